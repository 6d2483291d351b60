// Command e2e-cluster starts the e2e suite's cluster (test/utils.Cluster),
// optionally with podsieve installed as the suite installs it, prints its
// KUBECONFIG and runs until Ctrl-C, then stops everything:
//
//	make build
//	go run ./test/utils/cmd/e2e-cluster -assets "$(hack/setup-cluster.sh)" -podsieve bin/podsieve
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/podsieve/podsieve/test/utils"
)

func main() {
	assets := flag.String("assets", os.Getenv("E2E_CLUSTER_ASSETS"), "the directory hack/setup-cluster.sh prints")
	podsieve := flag.String("podsieve", "", "the built podsieve binary; empty: install nothing")
	root := flag.String("root", ".", "the repository, whose config/default is installed")
	replicas := flag.Int("replicas", 3, "podsieve replicas")
	nodes := flag.Int("nodes", 3, "fake nodes")
	dir := flag.String("dir", "", "directory for data, kubeconfigs and logs (default: a new temporary one)")
	exit := flag.Bool("exit", false, "stop once everything is up (to time the start)")
	flag.Parse()
	if err := run(*assets, *podsieve, *root, *dir, *replicas, *nodes, *exit); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-cluster:", err)
		os.Exit(1)
	}
}

func run(assets, podsieve, root, dir string, replicas, nodes int, exit bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() { _ = utils.StopAll() }()
	start := time.Now()
	c, err := utils.StartCluster(ctx, utils.ClusterOptions{Assets: assets, Dir: dir, Nodes: nodes})
	if err != nil {
		return err
	}
	fmt.Printf("cluster started in %s (%s)\n", time.Since(start).Round(time.Millisecond), c.Dir)
	if podsieve != "" {
		t := time.Now()
		absRoot, err := filepath.Abs(root)
		if err != nil {
			return err
		}
		absBin, err := filepath.Abs(podsieve)
		if err != nil {
			return err
		}
		if _, err := utils.Install(ctx, c, utils.InstallOptions{Root: absRoot, Binary: absBin, Replicas: replicas}); err != nil {
			return err
		}
		fmt.Printf("podsieve installed and %d replicas ready in %s\n", replicas, time.Since(t).Round(time.Millisecond))
	}
	fmt.Printf("export KUBECONFIG=%s\nalias kubectl=%s\nlogs: %s\n", c.Kubeconfig, filepath.Join(assets, "kubectl"), filepath.Join(c.Dir, "logs"))
	if exit {
		return nil
	}
	fmt.Println("Ctrl-C stops it.")
	<-ctx.Done()
	return nil
}
