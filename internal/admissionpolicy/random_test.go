package admissionpolicy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// Random worlds: policies with exclusions, exceptions and pods drawn from
// pools that meet at the edges (globs, image spellings, container kinds,
// missing settings, the hostPath part of Volume Types), decided by the
// engine and by the compiled CEL. TestRandomDecideAsTheEngine runs a fixed
// number of seeds; FuzzDecideAsTheEngine explores more.

var (
	randImages = []string{
		"docker.io/istio/proxyv2:1.24.0", "istio/proxyv2:1.24.0", "gcr.io/istio-release/proxyv2:1.24.0",
		"registry.attacker.example/istio/proxyv2:1", "docker.io/gcr.io/istio-release/proxyv2:1",
		"nginx", "nginx:1.25", "library/nginx", "index.docker.io/library/nginx:1.25",
		"docker.io/library/nginx@sha256:" + strings.Repeat("a1", 32), "nginx:1.25@sha256:" + strings.Repeat("0f", 32),
		"nginx@sha512:" + strings.Repeat("ab", 64), "nginx@md5:" + strings.Repeat("ab", 16),
		"localhost/app:1", "localhost:5000/team/app", "Foo/bar", "UPPER", "cr.l5d.io/linkerd/proxy-init:v2",
		"quay.io/prometheus/node-exporter:v1.8.0", "", strings.Repeat("ab", 32), "docker.io/localhost/x",
		"[::1]:5000/app:1", "registry.io/team-evil/app", strings.Repeat("a", 600),
		"docker.io/" + strings.Repeat("b", 250) + "/x",
	}
	randNames  = []string{"istio-init", "istio-proxy", "app", "linkerd-init", "metrics", "kuma-init"}
	randCaps   = []corev1.Capability{"NET_ADMIN", "NET_RAW", "SYS_ADMIN", "CHOWN", "NET_BIND_SERVICE", "ALL"}
	randPaths  = []string{"/var/log", "/var/log/pods", "/etc", "/"}
	randGlobs  = []string{"*", "**", "NET_*", "NET_ADMIN", "NET_RAW", "SYS_*", "0", "true", "false", "", "/var/**", "/var/*", "/etc", "80", "9100", "?0", "Unconfined", "unconfined", "data", "host", "kernel.*", "net.**"}
	randImageG = []string{"docker.io/istio/proxyv2", "gcr.io/istio-release/proxyv2", "istio/proxyv2*", "*/istio/proxyv2*", "**/proxyv2:*",
		"nginx", "nginx*", "docker.io/library/nginx:*", "*", "**", "localhost/**", "quay.io/prometheus/**", "docker.io/gcr.io/**", "registry.io/team*",
		"registry.io/team*/**", "**@sha256:*", ""}
	randNameG = []string{"istio-init", "istio-*", "*", "app", "?pp", "metrics", "linkerd-init"}
)

type gen struct{ r *rand.Rand }

func (g gen) chance(n int) bool { return g.r.IntN(n) == 0 }
func (g gen) pick(ss []string) string {
	return ss[g.r.IntN(len(ss))]
}

func (g gen) some(ss []string, max int) []string {
	n := 1 + g.r.IntN(max)
	out := make([]string, 0, n)
	for range n {
		if s := g.pick(ss); s != "" || g.chance(4) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = append(out, ss[0])
	}
	return out
}

func (g gen) container() corev1.Container {
	c := corev1.Container{Name: g.pick(randNames), Image: g.pick(randImages)}
	sc := &corev1.SecurityContext{}
	if g.chance(2) {
		caps := &corev1.Capabilities{}
		for range g.r.IntN(3) {
			caps.Add = append(caps.Add, randCaps[g.r.IntN(len(randCaps))])
		}
		if g.chance(2) {
			caps.Drop = []corev1.Capability{"ALL"}
		}
		sc.Capabilities = caps
	}
	switch g.r.IntN(3) {
	case 0:
		sc.RunAsUser = ptr.To[int64](0)
	case 1:
		sc.RunAsUser = ptr.To[int64](1000)
	}
	switch g.r.IntN(3) {
	case 0:
		sc.RunAsNonRoot = ptr.To(true)
	case 1:
		sc.RunAsNonRoot = ptr.To(false)
	}
	if g.chance(5) {
		sc.Privileged = ptr.To(g.chance(2))
	}
	if g.chance(2) {
		sc.AllowPrivilegeEscalation = ptr.To(g.chance(3))
	}
	if g.chance(2) {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: []corev1.SeccompProfileType{"RuntimeDefault", "Unconfined", "Localhost", ""}[g.r.IntN(4)]}
	}
	if g.chance(6) {
		sc.ProcMount = ptr.To([]corev1.ProcMountType{"Default", "Unmasked", ""}[g.r.IntN(3)])
	}
	if g.chance(6) {
		sc.SELinuxOptions = &corev1.SELinuxOptions{Type: g.pick([]string{"", "container_t", "spc_t", "container_engine_t"}), User: g.pick([]string{"", "", "root"})}
	}
	if g.chance(6) {
		sc.AppArmorProfile = &corev1.AppArmorProfile{Type: []corev1.AppArmorProfileType{"RuntimeDefault", "Unconfined", ""}[g.r.IntN(3)]}
	}
	if g.chance(6) {
		sc.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(g.chance(2))}
	}
	if !g.chance(5) {
		c.SecurityContext = sc
	}
	for range g.r.IntN(3) {
		p := corev1.ContainerPort{ContainerPort: int32(80 + g.r.IntN(3))}
		if g.chance(2) {
			p.HostPort = []int32{80, 9100, 8080}[g.r.IntN(3)]
		}
		c.Ports = append(c.Ports, p)
	}
	if g.chance(6) {
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: g.pick([]string{"", "10.0.0.1", "host"})}}}
	}
	return c
}

func (g gen) podSpec() (corev1.PodSpec, map[string]string) {
	spec := corev1.PodSpec{HostNetwork: g.chance(5), HostPID: g.chance(8)}
	for range 1 + g.r.IntN(2) {
		spec.Containers = append(spec.Containers, g.container())
	}
	for range g.r.IntN(3) {
		c := g.container()
		if g.chance(3) {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		spec.InitContainers = append(spec.InitContainers, c)
	}
	for i := range g.r.IntN(3) {
		v := corev1.Volume{Name: fmt.Sprintf("v%d", i)}
		switch g.r.IntN(4) {
		case 0:
			v.HostPath = &corev1.HostPathVolumeSource{Path: g.pick(randPaths)}
		case 1:
			v.NFS = &corev1.NFSVolumeSource{Server: "s", Path: "/"}
			v.Name = "data"
		case 2:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		default:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{}
		}
		spec.Volumes = append(spec.Volumes, v)
	}
	psc := &corev1.PodSecurityContext{}
	if g.chance(3) {
		psc.RunAsNonRoot = ptr.To(g.chance(3) || true)
	}
	if g.chance(3) {
		psc.SeccompProfile = &corev1.SeccompProfile{Type: []corev1.SeccompProfileType{"RuntimeDefault", "Unconfined"}[g.r.IntN(2)]}
	}
	if g.chance(5) {
		psc.Sysctls = []corev1.Sysctl{{Name: g.pick([]string{"kernel.shm_rmid_forced", "kernel.msgmax", "net.ipv4.tcp_rmem"})}}
	}
	if g.chance(6) {
		psc.RunAsUser = ptr.To[int64](0)
	}
	if !g.chance(3) {
		spec.SecurityContext = psc
	}
	if g.chance(8) {
		spec.OS = &corev1.PodOS{Name: corev1.Windows}
	}
	if g.chance(8) {
		spec.HostUsers = ptr.To(false)
	}
	if g.chance(8) {
		spec.RuntimeClassName = ptr.To(g.pick([]string{"gvisor", "kata"}))
	}
	var annotations map[string]string
	if g.chance(4) {
		annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/" + g.pick(randNames): g.pick([]string{"unconfined", "runtime/default", "localhost/p"})}
	}
	return spec, annotations
}

// entry is a random exclusion entry; it may not compile, and the caller
// then draws another.
func (g gen) entry() policyv1alpha1.PodSecurityExclusion {
	control := policyv1alpha1.Controls[g.r.IntN(len(policyv1alpha1.Controls))]
	x := policyv1alpha1.PodSecurityExclusion{ControlName: control}
	if !engine.PodLevelOnly(control) {
		if g.chance(2) {
			x.Images = g.some(randImageG, 2)
		}
		if g.chance(2) {
			x.ContainerNames = g.some(randNameG, 2)
		}
		if g.chance(3) {
			x.ContainerKinds = []policyv1alpha1.ContainerKind{policyv1alpha1.ContainerKinds[g.r.IntN(4)]}
		}
	}
	if fields := engine.FieldsOf(control); g.chance(2) && len(fields) > 0 {
		x.RestrictedField = fields[g.r.IntN(len(fields))]
		if g.chance(2) {
			x.Values = g.some(randGlobs, 3)
		}
	}
	return x
}

func (g gen) selector() *metav1.LabelSelector {
	switch g.r.IntN(4) {
	case 0:
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick([]string{"web", "mesh"})}}
	case 1:
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: []metav1.LabelSelectorOperator{"In", "NotIn", "Exists", "DoesNotExist"}[g.r.IntN(4)], Values: []string{"front"}}}}
	}
	return nil
}

func (g gen) policy(name string) *policyv1alpha1.SecurityPolicy {
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
	sp.Spec.Action = []policyv1alpha1.PolicyAction{"Enforce", "Enforce", "Warn", "Audit"}[g.r.IntN(4)]
	for i := range 1 + g.r.IntN(2) {
		r := policyv1alpha1.PolicyRule{Name: fmt.Sprintf("r%d", i)}
		r.PodSecurity.Level = []policyv1alpha1.PodSecurityLevel{"baseline", "restricted", "privileged"}[g.r.IntN(3)%2+g.r.IntN(3)/2]
		r.PodSecurity.Version = g.pick([]string{"latest", "v1.0", "v1.8", "v1.19", "v1.22", "v1.23", "v1.25", "v1.31", "v1.34", "v1.35", "v1.37", "v1.40", ""})
		if g.chance(3) {
			r.Match = &policyv1alpha1.ResourceFilter{Namespaces: g.some([]string{"apps", "app*", "*", "other"}, 2), Selector: g.selector()}
		}
		if g.chance(3) {
			r.Exclude = &policyv1alpha1.ResourceFilter{}
			switch g.r.IntN(4) {
			case 0:
				r.Exclude.Usernames = []string{requestUser}
			case 1:
				r.Exclude.RuntimeClassNames = []string{"gvisor"}
			case 2:
				r.Exclude.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
			default:
				r.Exclude.Selector = g.selector()
			}
		}
		for range g.r.IntN(4) {
			r.PodSecurity.Exclude = append(r.PodSecurity.Exclude, g.entry())
		}
		sp.Spec.Rules = append(sp.Spec.Rules, r)
	}
	if !g.chance(4) {
		sp.Spec.Exceptions = &policyv1alpha1.ExceptionGuardrails{}
		if g.chance(3) {
			// Guardrails that refuse some exceptions, which then must
			// waive nothing.
			sp.Spec.Exceptions.AllowedControls = []policyv1alpha1.ControlName{policyv1alpha1.Controls[g.r.IntN(len(policyv1alpha1.Controls))]}
		}
	}
	return sp
}

func (g gen) exception(name string, policies []*policyv1alpha1.SecurityPolicy) *policyv1alpha1.PolicyException {
	ns := "apps"
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Now()}}
	p := policies[g.r.IntN(len(policies))]
	pe.Spec.Exceptions = []policyv1alpha1.ExceptionTarget{{PolicyName: p.Name, RuleNames: []string{g.pick([]string{"*", "r0", "r1", "r?"})}}}
	if g.chance(4) {
		pe.Namespace = clusterNS
		pe.Spec.Match = &policyv1alpha1.ExceptionMatch{Namespaces: []string{g.pick([]string{"apps", "a*", "other"})}}
	}
	if g.chance(3) {
		if pe.Spec.Match == nil {
			pe.Spec.Match = &policyv1alpha1.ExceptionMatch{}
		}
		pe.Spec.Match.Names = []string{g.pick([]string{"web", "web-*", "*", "other"})}
		if g.chance(2) {
			pe.Spec.Match.Kinds = []policyv1alpha1.PodBearingKind{[]policyv1alpha1.PodBearingKind{"Pod", "Deployment"}[g.r.IntN(2)]}
		}
		pe.Spec.Match.Selector = g.selector()
	}
	if !g.chance(5) {
		for range 1 + g.r.IntN(3) {
			pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, g.entry())
		}
	}
	if g.chance(6) {
		pe.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(-time.Hour)}
	}
	return pe
}

// compiles reports whether the engine compiles the policy, so that a
// random world holds only what a cluster would.
func compiles(sp *policyv1alpha1.SecurityPolicy) bool {
	_, err := engine.CompilePolicy(sp)
	return err == nil
}

// randomWorld draws policies that compile and exceptions that compile.
func randomWorld(tb testing.TB, seed uint64) (*world, []runtime.Object) {
	g := gen{rand.New(rand.NewPCG(seed, seed^0x5eed))}
	var sps []*policyv1alpha1.SecurityPolicy
	for i := range 1 + g.r.IntN(2) {
		for range 20 {
			sp := g.policy(fmt.Sprintf("p%d", i))
			if compiles(sp) {
				sps = append(sps, sp)
				break
			}
		}
	}
	if len(sps) == 0 {
		return nil, nil
	}
	var pes []*policyv1alpha1.PolicyException
	for i := range g.r.IntN(4) {
		for range 20 {
			pe := g.exception(fmt.Sprintf("e%d", i), sps)
			if _, err := engine.CompileException(pe, clusterNS); err == nil {
				pes = append(pes, pe)
				break
			}
		}
	}
	w := newWorld(tb, sps, pes, map[string]map[string]string{"apps": {"team": g.pick([]string{"a", "b"})}})
	var objs []runtime.Object
	for i := range 6 {
		spec, annotations := g.podSpec()
		labels := map[string]string{"app": g.pick([]string{"web", "mesh"})}
		if g.chance(2) {
			labels["tier"] = "front"
		}
		name := g.pick([]string{"web", "web-1", "other"}) + fmt.Sprint(i)
		meta := metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}
		if g.chance(3) {
			d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"}}
			d.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: meta, Spec: spec}
			objs = append(objs, d)
			continue
		}
		meta.Namespace = "apps"
		objs = append(objs, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta, Spec: spec})
	}
	return w, objs
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// decideBoth decides every object of a random world both ways and returns
// the disagreements.
func decideBoth(tb testing.TB, seed uint64) (decided, waived int, disagreements []string) {
	w, objs := randomWorld(tb, seed)
	if w == nil {
		return 0, 0, nil
	}
	for _, obj := range objs {
		gvr := podsGVR
		if _, ok := obj.(*appsv1.Deployment); ok {
			gvr = deploymentsGVR
		}
		o, err := engine.NewAdmissionObject(obj)
		if err != nil {
			tb.Fatal(err)
		}
		o.RequestUser = requestUser
		want := w.engineVerdict(o)
		got, res := w.celVerdict(tb, obj, gvr, "apps")
		slices.Sort(want.failing)
		if got.allowed != want.allowed || !slices.Equal(got.failing, want.failing) || len(res.Errors) > 0 {
			disagreements = append(disagreements, fmt.Sprintf("seed %d, %s %s: engine %v, CEL %v; denials %q warnings %q errors %v",
				seed, o.Kind, o.Name, want, got, res.Denials, res.Warnings, res.Errors))
		}
		decided++
		d := engine.DecideWithin(engine.Limits{}, w.policies, engine.AllExceptions(w.exceptions), o, w.nsLabels[o.Namespace], time.Now(), engine.Admission)
		for _, r := range d.Results {
			if slices.ContainsFunc(r.Findings, func(f engine.Finding) bool { return f.Covered() }) || r.Outcome == engine.Skip {
				waived++
				break
			}
		}
	}
	return decided, waived, disagreements
}

func TestRandomDecideAsTheEngine(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 20
	}
	start := time.Now()
	total, waived, failed := 0, 0, 0
	for seed := range uint64(seeds) {
		n, w, bad := decideBoth(t, seed)
		total += n
		waived += w
		for _, d := range bad {
			failed++
			if failed <= 20 {
				t.Error(d)
			}
		}
	}
	t.Logf("%d objects in %d random worlds decided both ways in %s, %d of them with something waived; %d disagreements",
		total, seeds, time.Since(start).Round(time.Millisecond), waived, failed)
	if total < seeds*3 || waived < total/20 {
		t.Errorf("%d objects decided, %d with something waived: the generator draws too few worlds that compile or waive", total, waived)
	}
}

func FuzzDecideAsTheEngine(f *testing.F) {
	for _, seed := range []uint64{1, 7, 42, 1000, 65537} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		_, _, bad := decideBoth(t, seed)
		for _, d := range bad {
			t.Error(d)
		}
	})
}
