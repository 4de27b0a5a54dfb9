package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

type selectorOp struct {
	Op       string            `json:"op"`
	Selector string            `json:"selector"`
	Labels   map[string]string `json:"labels"`
}

// replaySelector replays a selector trace on apimachinery's labels.Parse.
func replaySelector(lines *bufio.Scanner, out *bufio.Writer) error {
	n := 0
	for lines.Scan() {
		if len(lines.Bytes()) == 0 {
			continue
		}
		n++
		var o selectorOp
		if err := json.Unmarshal(lines.Bytes(), &o); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		obs := map[string]any{"n": n, "op": o.Op}
		switch o.Op {
		case "select":
			sel, err := labels.Parse(o.Selector)
			switch {
			case err != nil:
				obs["valid"] = false
			case hasGtLt(sel):
				// client-go accepts it; kinformer refuses it with
				// UnsupportedSelectorOperator. What both observe is that it is such a
				// selector (see the README).
				obs["unsupported"] = true
			default:
				obs["valid"] = true
				obs["matches"] = sel.Matches(labels.Set(o.Labels))
				// kinformer prints `==` as `=`; keys and values cannot hold `=`.
				obs["string"] = strings.ReplaceAll(sel.String(), "==", "=")
			}
		default:
			return fmt.Errorf("line %d: unknown op %q", n, o.Op)
		}
		emit(out, obs)
	}
	return lines.Err()
}

// hasGtLt reports whether a parsed selector has a `>` or `<` requirement.
func hasGtLt(sel labels.Selector) bool {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if op := r.Operator(); op == selection.GreaterThan || op == selection.LessThan {
			return true
		}
	}
	return false
}
