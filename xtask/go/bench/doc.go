// Package bench holds client-go's side of kinformer's benchmarks: the same workloads
// as the Rust criterion benches, run by `cargo xtask bench` with `go test -bench`.
package bench
