//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// restrictedPolicy is a SecurityPolicy for one namespace at restricted.
func restrictedPolicy(name, ns, action string) string {
	return `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: ` + name + `}
spec:
  action: ` + action + `
  rules:
  - name: restricted
    match:
      namespaces: [` + ns + `]
    podSecurity: {level: restricted, version: latest}
  # Developers may waive what a legacy image lacks, for 30 days at most,
  # with a reason.
  exceptions:
    allowedControls: ["Privilege Escalation", "Capabilities", "Running as Non-root", "Seccomp"]
    requireJustification: true
    maxDuration: 720h
`
}

// plainDeployment passes baseline and fails restricted: nothing in its
// securityContext (privilege escalation, capabilities, non-root, seccomp).
func plainDeployment(ns, name string, replicas int) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  replicas: ` + strconv.Itoa(replicas) + `
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      containers:
      - name: app
        image: docker.io/library/nginx:1.27
`
}

// tightenSpecs are the specs of "A policy tightened under a running Deployment".
func tightenSpecs() {
	It("keeps the running pods and reports them, refuses the scale-up's new pods with podsieve's message in the ReplicaSet's FailedCreate event, and a developer's PolicyException lets them through until it expires", func(ctx SpecContext) {
		ns := newNamespace(ctx, "tighten")
		policy := "restricted-" + ns
		DeferCleanup(func(ctx SpecContext) { _, _ = kubectl.Run(ctx, "delete", "secpol", policy) })

		By("a restricted policy in Audit, and a Deployment that fails it rolls out")
		apply(ctx, restrictedPolicy(policy, ns, "Audit"))
		waitReady(ctx, "secpol/"+policy)
		apply(ctx, plainDeployment(ns, "app", 2))
		run(ctx, "rollout", "status", "deployment/app", "-n", ns, "--timeout=90s")
		before := strings.Fields(run(ctx, "get", "pods", "-n", ns, "-l", "app=app", "-o", "jsonpath={.items[*].metadata.name}"))
		Expect(before).To(HaveLen(2))

		By("the admin moves the policy to Enforce")
		run(ctx, "patch", "secpol", policy, "--type=merge", "-p", `{"spec":{"action":"Enforce"}}`)
		run(ctx, "wait", "secpol/"+policy, "--for=jsonpath={.status.observedGeneration}=2", "--timeout=60s")
		waitReady(ctx, "secpol/"+policy)

		By("the background scan reports the Deployment as fail, once: its two pods repeat it and are not reported")
		Eventually(func(g Gomega) map[string]string { return policyResults(ctx, g, ns, policy) }).
			WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Equal(map[string]string{"Deployment/app": "fail"}))
		run(ctx, "wait", "polr", "-n", ns, "-l", "podsieve.dev/scope-kind=Deployment", "--for=jsonpath={.results[0].properties.action}=Enforce", "--timeout=60s")

		By("a scale-up: the ReplicaSet's new pods are refused")
		run(ctx, "scale", "deployment/app", "-n", ns, "--replicas=4")
		var first string
		Eventually(func(g Gomega) {
			events := eventMessages(ctx, g, ns, "reason=FailedCreate,involvedObject.kind=ReplicaSet")
			g.Expect(events).NotTo(BeEmpty())
			first = events[0]
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(first).To(MatchRegexp(`^Error creating: (pods "app-[^"]+" is forbidden: )?` + podsieveRefusal.String() + `Pod ` + ns + `/app-`))
		Expect(first).To(ContainSubstring(`is refused by SecurityPolicy "` + policy + `" rule "restricted" (restricted:latest)`))
		Expect(first).To(ContainSubstring("Running as Non-root"))
		AddReportEntry("the ReplicaSet's FailedCreate event", first)

		By("the pods that ran keep running, and no new pod exists")
		Expect(run(ctx, "get", "pods", "-n", ns, "-l", "app=app", "-o", "jsonpath={.items[*].metadata.name}")).
			To(Equal(strings.Join(before, " ")))
		Expect(podPhases(ctx, ns, "app")).To(Equal([]string{"Running", "Running"}))
		// kubectl get deploy: 2/4 ready, and the Deployment says why.
		Expect(run(ctx, "get", "deployment", "app", "-n", ns, "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}")).To(Equal("2/4"))
		Expect(run(ctx, "get", "deployment", "app", "-n", ns,
			"-o", `jsonpath={.status.conditions[?(@.type=="ReplicaFailure")].message}`)).
			To(ContainSubstring("is refused by SecurityPolicy"))

		By("a developer (edit in the namespace) generates the narrowest exceptions with podsieve and creates them, expiring in 30 seconds")
		run(ctx, "create", "rolebinding", "dev-edit", "--clusterrole=edit", "--user=dev", "-n", ns)
		dev := kubectl.AsUser("dev", "system:authenticated")
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(run(ctx, "get", "secpol", policy, "-o", "yaml")), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "deploy.yaml"), []byte(plainDeployment(ns, "app", 4)), 0o600)).To(Succeed())
		out, err := exec.CommandContext(ctx, podsieveBinary, "exception", "generate",
			"-f", filepath.Join(dir, "policy.yaml"), "-f", filepath.Join(dir, "deploy.yaml"),
			"--justification", "legacy nginx image, ticket APP-9").Output()
		Expect(err).NotTo(HaveOccurred())
		expiresAt := time.Now().Add(30 * time.Second).UTC().Truncate(time.Second)
		exceptions := regexp.MustCompile(`expiresAt: ".*"`).ReplaceAllString(string(out), `expiresAt: "`+expiresAt.Format(time.RFC3339)+`"`)
		created, err := dev.RunStdin(ctx, exceptions, "create", "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(ContainSubstring("policyexception.policy.podsieve.dev/app-" + policy + "-pods created"))
		for _, name := range []string{"app-" + policy, "app-" + policy + "-pods"} {
			dev.Timeout = 90 * time.Second
			_, err := dev.Run(ctx, "wait", "podex/"+name, "-n", ns, `--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=Active`, "--timeout=60s")
			Expect(err).NotTo(HaveOccurred())
		}

		By("the ReplicaSet's retries now create the pods: 4/4")
		run(ctx, "rollout", "status", "deployment/app", "-n", ns, "--timeout=50s")
		Expect(podPhases(ctx, ns, "app")).To(HaveLen(4))
		Expect(time.Now()).To(BeTemporally("<", expiresAt), "the scale-up finished after the exception expired: the spec needs a later expiresAt")

		By("at expiresAt the exceptions turn Expired, and the next pod is refused")
		run(ctx, "wait", "podex/app-"+policy+"-pods", "-n", ns,
			`--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=Expired`, "--timeout=90s")
		Expect(time.Now()).To(BeTemporally(">=", expiresAt))
		run(ctx, "scale", "deployment/app", "-n", ns, "--replicas=5")
		expired := And(
			ContainSubstring(`is refused by SecurityPolicy "`+policy+`"`),
			ContainSubstring("exception/"+ns+"/app-"+policy+"-pods does not apply: expired at"))
		Eventually(func(g Gomega) {
			events := eventMessages(ctx, g, ns, "reason=FailedCreate,involvedObject.kind=ReplicaSet")
			g.Expect(events).To(ContainElement(expired))
			for _, e := range events {
				if ok, _ := expired.Match(e); ok {
					AddReportEntry("the FailedCreate event after expiry", e)
					break
				}
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(podPhases(ctx, ns, "app")).To(HaveLen(4))
	}, SpecTimeout(6*time.Minute))
}
