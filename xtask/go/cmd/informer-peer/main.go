// Command informer-peer is client-go's contender in `cargo xtask bench informer`: a
// SharedInformerFactory's pod informer over one namespace, run as a separate process.
//
//	informer-peer --kubeconfig PATH --namespace NS --expect N [--wire protobuf|json] [--compression gzip|none] [--strip] [--latency M] [--project] [--relist] [--settle]
//	informer-peer --kubeconfig PATH --namespace NS --expect N --resource GROUP/VERSION/PLURAL [--compression gzip|none] [--latency M] [--relist] [--settle]
//	informer-peer --kubeconfig PATH --namespace NS --expect N [--wire protobuf|json] --reads
//
// --resource syncs that custom resource instead of pods, with client-go's default for a
// resource without generated clients: a dynamic informer
// (dynamicinformer.NewFilteredDynamicSharedInformerFactory, which is
// NewDynamicSharedInformerFactory for one namespace) caching unstructured objects, no
// transform. The dynamic client speaks JSON (it sets the config's content type itself), so
// --wire is json there, or cbor: client-go's ClientsAllowCBOR and ClientsPreferCBOR gates
// on (alpha), which make the dynamic client ask for CBOR; --strip and --project are for
// pods only.
//
// --compression none sets the config's DisableCompression, so that Go's transport stops
// asking for gzip; gzip (the default) is client-go's: every request says
// Accept-Encoding: gzip, and the API server compresses lists over 128 KiB and (1.37,
// WatchListCompression) streaming lists.
//
// --wire picks the encoding client-go asks the API server for. protobuf is client-go's
// default for built-in types since v0.32 (typed clients are built with
// gentype.PrefersProtobuf and send Accept: application/vnd.kubernetes.protobuf,
// application/json when the config names no content type); json sets the config's
// ContentType to application/json, as a program that wants JSON does.
//
// It syncs the namespace's pods and prints one JSON line: contender, wire, transform,
// synced_ms (from the start of main), rss_kib (VmHWM from /proc/self/status right after
// the sync), rss_now_kib (VmRSS), cpu_ms (user + system CPU time of the process up to
// that moment, from getrusage(RUSAGE_SELF), as the Rust contenders read it) and objects.
// With --latency M it then records, for every update whose new pod carries the label
// kinformer-bench/seq=i (i < M), the wall-clock time its handler saw it, and prints
// {"seen": [[i, unix_ns], ...]} once it has seen all M or a few seconds after its stdin
// closed. The Rust contenders (bench/informer) do the same.
//
// --project keeps, with a transform, only what kinformer's PodView projection keeps:
// metadata (managedFields cleared), spec.nodeName, each container's name and image,
// status.phase. --relist measures a relist as the Rust contenders do (see their crate docs):
// a second after the sync it resets its peak RSS and prints {"steady_rss_kib"}, then waits
// for an update carrying the label kinformer-bench/relist and a second more, and prints
// {"relist_hwm_kib", "after_rss_kib"}. --settle prints {"settled_rss_kib"} (VmRSS) two
// seconds after the sync.
//
// --reads (reads.go) syncs the default pod informer with one more index, byNode
// (spec.nodeName), and one add handler that reads each typed pod's spec.nodeName, then
// runs the read workload kinformer's contender runs and prints its {"reads": {...}} line.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const seqLabel = "kinformer-bench/seq"

const relistLabel = "kinformer-bench/relist"

// grace is how long to wait for missing updates after stdin closed.
const grace = 5 * time.Second

func main() {
	start := time.Now()
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the control plane")
	namespace := flag.String("namespace", "", "namespace whose pods (or --resource objects) to sync")
	expect := flag.Int("expect", -1, "objects the namespace holds")
	strip := flag.Bool("strip", false, "strip managedFields with a transform")
	latency := flag.Int("latency", 0, "labelled updates to wait for after the sync")
	wire := flag.String("wire", "protobuf", "encoding to ask for: protobuf (client-go's default) or json")
	project := flag.Bool("project", false, "keep only metadata, node name, containers' names and images, phase")
	relist := flag.Bool("relist", false, "measure the peak RSS of a relist after the sync")
	settle := flag.Bool("settle", false, "print the RSS two seconds after the sync")
	resource := flag.String("resource", "", "sync this custom resource (group/version/plural) with a dynamic informer instead of pods")
	reads := flag.Bool("reads", false, "after the sync, run the read workload (pods, the default informer with a byNode index)")
	compression := flag.String("compression", "gzip", "gzip (client-go's default: Accept-Encoding: gzip) or none (DisableCompression)")
	flag.Parse()
	switch *compression {
	case "gzip":
	case "none":
		disableCompression = true
	default:
		fmt.Fprintln(os.Stderr, "informer-peer: --compression", *compression, ": want gzip or none")
		os.Exit(2)
	}
	if *reads {
		if *strip || *project || *relist || *settle || *latency != 0 || *resource != "" {
			fmt.Fprintln(os.Stderr, "informer-peer: --reads reads the default pod informer's cache: no --strip, --project, --resource, --latency, --relist or --settle")
			os.Exit(2)
		}
		config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err == nil {
			err = runReads(start, config, *namespace, *expect, *wire)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "informer-peer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	wireSet := false
	flag.Visit(func(f *flag.Flag) { wireSet = wireSet || f.Name == "wire" })
	if *resource != "" {
		// The dynamic client's wire format, whatever --wire's default says: JSON, or CBOR
		// with client-go's two alpha gates on (read from the environment the first time a
		// gate is asked, which is after this).
		if wireSet && *wire == "cbor" {
			os.Setenv("KUBE_FEATURE_ClientsAllowCBOR", "true")
			os.Setenv("KUBE_FEATURE_ClientsPreferCBOR", "true")
		} else if wireSet && *wire != "json" {
			fmt.Fprintln(os.Stderr, "informer-peer: --resource syncs in JSON (the dynamic client's format) or CBOR; --wire", *wire, "is for pods")
			os.Exit(2)
		}
		if *strip || *project {
			fmt.Fprintln(os.Stderr, "informer-peer: --strip and --project are for pods, not --resource")
			os.Exit(2)
		}
		if *wire != "cbor" {
			*wire = "json"
		}
	}
	if err := run(start, *kubeconfig, *namespace, *expect, *wire, *resource, *strip, *latency, *project, *relist, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "informer-peer:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// informer is what run needs of the informer it syncs and the factory that made it.
type informer struct {
	cache.SharedIndexInformer
	start func(stop <-chan struct{})
}

// disableCompression is --compression none.
var disableCompression bool

func run(start time.Time, kubeconfig, namespace string, expect int, wire, resource string, strip bool, want int, project, relist, settle bool) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.DisableCompression = disableCompression
	var inf informer
	if resource != "" {
		inf, err = dynamicInformer(config, namespace, resource)
	} else {
		inf, err = podInformer(config, namespace, wire, strip, project)
	}
	if err != nil {
		return err
	}
	return syncAndReport(start, inf, namespace, expect, wire, strip, want, relist, settle)
}

// dynamicInformer is the informer of the custom resource group/version/plural in
// namespace, as client-go's dynamic informer factory makes it: unstructured objects, no
// transform, no resync.
func dynamicInformer(config *rest.Config, namespace, resource string) (informer, error) {
	parts := strings.Split(resource, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return informer{}, fmt.Errorf("--resource %q: want group/version/plural", resource)
	}
	gvr := schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return informer{}, err
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace, nil)
	return informer{SharedIndexInformer: factory.ForResource(gvr).Informer(), start: factory.Start}, nil
}

// podInformer is the pod informer of a SharedInformerFactory over namespace, with the
// wire format, transform or projection asked for.
func podInformer(config *rest.Config, namespace, wire string, strip, project bool) (informer, error) {
	switch wire {
	case "protobuf":
		// client-go's default: nothing to set.
	case "json":
		config.ContentType = "application/json"
	default:
		return informer{}, fmt.Errorf("--wire %q: want protobuf or json", wire)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return informer{}, err
	}
	opts := []informers.SharedInformerOption{informers.WithNamespace(namespace)}
	if project {
		opts = append(opts, informers.WithTransform(func(obj any) (any, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return obj, nil
			}
			kept := &corev1.Pod{ObjectMeta: pod.ObjectMeta}
			kept.ManagedFields = nil
			kept.Spec.NodeName = pod.Spec.NodeName
			for _, c := range pod.Spec.Containers {
				kept.Spec.Containers = append(kept.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
			}
			kept.Status.Phase = pod.Status.Phase
			return kept, nil
		}))
	} else if strip {
		opts = append(opts, informers.WithTransform(func(obj any) (any, error) {
			if pod, ok := obj.(*corev1.Pod); ok {
				pod.ManagedFields = nil
			}
			return obj, nil
		}))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
	return informer{SharedIndexInformer: factory.Core().V1().Pods().Informer(), start: factory.Start}, nil
}

// labelsOf is the labels of a pod or an unstructured object, nil for anything else.
func labelsOf(obj any) map[string]string {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o.Labels
	case *unstructured.Unstructured:
		return o.GetLabels()
	}
	return nil
}

// syncAndReport registers the handler, starts the informer, prints the result line once
// it has synced, then what --settle, --relist and --latency ask for.
func syncAndReport(start time.Time, inf informer, namespace string, expect int, wire string, strip bool, want int, relist, settle bool) error {
	var mu sync.Mutex
	seen := make(map[int]int64, want)
	var relisted atomic.Bool
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, newObj any) {
			labels := labelsOf(newObj)
			if labels == nil {
				return
			}
			if _, ok := labels[relistLabel]; ok {
				relisted.Store(true)
			}
			if want == 0 {
				return
			}
			seq, err := strconv.Atoi(labels[seqLabel])
			if err != nil {
				return
			}
			now := time.Now().UnixNano()
			mu.Lock()
			if _, dup := seen[seq]; !dup {
				seen[seq] = now
			}
			mu.Unlock()
		},
	}); err != nil {
		return err
	}
	stop := make(chan struct{})
	inf.start(stop)
	// Polled every millisecond like the Rust contenders (WaitForCacheSync polls every
	// 100 ms, which would be client-go's handicap, not its speed).
	for !inf.HasSynced() {
		time.Sleep(time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	if err := reportSynced(out, wire, strip, start, inf.GetStore(), expect, namespace); err != nil {
		return err
	}
	if settle {
		time.Sleep(2 * time.Second)
		line, _ := json.Marshal(map[string]any{"settled_rss_kib": statusKiB("VmRSS:")})
		fmt.Fprintf(out, "%s\n", line)
		if err := out.Flush(); err != nil {
			return err
		}
	}
	if relist {
		return measureRelist(out, &relisted)
	}
	if want == 0 {
		return nil
	}

	var closed atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		closed.Store(true)
	}()
	var closedAt time.Time
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= want {
			break
		}
		if closedAt.IsZero() && closed.Load() {
			closedAt = time.Now()
		}
		if !closedAt.IsZero() && time.Since(closedAt) > grace {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	pairs := make([][2]int64, 0, len(seen))
	for k, v := range seen {
		pairs = append(pairs, [2]int64{int64(k), v})
	}
	mu.Unlock()
	sort.Slice(pairs, func(i, j int) bool { return pairs[i][0] < pairs[j][0] })
	line, _ := json.Marshal(map[string]any{"seen": pairs})
	fmt.Fprintf(out, "%s\n", line)
	return out.Flush()
}

// measureRelist resets the peak RSS a second after the sync, prints the steady RSS, waits
// for the relist's update and prints the peak since the reset.
func measureRelist(out *bufio.Writer, relisted *atomic.Bool) error {
	time.Sleep(time.Second)
	// Linux: resets VmHWM to the current RSS for this process.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]any{"steady_rss_kib": statusKiB("VmRSS:")})
	fmt.Fprintf(out, "%s\n", line)
	if err := out.Flush(); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !relisted.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no update labelled %s within 2m", relistLabel)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	line, _ = json.Marshal(map[string]any{"relist_hwm_kib": peakRSSKiB(), "after_rss_kib": statusKiB("VmRSS:")})
	fmt.Fprintf(out, "%s\n", line)
	return out.Flush()
}

// cpuMs is the user + system CPU time of the whole process so far in milliseconds, or -1.
func cpuMs() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// peakRSSKiB is VmHWM from /proc/self/status, or -1.
func peakRSSKiB() int64 {
	return statusKiB("VmHWM:")
}

// statusKiB is the field (e.g. "VmRSS:") of /proc/self/status in KiB, or -1.
func statusKiB(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				if v, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// reportSynced writes the sync's line (time since start, peak and current RSS, CPU, the
// objects in store) to out, and fails when the store does not hold the expected count.
func reportSynced(out *bufio.Writer, wire string, transform bool, start time.Time, store cache.Store, expect int, namespace string) error {
	objects := len(store.ListKeys())
	line, _ := json.Marshal(map[string]any{
		"contender":   "client-go",
		"wire":        wire,
		"transform":   transform,
		"synced_ms":   float64(time.Since(start).Nanoseconds()) / 1e6,
		"rss_kib":     peakRSSKiB(),
		"rss_now_kib": statusKiB("VmRSS:"),
		"cpu_ms":      cpuMs(),
		"objects":     objects,
	})
	fmt.Fprintf(out, "%s\n", line)
	if err := out.Flush(); err != nil {
		return err
	}
	if objects != expect {
		return fmt.Errorf("synced %d objects, expected %d in %s", objects, expect, namespace)
	}
	return nil
}
