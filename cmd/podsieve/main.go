// Command podsieve is the one podsieve binary: the in-cluster manager and the
// offline CLI subcommands, all built on the same engine.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
