package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"k8s.io/client-go/tools/cache"
)

// fifoQueue is what both client-go FIFOs offer.
type fifoQueue interface {
	cache.Queue
	IsClosed() bool
}

// fifoOp is one line of a fifo trace (see xtask/traces/README.md).
type fifoOp struct {
	Op   string    `json:"op"`
	Obj  podDesc   `json:"obj"`
	Objs []podDesc `json:"objs"`
	Rv   string    `json:"rv"`
}

// sortedKnown is the informer's store as the FIFO sees it (KnownObjects), listing its
// keys sorted: client-go's store lists them in map order, which would make the order of
// a resync's Syncs and of a relist's tombstones for stored keys random.
type sortedKnown struct{ cache.Store }

func (s sortedKnown) ListKeys() []string {
	keys := s.Store.ListKeys()
	sort.Strings(keys)
	return keys
}

// fifoDelta is how an observation shows one popped delta.
func fifoDelta(d cache.Delta) map[string]any {
	switch info := d.Object.(type) {
	case cache.ReplacedAllInfo:
		objs := make([]string, 0, len(info.Objects))
		for _, o := range info.Objects {
			objs = append(objs, item(o))
		}
		return map[string]any{"type": string(d.Type), "rv": info.ResourceVersion, "objects": objs}
	case cache.SyncAllInfo:
		return map[string]any{"type": string(d.Type)}
	case cache.DeletedFinalStateUnknown:
		key := info.Key
		return map[string]any{"type": string(d.Type), "key": key, "tombstone": true, "rv": podRv(info.Obj)}
	default:
		key, err := cache.MetaNamespaceKeyFunc(d.Object)
		if err != nil {
			key = "<" + err.Error() + ">"
		}
		return map[string]any{"type": string(d.Type), "key": key, "tombstone": false, "rv": podRv(d.Object)}
	}
}

func podRv(obj any) any {
	if p, ok := obj.(interface{ GetResourceVersion() string }); ok && !isNil(obj) {
		return p.GetResourceVersion()
	}
	// A tombstone without an object (a known key the store lost): cannot happen when the
	// replayer applies every pop to the store.
	return nil
}

func isNil(obj any) bool {
	v := reflect.ValueOf(obj)
	return !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil())
}

// queuedLen reads how many entries wait in the FIFO without blocking: client-go's Pop
// waits on an empty queue and neither FIFO exports its length, so reflection reads the
// private `queue` (DeltaFIFO) or `items` (RealFIFO) slice, read-only.
func queuedLen(q fifoQueue, field string) (int, error) {
	f := reflect.ValueOf(q).Elem().FieldByName(field)
	if !f.IsValid() {
		return 0, fmt.Errorf("client-go's FIFO has no field %q any more: update queuedLen", field)
	}
	return f.Len(), nil
}

// applyDeltas plays the informer: it applies popped deltas to the store the FIFO was
// built with, as controller.go's processDeltas and processReplacedAllInfo do.
func applyDeltas(store cache.Store, deltas []cache.Delta) error {
	for _, d := range deltas {
		switch d.Type {
		case cache.ReplacedAll:
			info := d.Object.(cache.ReplacedAllInfo)
			if err := store.Replace(info.Objects, info.ResourceVersion); err != nil {
				return err
			}
		case cache.SyncAll, cache.Bookmark:
		case cache.Deleted:
			if err := store.Delete(d.Object); err != nil {
				return err
			}
		default:
			if _, exists, err := store.Get(d.Object); err == nil && exists {
				if err := store.Update(d.Object); err != nil {
					return err
				}
			} else if err := store.Add(d.Object); err != nil {
				return err
			}
		}
	}
	return nil
}

func replayFifo(header map[string]any, lines *bufio.Scanner, out *bufio.Writer) error {
	// The informer's store: DeletionHandlingMetaNamespaceKeyFunc, as NewInformer's, so
	// that a popped tombstone deletes its key.
	store := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	variant, _ := header["fifo"].(string)
	var (
		queue fifoQueue
		real  *cache.RealFIFO
		field = "items"
		batch bool
	)
	switch variant {
	case "delta":
		queue = cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
			KeyFunction:           cache.MetaNamespaceKeyFunc,
			KnownObjects:          sortedKnown{store},
			EmitDeltaTypeReplaced: true,
		})
		field = "queue"
	case "real", "real_batch":
		real = cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
			KeyFunction:  cache.MetaNamespaceKeyFunc,
			KnownObjects: sortedKnown{store},
		})
		queue, batch = real, variant == "real_batch"
	case "real_atomic":
		real = cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
			KeyFunction:  cache.MetaNamespaceKeyFunc,
			AtomicEvents: true,
		})
		queue, batch = real, true
	default:
		return fmt.Errorf("unknown fifo %q", variant)
	}
	n := 0
	for lines.Scan() {
		if len(lines.Bytes()) == 0 {
			continue
		}
		n++
		var o fifoOp
		if err := json.Unmarshal(lines.Bytes(), &o); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		obs := map[string]any{"n": n, "op": o.Op}
		switch o.Op {
		case "add":
			obs["error"] = queue.Add(o.Obj.pod()) != nil
		case "update":
			obs["error"] = queue.Update(o.Obj.pod()) != nil
		case "delete":
			obs["error"] = queue.Delete(o.Obj.pod()) != nil
		case "replace":
			list := make([]any, 0, len(o.Objs))
			for i := range o.Objs {
				list = append(list, o.Objs[i].pod())
			}
			obs["error"] = queue.Replace(list, o.Rv) != nil
		case "resync":
			obs["error"] = queue.Resync() != nil
		case "has_synced":
			obs["value"] = queue.HasSynced()
		case "len":
			l, err := queuedLen(queue, field)
			if err != nil {
				return err
			}
			obs["len"] = l
		case "close":
			queue.Close()
		case "pop":
			l, err := queuedLen(queue, field)
			if err != nil {
				return err
			}
			if l == 0 && !queue.IsClosed() {
				obs["would_block"] = true
				break
			}
			var popped []cache.Delta
			var initial, isBatch bool
			if batch {
				err = real.PopBatch(
					func(deltas []cache.Delta, isInInitialList bool) error {
						popped, initial, isBatch = deltas, isInInitialList, true
						return applyDeltas(store, deltas)
					},
					func(obj any, isInInitialList bool) error {
						popped, initial = obj.(cache.Deltas), isInInitialList
						return applyDeltas(store, popped)
					})
			} else {
				_, err = queue.Pop(func(obj any, isInInitialList bool) error {
					popped, initial = obj.(cache.Deltas), isInInitialList
					return applyDeltas(store, popped)
				})
			}
			if errors.Is(err, cache.ErrFIFOClosed) {
				obs["closed"] = true
				break
			}
			if err != nil {
				return fmt.Errorf("line %d: applying the popped item: %w", n, err)
			}
			deltas := make([]map[string]any, 0, len(popped))
			for _, d := range popped {
				deltas = append(deltas, fifoDelta(d))
			}
			obs["deltas"] = deltas
			obs["batch"] = isBatch
			obs["is_in_initial_list"] = initial
		default:
			return fmt.Errorf("line %d: unknown op %q", n, o.Op)
		}
		emit(out, obs)
	}
	return lines.Err()
}
