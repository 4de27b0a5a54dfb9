// Command kube-apiserver is the upstream Kubernetes API server, built from the
// k8s.io/kubernetes module so that kinformer's tests, demo and benchmarks can run
// against a real control plane without containers or prebuilt binaries.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"

	"github.com/kinformer/kinformer/crates/testenv/go/internal/parentwatch"
)

func main() {
	parentwatch.Start()
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
