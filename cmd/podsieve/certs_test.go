package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestManagerIssuesItsCertificate: with --cert-rotation the manager creates
// a CA and a serving certificate in its Secret, puts the CA in the webhook
// configuration's caBundle, and serves with that certificate once it is
// mounted; the API server then trusts it. The test plays the kubelet, which
// in a cluster mounts the Secret at --webhook-cert-dir.
func TestManagerIssuesItsCertificate(t *testing.T) {
	c := newTestCluster(t, func() (*envtest.Environment, *rest.Config, error) { return testenv.StartWithWebhooksAt("localhost") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// What config/ ships: the namespace and an empty Secret to fill.
	if err := c.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "podsieve-system"}}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "podsieve-system", Name: "podsieve-webhook-cert"}}
	if err := c.k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	envtestCA := c.env.WebhookInstallOptions.LocalServingCAData

	// The kubelet's part: mount the Secret's keys as files once they exist.
	certDir := filepath.Join(t.TempDir(), "certs")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	mounted := make(chan error, 1)
	go func() {
		mounted <- wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var s corev1.Secret
			if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(secret), &s); err != nil || len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
				return false, nil
			}
			for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
				if err := os.WriteFile(filepath.Join(certDir, key), s.Data[key], 0o600); err != nil {
					return false, err
				}
			}
			return true, nil
		})
	}()

	stop := c.startManager(t, "--webhook-cert-dir", certDir, "--webhook-dns-names", "localhost")
	defer stop()
	if err := <-mounted; err != nil {
		t.Fatal(err)
	}
	if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.k8s.Get(ctx, client.ObjectKey{Name: "podsieve"}, &vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if bytes.Equal(w.ClientConfig.CABundle, envtestCA) || !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
			t.Fatalf("webhook %s does not carry the manager's CA", w.Name)
		}
	}

	// A SecurityPolicy goes through the policy webhook and a pod through the
	// pod webhook: both over TLS with the manager's own certificate.
	if err := c.k8s.Create(ctx, mustSecurityPolicy(t, "certs", enginetest.BaselineRule)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the policy to refuse a pod through the webhook", func() bool {
		err := c.k8s.Create(ctx, hostPIDPod())
		return err != nil && strings.Contains(err.Error(), `admission webhook "pods.podsieve.dev" denied the request`)
	})
}
