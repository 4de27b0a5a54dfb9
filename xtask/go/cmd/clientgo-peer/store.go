package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

func init() {
	// A namespaced list without the namespace index logs a warning per call (client-go's
	// fallback to a full scan); the replay output is the observations alone.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}

// podDesc is a trace's description of a pod (see xtask/traces/README.md).
type podDesc struct {
	Ns     string            `json:"ns"`
	Name   string            `json:"name"`
	Node   string            `json:"node"`
	Tags   []string          `json:"tags"`
	Labels map[string]string `json:"labels"`
	Rv     string            `json:"rv"`
}

// pod builds the pod a description stands for: tags are its containers' names.
func (d *podDesc) pod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       d.Ns,
			Name:            d.Name,
			ResourceVersion: d.Rv,
			Labels:          d.Labels,
		},
		Spec: corev1.PodSpec{NodeName: d.Node},
	}
	for _, t := range d.Tags {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: t})
	}
	return p
}

// storeIndexFuncs is the fixed menu of index functions a store trace installs by name.
var storeIndexFuncs = map[string]cache.IndexFunc{
	// client-go's own.
	"namespace": cache.MetaNamespaceIndexFunc,
	// The reference article's byNode: one value, "" when the pod is not scheduled.
	"by_node": func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
	},
	// Every container name: zero, one or many values.
	"by_tag": func(obj any) ([]string, error) {
		var names []string
		for _, c := range obj.(*corev1.Pod).Spec.Containers {
			names = append(names, c.Name)
		}
		return names, nil
	},
}

func storeIndexers(names []string) (cache.Indexers, error) {
	indexers := cache.Indexers{}
	for _, name := range names {
		f, ok := storeIndexFuncs[name]
		if !ok {
			return nil, fmt.Errorf("unknown index function %q", name)
		}
		indexers[name] = f
	}
	return indexers, nil
}

type storeOp struct {
	Op       string    `json:"op"`
	Obj      podDesc   `json:"obj"`
	Objs     []podDesc `json:"objs"`
	Key      string    `json:"key"`
	Index    string    `json:"index"`
	Value    string    `json:"value"`
	Rv       string    `json:"rv"`
	Names    []string  `json:"names"`
	Ns       *string   `json:"ns"`
	Name     string    `json:"name"`
	Selector string    `json:"selector"`
}

// item is how an observation shows a stored object: its key and resource version.
func item(obj any) string {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		key = "<" + err.Error() + ">"
	}
	rv := ""
	if p, ok := obj.(*corev1.Pod); ok {
		rv = p.ResourceVersion
	}
	return key + "@" + rv
}

func items[T any](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, item(o))
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append(make([]string, 0, len(s)), s...)
	sort.Strings(out)
	return out
}

func replayStore(header map[string]any, lines *bufio.Scanner, out *bufio.Writer) error {
	var names []string
	if raw, ok := header["indexers"].([]any); ok {
		for _, n := range raw {
			s, _ := n.(string)
			names = append(names, s)
		}
	}
	indexers, err := storeIndexers(names)
	if err != nil {
		return err
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	lister := listers.New[*corev1.Pod](store, corev1.Resource("pod"))
	n := 0
	for lines.Scan() {
		if len(lines.Bytes()) == 0 {
			continue
		}
		n++
		var o storeOp
		if err := json.Unmarshal(lines.Bytes(), &o); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		obs := map[string]any{"n": n, "op": o.Op}
		found := func(obj any, exists bool) {
			obs["found"] = exists
			if exists {
				obs["item"] = item(obj)
			}
		}
		switch o.Op {
		case "add", "update", "delete":
			var err error
			switch o.Op {
			case "add":
				err = store.Add(o.Obj.pod())
			case "update":
				err = store.Update(o.Obj.pod())
			default:
				err = store.Delete(o.Obj.pod())
			}
			obs["error"] = err != nil
			obs["rv"] = store.LastStoreSyncResourceVersion()
		case "replace":
			list := make([]any, 0, len(o.Objs))
			for i := range o.Objs {
				list = append(list, o.Objs[i].pod())
			}
			obs["error"] = store.Replace(list, o.Rv) != nil
			obs["rv"] = store.LastStoreSyncResourceVersion()
		case "bookmark":
			store.Bookmark(o.Rv)
			obs["rv"] = store.LastStoreSyncResourceVersion()
		case "last_sync_resource_version":
			obs["rv"] = store.LastStoreSyncResourceVersion()
		case "get":
			obj, exists, err := store.Get(o.Obj.pod())
			if err != nil {
				obs["error"] = true
			} else {
				found(obj, exists)
			}
		case "get_by_key":
			obj, exists, err := store.GetByKey(o.Key)
			if err != nil {
				obs["error"] = true
			} else {
				found(obj, exists)
			}
		case "list_keys":
			obs["keys"] = sorted(store.ListKeys())
		case "list":
			obs["items"] = items(store.List())
		case "by_index":
			objs, err := store.ByIndex(o.Index, o.Value)
			obs["error"] = err != nil
			if err == nil {
				obs["items"] = items(objs)
			}
		case "index_keys":
			keys, err := store.IndexKeys(o.Index, o.Value)
			obs["error"] = err != nil
			if err == nil {
				obs["keys"] = sorted(keys)
			}
		case "index":
			objs, err := store.Index(o.Index, o.Obj.pod())
			obs["error"] = err != nil
			if err == nil {
				obs["items"] = items(objs)
			}
		case "list_index_func_values":
			obs["values"] = sorted(store.ListIndexFuncValues(o.Index))
		case "get_indexers":
			got := make([]string, 0)
			for name := range store.GetIndexers() {
				got = append(got, name)
			}
			obs["names"] = sorted(got)
		case "add_indexers":
			more, err := storeIndexers(o.Names)
			if err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			obs["error"] = store.AddIndexers(more) != nil
		case "lister_list":
			sel, err := labels.Parse(o.Selector)
			if err != nil {
				return fmt.Errorf("line %d: selector %q: %w", n, o.Selector, err)
			}
			var pods []*corev1.Pod
			if o.Ns == nil {
				pods, err = lister.List(sel)
			} else {
				pods, err = listers.NewNamespaced(lister, *o.Ns).List(sel)
			}
			obs["error"] = err != nil
			if err == nil {
				obs["items"] = items(pods)
			}
		case "lister_get":
			var pod *corev1.Pod
			var err error
			if o.Ns == nil {
				pod, err = lister.Get(o.Name)
			} else {
				pod, err = listers.NewNamespaced(lister, *o.Ns).Get(o.Name)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				obs["error"] = true
			} else {
				found(pod, err == nil)
			}
		default:
			return fmt.Errorf("line %d: unknown op %q", n, o.Op)
		}
		emit(out, obs)
	}
	return lines.Err()
}
