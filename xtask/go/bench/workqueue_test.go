package bench

// The workqueue workloads of crates/workqueue/benches/workqueue.rs, on client-go. Each
// benchmark's op is the Rust bench's element, so ns/op compares directly.

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

func keys(n int) []string {
	k := make([]string, n)
	for i := range k {
		k[i] = fmt.Sprintf("namespace-%d/object-%d", i%7, i)
	}
	return k
}

// workqueue/add_get_done/same_thread: add, get, done in one goroutine over 100 keys.
func BenchmarkWorkqueueAddGetDoneSameThread(b *testing.B) {
	hundred := keys(100)
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{})
	defer q.ShutDown()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.Add(hundred[i%100])
		k, _ := q.Get()
		q.Done(k)
	}
}

// workqueue/add_get_done/1p1w: one producer adds distinct keys, one worker gets and
// dones them; drained at the end.
func BenchmarkWorkqueueAddGetDone1p1w(b *testing.B) {
	many := keys(100_000)
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			k, shutdown := q.Get()
			if shutdown {
				return
			}
			q.Done(k)
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Keep at most ~1k items queued, so that (with 100k keys) no add is a duplicate
		// and every add is one full cycle, however the goroutines are paced.
		if i%256 == 0 {
			for q.Len() > 1024 {
				runtime.Gosched()
			}
		}
		q.Add(many[i%len(many)])
	}
	q.ShutDownWithDrain()
	<-done
}

// workqueue/contended/2p8w_10k_keys_50pct_dup: 2 producers each add the same 10k
// keys, 8 workers get and done until the queue is shut down and drained. op = one add.
func BenchmarkWorkqueueContended2p8w(b *testing.B) {
	const n = 10_000
	ks := keys(n)
	b.ResetTimer()
	for it := 0; it < b.N; it += 2 * n {
		q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{})
		var workers, producers sync.WaitGroup
		for w := 0; w < 8; w++ {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for {
					k, shutdown := q.Get()
					if shutdown {
						return
					}
					q.Done(k)
				}
			}()
		}
		for p := 0; p < 2; p++ {
			producers.Add(1)
			go func() {
				defer producers.Done()
				for _, k := range ks {
					q.Add(k)
				}
			}()
		}
		producers.Wait()
		q.ShutDownWithDrain()
		workers.Wait()
	}
}

// workqueue/delaying/add_after: 10k add_after with pseudo-random delays up to 10 min on
// a fake clock, step 11 min, get everything. op = one item.
func BenchmarkWorkqueueAddAfter(b *testing.B) {
	const n = 10_000
	ks := keys(n)
	delays := make([]time.Duration, n)
	state := uint64(0x2545_F491_4F6C_DD1D)
	for i := range delays {
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		delays[i] = time.Duration(state % 600_000_000_000)
	}
	b.ResetTimer()
	for it := 0; it < b.N; it += n {
		clock := clocktesting.NewFakeClock(time.Now())
		q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Clock: clock})
		for i, k := range ks {
			q.AddAfter(k, delays[i])
		}
		clock.Step(11 * time.Minute)
		for range ks {
			q.Get()
		}
		b.StopTimer()
		q.ShutDown()
		b.StartTimer()
	}
}

// workqueue/rate_limited/requeue: 1000 queued keys each fail once (get, add_rate_limited,
// done) on the default controller limiter, fire after the clock steps, and succeed (get,
// forget, done). op = one failed-then-succeeded retry.
func BenchmarkWorkqueueRateLimitedRequeue(b *testing.B) {
	const n = 1_000
	ks := keys(n)
	b.ResetTimer()
	for it := 0; it < b.N; it += n {
		b.StopTimer()
		clock := clocktesting.NewFakeClock(time.Now())
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Clock: clock})
		for _, k := range ks {
			q.Add(k)
		}
		b.StartTimer()
		for range ks {
			k, _ := q.Get()
			q.AddRateLimited(k)
			q.Done(k)
		}
		// AddRateLimited hands items to the timer goroutine: wait until it has them all
		// queued before the clock jumps, or a late one would wait for the next step.
		for i := 0; i < 200 && q.Len() < n; i++ {
			clock.Step(1000 * time.Second)
			if q.Len() < n {
				time.Sleep(100 * time.Microsecond)
			}
		}
		for range ks {
			k, _ := q.Get()
			q.Forget(k)
			q.Done(k)
		}
		b.StopTimer()
		q.ShutDown()
		b.StartTimer()
	}
}
