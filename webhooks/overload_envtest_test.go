package webhooks_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/testenv"
	"github.com/podsieve/podsieve/webhooks"
)

// restrictedPodIn passes every Pod Security level.
func restrictedPodIn(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}}
}

// These specs serve a second pod handler, with small limits and decisions
// made slow in one namespace, behind a webhook configuration of their own
// that selects only their namespaces; the real API server calls it with its
// ?timeout=, as it calls podsieve's.
var _ = Describe("Overload", Ordered, func() {
	const timeoutSeconds = 3
	var (
		flood, quiet string
		calls        atomic.Int64
		stop         context.CancelFunc
	)
	BeforeAll(func() {
		id := fmt.Sprint(GinkgoRandomSeed())
		labels := map[string]string{"podsieve.dev/overload-test": id}
		flood, quiet = namespace("flood", labels), namespace("quiet", labels)

		h := &webhooks.PodAdmission{Index: ix, Clock: clock.RealClock{}, MaxConcurrentReviews: 4, ReviewQueueTimeout: 500 * time.Millisecond}
		// An expensive review in the flood namespace: it runs until its
		// deadline, as a decision of a pathological policy set would.
		webhooks.SlowDecisions(h, func(ctx context.Context, o *engine.Object) {
			calls.Add(1)
			if o.Namespace == flood {
				<-ctx.Done()
			}
		})
		wo := env.WebhookInstallOptions
		l, err := net.Listen("tcp", net.JoinHostPort(wo.LocalServingHost, "0"))
		Expect(err).NotTo(HaveOccurred())
		port := l.Addr().(*net.TCPAddr).Port
		Expect(l.Close()).To(Succeed())
		server := webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: port, CertDir: wo.LocalServingCertDir})
		server.Register(webhooks.PodsPath, webhooks.NewPodWebhook(h))
		var serverCtx context.Context
		serverCtx, stop = context.WithCancel(ctx)
		go func() {
			defer GinkgoRecover()
			Expect(server.Start(serverCtx)).To(Succeed())
		}()
		Eventually(func() error { return server.StartedChecker()(nil) }).Should(Succeed())

		host := wo.LocalServingHost
		if wo.LocalServingHostExternalName != "" {
			host = wo.LocalServingHostExternalName
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "overload-" + id},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "overload.podsieve.dev",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{
					URL:      ptr.To(fmt.Sprintf("https://%s%s", net.JoinHostPort(host, fmt.Sprint(port)), webhooks.PodsPath)),
					CABundle: wo.LocalServingCAData,
				},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: labels},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds:          ptr.To[int32](timeoutSeconds),
			}},
		}
		Expect(k8s.Create(ctx, vwc)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, vwc))).To(Succeed())
			stop()
		})
		// The API server picks up a new webhook configuration in a moment:
		// wait until it calls this handler.
		probe := 0
		Eventually(func() int64 {
			probe++
			p := restrictedPodIn(quiet, fmt.Sprintf("probe-%d", probe))
			Expect(k8s.Create(ctx, p)).To(Succeed())
			Expect(k8s.Delete(ctx, p)).To(Succeed())
			return calls.Load()
		}).Should(BeNumerically(">", 0))
	})

	It("admits nothing from a flood of expensive reviews and still answers a cheap one in another namespace in time", func() {
		// No retries: each create is one review, as the API server sees it.
		c := rest.CopyConfig(cfg)
		c.Timeout = 2 * timeoutSeconds * time.Second
		noRetry, err := client.New(c, client.Options{Scheme: testenv.Scheme()})
		Expect(err).NotTo(HaveOccurred())

		const floodSize = 12
		errs := make([]error, floodSize)
		var wg sync.WaitGroup
		before := calls.Load()
		for i := range floodSize {
			wg.Go(func() {
				defer GinkgoRecover()
				errs[i] = noRetry.Create(ctx, restrictedPodIn(flood, fmt.Sprintf("expensive-%d", i)))
			})
		}
		// The flood holds its share of the slots.
		Eventually(func() int64 { return calls.Load() - before }).Should(BeNumerically(">=", 2))

		start := time.Now()
		Expect(noRetry.Create(ctx, restrictedPodIn(quiet, "cheap"))).To(Succeed())
		Expect(time.Since(start)).To(BeNumerically("<", time.Second),
			"a cheap review in another namespace waited behind the flood")

		wg.Wait()
		var overloaded, stopped int
		for i, err := range errs {
			Expect(err).To(HaveOccurred(), "expensive review %d was admitted", i)
			switch msg := err.Error(); {
			case strings.Contains(msg, "podsieve is overloaded") && strings.Contains(msg, "retry"):
				overloaded++
			case strings.Contains(msg, "could not finish deciding"):
				stopped++
			default:
				Fail("an expensive review was refused for another reason: " + msg)
			}
		}
		Expect(overloaded).To(BeNumerically(">", 0), "no review was refused as overloaded")
		Expect(stopped).To(BeNumerically(">", 0), "no review was stopped at its deadline")
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(flood))).To(Succeed())
		Expect(pods.Items).To(BeEmpty())
	})
})
