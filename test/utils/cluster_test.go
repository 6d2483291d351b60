//go:build e2e

package utils

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterStartsAndStops starts the cluster, checks that a Deployment's
// pods turn Running on the fake nodes, and that Stop leaves no process
// behind. Run with `make test-e2e` (which builds the assets) or
// E2E_CLUSTER_ASSETS=$(hack/setup-cluster.sh) go test -tags e2e ./test/utils/.
func TestClusterStartsAndStops(t *testing.T) {
	assets := os.Getenv("E2E_CLUSTER_ASSETS")
	if assets == "" {
		t.Skip("E2E_CLUSTER_ASSETS is not set: run hack/setup-cluster.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	dir := os.Getenv("E2E_DIR") // kept for reading when set
	if dir == "" {
		dir = t.TempDir()
	}
	c, err := StartCluster(ctx, ClusterOptions{Assets: assets, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster started in %s", time.Since(start).Round(time.Millisecond))
	procs := c.Processes()
	defer func() { _ = c.Stop() }()

	k := c.Kubectl()
	if _, err := k.Run(ctx, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, "rollout", "status", "deployment/web", "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	out, err := k.Run(ctx, "get", "pods", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.status.phase} {.spec.nodeName}{\"\\n\"}{end}")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Fields(out); len(lines) != 6 || strings.Count(out, "Running") != 3 {
		t.Fatalf("want 3 Running pods on fake nodes, got:\n%s", out)
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		// The group is gone: signal 0 to it finds no process.
		if err := syscall.Kill(-p.Pid(), 0); err != syscall.ESRCH {
			t.Errorf("%s's process group %d still exists after Stop (%v)", p.Name, p.Pid(), err)
		}
	}
}
