package admissionpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/samples"
)

// meshPod is a pod with an Istio-like init container (or, app, the same
// container among the app's), from the image.
func meshPod(name, image string, app, nativeSidecar bool) *corev1.Pod {
	restricted := func(c corev1.Container) corev1.Container {
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		return c
	}
	mesh := corev1.Container{Name: "istio-init", Image: image, SecurityContext: &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsNonRoot:             ptr.To(false),
		RunAsUser:                ptr.To[int64](0),
		Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}}
	if nativeSidecar {
		mesh.Name = "istio-proxy"
		mesh.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{restricted(corev1.Container{Name: "app", Image: "registry.example/web:1.0"})},
		},
	}
	if app {
		pod.Spec.Containers = append(pod.Spec.Containers, mesh)
	} else {
		pod.Spec.InitContainers = []corev1.Container{mesh}
	}
	return pod
}

// TestAPIServerDecidesSamplesAsTheEngine: the config/samples policies and
// exceptions, compiled with their parameters and applied to a real API
// server, decide mesh-like pods in the samples' namespaces as the engine
// and the in-process CEL do; once as shipped (restricted-workloads audits,
// which a dry run cannot observe), once with restricted-workloads enforced,
// so that its exception for istio-init decides.
func TestAPIServerDecidesSamplesAsTheEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shipped, pes := samples.Read(t)
	// The samples carry no date; the time-boxed one is given the expiry its
	// comment says to set (the baseline policy requires one), so that its
	// Host Ports waiver is in force and decided here too.
	for _, pe := range pes {
		if pe.Spec.ExpiresAt == nil && pe.Name == "node-debug-hostport" {
			pe.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(14 * 24 * time.Hour).Truncate(time.Second)}
		}
	}
	s := startAPIServer(ctx, t)

	// staging holds the samples' exceptions and is restricted; team-a is
	// neither. kube-system, which no policy decides, gives the defaults.
	nsLabels := map[string]map[string]string{
		"staging": {"security.podsieve.dev/profile": "restricted"},
		"team-a":  nil,
	}
	for ns, labels := range nsLabels {
		if err := s.namespace(ctx, ns, labels); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.namespace(ctx, "kube-system", nil); err != nil {
		t.Fatal(err)
	}

	const istio = "docker.io/istio/proxyv2:1.24.0"
	pods := []*corev1.Pod{
		meshPod("web-7d4b9c-x2x9q", istio, false, false),
		meshPod("web", istio, false, false),
		meshPod("api-5f6d7-abcde", istio, false, false),
		meshPod("web-7d4b9c-app", istio, true, false),
		meshPod("web-7d4b9c-attacker", "registry.attacker.example/istio/proxyv2:1.24.0", false, false),
		meshPod("web-7d4b9c-sidecar", istio, false, true),
		meshPod("web-7d4b9c-gcr", "gcr.io/istio-release/proxyv2:1.24.0", false, false),
	}
	nodeDebug := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node-debug"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "debug", Image: "quay.io/prometheus/node-exporter:v1.8.2",
			Ports: []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}}}},
	}
	pods = append(pods, nodeDebug)

	enforced := make([]*policyv1alpha1.SecurityPolicy, len(shipped))
	for i, sp := range shipped {
		enforced[i] = sp.DeepCopy()
		if sp.Name == "restricted-workloads" {
			enforced[i].Spec.Action = policyv1alpha1.ActionEnforce
		}
	}

	paramsWritten := false
	for _, variant := range []struct {
		name string
		sps  []*policyv1alpha1.SecurityPolicy
	}{{"as shipped", shipped}, {"restricted-workloads enforced", enforced}} {
		labels := map[string]map[string]string{}
		for ns, l := range nsLabels {
			labels[ns] = map[string]string{}
			for k, v := range l {
				labels[ns][k] = v
			}
		}
		w := newWorld(t, variant.sps, pes, labels)

		// What newWorld gives the in-process library, for the server.
		if err := s.c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
			t.Fatal(err)
		}
		if err := s.c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{}, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
			t.Fatal(err)
		}
		byName := map[string]*engine.Policy{}
		for i, sp := range variant.sps {
			byName[sp.Name] = w.policies[i]
			c, err := CompilePolicy(sp, w.policies[i], testOptions)
			if err != nil {
				t.Fatalf("compile %s: %v", sp.Name, err)
			}
			if err := s.apply(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if !paramsWritten {
			// The exceptions in force do not depend on the policies' action.
			policy := func(name string) *engine.Policy { return byName[name] }
			for ns := range nsLabels {
				var here []*ParamException
				for _, pe := range pes {
					e, err := engine.CompileException(pe, clusterNS)
					if err != nil {
						t.Fatal(err)
					}
					if !e.State(policy, time.Now()).Ready || !e.ReachesNamespace(ns, labels[ns]) {
						continue
					}
					px, err := CompileException(pe, e, policy)
					if err != nil {
						t.Fatal(err)
					}
					here = append(here, px)
				}
				params, err := paramsUnstructured(ns, here)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.params(ctx, params); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d exceptions in force", ns, len(here))
				if ns == "staging" && len(here) != len(pes) {
					t.Fatalf("%d of the %d sample exceptions are in force in staging; every one must be, for its waiver to be decided", len(here), len(pes))
				}
			}
			paramsWritten = true
		}
		deadline := time.Now().Add(60 * time.Second)
		s.awaitEnforced(ctx, t, privilegedPod("probe"), "team-a", "pod-security-standards", "pod-security-standards", time.Until(deadline))
		if byName["restricted-workloads"].Action == policyv1alpha1.ActionEnforce {
			// A pod baseline admits and restricted refuses.
			probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause"}}}}
			s.awaitEnforced(ctx, t, probe, "staging", "restricted-workloads", "restricted-workloads", time.Until(deadline))
		}

		outcomes := map[bool]int{}
		for _, ns := range []string{"staging", "team-a"} {
			for _, pod := range pods {
				var refusedBy []string
				got, err := s.dryRun(ctx, pod, ns)
				if err != nil {
					for _, sp := range variant.sps {
						if denied, msg := vapDenial(err, PolicyName(sp.Name)); denied {
							refusedBy = append(refusedBy, sp.Name)
							if !strings.Contains(msg, fmt.Sprintf("is refused by SecurityPolicy %q rule", sp.Name)) {
								t.Errorf("%s: %s/%s: the denial does not name the policy and rule: %s", variant.name, ns, pod.Name, msg)
							}
						}
					}
					if len(refusedBy) == 0 {
						t.Errorf("%s: %s/%s: refused by the server, not by a policy: %v", variant.name, ns, pod.Name, err)
						continue
					}
					if got, err = s.dryRun(ctx, pod, "kube-system"); err != nil {
						t.Errorf("%s: %s/%s: refused by the server where no policy applies: %v", variant.name, ns, pod.Name, err)
						continue
					}
					got.Namespace = ns
				}
				o, err := engine.NewAdmissionObject(got)
				if err != nil {
					t.Fatal(err)
				}
				want := w.engineVerdict(o)
				cel, _ := w.celVerdict(t, got, podsGVR, ns)
				serverAllowed := len(refusedBy) == 0
				outcomes[serverAllowed]++
				t.Logf("%s: %s/%s: engine %v; in-process CEL %v; API server allowed=%v refusedBy=%v", variant.name, ns, pod.Name, want, cel, serverAllowed, refusedBy)
				if want.allowed != serverAllowed || cel.allowed != serverAllowed {
					t.Errorf("%s: %s/%s: engine %v, in-process CEL %v, API server allowed=%v (refused by %v)", variant.name, ns, pod.Name, want, cel, serverAllowed, refusedBy)
				}
			}
		}
		if outcomes[true] == 0 || outcomes[false] == 0 {
			t.Errorf("%s: the pods must give both outcomes: %d allowed, %d refused", variant.name, outcomes[true], outcomes[false])
		}
	}
	s.warnings.report(t)
}
