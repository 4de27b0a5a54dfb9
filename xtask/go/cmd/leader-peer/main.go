// Command leader-peer is a client-go v0.36.3 leader elector (tools/leaderelection over a
// resourcelock.LeaseLock) that logs its leadership as JSON lines, for the leader election
// interop and chaos tests of crates/leaderelection. Its Rust twin is
// crates/leaderelection/examples/leader_peer.rs; both log the same lines.
//
//	leader-peer --kubeconfig PATH --namespace NS --name LEASE --identity ID
//	            [--lease-ms 15000] [--renew-deadline-ms 10000] [--retry-ms 2000]
//	            [--release-on-cancel]
//
// Every line is {"t": <wall clock, Unix ns>, "id": ID, "ev": EVENT, ...}:
//
//   - "renew" with "sent" and "until": a write of the Lease naming this identity, sent at
//     "sent", succeeded (the acquisition too). "until" is when client-go would stop leading if
//     no later write
//     succeeds: the deadline of the renewal poll that follows, that is now + renew deadline
//     after an acquisition (the first renewal poll starts at once) and now + retry period +
//     renew deadline after a renewal (the next poll starts a retry period later). It is
//     logged before client-go sees the write succeed, so it is never less than what
//     client-go believes.
//   - "start" / "stop": OnStartedLeading / OnStoppedLeading ran.
//   - "leader" with "leader": OnNewLeader reported this holder.
//   - "exit": the process is exiting after SIGTERM or SIGINT (the lease released first
//     with --release-on-cancel).
//
// After a lost term the elector runs again (a warm standby), like kinformer's
// LeaderElector::run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	namespace := flag.String("namespace", "", "namespace of the Lease")
	name := flag.String("name", "", "name of the Lease")
	identity := flag.String("identity", "", "this candidate's identity")
	leaseMs := flag.Int("lease-ms", 15000, "lease duration in milliseconds")
	deadlineMs := flag.Int("renew-deadline-ms", 10000, "renew deadline in milliseconds")
	retryMs := flag.Int("retry-ms", 2000, "retry period in milliseconds")
	release := flag.Bool("release-on-cancel", false, "release the lease on SIGTERM")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *name, *identity,
		time.Duration(*leaseMs)*time.Millisecond,
		time.Duration(*deadlineMs)*time.Millisecond,
		time.Duration(*retryMs)*time.Millisecond, *release); err != nil {
		fmt.Fprintln(os.Stderr, "leader-peer:", err)
		os.Exit(1)
	}
}

// journal writes the JSON lines, one write(2) each (os.Stdout is unbuffered), so a line is
// in the file even if the process is killed right after.
type journal struct {
	mu sync.Mutex
	id string
}

func (j *journal) log(ev string, extra map[string]any) {
	line := map[string]any{"t": time.Now().UnixNano(), "id": j.id, "ev": ev}
	for k, v := range extra {
		line[k] = v
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// loggingLock logs every successful write that names this identity, with the deadline
// client-go will hold leadership until (see the package docs).
type loggingLock struct {
	rl.Interface
	j             *journal
	retry         time.Duration
	renewDeadline time.Duration
}

func (l *loggingLock) wrote(ctx context.Context, ler rl.LeaderElectionRecord, sent time.Time) {
	if ler.HolderIdentity != l.Identity() {
		return // a release
	}
	until := time.Now().Add(l.renewDeadline)
	// Renewal polls run under a context with the poll's deadline; acquisition does not.
	if _, inPoll := ctx.Deadline(); inPoll {
		until = until.Add(l.retry)
	}
	l.j.log("renew", map[string]any{"sent": sent.UnixNano(), "until": until.UnixNano()})
}

func (l *loggingLock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.wrote(ctx, ler, sent)
	}
	return err
}

func (l *loggingLock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Update(ctx, ler)
	if err == nil {
		l.wrote(ctx, ler, sent)
	}
	return err
}

func run(kubeconfig, namespace, name, identity string, lease, renewDeadline, retry time.Duration, release bool) error {
	if namespace == "" || name == "" || identity == "" {
		return fmt.Errorf("--namespace, --name and --identity are required")
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// What most programs use: a client whose timeout is max(1 s, renew deadline / 2).
	inner, err := rl.NewFromKubeconfig(rl.LeasesResourceLock, namespace, name,
		rl.ResourceLockConfig{Identity: identity}, config, renewDeadline)
	if err != nil {
		return err
	}
	j := &journal{id: identity}
	lock := &loggingLock{Interface: inner, j: j, retry: retry, renewDeadline: renewDeadline}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   lease,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retry,
		ReleaseOnCancel: release,
		Name:            namespace + "/" + name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				j.log("start", nil)
				<-ctx.Done()
			},
			OnStoppedLeading: func() { j.log("stop", nil) },
			OnNewLeader: func(holder string) {
				j.log("leader", map[string]any{"leader": holder})
			},
		},
	})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		elector.Run(ctx)
	}
	j.log("exit", nil)
	return nil
}
