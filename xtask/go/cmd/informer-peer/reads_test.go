package main

import (
	"fmt"
	"strings"
	"testing"
)

// kinformer's contender pins the same order (bench/informer/src/reads.rs).
func TestShuffleIsFixedAndSortsFirst(t *testing.T) {
	a := make([]string, 10)
	for i := range a {
		a[i] = fmt.Sprintf("p0-%d", i)
	}
	b := make([]string, len(a))
	for i := range a {
		b[i] = a[len(a)-1-i]
	}
	shuffle(a)
	shuffle(b)
	got := strings.Join(a, ",")
	if got != strings.Join(b, ",") {
		t.Fatalf("the order depends on the input's: %s vs %s", got, strings.Join(b, ","))
	}
	if want := "p0-5,p0-1,p0-4,p0-7,p0-8,p0-2,p0-3,p0-6,p0-0,p0-9"; got != want {
		t.Fatalf("shuffled %s, want %s", got, want)
	}
}
