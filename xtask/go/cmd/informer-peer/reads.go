package main

// --reads: the read workload the peer runs on its synced cache, on one goroutine, the same
// steps as kinformer's contender (bench/informer/src/reads.rs, whose docs give them):
// every pod got by name through the namespaced lister in three passes over the names in a
// fixed shuffled order, one hot key got 100,000 times, the namespace listed by the selector
// app=web 5 times, the byNode index swept over the 64 nodes 5 times; each step reads
// spec.nodeName's length of every pod it gets into a checksum. Then the CPU time of the
// workload and the peak RSS, in one {"reads": {...}} line with the Rust side's keys.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const (
	readPasses   = 3
	hotGets      = 100_000
	readRepeats  = 5
	readNodes    = 64
	readSelector = "app=web"
	byNodeIndex  = "byNode"
	shuffleSeed  = uint64(0x9E3779B97F4A7C15)
)

// sink keeps the reads from being optimized away.
var sink int

// shuffle sorts names, then shuffles them (Fisher-Yates from the last element down, over
// xorshift64 seeded with shuffleSeed): the order of kinformer's contender too.
func shuffle(names []string) {
	sort.Strings(names)
	x := shuffleSeed
	for i := len(names) - 1; i >= 1; i-- {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i+1))
		names[i], names[j] = names[j], names[i]
	}
}

func nodeNameLen(obj any) int {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return 0
	}
	return len(pod.Spec.NodeName)
}

// runReads syncs the default pod informer of namespace (protobuf unless --wire json, no
// transform) with the byNode index and a typed add handler, prints the sync line, waits
// for the handler to have handled every initial add, and runs the read workload.
func runReads(start time.Time, config *rest.Config, namespace string, expect int, wire string) error {
	switch wire {
	case "protobuf":
	case "json":
		config.ContentType = "application/json"
	default:
		return fmt.Errorf("--wire %q: want protobuf or json", wire)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{byNodeIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{pod.Spec.NodeName}, nil
	}}); err != nil {
		return err
	}
	// Touched by the handler's goroutine only.
	var handled int
	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod := obj.(*corev1.Pod)
			handled += len(pod.Spec.NodeName)
		},
	})
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	factory.Start(stop)
	for !informer.HasSynced() {
		time.Sleep(time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	if err := reportSynced(out, wire, false, start, informer.GetStore(), expect, namespace); err != nil {
		return err
	}
	for !registration.HasSynced() {
		time.Sleep(time.Millisecond)
	}
	handledMs := float64(time.Since(start).Nanoseconds()) / 1e6
	reads, err := readWorkload(informer.GetIndexer(), namespace)
	if err != nil {
		return err
	}
	reads["handled_ms"] = handledMs
	line, _ := json.Marshal(map[string]any{"reads": reads})
	fmt.Fprintf(out, "%s\n", line)
	return out.Flush()
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// readWorkload runs the steps on this goroutine over the pods of namespace in indexer.
func readWorkload(indexer cache.Indexer, namespace string) (map[string]any, error) {
	lister := listers.NewPodLister(indexer).Pods(namespace)
	var names []string
	for _, key := range indexer.ListKeys() {
		if name, ok := strings.CutPrefix(key, namespace+"/"); ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no pods in %s to read", namespace)
	}
	shuffle(names)
	selector, err := labels.Parse(readSelector)
	if err != nil {
		return nil, err
	}
	nodes := make([]string, readNodes)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
	}
	get := func(name string) int {
		pod, err := lister.Get(name)
		if err != nil {
			return 0
		}
		return len(pod.Spec.NodeName)
	}
	cpuBefore := cpuMs()
	checksum := 0

	// 1. Every name, three passes.
	passNs := make([]float64, readPasses)
	passSums := make([]int, readPasses)
	for p := range readPasses {
		started := time.Now()
		sum := 0
		for _, name := range names {
			sum += get(name)
		}
		passNs[p] = float64(time.Since(started).Nanoseconds()) / float64(len(names))
		passSums[p] = sum
		checksum += sum
	}
	for _, s := range passSums {
		if s != passSums[0] || s == 0 {
			return nil, fmt.Errorf("the passes by name read %v bytes of node names: a pod went missing", passSums)
		}
	}

	// 2. The hot key.
	hot := names[0]
	started := time.Now()
	sum := 0
	for range hotGets {
		sum += get(hot)
	}
	hotNs := float64(time.Since(started).Nanoseconds()) / hotGets
	checksum += sum

	// 3. By selector.
	lists := make([]float64, readRepeats)
	for r := range readRepeats {
		started := time.Now()
		pods, err := lister.List(selector)
		if err != nil {
			return nil, err
		}
		sum := 0
		for _, pod := range pods {
			sum += len(pod.Spec.NodeName)
		}
		lists[r] = float64(time.Since(started).Nanoseconds()) / 1e6
		checksum += sum
	}

	// 4. The index, every node.
	sweeps := make([]float64, readRepeats)
	for r := range readRepeats {
		started := time.Now()
		sum := 0
		for _, node := range nodes {
			objs, err := indexer.ByIndex(byNodeIndex, node)
			if err != nil {
				return nil, err
			}
			for _, obj := range objs {
				sum += nodeNameLen(obj)
			}
		}
		sweeps[r] = float64(time.Since(started).Nanoseconds()) / 1e6
		checksum += sum
	}

	cpu := cpuMs() - cpuBefore
	sink += checksum
	return map[string]any{
		"get_pass1_ns":     passNs[0],
		"get_pass3_ns":     passNs[readPasses-1],
		"hot_get_ns":       hotNs,
		"selector_list_ms": median(lists),
		"index_sweep_ms":   median(sweeps),
		"cpu_ms":           cpu,
		"rss_kib":          peakRSSKiB(),
		"checksum":         checksum,
	}, nil
}
