package controllers_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/testenv"
)

// newNamespace creates a namespace of its own for one spec.
func newNamespace(prefix string) string {
	name := fmt.Sprintf("%s-%d", prefix, rand.IntN(1_000_000))
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// uniqueName keeps cluster-scoped names apart between specs.
func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, rand.IntN(1_000_000)) }

func createPolicy(name, spec string) *policyv1alpha1.SecurityPolicy {
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(yaml.UnmarshalStrict([]byte(spec), &sp.Spec)).To(Succeed())
	Expect(k8s.Create(ctx, sp)).To(Succeed())
	return sp
}

func createException(ns, name, spec string) *policyv1alpha1.PolicyException {
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(yaml.UnmarshalStrict([]byte(spec), &pe.Spec)).To(Succeed())
	Expect(k8s.Create(ctx, pe)).To(Succeed())
	return pe
}

// ready returns an object's Ready condition as the API server has it.
func ready(obj client.Object) func() *metav1.Condition {
	return func() *metav1.Condition {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return nil
		}
		switch o := obj.(type) {
		case *policyv1alpha1.SecurityPolicy:
			return meta.FindStatusCondition(o.Status.Conditions, policyv1alpha1.ConditionReady)
		case *policyv1alpha1.PolicyException:
			return meta.FindStatusCondition(o.Status.Conditions, policyv1alpha1.ConditionReady)
		}
		return nil
	}
}

func haveReason(reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Reason", reason))
}

// eventReasons are the reasons of the events about obj.
func eventReasons(obj client.Object) func() []string {
	return func() []string {
		var list eventsv1.EventList
		Expect(k8s.List(ctx, &list, client.InNamespace(eventNamespace(obj)))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == obj.GetName() && e.Regarding.Kind == kindOf(obj) {
				out = append(out, e.Reason)
			}
		}
		return out
	}
}

func eventNamespace(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return metav1.NamespaceDefault
	}
	return obj.GetNamespace()
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*policyv1alpha1.SecurityPolicy); ok {
		return "SecurityPolicy"
	}
	return "PolicyException"
}

// hostPortPod adds hostPort 9100 in namespace ns.
func hostPortPod(ns string) *engine.Object {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exporter"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "exporter", Image: "node-exporter:1", Ports: []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}}},
	}}
	o, err := engine.NewObject(pod)
	Expect(err).NotTo(HaveOccurred())
	return o
}

// allowedAt decides a pod from the index at a given time and says whether
// the named policy admits it (other specs' policies are in the index too).
func allowedAt(policy string, o *engine.Object, at time.Time) bool {
	d := ix.Snapshot().Decide(o, at, engine.Admission)
	found := false
	for _, r := range d.Results {
		if r.Rule.Policy.Name == policy {
			found = true
			if r.Outcome == engine.Fail {
				return false
			}
		}
	}
	Expect(found).To(BeTrue(), "policy %s is not in the index", policy)
	return true
}

const hostPortsException = `
exceptions: [{policyName: %s, ruleNames: ["*"]}]
podSecurity:
- controlName: Host Ports
  restrictedField: spec.containers[*].ports[*].hostPort
  values: ["9100"]
justification: node-exporter
`

// edit changes an object as a user would with kubectl edit: a merge patch
// that does not conflict with the controllers' status writes.
func edit(obj client.Object, change func()) {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	change()
	Expect(k8s.Patch(ctx, obj, patch)).To(Succeed())
}

func kubectlRow(resource, ns string, keys ...string) []string {
	args := []string{"get", resource, "-o", "wide"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	out, err := testenv.Kubectl(env, args...)
	Expect(err).NotTo(HaveOccurred())
	rows := testenv.Columns(out)
	r := testenv.Row(rows, keys...)
	Expect(r).NotTo(BeNil(), "no row with %v in:\n%s", keys, out)
	return append([]string{}, r...)
}

var _ = Describe("SecurityPolicy", func() {
	It("compiles a policy, enforces it and says so", func() {
		name := uniqueName("baseline")
		sp := createPolicy(name, "rules:\n- name: a\n  podSecurity: {level: baseline}\n- name: b\n  podSecurity: {level: restricted, version: v1.30}")
		Eventually(ready(sp)).Should(And(haveReason(policyv1alpha1.ReasonCompiled), HaveField("Status", metav1.ConditionTrue), HaveField("ObservedGeneration", sp.Generation)))
		Expect(sp.Status.ObservedGeneration).To(Equal(sp.Generation))
		Expect(sp.Status.Rules).To(Equal(int32(2)))
		Expect(ix.Snapshot().Policy(name)).NotTo(BeNil())
		Expect(allowedAt(name, hostPortPod("default"), time.Now())).To(BeFalse())
		Expect(kubectlRow("secpol", "", name)).To(ContainElements("Enforce", "2", "True", "Compiled"))
		Eventually(eventReasons(sp)).Should(ContainElement(policyv1alpha1.EventReasonCompiled))
	})

	It("enforces a policy that never compiled at its strictest, and says what to write", func() {
		// Written past the webhook (the suite runs none), as an earlier
		// podsieve stored it: the entry that does not compile waives
		// nothing, and the rest is enforced.
		name := uniqueName("broken")
		sp := createPolicy(name, "rules:\n- name: a\n  podSecurity:\n    level: baseline\n    exclude: [{controlName: Capabilities, restrictedField: spec.hostPID}, {controlName: Host Ports}, {controlName: Capabilities, restrictedField: spec.hostIPC}]")
		Eventually(ready(sp)).Should(And(haveReason(policyv1alpha1.ReasonDegraded), HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", ContainSubstring(`generation 1 does not compile as this version of podsieve reads it`)),
			HaveField("Message", ContainSubstring(`spec.rules[0].podSecurity.exclude[0].restrictedField: "spec.hostPID" is not a field of control "Capabilities"`)),
			HaveField("Message", ContainSubstring(`(until then the entry waives nothing)`))))
		Expect(ix.Snapshot().Policy(name)).NotTo(BeNil())
		Expect(ix.Snapshot().Policy(name).Strict).To(HaveLen(2))
		Expect(len(meta.FindStatusCondition(sp.Status.Conditions, policyv1alpha1.ConditionReady).Message)).To(BeNumerically(">", 1024),
			"the message fits an event's note: the event below does not show that a longer one is cut")
		Expect(sp.Status.Rules).To(Equal(int32(1)))
		Expect(sp.Status.LastValidSpec).To(BeNil(), "a spec that does not compile was kept as the last valid one")
		// The Host Ports entry compiles and still waives; the pod it waives
		// is refused only by the other policies of this spec's namespace.
		Expect(allowedAt(name, hostPortPod("default"), time.Now())).To(BeTrue())
		hostPID := hostPortPod("default")
		hostPID.Spec.HostPID = true
		Expect(allowedAt(name, hostPID, time.Now())).To(BeFalse(), "the entry that does not compile waived hostPID")
		// The message is longer than an event's note may be: cut, not lost.
		Eventually(eventReasons(sp)).Should(ContainElement(policyv1alpha1.EventReasonRefused))
		Expect(kubectlRow("secpol", "", name)).To(ContainElements("Enforce", "1", "False", "Degraded"))
	})

	It("keeps the last valid form in force when an edit does not compile, and says so", func() {
		name := uniqueName("degraded")
		sp := createPolicy(name, "rules:\n- name: a\n  podSecurity: {level: baseline}")
		Eventually(ready(sp)).Should(haveReason(policyv1alpha1.ReasonCompiled))
		edit(sp, func() {
			sp.Spec.Rules[0].PodSecurity.Exclude = []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities, RestrictedField: "spec.hostPID"}}
		})
		Eventually(ready(sp)).Should(And(haveReason(policyv1alpha1.ReasonDegraded), HaveField("Status", metav1.ConditionFalse),
			HaveField("ObservedGeneration", int64(2)), HaveField("Message", ContainSubstring("generation 1 (1 rule) stays in force"))))
		Expect(ix.Snapshot().Policy(name).Generation).To(Equal(int64(1)))
		Expect(allowedAt(name, hostPortPod("default"), time.Now())).To(BeFalse(), "the degraded policy is still enforced")

		edit(sp, func() { sp.Spec.Rules[0].PodSecurity.Exclude = nil })
		Eventually(ready(sp)).Should(And(haveReason(policyv1alpha1.ReasonCompiled), HaveField("ObservedGeneration", int64(3))))
		Expect(ix.Snapshot().Policy(name).Generation).To(Equal(int64(3)))
	})

	AfterEach(func() {
		// Policies here refuse every hostPort pod; remove them so that the
		// exception specs see only their own.
		var list policyv1alpha1.SecurityPolicyList
		Expect(k8s.List(ctx, &list)).To(Succeed())
		for i := range list.Items {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, &list.Items[i]))).To(Succeed())
		}
		Eventually(func() int { return len(ix.Snapshot().Policies()) }).Should(BeZero())
	})
})

var _ = Describe("PolicyException", func() {
	var policy, guarded, bounded, ns string
	BeforeEach(func() {
		policy, guarded, bounded = uniqueName("open"), uniqueName("guarded"), uniqueName("bounded")
		createPolicy(policy, "exceptions: {}\nrules:\n- name: baseline\n  podSecurity: {level: baseline}")
		createPolicy(guarded, "exceptions: {allowedControls: [Capabilities]}\nrules:\n- name: baseline\n  podSecurity: {level: baseline}")
		createPolicy(bounded, "exceptions:\n  controls: [{controlName: Host Ports, allowedValues: [\"9100\"], requireContainerNames: true}]\nrules:\n- name: baseline\n  podSecurity: {level: baseline}")
		Eventually(func() bool {
			return ix.Snapshot().Policy(policy) != nil && ix.Snapshot().Policy(guarded) != nil && ix.Snapshot().Policy(bounded) != nil
		}).Should(BeTrue())
		ns = newNamespace("team")
		DeferCleanup(func() {
			for _, name := range []string{policy, guarded, bounded} {
				sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
				Expect(client.IgnoreNotFound(k8s.Delete(ctx, sp))).To(Succeed())
			}
		})
	})

	DescribeTable("reaches each reason through the API, with a message that says what to change",
		func(spec func(policy, guarded, bounded string) string, reason, message string) {
			pe := createException(ns, "e", spec(policy, guarded, bounded))
			Eventually(ready(pe)).Should(And(haveReason(reason), HaveField("Message", ContainSubstring(message)), HaveField("ObservedGeneration", pe.Generation)))
			Expect(pe.Status.ObservedGeneration).To(Equal(pe.Generation))
			inIndex := ix.Snapshot().Exception(ns, "e") != nil
			Expect(inIndex).To(Equal(reason == policyv1alpha1.ReasonActive), "only Active exceptions are in the index")
			// The policy the exception names admits the pod exactly when the
			// exception is Active (the open policy when it names none there is).
			named := pe.Spec.Exceptions[0].PolicyName
			if ix.Snapshot().Policy(named) == nil {
				named = policy
			}
			Expect(allowedAt(named, hostPortPod(ns), time.Now())).To(Equal(reason == policyv1alpha1.ReasonActive))
			Expect(kubectlRow("podex", ns, "e")).To(ContainElement(reason))
			want := policyv1alpha1.EventReasonRefused
			if reason == policyv1alpha1.ReasonActive {
				want = policyv1alpha1.EventReasonActivated
			}
			if reason == policyv1alpha1.ReasonExpired {
				want = policyv1alpha1.EventReasonExpired
			}
			Eventually(eventReasons(pe)).Should(ContainElement(want))
		},
		Entry("Active", func(p, _, _ string) string { return fmt.Sprintf(hostPortsException, p) },
			policyv1alpha1.ReasonActive, "honoured for"),
		Entry("PolicyNotFound", func(_, _, _ string) string { return fmt.Sprintf(hostPortsException, "no-such-policy") },
			policyv1alpha1.ReasonPolicyNotFound, `spec.exceptions[0].policyName: SecurityPolicy "no-such-policy" does not exist`),
		Entry("RuleNotFound", func(p, _, _ string) string {
			return fmt.Sprintf("exceptions: [{policyName: %s, ruleNames: [restricted]}]\npodSecurity: [{controlName: Host Ports}]", p)
		}, policyv1alpha1.ReasonRuleNotFound, `its rules are "baseline"`),
		Entry("NotPermitted", func(_, g, _ string) string { return fmt.Sprintf(hostPortsException, g) },
			policyv1alpha1.ReasonNotPermitted, `remove control "Host Ports" from spec.podSecurity`),
		Entry("NotPermitted: a policy without spec.exceptions", func(_, _, _ string) string {
			closed := uniqueName("closed")
			createPolicy(closed, "rules:\n- name: baseline\n  podSecurity: {level: baseline}")
			DeferCleanup(func() {
				Expect(client.IgnoreNotFound(k8s.Delete(ctx, &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: closed}}))).To(Succeed())
			})
			return fmt.Sprintf(hostPortsException, closed)
		}, policyv1alpha1.ReasonNotPermitted, "honours no PolicyExceptions: it has no spec.exceptions; a cluster admin opts it in by setting spec.exceptions"),
		Entry("NotPermitted: a per-control guardrail", func(_, _, b string) string { return fmt.Sprintf(hostPortsException, b) },
			policyv1alpha1.ReasonNotPermitted, `requires exceptions for control "Host Ports" to name containers (spec.exceptions.controls): set spec.podSecurity[0].containerNames`),
		Entry("Active within a per-control guardrail", func(_, _, b string) string {
			return strings.Replace(fmt.Sprintf(hostPortsException, b), "- controlName: Host Ports\n", "- controlName: Host Ports\n  containerNames: [exporter]\n", 1)
		}, policyv1alpha1.ReasonActive, "honoured for"),
		Entry("Expired", func(p, _, _ string) string {
			return fmt.Sprintf(hostPortsException, p) + "expiresAt: \"2026-01-01T00:00:00Z\"\n"
		}, policyv1alpha1.ReasonExpired, "spec.expiresAt 2026-01-01T00:00:00Z has passed"),
		Entry("Invalid: restrictedField of another control", func(p, _, _ string) string {
			return fmt.Sprintf("exceptions: [{policyName: %s, ruleNames: [\"*\"]}]\npodSecurity: [{controlName: Host Ports, restrictedField: spec.hostPID}]", p)
		}, policyv1alpha1.ReasonInvalid, `"spec.hostPID" is not a field of control "Host Ports"`),
		Entry("Invalid: match.namespaces outside the cluster exceptions namespace", func(p, _, _ string) string {
			return fmt.Sprintf(hostPortsException, p) + "match: {namespaces: [\"*\"]}\n"
		}, policyv1alpha1.ReasonInvalid, `honoured only for exceptions in the cluster exceptions namespace "podsieve-system"`),
	)

	It("shows its policies and controls in kubectl get, and counts in the policy's activeExceptions", func() {
		createException(ns, "ports", fmt.Sprintf(hostPortsException, policy))
		createException(ns, "whole", fmt.Sprintf("exceptions: [{policyName: %s, ruleNames: [\"*\"]}]", policy))
		Eventually(func() []string { return kubectlRow("podex", ns, "ports") }).Should(ContainElements(policy, "Host Ports", "True", "Active"))
		Expect(kubectlRow("podex", ns, "whole")).To(ContainElements(policy, "*", "True"))
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}}
		Eventually(func() int32 {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
			return sp.Status.ActiveExceptions
		}).Should(Equal(int32(2)))
	})

	// Turning Expired when the requeue for expiresAt comes is
	// TestExceptionExpiresAtItsRequeue's, with a fake clock.
	It("stops applying at expiresAt, whatever the reconciler has done yet", func() {
		expiry := time.Now().Add(time.Hour).Truncate(time.Second)
		pe := createException(ns, "soon", fmt.Sprintf(hostPortsException, policy)+fmt.Sprintf("expiresAt: %q\n", expiry.UTC().Format(time.RFC3339)))
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonActive))
		o := hostPortPod(ns)
		// The index checks the clock on every lookup: exact.
		Expect(allowedAt(policy, o, expiry.Add(-time.Millisecond))).To(BeTrue())
		Expect(allowedAt(policy, o, expiry)).To(BeFalse())
	})

	It("is re-judged when its policy is edited, deleted and restored", func() {
		pe := createException(ns, "follows", fmt.Sprintf(hostPortsException, policy))
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonActive))

		sp := &policyv1alpha1.SecurityPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: policy}, sp)).To(Succeed())
		edit(sp, func() {
			sp.Spec.Exceptions = &policyv1alpha1.ExceptionGuardrails{AllowedControls: []policyv1alpha1.ControlName{policyv1alpha1.ControlCapabilities}}
		})
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonNotPermitted))
		Expect(allowedAt(policy, hostPortPod(ns), time.Now())).To(BeFalse())

		// Without spec.exceptions the policy honours no exception.
		edit(sp, func() { sp.Spec.Exceptions = nil })
		Eventually(ready(pe)).Should(And(haveReason(policyv1alpha1.ReasonNotPermitted),
			HaveField("Message", ContainSubstring(fmt.Sprintf("policy %q honours no PolicyExceptions: it has no spec.exceptions", policy)))))
		Expect(allowedAt(policy, hostPortPod(ns), time.Now())).To(BeFalse())

		Expect(k8s.Delete(ctx, sp)).To(Succeed())
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonPolicyNotFound))

		createPolicy(policy, "exceptions: {}\nrules:\n- name: baseline\n  podSecurity: {level: baseline}")
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonActive))
		Expect(allowedAt(policy, hostPortPod(ns), time.Now())).To(BeTrue())
	})

	It("never applies in another namespace, whatever its match says", func() {
		other := newNamespace("team-b")
		pe := createException(ns, "mine", fmt.Sprintf(hostPortsException, policy)+"match: {selector: {}, names: [\"*\"]}\n")
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonActive))
		Expect(allowedAt(policy, hostPortPod(ns), time.Now())).To(BeTrue())
		Expect(allowedAt(policy, hostPortPod(other), time.Now())).To(BeFalse())
	})

	It("reaches other namespaces from the cluster exceptions namespace through namespaceSelector", func() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exceptionsNamespace}}))).To(Succeed())
		labelled := newNamespace("monitoring")
		nsObj := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: labelled}, nsObj)).To(Succeed())
		edit(nsObj, func() { nsObj.Labels["node-exporter"] = "allowed" })
		name := uniqueName("exporters")
		pe := createException(exceptionsNamespace, name, fmt.Sprintf(hostPortsException, policy)+"match: {namespaceSelector: {matchLabels: {node-exporter: allowed}}}\n")
		DeferCleanup(func() { Expect(k8s.Delete(ctx, pe)).To(Succeed()) })
		Eventually(ready(pe)).Should(haveReason(policyv1alpha1.ReasonActive))
		Eventually(func() bool { return allowedAt(policy, hostPortPod(labelled), time.Now()) }).Should(BeTrue(), "the namespace's labels reach the index")
		Expect(allowedAt(policy, hostPortPod(ns), time.Now())).To(BeFalse())
	})
})
