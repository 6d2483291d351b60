package controllers_test

import (
	"context"
	"encoding/json"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/internal/synthetic"
)

var _ = Describe("The manager's cache", func() {
	It("holds none of the labels, annotations and managed fields a namespace editor writes on a PolicyException", func() {
		ns := newNamespace("cached")
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-maximal"},
			Spec: synthetic.MaximalException(0).Spec}
		synthetic.TenantMetadata(&pe.ObjectMeta, synthetic.TenantEntries)
		Expect(k8s.Create(ctx, pe)).To(Succeed(), "the API server refuses the maximal exception: lower synthetic.TenantEntries")
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, pe))).To(Succeed()) })
		key := client.ObjectKeyFromObject(pe)
		var stored policyv1alpha1.PolicyException
		Expect(k8s.Get(ctx, key, &stored)).To(Succeed())
		Expect(stored.Labels).To(HaveLen(synthetic.TenantEntries))
		Expect(stored.Annotations).To(HaveLen(synthetic.TenantEntries))
		Expect(stored.ManagedFields).NotTo(BeEmpty())
		b, err := json.Marshal(&stored)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("stored: %d bytes of JSON, %d managed-fields entries\n", len(b), len(stored.ManagedFields))

		// The cache the manager builds (cmd/podsieve passes the same options).
		opts := controllers.CacheOptions()
		opts.Scheme = k8s.Scheme()
		c, err := cache.New(cfg, opts)
		Expect(err).NotTo(HaveOccurred())
		cctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(c.Start(cctx)).To(Succeed())
		}()
		var cached policyv1alpha1.PolicyException
		Eventually(func() error { return c.Get(ctx, key, &cached) }).Should(Succeed())
		Expect(cached.Labels).To(BeEmpty())
		Expect(cached.Annotations).To(BeEmpty())
		Expect(cached.ManagedFields).To(BeEmpty())
		Expect(cached.UID).To(Equal(stored.UID))
		Expect(cached.Generation).To(Equal(stored.Generation))
		Expect(cached.CreationTimestamp).To(Equal(stored.CreationTimestamp))
		Expect(cached.Spec).To(Equal(stored.Spec))
	})
})

var _ = Describe("Events", func() {
	It("name podsieve as their reportingController and the replica as their reportingInstance", func() {
		ns := newNamespace("events")
		pe := createException(ns, "e", `exceptions: [{policyName: `+uniqueName("missing")+`, ruleNames: ["*"]}]`)
		var ev eventsv1.Event
		Eventually(func() []string {
			var list eventsv1.EventList
			Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.Name == pe.Name {
					ev = e
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElement(policyv1alpha1.EventReasonRefused))
		host, err := os.Hostname()
		Expect(err).NotTo(HaveOccurred())
		Expect(ev.ReportingController).To(Equal("podsieve"))
		Expect(ev.ReportingController).To(Equal(controllers.ReportingController))
		Expect(ev.ReportingInstance).To(Equal("podsieve-" + host))

		// The same event read through the core API, as kubectl describe does.
		var core corev1.Event
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: ev.Name}, &core)).To(Succeed())
		Expect(core.ReportingController).To(Equal("podsieve"))
		Expect(core.ReportingInstance).To(Equal("podsieve-" + host))
	})
})
