// Command etcd is the upstream etcd server (the version Kubernetes pins), built
// from go.etcd.io/etcd/server/v3 for kinformer's local control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/kinformer/kinformer/crates/testenv/go/internal/parentwatch"
)

func main() {
	parentwatch.Start()
	etcdmain.Main(os.Args)
}
