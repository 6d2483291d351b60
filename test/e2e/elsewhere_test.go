//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsieve/podsieve/test/utils"
)

// privilegedPod is what baseline refuses anywhere podsieve judges it.
func privilegedPod(ns, name string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  containers:
  - name: app
    image: docker.io/library/busybox:1.36
    command: [sleep, infinity]
    securityContext: {privileged: true}
`
}

// removeMainInstallation uninstalls the suite's podsieve as docs/install.md
// says, so that another can be installed: there is one webhook
// configuration named podsieve, and one set of CRDs, per cluster.
func removeMainInstallation(ctx SpecContext) {
	GinkgoHelper()
	if podsieve == nil || podsieve.Namespace != utils.DefaultNamespace {
		return
	}
	_, _ = kubectl.Run(ctx, "delete", "validatingwebhookconfiguration", utils.WebhookConfig, "--ignore-not-found")
	Expect(podsieve.Stop()).To(Succeed())
	run(ctx, "delete", "-k", podsieve.Overlay, "--ignore-not-found", "--wait", "--timeout=120s")
	podsieve = nil
}

// worksIn checks, as a user would, that podsieve installed in p.Namespace
// judges: a cluster-wide baseline policy turns Ready (the leader wrote its
// status: leader election and RBAC work in that namespace), a privileged pod
// is refused with podsieve's message, a compliant one is admitted and
// reported, and podsieve's own namespace is never judged. It stops the
// replicas.
func worksIn(ctx SpecContext, p *utils.Podsieve) {
	GinkgoHelper()
	ns := newNamespace(ctx, "elsewhere")
	apply(ctx, `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: everywhere-baseline}
spec:
  action: Enforce
  rules:
  - name: baseline
    match:
      namespaces: ["*"]
    podSecurity: {level: baseline, version: latest}
`)
	DeferCleanup(func(ctx SpecContext) {
		_, _ = kubectl.Run(ctx, "delete", "secpol", "everywhere-baseline", "--ignore-not-found")
	})
	waitReady(ctx, "secpol/everywhere-baseline")

	_, err := kubectl.RunStdin(ctx, privilegedPod(ns, "root-shell"), "apply", "-f", "-")
	Expect(err).To(HaveOccurred())
	Expect(kubectlStderr(err)).To(ContainSubstring(`Pod ` + ns + `/root-shell is refused by SecurityPolicy "everywhere-baseline" rule "baseline"`))

	apply(ctx, restrictedPod(ns, "app"))
	Eventually(func(g Gomega) map[string]string { return policyResults(ctx, g, ns, "everywhere-baseline") }).
		WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Equal(map[string]string{"Pod/app": "pass"}))

	// Each replica's own check of the webhook configuration agrees: the
	// configuration is there and its pod webhooks exclude p.Namespace.
	for _, r := range p.Replicas {
		Eventually(func(g Gomega) {
			m, err := p.Metrics(ctx, r, scraper)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sumLines(m, "podsieve_webhook_configuration_present")).To(Equal(1.0))
			g.Expect(sumLines(m, "podsieve_own_namespace_excluded")).To(Equal(1.0))
		}).Should(Succeed())
	}

	// The webhooks' exclusions followed the namespace: with every replica
	// down, a pod there is still created (it is never sent to podsieve, so
	// an outage cannot block podsieve's own recovery), and elsewhere the
	// webhook fails closed.
	for _, r := range append(p.Replicas[:0:0], p.Replicas...) {
		_, err := p.Terminate(r, 0, 30*time.Second)
		Expect(err).NotTo(HaveOccurred())
	}
	apply(ctx, restrictedPod(p.Namespace, "recovery-probe"))
	run(ctx, "delete", "pod", "recovery-probe", "-n", p.Namespace, "--wait=false")
	_, err = kubectl.RunStdin(ctx, restrictedPod(ns, "while-down"), "apply", "-f", "-")
	Expect(err).To(HaveOccurred())
	Expect(kubectlStderr(err)).To(ContainSubstring(`failed calling webhook "pods.podsieve.dev"`))
}

// runsAs checks, with each replica's own kubeconfig, that it is
// authenticated as user (its install's ServiceAccount, not an admin).
func runsAs(ctx SpecContext, p *utils.Podsieve, user string) {
	GinkgoHelper()
	for _, r := range p.Replicas {
		who, err := (&utils.Kubectl{Path: kubectl.Path, Kubeconfig: r.Kubeconfig, CacheDir: kubectl.CacheDir}).Run(ctx, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		Expect(err).NotTo(HaveOccurred())
		Expect(who).To(Equal(user))
	}
}

// elsewhereSpecs are the specs of "Installed elsewhere". They run last:
// they remove the suite's installation first.
func elsewhereSpecs() {
	It("works from a namespace: overlay of config/default, as docs/install.md shows", func(ctx SpecContext) {
		removeMainInstallation(ctx)
		p, err := utils.Install(ctx, cluster, utils.InstallOptions{Root: root, Binary: podsieveBinary, Replicas: 2, Namespace: "security-tools"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_, _ = kubectl.Run(ctx, "delete", "validatingwebhookconfiguration", utils.WebhookConfig, "--ignore-not-found")
			Expect(p.Stop()).To(Succeed())
			run(ctx, "delete", "-k", p.Overlay, "--ignore-not-found", "--wait", "--timeout=120s")
		})
		runsAs(ctx, p, "system:serviceaccount:security-tools:podsieve-manager")
		worksIn(ctx, p)
		// The leader held its Lease there.
		Expect(run(ctx, "get", "lease", "-n", "security-tools", "-o", "name")).To(ContainSubstring(utils.LeaseName))
	}, SpecTimeout(4*time.Minute))

	It("works from the Helm chart, in podsieve-helm, and helm uninstall as docs/install.md says leaves the cluster writable", func(ctx SpecContext) {
		helm := os.Getenv("E2E_HELM")
		Expect(helm).NotTo(BeEmpty(), "E2E_HELM: run `make test-e2e`, or set it to what hack/setup-helm.sh prints")
		removeMainInstallation(ctx)
		p, err := utils.Install(ctx, cluster, utils.InstallOptions{Root: root, Binary: podsieveBinary, Replicas: 2, Namespace: "podsieve-helm", Helm: helm, Chart: podsieveChart})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(p.Stop()).To(Succeed()) })
		if podsieveChart != "" {
			By("the released chart runs the released image, by its digest")
			values := exec.CommandContext(ctx, helm, "show", "values", podsieveChart)
			values.Env = append(os.Environ(), "HELM_CACHE_HOME="+GinkgoT().TempDir(), "HELM_CONFIG_HOME="+GinkgoT().TempDir(), "HELM_DATA_HOME="+GinkgoT().TempDir())
			out, err := values.Output()
			Expect(err).NotTo(HaveOccurred())
			repository := regexp.MustCompile(`(?m)^  repository: (\S+)$`).FindStringSubmatch(string(out))
			digest := regexp.MustCompile(`(?m)^  digest: "?(sha256:[a-f0-9]{64})"?$`).FindStringSubmatch(string(out))
			Expect(repository).NotTo(BeNil(), "the packaged chart's values set no image.repository:\n%s", out)
			Expect(digest).NotTo(BeNil(), "the packaged chart's values set no image.digest:\n%s", out)
			Expect(run(ctx, "get", "deployment/podsieve-manager", "-n", "podsieve-helm", "-o", "jsonpath={.spec.template.spec.containers[0].image}")).
				To(Equal(repository[1] + "@" + digest[1]))
		}
		runsAs(ctx, p, "system:serviceaccount:podsieve-helm:podsieve-manager")
		worksIn(ctx, p)
		Expect(run(ctx, "get", "lease", "-n", "podsieve-helm", "-o", "name")).To(ContainSubstring(utils.LeaseName))

		By("helm uninstall, after the webhook configuration, as docs/install.md says")
		run(ctx, "delete", "validatingwebhookconfiguration", utils.WebhookConfig, "--ignore-not-found")
		uninstall := exec.CommandContext(ctx, helm, "uninstall", "podsieve", "--namespace", "podsieve-helm", "--wait", "--kubeconfig", cluster.Kubeconfig)
		uninstall.Env = append(os.Environ(), "HELM_CACHE_HOME="+GinkgoT().TempDir(), "HELM_CONFIG_HOME="+GinkgoT().TempDir(), "HELM_DATA_HOME="+GinkgoT().TempDir())
		out, err := uninstall.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(ContainSubstring(`release "podsieve" uninstalled`))
		run(ctx, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "-l", "app.kubernetes.io/managed-by=podsieve")
		// The CRDs, and so the policies, stay (helm.sh/resource-policy: keep).
		run(ctx, "get", "crd", "securitypolicies.policy.podsieve.dev", "policyexceptions.policy.podsieve.dev")
		Expect(run(ctx, "get", "deployment,service,clusterrole", "-A", "-l", "app.kubernetes.io/name=podsieve", "-o", "name")).To(BeEmpty())
		ns := newNamespace(ctx, "after-helm")
		// The API server's admission drops a deleted
		// ValidatingAdmissionPolicy once its informer hears of it, within
		// a moment.
		Eventually(func() error {
			_, err := kubectl.RunStdin(ctx, privilegedPod(ns, "root-shell"), "apply", "-f", "-")
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(4*time.Minute))
}
