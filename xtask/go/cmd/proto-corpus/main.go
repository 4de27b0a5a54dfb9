// Command proto-corpus writes objects encoded by Go's own protobuf and JSON encoders, for
// kinformer-protobuf's tests.
//
//	proto-corpus -out FILE [-n 100] [-seed 1]   the randomized differential corpus
//	proto-corpus -fixtures DIR                  the hand-written fixtures of tests/data
//
// The corpus holds, for every Go type registered in client-go's kubernetes/scheme (each
// type once, under the first of its group/version/kinds in sorted order), n objects filled
// by apimachinery's round-trip fuzzer (k8s.io/apimachinery/pkg/api/apitesting/fuzzer with
// the generic meta fuzzer funcs, as k8s.io/api's own TestRoundTripExternalTypes uses it),
// from fixed seeds. Each object is encoded to protobuf (the `k8s\0` envelope), decoded
// back, and the decoded object is encoded to JSON: protobuf cannot tell a nil slice or map
// from an empty one, so both encodings then carry the same information.
//
// The file is a sequence of records, each five length-prefixed fields (4-byte big-endian
// length, then the bytes): apiVersion, kind, seed (decimal), protobuf, JSON. Objects Go
// itself cannot encode (the fuzzer can make values JSON refuses) are left out and counted
// on stderr.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"reflect"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	genericfuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

func main() {
	out := flag.String("out", "", "write the randomized corpus to this file")
	n := flag.Int("n", 100, "objects per type")
	seed := flag.Int64("seed", 1, "base seed")
	fixtures := flag.String("fixtures", "", "write the fixtures of crates/protobuf/tests/data into this directory")
	flag.Parse()
	var err error
	switch {
	case *out != "":
		err = corpus(*out, *n, *seed)
	case *fixtures != "":
		err = writeFixtures(*fixtures)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "proto-corpus:", err)
		os.Exit(1)
	}
}

// kinds lists one group/version/kind per Go type, sorted, leaving out WatchEvent (its
// object is a RawExtension the fuzzer fills with JSON, not an envelope: the watch tests
// cover it).
func kinds() []schema.GroupVersionKind {
	byType := map[reflect.Type]schema.GroupVersionKind{}
	var all []schema.GroupVersionKind
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version != runtime.APIVersionInternal && gvk.Kind != "WatchEvent" {
			all = append(all, gvk)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].String() < all[j].String() })
	var out []schema.GroupVersionKind
	for _, gvk := range all {
		t := scheme.Scheme.AllKnownTypes()[gvk]
		if _, seen := byType[t]; seen {
			continue
		}
		byType[t] = gvk
		out = append(out, gvk)
	}
	return out
}

func corpus(path string, n int, base int64) error {
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	js := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	written, skipped := 0, 0
	for _, gvk := range kinds() {
		for i := 0; i < n; i++ {
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%s/%d", base, gvk, i)
			seed := int64(h.Sum64() >> 1)
			obj, err := scheme.Scheme.New(gvk)
			if err != nil {
				return err
			}
			fuzzer.FuzzerFor(genericfuzzer.Funcs, rand.NewSource(seed), codecs).Fill(obj)
			setType(obj, gvk)
			var pbuf bytes.Buffer
			if err := pb.Encode(obj, &pbuf); err != nil {
				skipped++
				continue
			}
			back, _, err := pb.Decode(pbuf.Bytes(), &gvk, nil)
			if err != nil {
				return fmt.Errorf("%s seed %d: Go cannot decode its own protobuf: %w", gvk, seed, err)
			}
			setType(back, gvk)
			var jbuf bytes.Buffer
			if err := js.Encode(back, &jbuf); err != nil {
				skipped++
				continue
			}
			for _, field := range [][]byte{
				[]byte(gvk.GroupVersion().String()), []byte(gvk.Kind), []byte(strconv.FormatInt(seed, 10)),
				pbuf.Bytes(), bytes.TrimRight(jbuf.Bytes(), "\n"),
			} {
				var l [4]byte
				binary.BigEndian.PutUint32(l[:], uint32(len(field)))
				w.Write(l[:])
				w.Write(field)
			}
			written++
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "proto-corpus: %d objects of %d types written, %d that Go cannot encode left out\n",
		written, len(kinds()), skipped)
	return nil
}

func setType(obj runtime.Object, gvk schema.GroupVersionKind) {
	if acc, err := apimeta.TypeAccessor(obj); err == nil {
		acc.SetAPIVersion(gvk.GroupVersion().String())
		acc.SetKind(gvk.Kind)
	}
}
