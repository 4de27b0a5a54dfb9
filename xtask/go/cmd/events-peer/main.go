// Command events-peer is client-go's side of kinformer-events' end-to-end check: it feeds
// a sequence of events (crates/events/tests/sequences/*.json) to client-go's
// events.k8s.io/v1 recorder (k8s.io/client-go/tools/events) against a real API server;
// the Rust test feeds the same sequence to kinformer-events in another namespace and
// compares the Event objects both wrote.
//
//	events-peer --kubeconfig PATH --namespace NS --sequence FILE
//
// Objects named in the sequence ("configmap/NAME", or "namespace" for NS itself) must
// exist. After the last step the peer waits until its sink has been idle for a while
// (client-go's broadcaster has no flush), then prints one JSON line with the sink calls
// it made: {"create": N, "patch": M, "failed": K}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
)

// quiet is how long the sink must have been idle, after the last step, for the peer to
// consider every write done. The sequences space their steps so that client-go's
// create/patch race (which would add a 10 s retry) does not happen.
const quiet = 1500 * time.Millisecond

// giveUp bounds the wait for the sink to go quiet.
const giveUp = 60 * time.Second

type sequence struct {
	Controller string `json:"controller"`
	Steps      []step `json:"steps"`
}

type step struct {
	Regarding string `json:"regarding"`
	Related   string `json:"related,omitempty"`
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Action    string `json:"action"`
	Note      string `json:"note"`
	PauseMs   int    `json:"pause_ms"`
}

// countingSink is client-go's EventSinkImpl, counting calls and remembering when the
// last one ended.
type countingSink struct {
	inner events.EventSink

	mu       sync.Mutex
	inFlight int
	lastEnd  time.Time
	create   int
	patch    int
	failed   int
}

func (s *countingSink) begin() {
	s.mu.Lock()
	s.inFlight++
	s.mu.Unlock()
}

func (s *countingSink) end(err error) {
	s.mu.Lock()
	s.inFlight--
	s.lastEnd = time.Now()
	if err != nil {
		s.failed++
	}
	s.mu.Unlock()
}

func (s *countingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.begin()
	s.mu.Lock()
	s.create++
	s.mu.Unlock()
	out, err := s.inner.Create(ctx, e)
	s.end(err)
	return out, err
}

func (s *countingSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.begin()
	out, err := s.inner.Update(ctx, e)
	s.end(err)
	return out, err
}

func (s *countingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.begin()
	s.mu.Lock()
	s.patch++
	s.mu.Unlock()
	out, err := s.inner.Patch(ctx, e, data)
	s.end(err)
	return out, err
}

// idle reports whether no call is running and the last one ended (or, if none did
// since, `since` was) at least `quiet` ago.
func (s *countingSink) idle(since time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := since
	if s.lastEnd.After(last) {
		last = s.lastEnd
	}
	return s.inFlight == 0 && time.Since(last) >= quiet
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the control plane")
	namespace := flag.String("namespace", "", "namespace holding the sequence's objects")
	seqPath := flag.String("sequence", "", "sequence file (JSON)")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *seqPath); err != nil {
		fmt.Fprintln(os.Stderr, "events-peer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace, seqPath string) error {
	raw, err := os.ReadFile(seqPath)
	if err != nil {
		return err
	}
	var seq sequence
	if err := json.Unmarshal(raw, &seq); err != nil {
		return fmt.Errorf("%s: %w", seqPath, err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	objects := map[string]runtime.Object{}
	lookup := func(id string) (runtime.Object, error) {
		if obj, ok := objects[id]; ok {
			return obj, nil
		}
		var obj runtime.Object
		var err error
		switch {
		case id == "namespace":
			obj, err = client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		case len(id) > len("configmap/") && id[:len("configmap/")] == "configmap/":
			obj, err = client.CoreV1().ConfigMaps(namespace).Get(ctx, id[len("configmap/"):], metav1.GetOptions{})
		default:
			return nil, fmt.Errorf("unknown object %q", id)
		}
		if err != nil {
			return nil, err
		}
		objects[id] = obj
		return obj, nil
	}

	sink := &countingSink{inner: &events.EventSinkImpl{Interface: client.EventsV1()}}
	broadcaster := events.NewBroadcaster(sink)
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	recorder := broadcaster.NewRecorder(scheme.Scheme, seq.Controller)

	for i, s := range seq.Steps {
		regarding, err := lookup(s.Regarding)
		if err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		if s.Related != "" {
			related, err := lookup(s.Related)
			if err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
			recorder.Eventf(regarding, related, s.Type, s.Reason, s.Action, "%s", s.Note)
		} else {
			recorder.Eventf(regarding, nil, s.Type, s.Reason, s.Action, "%s", s.Note)
		}
		time.Sleep(time.Duration(s.PauseMs) * time.Millisecond)
	}

	lastStep := time.Now()
	deadline := lastStep.Add(giveUp)
	for !sink.idle(lastStep) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the sink was still busy %v after the last step", giveUp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	broadcaster.Shutdown()

	sink.mu.Lock()
	line, err := json.Marshal(map[string]int{"create": sink.create, "patch": sink.patch, "failed": sink.failed})
	sink.mu.Unlock()
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}
