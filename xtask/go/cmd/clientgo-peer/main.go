// Command clientgo-peer is client-go's side of kinformer's conformance checks and
// benchmarks. It replays operation traces (see xtask/traces/README.md) on client-go's
// own types and prints what it observed, one canonical JSON line per observation; the
// Rust side replays the same traces, and `cargo xtask conformance` diffs the two.
//
//	clientgo-peer replay FILE...   replay trace files, printing "# FILE" before each
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: clientgo-peer replay FILE...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "replay":
		out := bufio.NewWriter(os.Stdout)
		defer out.Flush()
		for _, path := range os.Args[2:] {
			fmt.Fprintf(out, "# %s\n", path)
			if err := replayFile(path, out); err != nil {
				fmt.Fprintf(out, "{\"error\":%q}\n", err.Error())
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// replayFile dispatches on the trace's header line. A panic while replaying (in client-go
// or in the replayer) becomes this trace's error instead of ending the whole run.
func replayFile(path string, out *bufio.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 1<<20), 1<<26)
	var header map[string]any
	for lines.Scan() {
		if len(lines.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(lines.Bytes(), &header); err != nil {
			return fmt.Errorf("header: %w", err)
		}
		break
	}
	switch header["trace"] {
	case "workqueue":
		return replayWorkqueue(header, lines, out)
	case "store":
		return replayStore(header, lines, out)
	case "selector":
		return replaySelector(lines, out)
	case "fifo":
		return replayFifo(header, lines, out)
	default:
		return fmt.Errorf("unknown trace kind %v", header["trace"])
	}
}

// emit prints one observation as canonical JSON (sorted keys, no spaces).
func emit(out *bufio.Writer, obs map[string]any) {
	b, err := json.Marshal(obs)
	if err != nil {
		b = []byte(fmt.Sprintf("{\"error\":%q}", err.Error()))
	}
	out.Write(b)
	out.WriteByte('\n')
}
