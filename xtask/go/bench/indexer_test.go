// The indexer workloads of crates/indexer/benches/indexer.rs, on client-go's
// ThreadSafeStore: 100k pods over 100 namespaces and 1000 nodes, indexed by namespace and
// byNode.

package bench

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

const nPods = 100000

func mkPods() []*corev1.Pod { return mkVersions(0) }

func mkVersions(rvBase int) []*corev1.Pod {
	tiers := []string{"web", "db", "cache"}
	pods := make([]*corev1.Pod, nPods)
	for i := 0; i < nPods; i++ {
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:            fmt.Sprintf("pod-%d", i),
				Namespace:       fmt.Sprintf("ns-%d", i%100),
				ResourceVersion: fmt.Sprintf("%d", rvBase+i+1),
				Labels:          map[string]string{"app": fmt.Sprintf("app-%d", i%50), "tier": tiers[i%3]},
			},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", (i/100)%1000)},
		}
	}
	return pods
}

func byNode(obj interface{}) ([]string, error) {
	return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
}

func mkStore(pods []*corev1.Pod) cache.Indexer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, "byNode": byNode})
	for _, p := range pods {
		idx.Add(p)
	}
	return idx
}

func podKeys() []string {
	ks := make([]string, nPods)
	for i := range ks {
		ks[i] = fmt.Sprintf("ns-%d/pod-%d", i%100, i)
	}
	return ks
}

func BenchmarkIndexerGet(b *testing.B) {
	idx := mkStore(mkPods())
	ks := podKeys()
	b.ResetTimer()
	i := 0
	for n := 0; n < b.N; n++ {
		i = (i + 7919) % nPods
		if _, ok, _ := idx.GetByKey(ks[i]); !ok {
			b.Fatal("missing")
		}
	}
}

// The same, reading the pod's name as any caller of Get does next (Rust's get touches the
// object to count the reference it hands out).
func BenchmarkIndexerGetRead(b *testing.B) {
	idx := mkStore(mkPods())
	ks := podKeys()
	b.ResetTimer()
	i, total := 0, 0
	for n := 0; n < b.N; n++ {
		i = (i + 7919) % nPods
		o, _, _ := idx.GetByKey(ks[i])
		total += len(o.(*corev1.Pod).Name)
	}
	_ = total
}

func BenchmarkIndexerByIndex(b *testing.B) {
	idx := mkStore(mkPods())
	nodes := make([]string, 1000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
	}
	b.ResetTimer()
	i := 0
	for n := 0; n < b.N; n++ {
		i = (i + 7) % 1000
		r, _ := idx.ByIndex("byNode", nodes[i])
		if len(r) != 100 {
			b.Fatal(len(r))
		}
	}
}

func BenchmarkIndexerUpdate(b *testing.B) {
	pods := mkPods()
	versions := [2][]*corev1.Pod{pods, mkVersions(nPods)}
	idx := mkStore(pods)
	b.ResetTimer()
	i, round := 0, 1
	for n := 0; n < b.N; n++ {
		i = (i + 7919) % nPods
		if i < 7919 {
			round++
		}
		idx.Update(versions[round%2][i])
	}
}

func BenchmarkIndexerListSelectorNamespace(b *testing.B) {
	idx := mkStore(mkPods())
	l := corelisters.NewPodLister(idx)
	sel, _ := labels.Parse("app=app-7,tier in (web,db)")
	nss := []string{"ns-7", "ns-57", "ns-107"}
	b.ResetTimer()
	i := 0
	for n := 0; n < b.N; n++ {
		i = (i + 1) % 3
		r, _ := l.Pods(nss[i]).List(sel)
		_ = r
	}
}

func BenchmarkIndexerListSelectorAll(b *testing.B) {
	idx := mkStore(mkPods())
	l := corelisters.NewPodLister(idx)
	sel, _ := labels.Parse("app=app-7,tier in (web,db)")
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		r, _ := l.List(sel)
		_ = r
	}
}

func BenchmarkIndexerParseSelector(b *testing.B) {
	for n := 0; n < b.N; n++ {
		if _, err := labels.Parse("app=app-7,tier in (web,db)"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestIndexerHeapPerEntry(t *testing.T) {
	pods := mkPods()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	idx := mkStore(pods)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.Logf("heap bytes per entry: %.1f", float64(m1.HeapAlloc-m0.HeapAlloc)/nPods)
	runtime.KeepAlive(idx)
	runtime.KeepAlive(pods)
}
