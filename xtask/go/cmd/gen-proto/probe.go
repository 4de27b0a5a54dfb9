package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireLen     = 2
	wireFixed32 = 5
)

// specialSample is a non-zero value of each special type, so that its Marshal writes it.
func specialSample(t reflect.Type) (reflect.Value, bool) {
	var v any
	switch t {
	case reflect.TypeOf(metav1.Time{}):
		v = metav1.Unix(1_000_000_000, 0)
	case reflect.TypeOf(metav1.MicroTime{}):
		v = metav1.NewMicroTime(time.Unix(1_000_000_000, 1000))
	case reflect.TypeOf(metav1.Duration{}):
		v = metav1.Duration{Duration: time.Second}
	case reflect.TypeOf(resource.Quantity{}):
		v = resource.MustParse("1")
	case reflect.TypeOf(intstr.IntOrString{}):
		v = intstr.FromInt32(1)
	case reflect.TypeOf(runtime.RawExtension{}):
		v = runtime.RawExtension{Raw: []byte("{}")}
	case reflect.TypeOf(metav1.FieldsV1{}):
		f := metav1.FieldsV1{}
		f.SetRawBytes([]byte("{}"))
		v = f
	default:
		return reflect.Value{}, false
	}
	return reflect.ValueOf(v), true
}

// fill sets v to a non-zero sample: n elements for slices and maps, empty structs.
func fill(v reflect.Value, n int) {
	t := v.Type()
	if s, ok := specialSample(t); ok {
		v.Set(s)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Slice:
		s := reflect.MakeSlice(t, n, n)
		for i := 0; i < n; i++ {
			fill(s.Index(i), 1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(t)
		for i := 0; i < n; i++ {
			k := reflect.New(t.Key()).Elem()
			k.SetString(fmt.Sprint("k", i))
			val := reflect.New(t.Elem()).Elem()
			fill(val, 1)
			m.SetMapIndex(k, val)
		}
		v.Set(m)
	}
}

// wireOf is the wire type a single (not repeated) value of Go type t is written with.
func wireOf(t reflect.Type) int {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, ok := special[t]; ok {
		return wireLen
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return wireVarint
	case reflect.Float64:
		return wireFixed64
	case reflect.Float32:
		return wireFixed32
	default:
		return wireLen
	}
}

type occurrence struct {
	wire    int
	payload []byte
}

// parseFields splits an encoded message into its fields.
func parseFields(data []byte) (map[int][]occurrence, error) {
	out := map[int][]occurrence{}
	for len(data) > 0 {
		key, n := binary.Uvarint(data)
		if n <= 0 {
			return nil, errors.New("bad field key")
		}
		data = data[n:]
		num, wire := int(key>>3), int(key&7)
		var payload []byte
		switch wire {
		case wireVarint:
			_, n := binary.Uvarint(data)
			if n <= 0 {
				return nil, errors.New("bad varint")
			}
			payload, data = data[:n], data[n:]
		case wireFixed64:
			if len(data) < 8 {
				return nil, errors.New("short fixed64")
			}
			payload, data = data[:8], data[8:]
		case wireFixed32:
			if len(data) < 4 {
				return nil, errors.New("short fixed32")
			}
			payload, data = data[:4], data[4:]
		case wireLen:
			l, n := binary.Uvarint(data)
			if n <= 0 || uint64(len(data)-n) < l {
				return nil, errors.New("bad length")
			}
			payload, data = data[n:n+int(l)], data[n+int(l):]
		default:
			return nil, fmt.Errorf("wire type %d", wire)
		}
		out[num] = append(out[num], occurrence{wire, payload})
	}
	return out, nil
}

// probe checks m against the Go type's own Marshal: with every field set to a non-zero sample
// (two elements in slices and maps), each field must be written under its number with the wire
// type the decoder expects, repeated fields once per element (or packed), wrapped lists and
// map entries as one message each, and no number may be written that the table lacks.
func (g *generator) probe(m *message) {
	v := reflect.New(m.goType)
	for _, f := range m.fields {
		fill(v.Elem().Field(f.index), 2)
	}
	marshaler, ok := v.Interface().(interface{ Marshal() ([]byte, error) })
	if !ok {
		g.fail("%s: no protobuf Marshal method", m.goType)
		return
	}
	data, err := marshaler.Marshal()
	if err != nil {
		g.fail("%s: Marshal of a sample failed: %v", m.goType, err)
		return
	}
	seen, err := parseFields(data)
	if err != nil {
		g.fail("%s: cannot parse its encoding: %v", m.goType, err)
		return
	}
	for _, f := range m.fields {
		sf := m.goType.Field(f.index)
		where := m.goType.String() + "." + sf.Name
		obs := seen[f.number]
		delete(seen, f.number)
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		bad := func(what string) {
			g.fail("%s (field %d): %s, but Marshal wrote %d occurrence(s) %v", where, f.number, what, len(obs), wires(obs))
		}
		switch {
		case ft.Kind() == reflect.Map:
			if len(obs) != 2 || obs[0].wire != wireLen || obs[1].wire != wireLen {
				bad("expected a map entry per key")
				continue
			}
			entry, err := parseFields(obs[0].payload)
			valWire := wireOf(ft.Elem())
			if err != nil || len(entry[1]) != 1 || entry[1][0].wire != wireLen ||
				len(entry[2]) != 1 || entry[2][0].wire != valWire {
				bad(fmt.Sprintf("expected map entries {1: key, 2: value of wire type %d}", valWire))
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 && !isWrappedList(ft):
			w := wireOf(ft.Elem())
			unpacked := len(obs) == 2 && obs[0].wire == w && obs[1].wire == w
			packed := w != wireLen && len(obs) == 1 && obs[0].wire == wireLen
			if !unpacked && !packed {
				bad(fmt.Sprintf("expected one occurrence of wire type %d per element", w))
			}
		case isWrappedList(ft):
			if len(obs) != 1 || obs[0].wire != wireLen {
				bad("expected one wrapped list")
				continue
			}
			inner, err := parseFields(obs[0].payload)
			if err != nil || len(inner) != 1 || len(inner[1]) != 2 {
				bad("expected a message { repeated items = 1 } with both elements")
			}
		default:
			w := wireOf(ft)
			if len(obs) != 1 || obs[0].wire != w {
				bad(fmt.Sprintf("expected one occurrence of wire type %d", w))
			}
		}
	}
	for num, obs := range seen {
		g.fail("%s: Marshal wrote field %d (%v), which the table lacks", m.goType, num, wires(obs))
	}
}

func wires(obs []occurrence) []int {
	var out []int
	for _, o := range obs {
		out = append(out, o.wire)
	}
	return out
}
