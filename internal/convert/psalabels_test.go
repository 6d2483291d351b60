package convert

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/admission/api"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// TestPSALabelsDecideAsUpstream converts namespaces with every combination of
// Pod Security Admission labels (valid and invalid) and checks, for each
// namespace and each pod of a table, that the converted policies fail in
// each mode exactly when upstream's evaluator fails the level and version
// that upstream's own label parsing (api.PolicyToEvaluate) gives that
// namespace.
func TestPSALabelsDecideAsUpstream(t *testing.T) {
	res := &Result{}
	nss, err := Namespaces(readTestdata(t, "testdata/psa/namespaces.yaml", "testdata/psa/invalid.yaml"), res)
	if err != nil {
		t.Fatal(err)
	}
	c, evaluator := convertPSA(t, nss, nil, res)
	privileged := api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()}
	defaults := api.Policy{Enforce: privileged, Audit: privileged, Warn: privileged}

	seccomp := func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
	}
	// Pods whose verdict depends on the version: a probe with a host fails
	// baseline from v1.34 only; net.ipv4.tcp_keepalive_time is allowed from
	// v1.29 only.
	probeHost := func(p *corev1.Pod) {
		p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}}
	}
	keepalive := func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.tcp_keepalive_time", Value: "60"}}}
	}
	noSeccomp := func(p *corev1.Pod) {
		restrictedPod(p)
		p.Spec.SecurityContext.SeccompProfile = nil
	}
	pods := []struct {
		name string
		opts []podOpt
	}{
		{"plain", nil},
		{"restricted", []podOpt{restrictedPod}},
		{"restricted-but-seccomp", []podOpt{noSeccomp}},
		{"restricted-probe-host", []podOpt{restrictedPod, probeHost}},
		{"keepalive-sysctl", []podOpt{keepalive}},
		{"host-network", []podOpt{hostNetwork}},
		{"net-admin", []podOpt{withApp("nginx:1.25", "NET_ADMIN")}},
		{"unconfined-seccomp", []podOpt{seccomp}},
		{"mesh-init", []podOpt{withInit("istio-init", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN", "NET_RAW")}},
	}
	modes := []struct {
		action policyv1alpha1.PolicyAction
		lv     func(api.Policy) api.LevelVersion
	}{
		{policyv1alpha1.ActionEnforce, func(p api.Policy) api.LevelVersion { return p.Enforce }},
		{policyv1alpha1.ActionAudit, func(p api.Policy) api.LevelVersion { return p.Audit }},
		{policyv1alpha1.ActionWarn, func(p api.Policy) api.LevelVersion { return p.Warn }},
	}
	for _, ns := range nss {
		for _, pt := range pods {
			t.Run(ns.Namespace.Name+"/"+pt.name, func(t *testing.T) {
				p := pod(ns.Namespace.Name, pt.name, pt.opts...)
				upstream, _ := api.PolicyToEvaluate(ns.Namespace.Labels, defaults)
				d := c.decide(t, p, ns.Namespace.Labels)
				for _, m := range modes {
					lv := m.lv(upstream)
					want := !policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &p.ObjectMeta, &p.Spec)).Allowed
					got := slices.ContainsFunc(d.Results, func(r engine.RuleResult) bool {
						return r.Rule.Policy.Action == m.action && r.Outcome == engine.Fail
					})
					if m.action == policyv1alpha1.ActionWarn && want && !got {
						// Pod Security Admission warns at the enforce
						// level when no warn label is set; podsieve's
						// Enforce refuses those pods (and their
						// controllers) already, so no Warn policy is
						// written for it.
						e := upstream.Enforce
						if e.Level == lv.Level && e.Version == lv.Version && !ns.hasLabel("pod-security.kubernetes.io/warn") && !d.Allowed {
							continue
						}
					}
					if got != want {
						t.Errorf("%s at %s: podsieve fails %v, upstream fails %v; podsieve failing %v", m.action, lv, got, want, failing(d))
					}
				}
				if enforced := !d.Allowed; enforced != slices.ContainsFunc(d.Results, func(r engine.RuleResult) bool {
					return r.Rule.Policy.Action == policyv1alpha1.ActionEnforce && r.Outcome == engine.Fail
				}) {
					t.Errorf("allowed %v does not follow the Enforce rules", d.Allowed)
				}
			})
		}
	}
}

// convertPSA converts the namespaces' labels (with the admission
// configuration, when given), requires every one translated, and compiles
// the output; the evaluator is upstream's, to decide the same pods with.
func convertPSA(t *testing.T, nss []Namespace, cfg *PSAConfig, res *Result) (compiled, policy.Evaluator) {
	t.Helper()
	res = PSALabels(nss, cfg, res)
	if res.Untranslated() {
		t.Fatalf("notes: %v", res.Notes)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return compileResult(t, res), evaluator
}

func (ns Namespace) hasLabel(k string) bool {
	_, ok := ns.Namespace.Labels[k]
	return ok
}

// TestPSALabelsPolicies pins the shape of the output: one policy per mode
// and level, one rule per version label value.
func TestPSALabelsPolicies(t *testing.T) {
	res := &Result{}
	nss, err := Namespaces(readTestdata(t, "testdata/psa/namespaces.yaml"), res)
	if err != nil {
		t.Fatal(err)
	}
	res = PSALabels(nss, nil, res)
	var got []string
	for _, o := range res.Objects {
		sp := o.Object.(*policyv1alpha1.SecurityPolicy)
		for _, r := range sp.Spec.Rules {
			got = append(got, sp.Name+"/"+r.Name+"="+string(sp.Spec.Action)+":"+string(r.PodSecurity.Level)+":"+r.PodSecurity.Version)
		}
	}
	want := []string{
		"psa-enforce-baseline/latest=Enforce:baseline:latest",
		"psa-enforce-baseline/v1-30=Enforce:baseline:v1.30",
		"psa-enforce-restricted/latest-labelled=Enforce:restricted:latest",
		"psa-enforce-restricted/v1-24=Enforce:restricted:v1.24",
		"psa-audit-baseline/latest=Audit:baseline:latest",
		"psa-audit-restricted/v1-30=Audit:restricted:v1.30",
		"psa-warn-baseline/latest=Warn:baseline:latest",
		"psa-warn-restricted/latest=Warn:restricted:latest",
		"psa-warn-restricted/v1-24=Warn:restricted:v1.24",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules\n%v\nwant\n%v", got, want)
	}
}

// TestPSAConfigDecidesAsUpstream converts namespace labels with the API
// server's Pod Security Admission configuration and checks, for each
// namespace, pod, runtime class and requester, that the converted policies
// refuse exactly what Pod Security Admission's enforce mode refuses: its
// defaults for namespaces without labels (and for a level label without a
// version), and its exemptions by namespace, runtime class and user.
func TestPSAConfigDecidesAsUpstream(t *testing.T) {
	docs := readTestdata(t, "testdata/psa/admission-config.yaml")
	res := &Result{}
	nss, err := Namespaces(docs, res)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := PSAConfigs(docs)
	if err != nil || cfg == nil {
		t.Fatalf("config %v, %v", cfg, err)
	}
	c, evaluator := convertPSA(t, nss, cfg, res)
	defaults, err := psaapi.ToPolicy(cfg.Config.Defaults)
	if err != nil {
		t.Fatal(err)
	}
	exempt := cfg.Config.Exemptions
	runtimeClass := func(name string) podOpt { return func(p *corev1.Pod) { p.Spec.RuntimeClassName = &name } }
	pods := []struct {
		name string
		opts []podOpt
	}{
		{"plain", nil},
		{"restricted", []podOpt{restrictedPod}},
		{"host-network", []podOpt{hostNetwork}},
		{"host-network-gvisor", []podOpt{hostNetwork, runtimeClass("gvisor")}},
		{"host-network-kata", []podOpt{hostNetwork, runtimeClass("kata")}},
		// A probe with a host fails baseline from v1.34 only: the
		// configured default version (v1.30) and a labelled latest differ.
		{"probe-host", []podOpt{func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}}
		}}},
	}
	for _, ns := range nss {
		for _, pt := range pods {
			for _, user := range []string{"alice", "system:serviceaccount:ci:image-builder", ""} {
				t.Run(ns.Namespace.Name+"/"+pt.name+"/"+user, func(t *testing.T) {
					p := pod(ns.Namespace.Name, pt.name, pt.opts...)
					upstream, _ := api.PolicyToEvaluate(ns.Namespace.Labels, defaults)
					refused := !policy.AggregateCheckResults(evaluator.EvaluatePod(upstream.Enforce, &p.ObjectMeta, &p.Spec)).Allowed
					if slices.Contains(exempt.Namespaces, ns.Namespace.Name) ||
						(p.Spec.RuntimeClassName != nil && slices.Contains(exempt.RuntimeClasses, *p.Spec.RuntimeClassName)) ||
						slices.Contains(exempt.Usernames, user) {
						refused = false
					}
					d := c.decideAs(t, p, ns.Namespace.Labels, user)
					if d.Allowed == refused {
						t.Errorf("podsieve allowed %v, Pod Security Admission refuses %v (%s); failing %v", d.Allowed, refused, upstream.Enforce, failing(d))
					}
				})
			}
		}
	}
}
