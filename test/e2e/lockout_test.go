//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// restrictedPod passes the restricted profile, which podsieve-system's Pod
// Security Admission label enforces.
func restrictedPod(ns, name string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: app
    image: docker.io/library/busybox:1.36
    command: [sleep, infinity]
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
`
}

// stopAllReplicas stops every replica as its pod would be stopped, and
// returns a function that brings three back and waits until they are
// ready.
func stopAllReplicas() func(SpecContext) {
	GinkgoHelper()
	for _, r := range append(podsieve.Replicas[:0:0], podsieve.Replicas...) {
		_, err := podsieve.Terminate(r, 0, 30*time.Second)
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(podsieve.Balancer.ReadyCount()).To(BeZero())
	return func(ctx SpecContext) {
		GinkgoHelper()
		for len(podsieve.Replicas) < 3 {
			_, err := podsieve.AddReplica(ctx)
			Expect(err).NotTo(HaveOccurred())
		}
		for _, r := range podsieve.Replicas {
			Expect(podsieve.WaitReady(ctx, r, 2*time.Minute)).To(Succeed())
		}
	}
}

// lockoutSpecs are the specs of "Lock-out safety".
func lockoutSpecs() {
	It("with every replica down keeps kube-system and podsieve-system writable, fails closed elsewhere, and the documented emergency procedure restores writes", func(ctx SpecContext) {
		ns := newNamespace(ctx, "lockout")
		restore := stopAllReplicas()
		DeferCleanup(restore)

		By("kube-system and podsieve-system, which the webhooks never see, take pods")
		apply(ctx, restrictedPod("kube-system", "lockout-probe"))
		DeferCleanup(func(ctx SpecContext) {
			_, _ = kubectl.Run(ctx, "delete", "pod", "lockout-probe", "-n", "kube-system", "--wait=false")
		})
		apply(ctx, restrictedPod("podsieve-system", "lockout-probe"))
		DeferCleanup(func(ctx SpecContext) {
			_, _ = kubectl.Run(ctx, "delete", "pod", "lockout-probe", "-n", "podsieve-system", "--wait=false")
		})

		By("elsewhere a pod, and a SecurityPolicy, are refused with the API server's message")
		_, err := kubectl.RunStdin(ctx, restrictedPod(ns, "probe"), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		msg := kubectlStderr(err)
		Expect(msg).To(ContainSubstring(`failed calling webhook "pods.podsieve.dev"`))
		AddReportEntry("what the user reads with every replica down", msg)
		_, err = kubectl.RunStdin(ctx, restrictedPolicy("lockout-"+ns, ns, "Audit"), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(kubectlStderr(err)).To(ContainSubstring(`failed calling webhook "securitypolicies.policy.podsieve.dev"`))

		By("docs/operations.md: a cluster admin deletes the webhook configuration, and writes succeed")
		run(ctx, "delete", "validatingwebhookconfiguration", "podsieve")
		apply(ctx, restrictedPod(ns, "probe"))

		By("re-applying the installation restores the webhooks, and the managers inject their CA again")
		run(ctx, "apply", "-k", podsieve.Overlay)
		restore(ctx)
		Eventually(func(g Gomega) {
			out, err := kubectl.Run(ctx, "get", "validatingwebhookconfiguration", "podsieve", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		_, err = kubectl.RunStdin(ctx, netAdminDeployment(ns, "net-tool"), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(kubectlStderr(err)).To(ContainSubstring("is refused by SecurityPolicy"))
	}, SpecTimeout(4*time.Minute))
}

// uninstallSpecs are the specs of "Uninstall"; they leave podsieve
// installed again.
func uninstallSpecs() {
	It("as docs/install.md says, leaves the cluster writable", func(ctx SpecContext) {
		ns := newNamespace(ctx, "uninstall")
		By("kubectl delete validatingwebhookconfiguration podsieve; kubectl delete -k config/default --ignore-not-found --wait; kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy -l app.kubernetes.io/managed-by=podsieve; kubectl delete policyreports.wgpolicyk8s.io -A -l app.kubernetes.io/managed-by=podsieve")
		run(ctx, "delete", "validatingwebhookconfiguration", "podsieve")
		restore := stopAllReplicas()
		// What the docs delete, through the installed overlay (the same
		// objects as config/default): it succeeds, and returns once they
		// are gone.
		run(ctx, "delete", "-k", podsieve.Overlay, "--ignore-not-found", "--wait", "--timeout=120s")
		run(ctx, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "-l", "app.kubernetes.io/managed-by=podsieve")
		// The reports outlive the CRDs of policies and exceptions (they are
		// owned by the objects they are about) until the documented
		// command deletes them; Policy Reporter would show nothing of
		// podsieve's after it.
		reports := []string{"get", "policyreports.wgpolicyk8s.io", "-A", "-l", "app.kubernetes.io/managed-by=podsieve", "-o", "name"}
		Expect(strings.TrimSpace(run(ctx, reports...))).NotTo(BeEmpty(), "the suite's scans wrote no report, so their removal proves nothing")
		run(ctx, "delete", "policyreports.wgpolicyk8s.io", "-A", "-l", "app.kubernetes.io/managed-by=podsieve")
		Expect(strings.TrimSpace(run(ctx, reports...))).To(BeEmpty(), "podsieve's reports are still there after the documented uninstall")
		for _, gone := range []string{"namespace/podsieve-system", "crd/securitypolicies.policy.podsieve.dev", "crd/policyexceptions.policy.podsieve.dev"} {
			r, err := kubectl.Exec(ctx, "", "get", gone, "--ignore-not-found")
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(r.Stdout)).To(BeEmpty(), "%s is still there after the documented uninstall", gone)
		}

		By("every write podsieve judged now succeeds (once the API server's admission has dropped the deleted policies, within a moment)")
		Eventually(func() error {
			_, err := kubectl.RunStdin(ctx, netAdminDeployment(ns, "net-tool"), "apply", "-f", "-")
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		run(ctx, "rollout", "status", "deployment/net-tool", "-n", ns, "--timeout=90s")
		Expect(podPhases(ctx, ns, "net-tool")).To(Equal([]string{"Running"}))

		By("installing again, as a user would")
		run(ctx, "apply", "-k", podsieve.Overlay)
		run(ctx, "wait", "--for=condition=Established", "--timeout=60s",
			"crd/securitypolicies.policy.podsieve.dev", "crd/policyexceptions.policy.podsieve.dev")
		restore(ctx)
		run(ctx, "apply", "-k", filepath.Join(root, "config", "samples"))
		waitReady(ctx, "secpol/pod-security-standards")
		_, err := kubectl.RunStdin(ctx, netAdminDeployment(ns, fmt.Sprintf("net-tool-%d", 2)), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(kubectlStderr(err)).To(ContainSubstring("is refused by SecurityPolicy"))
	}, SpecTimeout(5*time.Minute))
}
