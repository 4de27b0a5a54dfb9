// Command soak-peer is client-go's subject in `cargo xtask soak`: a SharedInformerFactory's
// pod informer over one namespace, run as its own process beside the Rust subjects
// (bench/soak) under the same churn and faults.
//
//	soak-peer --kubeconfig PATH --namespace NS [--sample-ms MS]
//
// The informer has the Rust subject's three handlers: a recorder that hands every
// notification to a writer goroutine, one that panics on every 7th event and one that
// sleeps 50 ms per event. It prints the same JSON lines (see bench/soak/src/main.rs):
// "synced"; "event" (op, name, rv, tombstone, unix_ns); every --sample-ms a "sample"
// (rss_kib, fds, threads, tasks = goroutines, the handlers' counts, panics; lists,
// relists and watches are null: client-go does not expose them); and a "dump" (store:
// name -> resourceVersion, last_sync_rv, the handlers' counts) for each "dump" line on
// stdin. It exits on EOF
// on stdin.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// The panicking handler panics on every panicEvery-th event.
	panicEvery = 7
	// The slow handler's time per event.
	slow = 50 * time.Millisecond
	// How long the informer may take to sync at start.
	syncTimeout = 2 * time.Minute
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig whose current context to use")
	namespace := flag.String("namespace", "", "namespace whose pods to inform on")
	sampleMs := flag.Int("sample-ms", 2000, "milliseconds between resource samples")
	flag.Parse()
	if *kubeconfig == "" || *namespace == "" || *sampleMs <= 0 {
		fmt.Fprintln(os.Stderr, "usage: soak-peer --kubeconfig PATH --namespace NS [--sample-ms MS]")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *namespace, time.Duration(*sampleMs)*time.Millisecond); err != nil {
		fmt.Fprintln(os.Stderr, "soak-peer:", err)
		os.Exit(1)
	}
}

// counts are the events each handler got and the panics thrown.
type counts struct {
	recorded, panicky, slow, panics atomic.Uint64
}

func run(kubeconfig, namespace string, sample time.Duration) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()

	out := newWriter()
	var c counts
	if _, err := informer.AddEventHandler(recorder(out, &c)); err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(panicky(&c)); err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(slowHandler(&c)); err != nil {
		return err
	}
	stop := make(chan struct{})
	factory.Start(stop)
	deadline := time.Now().Add(syncTimeout)
	for !informer.HasSynced() {
		if time.Now().After(deadline) {
			return fmt.Errorf("the pod informer did not sync within %v", syncTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out.send(map[string]any{"type": "synced", "unix_ns": time.Now().UnixNano()})

	commands := make(chan string)
	go func() {
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			commands <- strings.TrimSpace(scanner.Text())
		}
		close(commands)
	}()
	tick := time.NewTicker(sample)
	defer tick.Stop()
loop:
	for {
		select {
		case <-tick.C:
			out.send(sampleLine(&c))
		case cmd, ok := <-commands:
			if !ok {
				break loop
			}
			if cmd == "dump" {
				out.send(dumpLine(informer, &c))
			}
		}
	}
	close(stop)
	factory.Shutdown()
	out.close()
	return nil
}

// writer prints the lines handed to it from one goroutine, so a handler only pays for a
// channel send and lines never interleave.
type writer struct {
	lines chan map[string]any
	done  chan struct{}
}

func newWriter() *writer {
	w := &writer{lines: make(chan map[string]any, 1<<16), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		buf := bufio.NewWriter(os.Stdout)
		enc := json.NewEncoder(buf)
		for line := range w.lines {
			_ = enc.Encode(line)
			// Write what is queued, then flush once: few syscalls under load, no delay
			// when idle.
			if len(w.lines) == 0 {
				if err := buf.Flush(); err != nil {
					return
				}
			}
		}
		_ = buf.Flush()
	}()
	return w
}

func (w *writer) send(line map[string]any) { w.lines <- line }

func (w *writer) close() {
	close(w.lines)
	<-w.done
}

func recorder(out *writer, c *counts) cache.ResourceEventHandlerFuncs {
	record := func(op, name string, pod *corev1.Pod, tombstone bool) {
		// The time first: what the driver measures is when the handler was called.
		now := time.Now().UnixNano()
		rv := ""
		if pod != nil {
			rv = pod.ResourceVersion
		}
		out.send(map[string]any{
			"type": "event", "op": op, "name": name, "rv": rv,
			"tombstone": tombstone, "unix_ns": now,
		})
		c.recorded.Add(1)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				record("add", pod.Name, pod, false)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if pod, ok := newObj.(*corev1.Pod); ok {
				record("update", pod.Name, pod, false)
			}
		},
		DeleteFunc: func(obj any) {
			switch o := obj.(type) {
			case *corev1.Pod:
				record("delete", o.Name, o, false)
			case cache.DeletedFinalStateUnknown:
				// The key is what a tombstone is sure of; its object may be stale.
				_, name, _ := cache.SplitMetaNamespaceKey(o.Key)
				pod, _ := o.Obj.(*corev1.Pod)
				record("delete", name, pod, true)
			}
		},
	}
}

// panicky panics on every 7th event. client-go's listener runs handlers under
// utilruntime.HandleCrash, which logs and then re-panics by default (ReallyCrash), so an
// uncaught panic would kill the whole process; the handler recovers its own panic, as a
// client-go user has to. (kinformer's listener catches it instead.)
func panicky(c *counts) cache.ResourceEventHandlerFuncs {
	handle := func() {
		defer func() { _ = recover() }()
		if c.panicky.Add(1)%panicEvery == 0 {
			c.panics.Add(1)
			panic("soak: deliberate panic")
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { handle() },
		UpdateFunc: func(any, any) { handle() },
		DeleteFunc: func(any) { handle() },
	}
}

// slowHandler sleeps 50 ms per event: slow work on its listener's goroutine.
func slowHandler(c *counts) cache.ResourceEventHandlerFuncs {
	handle := func() {
		time.Sleep(slow)
		c.slow.Add(1)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { handle() },
		UpdateFunc: func(any, any) { handle() },
		DeleteFunc: func(any) { handle() },
	}
}

func sampleLine(c *counts) map[string]any {
	rss, threads := procStatus()
	return map[string]any{
		"type":     "sample",
		"unix_ns":  time.Now().UnixNano(),
		"rss_kib":  rss,
		"fds":      openFds(),
		"threads":  threads,
		"tasks":    runtime.NumGoroutine(),
		"recorded": c.recorded.Load(),
		"panicky":  c.panicky.Load(),
		"slow":     c.slow.Load(),
		"panics":   c.panics.Load(),
		// client-go counts none of these where a user can read them.
		"lists":   nil,
		"relists": nil,
		"watches": nil,
	}
}

func dumpLine(informer cache.SharedIndexInformer, c *counts) map[string]any {
	store := map[string]string{}
	for _, obj := range informer.GetStore().List() {
		if pod, ok := obj.(*corev1.Pod); ok {
			store[pod.Name] = pod.ResourceVersion
		}
	}
	return map[string]any{
		"type":            "dump",
		"unix_ns":         time.Now().UnixNano(),
		"store":           store,
		"last_sync_rv":    informer.LastSyncResourceVersion(),
		"relists":         nil,
		"lists_by_reason": nil,
		"recorded":        c.recorded.Load(),
		"panicky":         c.panicky.Load(),
		"slow":            c.slow.Load(),
		"panics":          c.panics.Load(),
	}
}

// procStatus is VmRSS (KiB) and Threads from /proc/self/status, or nil each.
func procStatus() (rss, threads any) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, nil
	}
	for _, l := range strings.Split(string(data), "\n") {
		for prefix, dst := range map[string]*any{"VmRSS:": &rss, "Threads:": &threads} {
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						*dst = v
					}
				}
			}
		}
	}
	return rss, threads
}

// openFds counts the entries of /proc/self/fd, or nil.
func openFds() any {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	return len(entries)
}
