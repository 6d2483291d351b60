//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsieve/podsieve/test/utils"
)

// plainPod passes baseline and fails restricted, as plainDeployment's pods.
func plainPod(ns, name string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  containers:
  - name: app
    image: docker.io/library/nginx:1.27
`
}

// plainPodException waives, for the pod of that name only, what plainPod
// lacks at restricted, within restrictedPolicy's guardrails.
func plainPodException(ns, name, policy string) string {
	return `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  exceptions: [{policyName: ` + policy + `, ruleNames: [restricted]}]
  match: {names: [` + name + `], kinds: [Pod]}
  podSecurity:
  - controlName: Privilege Escalation
  - controlName: Capabilities
  - controlName: Running as Non-root
  - controlName: Seccomp
  justification: legacy nginx image, ticket APP-10
  expiresAt: "` + time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339) + `"
`
}

// setWebhookFailurePolicy sets every webhook of podsieve's configuration
// to policy, as the chart's webhooks.*.failurePolicy values do.
func setWebhookFailurePolicy(ctx SpecContext, policy string) {
	GinkgoHelper()
	names := strings.Fields(run(ctx, "get", "validatingwebhookconfiguration", utils.WebhookConfig, "-o", "jsonpath={.webhooks[*].name}"))
	var ops []string
	for i := range names {
		ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"/webhooks/%d/failurePolicy","value":%q}`, i, policy))
	}
	run(ctx, "patch", "validatingwebhookconfiguration", utils.WebhookConfig, "--type=json", "-p", "["+strings.Join(ops, ",")+"]")
}

// apiServerSpecs are the specs of "Enforcement by the API server itself".
func apiServerSpecs() {
	It("with every replica killed and the webhooks failing open, refuses violating pods and a violating Deployment's pods with podsieve's message, admits compliant and waived ones in every namespace, and honours an exception created meanwhile once the replicas return", func(ctx SpecContext) {
		ns := newNamespace(ctx, "apiserver")
		other := newNamespace(ctx, "apiserver-other")
		policy := "restricted-" + ns

		By("a Deployment runs before a restricted Enforce policy for its namespace, with a developer's exception for one pod")
		apply(ctx, plainDeployment(ns, "app", 1))
		run(ctx, "rollout", "status", "deployment/app", "-n", ns, "--timeout=90s")
		apply(ctx, restrictedPolicy(policy, ns, "Enforce"))
		waitReady(ctx, "secpol/"+policy)
		apply(ctx, plainPodException(ns, "waived", policy))
		run(ctx, "wait", "podex/waived", "-n", ns, `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=Active`, "--timeout=60s")

		By("every SecurityPolicy is enforced by the API server, and the namespace's parameters hold the exception")
		Eventually(func(g Gomega) {
			out, err := kubectl.Run(ctx, "get", "secpol", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="EnforcedByAPIServer")].status} {end}`)
			g.Expect(err).NotTo(HaveOccurred())
			for _, f := range strings.Fields(out) {
				g.Expect(f).To(HaveSuffix("=True"))
			}
			g.Expect(out).To(ContainSubstring(policy + "=True"))
			params, err := kubectl.Run(ctx, "get", "podsecurityparams", "podsieve", "-n", ns, "-o", "jsonpath={.spec.exceptions[*].source}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(params).To(ContainSubstring("exception/" + ns + "/waived"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		AddReportEntry("kubectl get secpol -o wide", run(ctx, "get", "secpol", "-o", "wide"))

		By("the webhooks fail open (failurePolicy: Ignore), as docs/admission.md allows once every policy is EnforcedByAPIServer; every replica stops")
		setWebhookFailurePolicy(ctx, "Ignore")
		DeferCleanup(func(ctx SpecContext) { setWebhookFailurePolicy(ctx, "Fail") })
		restore := stopAllReplicas()
		DeferCleanup(restore)

		By("a violating pod and a violating Deployment are refused by the API server itself, with podsieve's message")
		_, err := kubectl.RunStdin(ctx, privilegedPod(ns, "root-shell"), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		msg := kubectlStderr(err)
		Expect(msg).To(ContainSubstring(`ValidatingAdmissionPolicy 'podsieve.`))
		Expect(msg).To(ContainSubstring(`Pod ` + ns + `/root-shell is refused by SecurityPolicy`))
		Expect(msg).To(ContainSubstring("Privileged Containers"))
		AddReportEntry("what the user reads with every replica down", msg)
		_, err = kubectl.RunStdin(ctx, netAdminDeployment(ns, "net-tool"), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(kubectlStderr(err)).To(ContainSubstring(`Deployment ` + ns + `/net-tool is refused by SecurityPolicy`))

		By("the running Deployment's scale-up: the ReplicaSet's new pod is refused by the API server")
		run(ctx, "scale", "deployment/app", "-n", ns, "--replicas=2")
		Eventually(func(g Gomega) {
			events := eventMessages(ctx, g, ns, "reason=FailedCreate,involvedObject.kind=ReplicaSet")
			g.Expect(events).To(ContainElement(And(
				ContainSubstring(`ValidatingAdmissionPolicy 'podsieve.`+policy+`'`),
				ContainSubstring(`is refused by SecurityPolicy "`+policy+`" rule "restricted" (restricted:latest)`))))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(podPhases(ctx, ns, "app")).To(Equal([]string{"Running"}))

		By("a compliant pod and the pod the exception waives are admitted; writes elsewhere keep working")
		apply(ctx, restrictedPod(ns, "compliant"))
		apply(ctx, plainPod(ns, "waived"))
		apply(ctx, plainPod(other, "plain"))
		run(ctx, "create", "configmap", "settings", "-n", ns, "--from-literal=a=b")

		By("an exception created meanwhile waives nothing yet: no replica has judged it")
		apply(ctx, plainPodException(ns, "late", policy))
		_, err = kubectl.RunStdin(ctx, plainPod(ns, "late"), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(kubectlStderr(err)).To(ContainSubstring(`Pod ` + ns + `/late is refused by SecurityPolicy`))

		By("the replicas return: the exception turns Active and the pod is admitted")
		restore(ctx)
		run(ctx, "wait", "podex/late", "-n", ns, `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=Active`, "--timeout=60s")
		Eventually(func() error {
			_, err := kubectl.RunStdin(ctx, plainPod(ns, "late"), "create", "--dry-run=server", "-f", "-")
			return err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		apply(ctx, plainPod(ns, "late"))

		By("the leader's background scan decides the namespace's objects with the engine and with the API server's form, and the two agree")
		Eventually(func(g Gomega) {
			g.Expect(metricSum(ctx, "podsieve_background_crosscheck_total", `policy="`+policy+`"`, `result="agree"`)).To(BeNumerically(">=", 4),
				"the Deployment and the pods compliant, waived and late")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(metricSum(ctx, "podsieve_background_crosscheck_total", `result="disagree"`)).To(BeZero(),
			"no policy of the cluster is decided differently by the engine and the API server's form")
	}, SpecTimeout(5*time.Minute))
}
