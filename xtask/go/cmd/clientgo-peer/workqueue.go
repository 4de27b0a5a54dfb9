package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

type op struct {
	Op   string  `json:"op"`
	Item string  `json:"item"`
	Ms   float64 `json:"ms"`
}

// settle waits until the delaying queue's timer goroutine has moved every item the
// fake clock made due: the length stops changing. client-go's own tests poll likewise.
func settle(q workqueue.TypedInterface[string]) {
	last, stable := q.Len(), 0
	for stable < 10 {
		time.Sleep(2 * time.Millisecond)
		if n := q.Len(); n != last {
			last, stable = n, 0
		} else {
			stable++
		}
	}
}

// handedOver waits until client-go's timer goroutine has taken every AddAfter from its
// channel. client-go hands delayed adds over a buffered channel; an entry still in it
// when the fake clock moves is added in arrival order instead of ready-time order, so
// without this wait the observed order would depend on goroutine scheduling. The
// channel is private: reflection reads its length (read-only).
func handedOver(dq workqueue.TypedDelayingInterface[string]) error {
	if dq.ShuttingDown() {
		// The goroutine has stopped (or is stopping) and takes nothing more.
		return nil
	}
	v := reflect.ValueOf(dq)
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.Kind() == reflect.Pointer {
			if f := v.Elem().FieldByName("waitingForAddCh"); f.IsValid() {
				for deadline := time.Now().Add(5 * time.Second); f.Len() > 0; {
					if time.Now().After(deadline) {
						return fmt.Errorf("client-go's timer goroutine took nothing for 5 s")
					}
					time.Sleep(20 * time.Microsecond)
				}
				// The goroutine inserts what it received right after the receive.
				time.Sleep(200 * time.Microsecond)
				return nil
			}
			if f := v.Elem().FieldByName("TypedDelayingInterface"); f.IsValid() {
				v = f
				continue
			}
			break
		}
		v = v.Elem()
	}
	return fmt.Errorf("client-go's delaying queue has no waitingForAddCh any more: update handedOver")
}

func ms(v any) time.Duration {
	f, _ := v.(float64)
	return time.Duration(f * float64(time.Millisecond))
}

// fakeClockBucket is client-go's TypedBucketRateLimiter (When = Limiter.Reserve().Delay())
// with the token bucket reading the trace's fake clock instead of time.Now. With the real
// clock, a delay past the burst shrinks by however long the machine took between two
// calls, and a loaded machine turned 100 ms into 99 ms: the trace then differed from
// kinformer's, whose bucket reads the same fake clock as the rest of the trace.
type fakeClockBucket struct {
	limiter *rate.Limiter
	clock   clock.PassiveClock
}

func (b *fakeClockBucket) When(string) time.Duration {
	now := b.clock.Now()
	return b.limiter.ReserveN(now, 1).DelayFrom(now)
}
func (b *fakeClockBucket) NumRequeues(string) int { return 0 }
func (b *fakeClockBucket) Forget(string)          {}

func limiterFrom(spec map[string]any, clk clock.PassiveClock) (workqueue.TypedRateLimiter[string], error) {
	switch spec["kind"] {
	case "default":
		// client-go's DefaultTypedControllerRateLimiter, with the bucket on the fake clock.
		return workqueue.NewTypedMaxOfRateLimiter[string](
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
			&fakeClockBucket{limiter: rate.NewLimiter(rate.Limit(10), 100), clock: clk},
		), nil
	case "exponential":
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](ms(spec["base_ms"]), ms(spec["max_ms"])), nil
	case "fast_slow":
		n, _ := spec["max_fast"].(float64)
		return workqueue.NewTypedItemFastSlowRateLimiter[string](ms(spec["fast_ms"]), ms(spec["slow_ms"]), int(n)), nil
	case "max_wait":
		inner, _ := spec["inner"].(map[string]any)
		l, err := limiterFrom(inner, clk)
		if err != nil {
			return nil, err
		}
		return workqueue.NewTypedWithMaxWaitRateLimiter[string](l, ms(spec["max_ms"])), nil
	case "max_of":
		specs, _ := spec["limiters"].([]any)
		var ls []workqueue.TypedRateLimiter[string]
		for _, s := range specs {
			m, _ := s.(map[string]any)
			l, err := limiterFrom(m, clk)
			if err != nil {
				return nil, err
			}
			ls = append(ls, l)
		}
		return workqueue.NewTypedMaxOfRateLimiter[string](ls...), nil
	}
	return nil, fmt.Errorf("unknown limiter %v", spec["kind"])
}

// needs refuses an op that the trace's queue cannot do (an add in a limiter trace, an
// add_after on a basic queue), as the Rust replayer refuses it, instead of calling a
// method on a nil interface. Ops that need nothing (step, drained, metrics) pass.
func needs(op string, q, dq, rq, limiter any) error {
	var need any = true
	var what string
	switch op {
	case "add", "get", "done", "done_oldest", "len", "shut_down", "shutting_down", "shut_down_with_drain":
		need, what = q, "a queue"
	case "add_after":
		need, what = dq, "a delaying queue"
	case "add_rate_limited":
		need, what = rq, "a rate-limited queue"
	case "forget", "num_requeues", "when":
		need, what = limiter, "a rate limiter"
	}
	if need == nil {
		return fmt.Errorf("%s needs %s", op, what)
	}
	return nil
}

func replayWorkqueue(header map[string]any, lines *bufio.Scanner, out *bufio.Writer) error {
	clock := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	// A named queue records metrics (client-go records none for an unnamed one).
	name, _ := header["name"].(string)
	metrics := &recorder{}
	var (
		q       workqueue.TypedInterface[string]
		dq      workqueue.TypedDelayingInterface[string]
		rq      workqueue.TypedRateLimitingInterface[string]
		limiter workqueue.TypedRateLimiter[string]
	)
	switch header["queue"] {
	case "basic":
		q = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Clock: clock, Name: name, MetricsProvider: metrics})
	case "delaying":
		dq = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Clock: clock, Name: name, MetricsProvider: metrics})
		q = dq
	case "rate_limiting":
		spec, _ := header["limiter"].(map[string]any)
		l, err := limiterFrom(spec, clock)
		if err != nil {
			return err
		}
		limiter = l
		rq = workqueue.NewTypedRateLimitingQueueWithConfig(l, workqueue.TypedRateLimitingQueueConfig[string]{Clock: clock, Name: name, MetricsProvider: metrics})
		dq, q = rq, rq
	case "limiter":
		spec, _ := header["limiter"].(map[string]any)
		l, err := limiterFrom(spec, clock)
		if err != nil {
			return err
		}
		limiter = l
	default:
		return fmt.Errorf("unknown queue %v", header["queue"])
	}
	if q != nil {
		defer q.ShutDown()
	}
	var drained chan struct{}
	var held []string // items got and not yet done, oldest first
	n := 0
	for lines.Scan() {
		if len(lines.Bytes()) == 0 {
			continue
		}
		n++
		var o op
		if err := json.Unmarshal(lines.Bytes(), &o); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		obs := map[string]any{"n": n, "op": o.Op}
		if err := needs(o.Op, q, dq, rq, limiter); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		switch o.Op {
		case "add":
			q.Add(o.Item)
			continue
		case "get":
			if q.Len() == 0 && !q.ShuttingDown() {
				obs["would_block"] = true
			} else {
				item, shutdown := q.Get()
				obs["item"], obs["shutdown"] = item, shutdown
				if !shutdown {
					held = append(held, item)
				}
			}
		case "done":
			q.Done(o.Item)
			for i, h := range held {
				if h == o.Item {
					held = append(held[:i], held[i+1:]...)
					break
				}
			}
			continue
		case "done_oldest":
			if len(held) > 0 {
				q.Done(held[0])
				held = held[1:]
			}
			continue
		case "len":
			obs["len"] = q.Len()
		case "shut_down":
			q.ShutDown()
			continue
		case "shutting_down":
			obs["value"] = q.ShuttingDown()
		case "shut_down_with_drain":
			drained = make(chan struct{})
			go func(ch chan struct{}) { q.ShutDownWithDrain(); close(ch) }(drained)
			// Let the drain start before the next operation, as the Rust side does.
			time.Sleep(5 * time.Millisecond)
			continue
		case "drained":
			select {
			case <-drained:
				obs["value"] = true
			case <-time.After(200 * time.Millisecond):
				obs["value"] = false
			}
		case "add_after":
			dq.AddAfter(o.Item, time.Duration(o.Ms*float64(time.Millisecond)))
			continue
		case "step":
			if dq != nil {
				if err := handedOver(dq); err != nil {
					return err
				}
			}
			clock.Step(time.Duration(o.Ms * float64(time.Millisecond)))
			// A bare limiter has no queue to settle: the step only moves its bucket's clock.
			if q != nil {
				settle(q)
			}
			continue
		case "add_rate_limited":
			rq.AddRateLimited(o.Item)
			continue
		case "forget":
			limiter.Forget(o.Item)
			continue
		case "num_requeues":
			obs["value"] = limiter.NumRequeues(o.Item)
		case "metrics":
			metrics.observe(obs)
		case "when":
			obs["ms"] = limiter.When(o.Item).Round(time.Millisecond).Milliseconds()
		default:
			return fmt.Errorf("line %d: unknown op %q", n, o.Op)
		}
		emit(out, obs)
	}
	return lines.Err()
}
