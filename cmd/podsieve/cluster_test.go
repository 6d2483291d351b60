package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/testenv"
)

// testCluster is an envtest control plane with a cluster-admin kubeconfig
// on disk, for running `podsieve manager` as a user would.
type testCluster struct {
	env        *envtest.Environment
	k8s        client.Client
	kubeconfig string
}

func newTestCluster(t *testing.T, start func() (*envtest.Environment, *rest.Config, error)) *testCluster {
	t.Helper()
	env, cfg, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &testCluster{env: env, k8s: k8s, kubeconfig: path}
}

// startManager runs `podsieve manager` against the cluster with its
// webhooks on envtest's port, waits until /readyz answers 200 (failing at
// once if the manager exits), and returns the function that stops it and
// checks that it exited cleanly.
func (c *testCluster) startManager(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	probe := freeAddress(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	all := append([]string{"manager", "--kubeconfig", c.kubeconfig, "--metrics-bind-address", "0",
		"--health-probe-bind-address", probe, "--webhook-port", strconv.Itoa(c.env.WebhookInstallOptions.LocalServingPort)}, args...)
	go func() { exited <- runContext(ctx, all, nil, &bytes.Buffer{}, &stderr) }()
	waitFor(t, "/readyz to answer 200", func() bool {
		select {
		case code := <-exited:
			t.Fatalf("the manager exited %d: %s", code, stderr.String())
		default:
		}
		return httpOK("http://" + probe + "/readyz")
	})
	return func() {
		cancel()
		select {
		case code := <-exited:
			if code != exitOK {
				t.Errorf("the manager exited %d: %s", code, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("the manager did not stop within 30s of its context ending")
		}
	}
}

func freeAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// waitFor polls ok until it holds, for at most a minute.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return ok(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func mustSecurityPolicy(t *testing.T, name, spec string) *policyv1alpha1.SecurityPolicy {
	t.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
		t.Fatal(err)
	}
	return sp
}

// createReadyPolicy creates a SecurityPolicy and waits until the manager
// reports it Ready.
func (c *testCluster) createReadyPolicy(t *testing.T, name, spec string) {
	t.Helper()
	ctx := context.Background()
	sp := mustSecurityPolicy(t, name, spec)
	if err := c.k8s.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the policy to be Ready", func() bool {
		if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false
		}
		return meta.IsStatusConditionTrue(sp.Status.Conditions, policyv1alpha1.ConditionReady)
	})
}
