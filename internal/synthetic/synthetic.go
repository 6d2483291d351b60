// Package synthetic builds clusters of the size podsieve's scale targets
// name, for the index benchmarks and the admission load test: policies that
// select namespaces by a team label, exceptions spread evenly over
// namespaces, and the pods that exercise them.
package synthetic

import (
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// ClusterNamespace is the cluster exceptions namespace of synthetic clusters.
const ClusterNamespace = "podsieve-system"

// Cluster is the API objects of a synthetic cluster.
type Cluster struct {
	Policies   []*policyv1alpha1.SecurityPolicy
	Exceptions []*policyv1alpha1.PolicyException
	Namespaces map[string]map[string]string
}

// New makes a cluster: policy-i enforces baseline on namespaces labelled
// team=team-i; ns-j is labelled team-(j mod policies); exception exc-k lives
// in ns-(k mod namespaces), targets that namespace's policy, matches pods
// named app-k-*, and waives NET_ADMIN and NET_RAW for init containers named
// istio-init.
func New(policies, exceptions, namespaces int) *Cluster {
	c := &Cluster{Namespaces: make(map[string]map[string]string, namespaces)}
	for i := range policies {
		c.Policies = append(c.Policies, &policyv1alpha1.SecurityPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-%d", i)},
			Spec: policyv1alpha1.SecurityPolicySpec{
				Action: policyv1alpha1.ActionEnforce,
				// A policy honours exceptions only when it opts in.
				Exceptions: &policyv1alpha1.ExceptionGuardrails{AllowedControls: []policyv1alpha1.ControlName{policyv1alpha1.ControlCapabilities}},
				Rules: []policyv1alpha1.PolicyRule{{
					Name:        "baseline",
					Match:       &policyv1alpha1.ResourceFilter{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("team-%d", i)}}},
					PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest"},
				}},
			},
		})
	}
	for i := range namespaces {
		ns := Namespace(i)
		c.Namespaces[ns] = map[string]string{"kubernetes.io/metadata.name": ns, "team": fmt.Sprintf("team-%d", i%max(policies, 1))}
	}
	for i := range exceptions {
		c.Exceptions = append(c.Exceptions, &policyv1alpha1.PolicyException{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace(i % namespaces), Name: fmt.Sprintf("exc-%d", i)},
			Spec: policyv1alpha1.PolicyExceptionSpec{
				Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: fmt.Sprintf("policy-%d", (i%namespaces)%max(policies, 1)), RuleNames: []string{"baseline"}}},
				Match:      &policyv1alpha1.ExceptionMatch{Names: []string{fmt.Sprintf("app-%d-*", i)}},
				PodSecurity: []policyv1alpha1.PodSecurityExclusion{{
					ControlName:     policyv1alpha1.ControlCapabilities,
					ContainerNames:  []string{"istio-init"},
					RestrictedField: "spec.initContainers[*].securityContext.capabilities.add",
					Values:          []string{"NET_ADMIN", "NET_RAW"},
				}},
			},
		})
	}
	return c
}

// Namespace is the name of the i-th namespace.
func Namespace(i int) string { return fmt.Sprintf("ns-%d", i) }

// Index compiles every object and loads an index, as the manager does at
// start and podsieve eval does from its files.
func (c *Cluster) Index() (*index.Index, error) {
	var policies []*engine.Policy
	for _, sp := range c.Policies {
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			return nil, err
		}
		policies = append(policies, p)
	}
	excs := make([]*engine.Exception, 0, len(c.Exceptions))
	for _, pe := range c.Exceptions {
		e, err := engine.CompileException(pe, ClusterNamespace)
		if err != nil {
			return nil, err
		}
		excs = append(excs, e)
	}
	ix := index.New(ClusterNamespace)
	ix.Load(policies, excs, nil, c.Namespaces)
	ix.MarkReady()
	return ix, nil
}

// Pod kinds the load test mixes.
const (
	// Clean passes baseline.
	Clean = "clean"
	// Refused adds NET_ADMIN to its app container.
	Refused = "refused"
	// Exempted is Istio-shaped: its istio-init adds NET_ADMIN and NET_RAW,
	// which exception exc-k waives for pods named app-k-*.
	Exempted = "exempted"
)

// Pod returns a pod of the given kind in the namespace of exception k, named
// so that exception k matches it.
func (c *Cluster) Pod(kind string, k int) *corev1.Pod {
	ns := Namespace(k % len(c.Namespaces))
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d-%s", k, kind), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}},
	}
	switch kind {
	case Refused:
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	case Exempted:
		pod.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}}
	}
	return pod
}

// Review is one pod of the load test's mix and the answer it must get.
type Review struct {
	Kind    string
	Pod     *corev1.Pod
	Allowed bool
}

// Reviews is the rotating mix hack/loadtest sends and BenchmarkPodAdmission
// decides: for 300 exceptions k spread over the cluster's exceptions
// (exceptions of them; none when 0), a clean pod, a refused one and an
// exempted one in exception k's namespace.
func (c *Cluster) Reviews(exceptions int) []Review {
	var out []Review
	for i := range 300 {
		k := (i * 7919) % max(exceptions, 1)
		for _, kind := range []string{Clean, Refused, Exempted} {
			out = append(out, Review{Kind: kind, Pod: c.Pod(kind, k), Allowed: kind == Clean || kind == Exempted && exceptions > 0})
		}
	}
	return out
}

// Request is the review's AdmissionRequest as the API server sends it for
// a pod create, numbered i in its UID.
func (r Review) Request(i int) (*admissionv1.AdmissionRequest, error) {
	raw, err := json.Marshal(r.Pod)
	if err != nil {
		return nil, err
	}
	return &admissionv1.AdmissionRequest{
		UID:       types.UID(fmt.Sprintf("%s-%d", r.Kind, i)),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: r.Pod.Namespace, Name: r.Pod.Name,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}, nil
}

// CrowdedNamespace is the namespace of Crowded's exceptions.
const CrowdedNamespace = "crowded"

// Crowded makes a cluster of one policy (policy-0, baseline on every
// namespace, opted in to exceptions for Capabilities) and n exceptions in
// namespace CrowdedNamespace, as a namespace editor could create them: exc-i
// matches pods named app-i (one in three), app-i-* (one in three), or
// app-i of kind Deployment, and waives NET_ADMIN for containers named app.
func Crowded(n int) *Cluster {
	c := &Cluster{Namespaces: map[string]map[string]string{
		CrowdedNamespace: {"kubernetes.io/metadata.name": CrowdedNamespace},
	}}
	c.Policies = []*policyv1alpha1.SecurityPolicy{{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-0"},
		Spec: policyv1alpha1.SecurityPolicySpec{
			Action:     policyv1alpha1.ActionEnforce,
			Exceptions: &policyv1alpha1.ExceptionGuardrails{AllowedControls: []policyv1alpha1.ControlName{policyv1alpha1.ControlCapabilities}},
			Rules: []policyv1alpha1.PolicyRule{{
				Name:        "baseline",
				PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest"},
			}},
		},
	}}
	for i := range n {
		m := &policyv1alpha1.ExceptionMatch{Names: []string{fmt.Sprintf("app-%d", i)}}
		switch i % 3 {
		case 1:
			m.Names = []string{fmt.Sprintf("app-%d-*", i)}
		case 2:
			m.Kinds = []policyv1alpha1.PodBearingKind{"Deployment"}
		}
		c.Exceptions = append(c.Exceptions, &policyv1alpha1.PolicyException{
			ObjectMeta: metav1.ObjectMeta{Namespace: CrowdedNamespace, Name: fmt.Sprintf("exc-%d", i)},
			Spec: policyv1alpha1.PolicyExceptionSpec{
				Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "policy-0", RuleNames: []string{"baseline"}}},
				Match:      m,
				PodSecurity: []policyv1alpha1.PodSecurityExclusion{{
					ControlName:     policyv1alpha1.ControlCapabilities,
					ContainerNames:  []string{"app"},
					RestrictedField: "spec.containers[*].securityContext.capabilities.add",
					Values:          []string{"NET_ADMIN"},
				}},
			},
		})
	}
	return c
}

// MaximalException is the largest PolicyException the schema admits, every
// string distinct (i is in each) so that nothing is shared between two of
// them: 16 podSecurity entries holding 16 image globs of 256 bytes, 64
// values of 256 bytes and 32 containerNames of 63 bytes in all; 16
// match.names of 253 bytes; 8 targets of 8 ruleNames of 63 bytes; a
// justification of 1,024 bytes. Every glob has wildcards, which cost the
// most compiled. It compiles; it names policies that do not exist.
func MaximalException(i int) *policyv1alpha1.PolicyException {
	// fill pads s with c to n bytes, keeping its last byte.
	fill := func(s string, c byte, n int) string {
		return s[:len(s)-1] + strings.Repeat(string(c), n-len(s)) + s[len(s)-1:]
	}
	pe := &policyv1alpha1.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i), Name: fill(fmt.Sprintf("exc-%d-x", i), 'x', 253)},
		Spec: policyv1alpha1.PolicyExceptionSpec{
			Match:         &policyv1alpha1.ExceptionMatch{Kinds: []policyv1alpha1.PodBearingKind{"Pod", "Deployment"}},
			Justification: fill(fmt.Sprintf("exception %d: .", i), 'j', 1024),
		},
	}
	for t := range 8 {
		target := policyv1alpha1.ExceptionTarget{PolicyName: fill(fmt.Sprintf("policy-%d-%d-p", i, t), 'p', 253)}
		for r := range 8 {
			target.RuleNames = append(target.RuleNames, fill(fmt.Sprintf("rule-%d-%d-%d-*", i, t, r), 'r', 63))
		}
		pe.Spec.Exceptions = append(pe.Spec.Exceptions, target)
	}
	for n := range 16 {
		pe.Spec.Match.Names = append(pe.Spec.Match.Names, fill(fmt.Sprintf("app-%d-%d-*", i, n), 'n', 253))
	}
	for x := range 16 {
		ps := policyv1alpha1.PodSecurityExclusion{
			ControlName:     policyv1alpha1.ControlCapabilities,
			RestrictedField: "spec.containers[*].securityContext.capabilities.add",
		}
		ps.Images = append(ps.Images, fill(fmt.Sprintf("registry-%d-%d.example/team/app:*", i, x), 'i', 256))
		for j := range 2 {
			ps.ContainerNames = append(ps.ContainerNames, fill(fmt.Sprintf("c-%d-%d-%d-*", i, x, j), 'c', 63))
		}
		for j := range 4 {
			ps.Values = append(ps.Values, fill(fmt.Sprintf("CAP_%d_%d_%d_*", i, x, j), 'V', 256))
		}
		pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, ps)
	}
	return pe
}
