// Command demo is `make demo`: it starts a real etcd and kube-apiserver
// (built by hack/setup-envtest.sh), runs the podsieve manager against them
// with the admission webhooks served over TLS, applies config/samples, and
// walks through the mission with the built kubectl, printing what a user
// sees. It then leaves the control plane running until Ctrl-C
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
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: demo PATH-TO-PODSIEVE-BINARY")
		os.Exit(2)
	}
	if err := run(ctx, os.Args[1], os.Stdout, os.Getenv("DEMO_EXIT") == "1"); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
