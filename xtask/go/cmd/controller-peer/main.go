// Command controller-peer is the pod controller of examples/pod_controller.rs written with
// client-go v0.36.3, for the leader election failover test (examples/tests/failover.rs): a
// SharedInformerFactory for one namespace, the pod informer, a rate-limited work queue fed
// by handlers that only enqueue keys, a wait for the cache to sync and two workers that read
// each pod back from the lister. With --leader-elect the informer runs on every replica and
// the workers only while this replica holds the Lease "pod-controller" (tools/leaderelection
// over a resourcelock.LeaseLock, released on SIGTERM); after a lost term it stands by again,
// as the Rust example does.
//
//	controller-peer --kubeconfig PATH --namespace NS [--leader-elect]
//	                [--leader-elect-identity ID] [--leader-elect-lease-duration 15s]
//	                [--leader-elect-renew-deadline 10s] [--leader-elect-retry-period 2s]
//
// It prints the Rust example's lines: "cache synced", "leader election: started leading",
// "leader election: stopped leading", "processing pod NS/NAME, phase: P",
// "pod NS/NAME is gone: deleted".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
)

// out prints whole lines, one write each, so that lines of different goroutines never mix.
var outMu sync.Mutex

func line(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	namespace := flag.String("namespace", "default", "namespace whose pods to watch")
	elect := flag.Bool("leader-elect", false, "run the workers only while holding the Lease pod-controller")
	identity := flag.String("leader-elect-identity", "", "this replica's identity (default: host name and pid)")
	lease := flag.Duration("leader-elect-lease-duration", 15*time.Second, "lease duration")
	renew := flag.Duration("leader-elect-renew-deadline", 10*time.Second, "renew deadline")
	retry := flag.Duration("leader-elect-retry-period", 2*time.Second, "retry period")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *elect, *identity, *lease, *renew, *retry); err != nil {
		fmt.Fprintln(os.Stderr, "controller-peer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace string, elect bool, identity string, lease, renew, retry time.Duration) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	factory := informers.NewSharedInformerFactoryWithOptions(client, 30*time.Second, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return fmt.Errorf("the cache did not sync")
	}
	line("cache synced")
	c := &controller{queue: queue, lister: informer.Lister()}

	if !elect {
		c.runWorkers(ctx)
		return nil
	}
	if identity == "" {
		host, _ := os.Hostname()
		identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	lock, err := rl.NewFromKubeconfig(rl.LeasesResourceLock, namespace, "pod-controller",
		rl.ResourceLockConfig{Identity: identity}, config, renew)
	if err != nil {
		return err
	}
	line("leader election: candidate %s for lease %s/pod-controller", identity, namespace)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   lease,
		RenewDeadline:   renew,
		RetryPeriod:     retry,
		ReleaseOnCancel: true,
		Name:            namespace + "/pod-controller",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				line("leader election: started leading")
				c.runWorkers(ctx)
			},
			OnStoppedLeading: func() { line("leader election: stopped leading") },
			OnNewLeader:      func(holder string) { line("leader election: the leader is %q", holder) },
		},
	})
	if err != nil {
		return err
	}
	// A warm standby after a lost term, as the Rust example (client-go programs usually exit).
	for ctx.Err() == nil {
		elector.Run(ctx)
	}
	return nil
}

type controller struct {
	queue  workqueue.TypedRateLimitingInterface[string]
	lister listers.PodLister
}

// runWorkers runs two workers until ctx is done.
func (c *controller) runWorkers(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.worker, time.Second)
		}()
	}
	wg.Wait()
}

func (c *controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if ctx.Err() != nil {
		// The term ended while this worker waited: leave the key to the next leader.
		c.queue.Add(key)
		return false
	}
	if err := c.syncPod(key); err != nil {
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *controller) syncPod(key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		line("pod %s is gone: deleted", key)
		return nil
	}
	if err != nil {
		return err
	}
	phase := string(pod.Status.Phase)
	if phase == "" {
		phase = "Unknown"
	}
	line("processing pod %s, phase: %s", key, phase)
	return nil
}
