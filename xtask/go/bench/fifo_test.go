// The FIFO benchmarks: the Go twins of crates/deltafifo/benches/fifo.rs (a relist of
// 10,000 objects, 100,000 updates over them, everything popped), paired by the
// `deltafifo` suite of `cargo xtask bench`.
package bench

import (
	"fmt"
	"testing"

	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

const fifoKeys = 10000
const fifoUpdates = 100000

type fifoObj struct{ v1.ObjectMeta }

func fifoWorkload() ([]interface{}, []interface{}) {
	list := make([]interface{}, fifoKeys)
	for i := range fifoKeys {
		list[i] = &fifoObj{v1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("obj-%05d", i), ResourceVersion: "1"}}
	}
	ups := make([]interface{}, fifoUpdates)
	for j := range fifoUpdates {
		ups[j] = &fifoObj{v1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("obj-%05d", j%fifoKeys), ResourceVersion: fmt.Sprint(2 + j)}}
	}
	return list, ups
}

func BenchmarkFifoDeltaFIFO(b *testing.B) {
	list, ups := fifoWorkload()
	for b.Loop() {
		b.StopTimer()
		f := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{KnownObjects: cache.NewStore(cache.MetaNamespaceKeyFunc), EmitDeltaTypeReplaced: true})
		b.StartTimer()
		_ = f.Replace(list, "1")
		for _, u := range ups {
			_ = f.Update(u)
		}
		n := 0
		for f.IsClosed() == false {
			_, err := f.Pop(func(o interface{}, _ bool) error { n += len(o.(cache.Deltas)); return nil })
			if err != nil {
				b.Fatal(err)
			}
			if n == fifoKeys+fifoUpdates {
				break
			}
		}
	}
}

func fifoReal(batch bool, b *testing.B) {
	list, ups := fifoWorkload()
	for b.Loop() {
		b.StopTimer()
		f := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{KnownObjects: cache.NewStore(cache.MetaNamespaceKeyFunc)})
		b.StartTimer()
		_ = f.Replace(list, "1")
		for _, u := range ups {
			_ = f.Update(u)
		}
		n := 0
		for n < fifoKeys+fifoUpdates {
			if batch {
				_ = f.PopBatch(func(d []cache.Delta, _ bool) error { n += len(d); return nil }, func(o interface{}, _ bool) error { n += len(o.(cache.Deltas)); return nil })
			} else {
				_, _ = f.Pop(func(o interface{}, _ bool) error { n += len(o.(cache.Deltas)); return nil })
			}
		}
	}
}

func BenchmarkFifoRealFIFOBatch(b *testing.B)  { fifoReal(true, b) }
func BenchmarkFifoRealFIFOSingle(b *testing.B) { fifoReal(false, b) }

func BenchmarkFifoRealFIFOAtomic(b *testing.B) {
	list, ups := fifoWorkload()
	for b.Loop() {
		b.StopTimer()
		f := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{AtomicEvents: true})
		b.StartTimer()
		_ = f.Replace(list, "1")
		for _, u := range ups {
			_ = f.Update(u)
		}
		n := 0
		for n < 1+fifoUpdates {
			_ = f.PopBatch(func(d []cache.Delta, _ bool) error { n += len(d); return nil }, func(o interface{}, _ bool) error { n += len(o.(cache.Deltas)); return nil })
		}
	}
}
