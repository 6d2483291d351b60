//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/podsieve/podsieve/test/utils"
)

// objects renders a kustomization with the built kubectl and returns its
// objects by kind/namespace/name.
func objects(ctx SpecContext, dir string) map[string]map[string]any {
	GinkgoHelper()
	out := run(ctx, "kustomize", dir)
	objs := map[string]map[string]any{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var o map[string]any
		Expect(yaml.Unmarshal([]byte(doc), &o)).To(Succeed())
		if o == nil {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		objs[fmt.Sprintf("%s/%v/%v", o["kind"], meta["namespace"], meta["name"])] = o
	}
	return objs
}

// installSpecs are the specs of "The installation".
func installSpecs() {
	It("is config/default but for the webhooks' clientConfig and the Deployment's replicas", func(ctx SpecContext) {
		shipped := objects(ctx, filepath.Join(root, "config", "default"))
		installed := objects(ctx, podsieve.Overlay)
		Expect(installed).To(HaveLen(len(shipped)))

		// The two differences, taken out: what remains must be equal.
		deploy := "Deployment/podsieve-system/podsieve-manager"
		Expect(installed[deploy]["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(0))
		for _, objs := range []map[string]map[string]any{shipped, installed} {
			delete(objs[deploy]["spec"].(map[string]any), "replicas")
		}
		vwc := "ValidatingWebhookConfiguration/<nil>/podsieve"
		for i, w := range installed[vwc]["webhooks"].([]any) {
			cc := w.(map[string]any)["clientConfig"].(map[string]any)
			shippedCC := shipped[vwc]["webhooks"].([]any)[i].(map[string]any)["clientConfig"].(map[string]any)
			path := shippedCC["service"].(map[string]any)["path"]
			Expect(cc).To(Equal(map[string]any{"url": fmt.Sprintf("https://localhost:%d%s", podsieve.Balancer.Port(), path)}))
			delete(cc, "url")
			delete(shippedCC, "service")
		}
		Expect(installed).To(Equal(shipped))
	})

	It("runs the managers with the ServiceAccount's token, not an admin's", func(ctx SpecContext) {
		for _, r := range podsieve.Replicas {
			who, err := (&utils.Kubectl{Path: kubectl.Path, Kubeconfig: r.Kubeconfig, CacheDir: kubectl.CacheDir}).Run(ctx, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
			Expect(err).NotTo(HaveOccurred())
			Expect(who).To(Equal("system:serviceaccount:podsieve-system:podsieve-manager"))
		}
		// And the shipped RBAC was enough: no request of theirs was forbidden.
		for _, p := range replicaProcesses() {
			Expect(p.Tail(100000)).NotTo(ContainSubstring("forbidden"), "%s's log", p.Name)
		}
	})

	It("keeps all traffic on loopback: every component listens on 127.0.0.1 only, but podsieve's webhook server", func(ctx SpecContext) {
		listeners, err := utils.Listeners(append(cluster.Processes(), replicaProcesses()...))
		Expect(err).NotTo(HaveOccurred())
		Expect(listeners).NotTo(BeEmpty())
		webhookPorts := map[int]bool{}
		for _, r := range podsieve.Replicas {
			webhookPorts[r.WebhookPort] = true
		}
		var wildcard []string
		for _, l := range listeners {
			if l.Addr.Equal(net.ParseIP(utils.Loopback)) {
				continue
			}
			// podsieve manager has no flag for the webhook server's address
			// (controller-runtime's webhook.Options.Host): it listens on
			// every address. Reported; the API server still reaches it only
			// through the balancer on 127.0.0.1.
			Expect(strings.HasPrefix(l.Process, "podsieve-") && webhookPorts[l.Port]).To(BeTrue(),
				"%s listens beyond loopback", l)
			wildcard = append(wildcard, l.String())
		}
		where := "in this machine's network namespace: reachable from other machines"
		if os.Getenv(inNetns) == "1" {
			where = "in the suite's private network namespace, whose only interface is loopback"
		}
		AddReportEntry("listeners beyond 127.0.0.1 (podsieve manager has no flag for its webhook server's address), "+where, strings.Join(wildcard, "\n"))
	}, SpecTimeout(time.Minute))
}
