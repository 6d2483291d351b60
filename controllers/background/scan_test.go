package background

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/report"
	"github.com/podsieve/podsieve/internal/testenv"
)

// fixture is one spec's scan: its own index, filled as the controllers
// would fill it, a fake clock, and a record of the exceptions the scan said
// it applied.
type fixture struct {
	ix  *index.Index
	clk *clocktesting.FakeClock
	s   *Scanner

	mu      sync.Mutex
	applied map[string]time.Time
}

func newFixture() *fixture {
	f := &fixture{
		ix:      index.New(exceptionsNamespace),
		clk:     clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)),
		applied: map[string]time.Time{},
	}
	f.ix.MarkReady()
	f.s = newScanner(k8s, k8s, nil, f.ix, Options{ExceptionsNamespace: exceptionsNamespace, Clock: f.clk, ExceptionsApplied: f.record})
	// The counters wait for a first scan of every namespace; these specs
	// write them when they want to see them.
	f.s.initialPending = map[string]bool{}
	return f
}

func (f *fixture) record(sources []engine.Source, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, src := range sources {
		f.applied[src.NamespacedName()] = at
	}
}

// scan scans a namespace as the controller would for a queued request.
func (f *fixture) scan(ns string) {
	GinkgoHelper()
	_, err := f.s.Reconcile(ctx, request(ns))
	Expect(err).NotTo(HaveOccurred())
}

// writeCounters writes the status counters as the periodic flush would.
func (f *fixture) writeCounters() {
	GinkgoHelper()
	Expect(f.s.writeCounters(ctx)).To(Succeed())
}

// namespace creates a namespace of its own for one spec, in the API server
// and in the index.
func (f *fixture) namespace(prefix string) string {
	GinkgoHelper()
	name := uniqueName(prefix)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	f.ix.SetNamespace(name, map[string]string{"kubernetes.io/metadata.name": name})
	return name
}

// policy creates a SecurityPolicy and puts it in force, as the policy
// controller does.
func (f *fixture) policy(name, spec string) *policyv1alpha1.SecurityPolicy {
	GinkgoHelper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(yaml.UnmarshalStrict([]byte(spec), &sp.Spec)).To(Succeed())
	Expect(k8s.Create(ctx, sp)).To(Succeed())
	f.compile(sp)
	return sp
}

func (f *fixture) compile(sp *policyv1alpha1.SecurityPolicy) {
	GinkgoHelper()
	p, err := engine.CompilePolicy(sp)
	Expect(err).NotTo(HaveOccurred())
	f.ix.SetPolicy(p)
}

// exception creates a PolicyException and places it, judged at the fake
// clock's time, as the exception controller does.
func (f *fixture) exception(ns, name, spec string) *policyv1alpha1.PolicyException {
	GinkgoHelper()
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(yaml.UnmarshalStrict([]byte(spec), &pe.Spec)).To(Succeed())
	Expect(k8s.Create(ctx, pe)).To(Succeed())
	f.judge(pe)
	return pe
}

func (f *fixture) judge(pe *policyv1alpha1.PolicyException) engine.ExceptionState {
	GinkgoHelper()
	e, err := engine.CompileException(pe, exceptionsNamespace)
	Expect(err).NotTo(HaveOccurred())
	st := e.State(f.ix.Snapshot().Policy, f.clk.Now())
	f.ix.Place(pe.Namespace, pe.Name, e, st)
	return st
}

func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, rand.IntN(1_000_000)) }

// createPod creates a pod directly (no webhook runs here, as if the pod had
// been admitted before the policy existed or while it audited).
func createPod(ns, name string, caps ...corev1.Capability) {
	GinkgoHelper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/" + name + ":1"}}}}
	if len(caps) > 0 {
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
}

// edit changes an object as a user would with kubectl edit.
func edit(obj client.Object, change func()) {
	GinkgoHelper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	change()
	Expect(k8s.Patch(ctx, obj, patch)).To(Succeed())
}

// outcomes reads the namespace's reports as the API server has them and
// returns a policy's results: resource kind/name → result. Each report must
// be about one object (its scope, its owner, every result's resource) and
// its summary must count its results.
func outcomes(ns, policy string) map[string]string {
	GinkgoHelper()
	var list reportv1alpha2.PolicyReportList
	Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	out := map[string]string{}
	for _, r := range list.Items {
		Expect(r.Summary).To(Equal(report.Summarize(r.Results)), "report %s: summary disagrees with results", r.Name)
		Expect(r.Scope).NotTo(BeNil(), "report %s has no scope", r.Name)
		Expect(r.OwnerReferences).To(ConsistOf(And(HaveField("Kind", r.Scope.Kind), HaveField("Name", r.Scope.Name), HaveField("UID", r.Scope.UID))),
			"report %s is owned by its object", r.Name)
		Expect(r.Name).To(Equal(report.Name(*r.Scope, 0)))
		for _, res := range r.Results {
			Expect(res.Source).To(Equal("podsieve"))
			Expect(res.Resources).To(Equal([]corev1.ObjectReference{*r.Scope}))
			if res.Policy == policy {
				out[res.Resources[0].Kind+"/"+res.Resources[0].Name] = string(res.Result)
			}
		}
	}
	return out
}

// reportOf returns the report about one object, nil when it has none.
func reportOf(ns, kindName string) *reportv1alpha2.PolicyReport {
	GinkgoHelper()
	var list reportv1alpha2.PolicyReportList
	Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	for i := range list.Items {
		if r := &list.Items[i]; r.Scope != nil && r.Scope.Kind+"/"+r.Scope.Name == kindName {
			return r
		}
	}
	return nil
}

// result returns one resource's result of a policy.
func result(ns, policy, kindName string) *reportv1alpha2.PolicyReportResult {
	r := reportOf(ns, kindName)
	if r == nil {
		return nil
	}
	for i := range r.Results {
		if res := &r.Results[i]; res.Policy == policy {
			return res
		}
	}
	return nil
}

func violations(name string) *int32 {
	GinkgoHelper()
	var sp policyv1alpha1.SecurityPolicy
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, &sp)).To(Succeed())
	return sp.Status.Violations
}

func matchedObjects(ns, name string) *int32 {
	GinkgoHelper()
	var pe policyv1alpha1.PolicyException
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pe)).To(Succeed())
	return pe.Status.MatchedObjects
}

func kubectlRow(resource, ns string, keys ...string) []string {
	GinkgoHelper()
	args := []string{"get", resource, "-o", "wide"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	out, err := testenv.Kubectl(env, args...)
	Expect(err).NotTo(HaveOccurred())
	r := testenv.Row(testenv.Columns(out), keys...)
	Expect(r).NotTo(BeNil(), "no row with %v in:\n%s", keys, out)
	return append([]string{}, r...)
}

// metricValue sums a counter's samples in controller-runtime's registry.
func metricValue(name string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

const netAdminException = `
exceptions: [{policyName: %s, ruleNames: ["*"]}]
podSecurity:
- controlName: Capabilities
  restrictedField: spec.containers[*].securityContext.capabilities.add
  values: ["NET_ADMIN"]
match:
  names: ["mesh"]
`

var _ = Describe("Background scan", func() {
	var f *fixture
	var ns, policy string
	BeforeEach(func() {
		f = newFixture()
		ns = f.namespace("bg")
		policy = uniqueName("bg")
	})

	It("reports pods admitted under Audit as fail after Enforce, skip under an exception, and fail again when it expires", func() {
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(ns, "plain")
		sp := f.policy(policy, fmt.Sprintf(`
action: Audit
exceptions: {}
rules:
- name: baseline
  match: {namespaces: [%q]}
  podSecurity: {level: baseline}
`, ns))
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Pod/mesh": "fail", "Pod/plain": "pass"}))

		edit(sp, func() { sp.Spec.Action = policyv1alpha1.ActionEnforce })
		f.compile(sp)
		f.scan(ns)
		Expect(result(ns, policy, "Pod/mesh")).To(And(HaveField("Result", reportv1alpha2.ResultFail),
			HaveField("Properties", HaveKeyWithValue(report.PropertyAction, "Enforce"))))
		f.writeCounters()
		Expect(violations(policy)).To(HaveValue(Equal(int32(1))))
		Expect(kubectlRow("secpol", "", policy)).To(ContainElements("Enforce", "1"))

		expiry := f.clk.Now().Add(time.Hour)
		pe := f.exception(ns, "mesh-net-admin", fmt.Sprintf(netAdminException, policy)+fmt.Sprintf("expiresAt: %q\n", expiry.UTC().Format(time.RFC3339)))
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Pod/mesh": "skip", "Pod/plain": "pass"}))
		Expect(result(ns, policy, "Pod/mesh").Properties).To(HaveKeyWithValue(report.PropertyExceptions, ns+"/mesh-net-admin"))
		Expect(f.applied).To(HaveKeyWithValue(ns+"/mesh-net-admin", f.clk.Now()), "the scan tells the usage record (lastAppliedTime)")
		f.writeCounters()
		Expect(violations(policy)).To(HaveValue(Equal(int32(0))))
		Expect(matchedObjects(ns, "mesh-net-admin")).To(HaveValue(Equal(int32(1))))
		Expect(kubectlRow("podex", ns, "mesh-net-admin")).To(ContainElement("1"), "the Matched column")

		// Expiry: the exception controller takes it out of force when the
		// clock reaches expiresAt, and that change re-scans the namespace.
		f.clk.SetTime(expiry)
		Expect(f.judge(pe).Reason).To(Equal(policyv1alpha1.ReasonExpired))
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Pod/mesh": "fail", "Pod/plain": "pass"}))
		Expect(result(ns, policy, "Pod/mesh").Message).To(ContainSubstring("exception/" + ns + "/mesh-net-admin does not apply: expired at"))
		f.writeCounters()
		Expect(violations(policy)).To(HaveValue(Equal(int32(1))))
		Expect(matchedObjects(ns, "mesh-net-admin")).To(HaveValue(Equal(int32(0))))
	})

	It("never turns a result into skip with an exception from another namespace", func() {
		other := f.namespace("bg-other")
		createPod(ns, "mesh", "NET_ADMIN")
		f.policy(policy, fmt.Sprintf(`
exceptions: {}
rules:
- name: baseline
  match: {namespaces: [%q, %q]}
  podSecurity: {level: baseline}
`, ns, other))
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Pod/mesh": "fail"}))
		pe := f.exception(other, "mesh-net-admin", fmt.Sprintf(netAdminException, policy))
		Expect(f.ix.Snapshot().Exception(pe.Namespace, pe.Name)).NotTo(BeNil(), "the exception is in force")
		f.scan(ns)
		f.scan(other)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Pod/mesh": "fail"}))
		Expect(f.applied).To(BeEmpty())
		f.writeCounters()
		Expect(matchedObjects(other, "mesh-net-admin")).To(HaveValue(Equal(int32(0))))
	})

	It("reports top-level workloads, not the ReplicaSets they own, and leaves out policies with background: false", func() {
		off := uniqueName("bg-off")
		f.policy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		f.policy(off, fmt.Sprintf("background: false\nrules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		labels := map[string]string{"app": "web"}
		Expect(k8s.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
			},
		})).To(Succeed())
		// A ReplicaSet the Deployment controls (no controller-manager runs
		// here to create it) repeats its template and is not reported.
		var dep appsv1.Deployment
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &dep)).To(Succeed())
		Expect(k8s.Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: dep.Spec.Template},
		})).To(Succeed())
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Deployment/web": "fail"}))
		Expect(result(ns, policy, "Deployment/web").Properties).To(HaveKeyWithValue(report.PropertyFields, "spec.template.spec.hostPID"))
		Expect(outcomes(ns, off)).To(BeEmpty())
		f.writeCounters()
		Expect(violations(policy)).To(HaveValue(Equal(int32(1))))
		Expect(violations(off)).To(BeNil())
	})

	It("empties a namespace's results when its pods are deleted, and removes a policy's results with the policy", func() {
		other := f.namespace("bg-other")
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(other, "mesh", "NET_ADMIN")
		sp := f.policy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q, %q]}, podSecurity: {level: baseline}}]", ns, other))
		f.scan(ns)
		f.scan(other)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Pod/mesh": "fail"}))
		Expect(outcomes(other, policy)).To(Equal(map[string]string{"Pod/mesh": "fail"}))
		f.writeCounters()
		Expect(violations(policy)).To(HaveValue(Equal(int32(2))))

		var mesh corev1.Pod
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mesh"}, &mesh)).To(Succeed())
		Expect(reportOf(ns, "Pod/mesh").OwnerReferences).To(ConsistOf(HaveField("UID", mesh.UID)), "garbage collection removes the report with its object")

		// Unscheduled pods go at once, without a grace period.
		Expect(k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(BeEmpty())
		f.writeCounters()
		Expect(violations(policy)).To(HaveValue(Equal(int32(1))))

		// No garbage collector runs here: the scan deletes them itself. A
		// report left without results goes.
		Expect(k8s.Delete(ctx, sp)).To(Succeed())
		f.ix.DeletePolicy(policy)
		f.scan(other)
		Expect(outcomes(other, policy)).To(BeEmpty())
		Expect(reportOf(other, "Pod/mesh")).To(BeNil(), "the deleted policy's results are still reported")
	})

	It("shows the reports with kubectl get polr", func() {
		createPod(ns, "mesh", "NET_ADMIN")
		createPod(ns, "plain")
		f.policy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(HaveLen(2))
		out, err := testenv.Kubectl(env, "get", "polr", "-A")
		Expect(err).NotTo(HaveOccurred())
		// The report's own name is podsieve-<uid>; the scope's kind and
		// name say which object it is about, by default.
		Expect(strings.Fields(strings.Split(out, "\n")[0])).To(Equal([]string{"NAMESPACE", "NAME", "KIND", "OBJECT", "PASS", "FAIL", "WARN", "ERROR", "SKIP", "AGE"}))
		mesh, plain := reportOf(ns, "Pod/mesh").Name, reportOf(ns, "Pod/plain").Name
		Expect(testenv.Row(testenv.Columns(out), ns, mesh)).To(HaveExactElements(ns, mesh, "Pod", "mesh", "0", "1", "0", "0", "0", Not(BeEmpty())))
		Expect(testenv.Row(testenv.Columns(out), ns, plain)).To(HaveExactElements(ns, plain, "Pod", "plain", "1", "0", "0", "0", "0", Not(BeEmpty())))
		out, err = testenv.Kubectl(env, "get", "polr", "-n", ns, "-l", report.LabelPolicyPrefix+policy+","+report.LabelScopeKind+"=Pod", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Fields(out)).To(ConsistOf("policyreport.wgpolicyk8s.io/"+mesh, "policyreport.wgpolicyk8s.io/"+plain))
	})

	It("does not rewrite a report when a scan finds what it already says", func() {
		createPod(ns, "mesh", "NET_ADMIN")
		f.policy(policy, fmt.Sprintf("rules: [{name: r, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(HaveLen(1))
		before := *reportOf(ns, "Pod/mesh")
		scanned, writes := metricValue("podsieve_background_objects_scanned_total"), metricValue("podsieve_background_report_writes_total")

		// A label change re-scans the namespace: same results, no write.
		// Timestamps count seconds: the clock moves on, so that a scan
		// that rewrote them would show.
		f.clk.Step(2 * time.Second)
		var n corev1.Namespace
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		edit(&n, func() { n.Labels["touched"] = "yes" })
		f.ix.SetNamespace(ns, n.Labels)
		f.scan(ns)
		Expect(metricValue("podsieve_background_objects_scanned_total")).To(BeNumerically(">", scanned))
		var after reportv1alpha2.PolicyReport
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&before), &after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
		Expect(metricValue("podsieve_background_report_writes_total")).To(Equal(writes))

		// Another tool's label on the report is its own: kept, and no
		// reason to write.
		edit(&after, func() { after.Labels["team.example.com/owner"] = "a" })
		f.clk.Step(2 * time.Second)
		f.scan(ns)
		var labelled reportv1alpha2.PolicyReport
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&before), &labelled)).To(Succeed())
		Expect(labelled.ResourceVersion).To(Equal(after.ResourceVersion))
		Expect(labelled.Labels).To(HaveKeyWithValue("team.example.com/owner", "a"))
		Expect(metricValue("podsieve_background_report_writes_total")).To(Equal(writes))
	})

	It("reports a Deployment's violating replicas once, on the Deployment, and a replica a webhook changed on its own", func() {
		f.policy(policy, fmt.Sprintf("rules: [{name: baseline, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		dep, rs := createDeployment(ns, "web", "NET_ADMIN")
		for i := range 3 {
			createReplica(ns, fmt.Sprintf("web-%d", i), rs, nil)
		}
		// The mesh's mutating webhook injected an init container that the
		// template does not have: that replica says something the
		// Deployment does not.
		createReplica(ns, "web-injected", rs, func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"}}}}}
		})
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Deployment/web": "fail", "Pod/web-injected": "fail"}),
			"the three replicas that repeat their Deployment are not reported")
		Expect(reportOf(ns, "Deployment/web").OwnerReferences).To(ConsistOf(HaveField("UID", dep.UID)))
		Expect(result(ns, policy, "Pod/web-injected").Message).To(ContainSubstring(`init container "istio-init"`))
		f.writeCounters()
		Expect(violations(policy)).To(HaveValue(Equal(int32(1+2))), "the Deployment's one, the changed replica's two")

		// Asked to, it reports every replica.
		f.s.opts.ReportControlledPods = true
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{"Deployment/web": "fail", "Pod/web-0": "fail", "Pod/web-1": "fail",
			"Pod/web-2": "fail", "Pod/web-injected": "fail"}))

		// And back: the replicas' reports go.
		f.s.opts.ReportControlledPods = false
		f.scan(ns)
		Expect(reportOf(ns, "Pod/web-0")).To(BeNil())
		Expect(outcomes(ns, policy)).To(HaveLen(2))
	})

	It("does not take a pod's word for its controller: forged owners are reported in full", func() {
		f.policy(policy, fmt.Sprintf("rules: [{name: baseline, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		// A compliant-looking target: a Deployment whose template violates
		// too, so that a forged pod with the same violation would repeat it.
		dep, rs := createDeployment(ns, "web", "NET_ADMIN")
		owned := func(name string, owner client.Object, gvk schema.GroupVersionKind, labels map[string]string) {
			GinkgoHelper()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)}},
				Spec: *rs.Spec.Template.Spec.DeepCopy()}
			pod.Spec.Containers[0].Image = "registry.attacker.example/miner:1"
			Expect(k8s.Create(ctx, pod)).To(Succeed())
		}
		// Another image with the same violation, under the real ReplicaSet.
		owned("other-image", rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), rs.Spec.Template.Labels)
		// A pod that names the Deployment itself, which never owns pods.
		owned("claims-deployment", dep, appsv1.SchemeGroupVersion.WithKind("Deployment"), rs.Spec.Template.Labels)
		// A pod the ReplicaSet does not select (its controller would release it).
		owned("not-selected", rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), map[string]string{"app": "other"})
		// A pod that names the ReplicaSet's UID under another kind.
		owned("wrong-kind", rs, appsv1.SchemeGroupVersion.WithKind("StatefulSet"), rs.Spec.Template.Labels)
		// A ReplicaSet of its own that names a CronJob as its controller,
		// and a pod of it: the ReplicaSet is judged itself.
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}, Spec: batchv1.CronJobSpec{Schedule: "0 0 * * *", Suspend: ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "app", Image: "registry.example/job:1"}}}}}}}}
		Expect(k8s.Create(ctx, cj)).To(Succeed())
		labels := map[string]string{"app": "hidden"}
		hidden := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hidden", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "app", Image: "registry.example/x:1"}}}}}}
		Expect(k8s.Create(ctx, hidden)).To(Succeed())
		createReplica(ns, "hidden-1", hidden, nil)
		f.scan(ns)
		Expect(outcomes(ns, policy)).To(Equal(map[string]string{
			"Deployment/web": "fail", "CronJob/nightly": "pass", "ReplicaSet/hidden": "fail",
			"Pod/other-image": "fail", "Pod/claims-deployment": "fail", "Pod/not-selected": "fail", "Pod/wrong-kind": "fail",
		}), "hidden-1 repeats its ReplicaSet, which is reported; every forged claim is reported in full")
	})

	It("keeps each result's identity and leaves other reports alone when other objects are added", func() {
		f.policy(policy, fmt.Sprintf("rules: [{name: baseline, match: {namespaces: [%q]}, podSecurity: {level: baseline}}]", ns))
		createPod(ns, "m", "NET_ADMIN")
		createPod(ns, "n")
		f.scan(ns)
		before := map[string]*reportv1alpha2.PolicyReport{"Pod/m": reportOf(ns, "Pod/m"), "Pod/n": reportOf(ns, "Pod/n")}
		writes := metricValue("podsieve_background_report_writes_total")
		// New objects, whose names sort before the others' (which moved
		// results between reports when reports were per namespace).
		for i := range 3 {
			createPod(ns, fmt.Sprintf("a-%d", i), "NET_ADMIN")
		}
		f.clk.Step(2 * time.Second)
		f.scan(ns)
		Expect(metricValue("podsieve_background_report_writes_total")).To(Equal(writes+3), "one creation per new object, nothing else")
		for kindName, old := range before {
			now := reportOf(ns, kindName)
			Expect(now.ResourceVersion).To(Equal(old.ResourceVersion), "%s was rewritten", kindName)
			Expect(now.Results[0].Properties[report.PropertyResultID]).To(Equal(old.Results[0].Properties[report.PropertyResultID]))
		}
	})
})

// createDeployment creates a Deployment whose container adds caps, and the
// ReplicaSet it controls (no controller-manager runs here).
func createDeployment(ns, name string, caps ...corev1.Capability) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	GinkgoHelper()
	labels := map[string]string{"app": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/" + name + ":1",
					SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}}}}},
		},
	}
	Expect(k8s.Create(ctx, dep)).To(Succeed())
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-5d9f", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dep, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: dep.Spec.Template},
	}
	Expect(k8s.Create(ctx, rs)).To(Succeed())
	return dep, rs
}

// createReplica creates a pod of rs from its template, as the ReplicaSet
// controller would, changed by mut (a mutating webhook).
func createReplica(ns, name string, rs *appsv1.ReplicaSet, mut func(*corev1.Pod)) {
	GinkgoHelper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: rs.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: *rs.Spec.Template.Spec.DeepCopy()}
	if mut != nil {
		mut(pod)
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
}
