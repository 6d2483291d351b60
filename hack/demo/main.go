// Command demo is `make demo`: it starts a cluster built from Go modules
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok's
// fake nodes, by hack/setup-cluster.sh), installs podsieve with
// `kubectl apply -k config/default` as test/e2e does, and walks through the
// mission with the built kubectl, printing what a user sees: Deployments and
// a DaemonSet whose pods turn Running, refusals at `kubectl apply`, a
// developer's self-served PolicyException, and a policy tightened under a
// running Deployment. It then leaves the cluster running until Ctrl-C
// (DEMO_EXIT=1 exits after the walkthrough).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: demo CLUSTER-ASSETS PATH-TO-PODSIEVE-BINARY\n(CLUSTER-ASSETS is the directory hack/setup-cluster.sh prints; `make demo` passes both)")
		os.Exit(2)
	}
	if err := run(ctx, os.Args[1], os.Args[2], os.Stdout, os.Getenv("DEMO_EXIT") == "1"); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
