// Command podsieve is the one podsieve binary: the in-cluster manager and the
// offline CLI subcommands, all built on the same engine.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	// SIGTERM and SIGINT cancel the context: the manager stops gracefully.
	os.Exit(runContext(ctrl.SetupSignalHandler(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
