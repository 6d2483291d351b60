package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestManager runs `podsieve manager` against a real API server, as a user
// would with a kubeconfig: /readyz turns ready, a policy gets its Ready
// condition, the API server calls its webhook over TLS and a violating pod
// is refused, and cancelling the context stops the manager cleanly.
func TestManager(t *testing.T) {
	env, cfg, err := testenv.StartWithWebhooks()
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
	probe := freeAddress(t)

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	exited := make(chan int)
	go func() {
		exited <- runContext(ctx, []string{"manager", "--kubeconfig", path, "--metrics-bind-address", "0",
			"--health-probe-bind-address", probe, "--exceptions-namespace", "podsieve-system",
			"--webhook-port", strconv.Itoa(env.WebhookInstallOptions.LocalServingPort),
			"--webhook-cert-dir", env.WebhookInstallOptions.LocalServingCertDir, "--cert-rotation=false"}, nil, &stdout, &stderr)
	}()

	waitFor(t, "/readyz to answer 200", func() bool {
		select {
		case code := <-exited:
			t.Fatalf("the manager exited %d: %s", code, stderr.String())
		default:
		}
		return httpOK("http://" + probe + "/readyz")
	})

	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	sp := mustSecurityPolicy(t, "smoke", "rules:\n- name: r\n  podSecurity: {level: baseline}")
	if err := k8s.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the policy to be Ready", func() bool {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
			return false
		}
		return meta.IsStatusConditionTrue(sp.Status.Conditions, policyv1alpha1.ConditionReady)
	})

	refused := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "host-pid"}, Spec: corev1.PodSpec{
		HostPID: true, Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}},
	}}
	err = k8s.Create(ctx, refused)
	if err == nil || !strings.Contains(err.Error(), `admission webhook "pods.podsieve.dev" denied the request: Pod default/host-pid is refused by SecurityPolicy "smoke" rule "r" (baseline:latest):`) {
		t.Fatalf("a hostPID pod was not refused by the manager's webhook: %v", err)
	}

	cancel()
	select {
	case code := <-exited:
		if code != exitOK {
			t.Fatalf("manager exited %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop within 30s of its context ending")
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

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
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

// TestManagerRestartNeverAdmitsRefused: while a stream of pods that an
// Enforce policy refuses is being created, the manager is stopped and
// started again. Whether the webhook is down (the API server's failurePolicy
// Fail), starting (the index not built yet) or serving, no such pod is ever
// admitted.
func TestManagerRestartNeverAdmitsRefused(t *testing.T) {
	env, cfg, err := testenv.StartWithWebhooks()
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
	start := func() (stop func()) {
		probe := freeAddress(t)
		ctx, cancel := context.WithCancel(context.Background())
		var stderr bytes.Buffer
		exited := make(chan int, 1)
		go func() {
			exited <- runContext(ctx, []string{"manager", "--kubeconfig", path, "--metrics-bind-address", "0",
				"--health-probe-bind-address", probe, "--cert-rotation=false",
				"--webhook-port", strconv.Itoa(env.WebhookInstallOptions.LocalServingPort),
				"--webhook-cert-dir", env.WebhookInstallOptions.LocalServingCertDir}, nil, &bytes.Buffer{}, &stderr)
		}()
		waitFor(t, "/readyz to answer 200", func() bool { return httpOK("http://" + probe + "/readyz") })
		return func() {
			cancel()
			if code := <-exited; code != exitOK {
				t.Errorf("manager exited %d: %s", code, stderr.String())
			}
		}
	}

	stop := start()
	if err := k8s.Create(context.Background(), mustSecurityPolicy(t, "no-host-pid", "rules:\n- name: r\n  podSecurity: {level: baseline}")); err != nil {
		t.Fatal(err)
	}
	hostPID := func() error {
		return k8s.Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "host-pid-"},
			Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}})
	}
	waitFor(t, "the policy to refuse", func() bool { return hostPID() != nil })

	var admitted, refused atomic.Int64
	streamDone := make(chan struct{})
	streamCtx, endStream := context.WithCancel(context.Background())
	go func() {
		defer close(streamDone)
		for streamCtx.Err() == nil {
			if hostPID() == nil {
				admitted.Add(1)
			} else {
				refused.Add(1)
			}
		}
	}()
	for range 2 {
		time.Sleep(500 * time.Millisecond)
		stop()
		time.Sleep(500 * time.Millisecond) // down: the API server cannot reach the webhook
		stop = start()
	}
	time.Sleep(300 * time.Millisecond)
	endStream()
	<-streamDone
	stop()
	if admitted.Load() != 0 {
		t.Fatalf("%d hostPID pods were admitted across manager restarts (%d refused)", admitted.Load(), refused.Load())
	}
	if refused.Load() < 10 {
		t.Fatalf("only %d requests were sent; the stream did not run", refused.Load())
	}
	t.Logf("%d requests refused across two restarts, none admitted", refused.Load())
}
