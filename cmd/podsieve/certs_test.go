package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podsieve/podsieve/internal/testenv"
)

// TestManagerIssuesItsCertificate: with --cert-rotation the manager creates
// a CA and a serving certificate in its Secret, puts the CA in the webhook
// configuration's caBundle, and serves with that certificate once it is
// mounted; the API server then trusts it. The test plays the kubelet, which
// in a cluster mounts the Secret at --webhook-cert-dir.
func TestManagerIssuesItsCertificate(t *testing.T) {
	env, cfg, err := testenv.StartWithWebhooksAt("localhost")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// What config/ ships: the namespace and an empty Secret to fill.
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podsieve-system"}}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "podsieve-system", Name: "podsieve-webhook-cert"}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	envtestCA := env.WebhookInstallOptions.LocalServingCAData

	user, err := env.ControlPlane.AddUser(envtest.User{Name: "manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	probe := freeAddress(t)
	var stdout, stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- runContext(ctx, []string{"manager", "--kubeconfig", path, "--metrics-bind-address", "0",
			"--health-probe-bind-address", probe, "--webhook-port", strconv.Itoa(env.WebhookInstallOptions.LocalServingPort),
			"--webhook-cert-dir", certDir, "--webhook-dns-names", "localhost"}, nil, &stdout, &stderr)
	}()

	// The kubelet's part: mount the Secret's keys as files once they exist.
	waitFor(t, "the manager to write its certificate into the Secret", func() bool {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return false
		}
		return len(secret.Data["tls.crt"]) > 0 && len(secret.Data["tls.key"]) > 0
	})
	for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(certDir, key), secret.Data[key], 0o600); err != nil {
			t.Fatal(err)
		}
	}

	waitFor(t, "the webhook configuration to carry the manager's CA", func() bool {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := k8s.Get(ctx, client.ObjectKey{Name: "podsieve"}, &vwc); err != nil {
			return false
		}
		for _, w := range vwc.Webhooks {
			if bytes.Equal(w.ClientConfig.CABundle, envtestCA) || !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
				return false
			}
		}
		return true
	})
	waitFor(t, "/readyz to answer 200", func() bool {
		select {
		case code := <-exited:
			t.Fatalf("the manager exited %d: %s", code, stderr.String())
		default:
		}
		return httpOK("http://" + probe + "/readyz")
	})

	// A SecurityPolicy goes through the policy webhook and a pod through the
	// pod webhook: both over TLS with the manager's own certificate.
	if err := k8s.Create(ctx, mustSecurityPolicy(t, "certs", "rules:\n- name: r\n  podSecurity: {level: baseline}")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the policy to be in force", func() bool {
		err := k8s.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "host-pid-"},
			Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}})
		return err != nil && strings.Contains(err.Error(), `admission webhook "pods.podsieve.dev" denied the request`)
	})

	cancel()
	select {
	case code := <-exited:
		if code != exitOK {
			t.Fatalf("manager exited %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop")
	}
}
