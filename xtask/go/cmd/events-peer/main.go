// Command events-peer is client-go's side of kinformer-events' end-to-end checks: it feeds
// a sequence of events (crates/events/tests/sequences/*.json) to one of client-go's
// recorders against a real API server; the Rust test feeds the same sequence to
// kinformer-events in another namespace and compares the Event objects both wrote.
//
//	events-peer --kubeconfig PATH --namespace NS --sequence FILE [--recorder events|record]
//
// --recorder events (the default) is the events.k8s.io/v1 recorder
// (k8s.io/client-go/tools/events); --recorder record is the core/v1 one
// (k8s.io/client-go/tools/record: record.NewBroadcaster, StartRecordingToSink on the typed
// client's EventSinkImpl, NewRecorder with the sequence's controller as the source's
// component, Eventf with each step's type, reason and message; no action, no related
// object). A step with "repeat": N is published N times; a step with "touch": true first
// updates its configmap, so that its reference carries a new resourceVersion.
//
// Objects named in the sequence ("configmap/NAME", or "namespace" for NS itself) must
// exist. After the last step the peer waits until its sink has been idle for a while
// (client-go's broadcasters have no flush), then prints one JSON line with the sink calls
// it made: {"create": N, "patch": M, "failed": K}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
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
	// Message is the core/v1 event's message (--recorder record).
	Message string `json:"message"`
	Repeat  int    `json:"repeat"`
	Touch   bool   `json:"touch"`
	PauseMs int    `json:"pause_ms"`
}

// counts counts a sink's calls and remembers when the last one ended.
type counts struct {
	mu       sync.Mutex
	inFlight int
	lastEnd  time.Time
	create   int
	patch    int
	failed   int
}

func (s *counts) begin(patch bool) {
	s.mu.Lock()
	s.inFlight++
	if patch {
		s.patch++
	}
	s.mu.Unlock()
}

func (s *counts) beginCreate() {
	s.mu.Lock()
	s.inFlight++
	s.create++
	s.mu.Unlock()
}

func (s *counts) end(err error) {
	s.mu.Lock()
	s.inFlight--
	s.lastEnd = time.Now()
	if err != nil {
		s.failed++
	}
	s.mu.Unlock()
}

// idle reports whether no call is running and the last one ended (or, if none did
// since, `since` was) at least `quiet` ago.
func (s *counts) idle(since time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := since
	if s.lastEnd.After(last) {
		last = s.lastEnd
	}
	return s.inFlight == 0 && time.Since(last) >= quiet
}

// countingSink is tools/events' EventSinkImpl, counted.
type countingSink struct {
	*counts
	inner events.EventSink
}

func (s *countingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.beginCreate()
	out, err := s.inner.Create(ctx, e)
	s.end(err)
	return out, err
}

func (s *countingSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.begin(false)
	out, err := s.inner.Update(ctx, e)
	s.end(err)
	return out, err
}

func (s *countingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.begin(true)
	out, err := s.inner.Patch(ctx, e, data)
	s.end(err)
	return out, err
}

// countingRecordSink is tools/record's EventSinkImpl (of the typed core/v1 client),
// counted.
type countingRecordSink struct {
	*counts
	inner record.EventSink
}

func (s *countingRecordSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.beginCreate()
	out, err := s.inner.Create(e)
	s.end(err)
	return out, err
}

func (s *countingRecordSink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.begin(false)
	out, err := s.inner.Update(e)
	s.end(err)
	return out, err
}

func (s *countingRecordSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.begin(true)
	out, err := s.inner.Patch(e, data)
	s.end(err)
	return out, err
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the control plane")
	namespace := flag.String("namespace", "", "namespace holding the sequence's objects")
	seqPath := flag.String("sequence", "", "sequence file (JSON)")
	recorderKind := flag.String("recorder", "events", "events (tools/events) or record (tools/record)")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *seqPath, *recorderKind); err != nil {
		fmt.Fprintln(os.Stderr, "events-peer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace, seqPath, recorderKind string) error {
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

	// touch updates a configmap of the sequence so that it gets a new resourceVersion.
	touch := func(id string, i int) error {
		obj, err := lookup(id)
		if err != nil {
			return err
		}
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return fmt.Errorf("only a configmap can be touched, not %q", id)
		}
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["touched"] = strconv.Itoa(i)
		updated, err := client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		objects[id] = updated
		return nil
	}

	sinkCounts := &counts{}
	var publish func(s step) error
	var shutdown func()
	switch recorderKind {
	case "events":
		sink := &countingSink{counts: sinkCounts, inner: &events.EventSinkImpl{Interface: client.EventsV1()}}
		broadcaster := events.NewBroadcaster(sink)
		if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			return err
		}
		recorder := broadcaster.NewRecorder(scheme.Scheme, seq.Controller)
		publish = func(s step) error {
			regarding, err := lookup(s.Regarding)
			if err != nil {
				return err
			}
			if s.Related != "" {
				related, err := lookup(s.Related)
				if err != nil {
					return err
				}
				recorder.Eventf(regarding, related, s.Type, s.Reason, s.Action, "%s", s.Note)
			} else {
				recorder.Eventf(regarding, nil, s.Type, s.Reason, s.Action, "%s", s.Note)
			}
			return nil
		}
		shutdown = broadcaster.Shutdown
	case "record":
		sink := &countingRecordSink{counts: sinkCounts, inner: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}}
		broadcaster := record.NewBroadcaster()
		broadcaster.StartRecordingToSink(sink)
		recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: seq.Controller})
		publish = func(s step) error {
			object, err := lookup(s.Regarding)
			if err != nil {
				return err
			}
			recorder.Eventf(object, s.Type, s.Reason, "%s", s.Message)
			return nil
		}
		shutdown = broadcaster.Shutdown
	default:
		return fmt.Errorf("--recorder %q: events or record", recorderKind)
	}

	for i, s := range seq.Steps {
		if s.Touch {
			if err := touch(s.Regarding, i); err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
		}
		for n := 0; n < max(s.Repeat, 1); n++ {
			if err := publish(s); err != nil {
				return fmt.Errorf("step %d: %w", i, err)
			}
			time.Sleep(time.Duration(s.PauseMs) * time.Millisecond)
		}
	}

	lastStep := time.Now()
	deadline := lastStep.Add(giveUp)
	for !sinkCounts.idle(lastStep) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the sink was still busy %v after the last step", giveUp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	shutdown()

	sinkCounts.mu.Lock()
	line, err := json.Marshal(map[string]int{"create": sinkCounts.create, "patch": sinkCounts.patch, "failed": sinkCounts.failed})
	sinkCounts.mu.Unlock()
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}
