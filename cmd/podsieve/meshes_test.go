package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// meshSamples is config/samples/meshes: ready policies for Istio, Linkerd
// and Kuma. testdata/meshes holds each mesh's own injector and installer
// output (sources in testdata/meshes/README.md).
const meshSamples = "../../config/samples/meshes"

// meshFixture is one mesh's real output, with the test images its golden
// uses replaced by the release images users pull.
type meshFixture struct {
	file   string
	images map[string]string // golden image -> release image
	// rootInit is true when an injected init container runs as root, so the
	// hardened pod cannot set runAsNonRoot: true for the whole pod (the
	// kubelet would refuse to start that container).
	rootInit bool
}

var (
	// Only the registry and repository change: the tags stay the goldens'.
	// Linkerd's goldens already name its release registry.
	istioSidecar = meshFixture{file: "istio-sidecar.yaml", images: map[string]string{
		"registry.istio.io/testing/proxyv2:latest": "docker.io/istio/proxyv2:latest",
	}}
	istioCNI = meshFixture{file: "istio-cni.yaml", images: map[string]string{
		"registry.istio.io/testing/proxyv2:latest": "gcr.io/istio-release/proxyv2:latest",
	}}
	istioCNINode = meshFixture{file: "istio-cni-node.yaml", images: map[string]string{
		"registry.istio.io/testing/install-cni:latest": "docker.io/istio/install-cni:latest",
	}}
	linkerd        = meshFixture{file: "linkerd.yaml"}
	linkerdCNI     = meshFixture{file: "linkerd-cni.yaml"}
	linkerdCNINode = meshFixture{file: "linkerd-cni-node.yaml"}
	kuma           = meshFixture{file: "kuma.yaml", rootInit: true, images: map[string]string{
		"kuma/kuma-init:latest":    "docker.io/kumahq/kuma-init:latest",
		"kuma/kuma-sidecar:latest": "docker.io/kumahq/kuma-dp:latest",
	}}
)

// refusal is a mutation that the samples must refuse, in namespace ns
// when set, with extra documents (a PolicyException) added to the input.
type refusal struct {
	name   string
	mutate meshMutation
	ns     string
	extra  string
	// message is what the refusal must say, when set.
	message string
}

// TestMeshSamples: each sample of config/samples/meshes admits its mesh's
// real injector output (at restricted, with the app's own containers
// hardened as restricted asks of them, and the pod-level seccomp profile
// the samples tell users to set), also in the older layout with the proxy
// among the app containers, and refuses the same object when an injected
// container's image comes from another registry, when an app container or
// the proxy asks for the init container's privileges, when the init
// container becomes a native sidecar, or when it asks for one more value.
// The CNI node agents are admitted in their own namespace only, under their
// own names, by the cluster exceptions only.
func TestMeshSamples(t *testing.T) {
	initRefusals := func(init, proxy string) []refusal {
		return []refusal{
			{name: init + " from another registry", mutate: otherRegistry(init)},
			{name: init + " from another repository of the registry", mutate: otherRepository(init)},
			{name: "app container asks for " + init + "'s privileges", mutate: appAsks(init, false)},
			{name: "app container runs " + init + "'s image with its privileges", mutate: appAsks(init, true)},
			{name: init + " as a native sidecar", mutate: asSidecar(init)},
			{name: proxy + " asks for " + init + "'s privileges", mutate: copyContext(init, proxy)},
			{name: init + " asks for one more capability", mutate: adds(init, "SYS_ADMIN")},
		}
	}
	restricted := func(rs []refusal) []refusal {
		return append(rs, refusal{name: "no pod-level seccomp profile", mutate: noPodSeccomp})
	}
	// sampleException is the first PolicyException of a sample, changed:
	// the node agent's cluster exception, all of its entries.
	sampleException := func(file string, change func(m map[string]any)) string {
		data, err := os.ReadFile(filepath.Join(meshSamples, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			if m["kind"] != "PolicyException" {
				continue
			}
			change(m)
			out, err := yaml.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}
		t.Fatalf("%s has no PolicyException", file)
		return ""
	}
	// localException is it written in the mesh's namespace by an editor
	// there, for every object of that namespace.
	localException := func(file, ns string) string {
		return sampleException(file, func(m map[string]any) {
			m["metadata"] = map[string]any{"name": "local", "namespace": ns}
			delete(m["spec"].(map[string]any), "match")
		})
	}
	// reaching is it reaching a workload namespace, where the node policy
	// does not apply.
	reaching := func(file, ns string) string {
		return sampleException(file, func(m map[string]any) {
			m["metadata"] = map[string]any{"name": "reaching", "namespace": "podsieve-system"}
			m["spec"].(map[string]any)["match"] = map[string]any{"namespaces": []any{ns}}
		})
	}
	tests := []struct {
		name       string
		samples    []string
		fixture    meshFixture
		restricted bool
		asPod      bool           // decide the pod the API server stores for the DaemonSet
		admitted   []meshMutation // variants admitted as well
		refused    []refusal
	}{
		{name: "istio sidecar baseline", samples: []string{"istio-sidecar-baseline.yaml"}, fixture: istioSidecar,
			admitted: []meshMutation{proxyAsApp("istio-proxy")}, refused: initRefusals("istio-init", "istio-proxy")},
		{name: "istio sidecar restricted", samples: []string{"istio-sidecar-restricted.yaml"}, fixture: istioSidecar, restricted: true,
			admitted: []meshMutation{proxyAsApp("istio-proxy")}, refused: restricted(initRefusals("istio-init", "istio-proxy"))},
		{name: "istio cni baseline", samples: []string{"istio-cni-baseline.yaml", "istio-cni-node.yaml"}, fixture: istioCNI,
			refused: []refusal{
				{name: "app container asks for NET_ADMIN", mutate: appAddsNetAdmin()},
				{name: "istio-validation asks for NET_ADMIN", mutate: adds("istio-validation", "NET_ADMIN")},
			}},
		{name: "istio cni restricted", samples: []string{"istio-cni-restricted.yaml", "istio-cni-node.yaml"}, fixture: istioCNI, restricted: true,
			refused: restricted([]refusal{{name: "app container asks for NET_ADMIN", mutate: appAddsNetAdmin()}})},
		{name: "istio cni node agent", samples: []string{"istio-cni-baseline.yaml", "istio-cni-node.yaml"}, fixture: istioCNINode,
			refused: nodeRefusals("istio-system", "istio-cni-node", "istio-cni-node-debug", localException("istio-cni-node.yaml", "istio-system"), reaching("istio-cni-node.yaml", "team-a"), true)},
		{name: "istio cni node agent's pod as the API server stores it", samples: []string{"istio-cni-restricted.yaml", "istio-cni-node.yaml"}, fixture: istioCNINode, asPod: true,
			refused: nodeRefusals("istio-system", "istio-cni-node-x7k2p", "istio-cni-node-debug2", localException("istio-cni-node.yaml", "istio-system"), reaching("istio-cni-node.yaml", "team-a"), true)},
		{name: "linkerd baseline", samples: []string{"linkerd-baseline.yaml"}, fixture: linkerd,
			admitted: []meshMutation{proxyAsApp("linkerd-proxy")}, refused: initRefusals("linkerd-init", "linkerd-proxy")},
		{name: "linkerd restricted", samples: []string{"linkerd-restricted.yaml"}, fixture: linkerd, restricted: true,
			admitted: []meshMutation{proxyAsApp("linkerd-proxy")},
			refused: append(initRefusals("linkerd-init", "linkerd-proxy"),
				refusal{name: "linkerd-proxy from another registry", mutate: otherRegistry("linkerd-proxy")},
				refusal{name: "linkerd-proxy as an app container from another registry", mutate: both(proxyAsApp("linkerd-proxy"), otherRegistry("linkerd-proxy"))})},
		{name: "linkerd cni baseline", samples: []string{"linkerd-cni-baseline.yaml", "linkerd-cni-node.yaml"}, fixture: linkerdCNI,
			refused: []refusal{
				{name: "app container asks for NET_ADMIN", mutate: appAddsNetAdmin()},
				{name: "linkerd-network-validator asks for NET_ADMIN", mutate: adds("linkerd-network-validator", "NET_ADMIN")},
			}},
		{name: "linkerd cni restricted", samples: []string{"linkerd-cni-restricted.yaml", "linkerd-cni-node.yaml"}, fixture: linkerdCNI, restricted: true,
			admitted: []meshMutation{proxyAsApp("linkerd-proxy")},
			refused: restricted([]refusal{
				{name: "linkerd-proxy from another registry", mutate: otherRegistry("linkerd-proxy")},
				{name: "app container asks for NET_ADMIN", mutate: appAddsNetAdmin()},
				{name: "linkerd-proxy asks for NET_ADMIN", mutate: adds("linkerd-proxy", "NET_ADMIN")},
			})},
		{name: "linkerd cni node agent", samples: []string{"linkerd-cni-baseline.yaml", "linkerd-cni-node.yaml"}, fixture: linkerdCNINode,
			refused: nodeRefusals("linkerd-cni", "linkerd-cni", "linkerd-cni-debug", localException("linkerd-cni-node.yaml", "linkerd-cni"), reaching("linkerd-cni-node.yaml", "team-a"), false)},
		{name: "linkerd cni node agent's pod", samples: []string{"linkerd-cni-baseline.yaml", "linkerd-cni-node.yaml"}, fixture: linkerdCNINode, asPod: true,
			refused: nodeRefusals("linkerd-cni", "linkerd-cni-x7k2p", "linkerd-cni-debug2", localException("linkerd-cni-node.yaml", "linkerd-cni"), reaching("linkerd-cni-node.yaml", "team-a"), false)},
		{name: "kuma baseline", samples: []string{"kuma-baseline.yaml"}, fixture: kuma,
			admitted: []meshMutation{proxyAsApp("kuma-sidecar")}, refused: initRefusals("kuma-init", "kuma-sidecar")},
		{name: "kuma restricted", samples: []string{"kuma-restricted.yaml"}, fixture: kuma, restricted: true,
			admitted: []meshMutation{proxyAsApp("kuma-sidecar")},
			refused: restricted(append(initRefusals("kuma-init", "kuma-sidecar"),
				refusal{name: "kuma-sidecar from another registry", mutate: otherRegistry("kuma-sidecar")},
				refusal{name: "kuma-sidecar as an app container from another registry", mutate: both(proxyAsApp("kuma-sidecar"), otherRegistry("kuma-sidecar"))}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := loadMeshFixture(t, tt.fixture)
			if tt.restricted {
				hardenApp(t, obj, !tt.fixture.rootInit)
			}
			if tt.asPod {
				obj = podOfDaemonSet(t, obj)
			}
			var args []string
			for _, s := range tt.samples {
				// The platform's own files: the node samples hold cluster
				// exceptions, which eval honours as the cluster's state only.
				args = append(args, "--cluster-state", filepath.Join(meshSamples, s))
			}
			if out, code := evalMesh(t, args, obj, "", ""); code != exitOK {
				t.Fatalf("the mesh's own output is refused (exit %d):\n%s", code, out)
			}
			for i, m := range tt.admitted {
				variant := deepCopy(obj)
				if _, ok := m(variant); !ok {
					t.Fatalf("admitted variant %d does not apply", i)
				}
				if out, code := evalMesh(t, args, variant, "", ""); code != exitOK {
					t.Errorf("admitted variant %d is refused (exit %d):\n%s", i, code, out)
				}
			}
			for _, r := range tt.refused {
				mutated := deepCopy(obj)
				targets, ok := r.mutate(mutated)
				if !ok {
					t.Fatalf("%s: the mutation does not apply to %s", r.name, tt.fixture.file)
				}
				out, code := evalMesh(t, append(slices.Clone(args), "-o", "json"), mutated, r.ns, r.extra)
				if code != exitDenied {
					t.Errorf("%s: exit %d, want %d (refused):\n%s", r.name, code, exitDenied, out)
					continue
				}
				if !strings.Contains(out, r.message) {
					t.Errorf("%s: refused without saying %q:\n%s", r.name, r.message, out)
				}
				if exempt := exemptTargets(t, out, targets); len(exempt) > 0 {
					t.Errorf("%s: refused, but an entry still waives %s", r.name, strings.Join(exempt, "; "))
				}
			}
		})
	}
}

// nodeRefusals are what a CNI node agent's samples must refuse. Only an
// agent with container-level waivers (Istio's capabilities and AppArmor)
// is bound to its image: host paths belong to the pod (docs/meshes.md).
// Both meshes' agents run their CNI installer as the container install-cni.
func nodeRefusals(ns, ownName, otherName, local, reaching string, imageBound bool) []refusal {
	const container = "install-cni"
	var rs []refusal
	if imageBound {
		rs = append(rs, refusal{name: container + " from another registry", mutate: otherRegistry(container)})
	}
	return append(rs, []refusal{
		{name: "another name in " + ns, mutate: rename(otherName, true)},
		{name: "its name in " + ns + " with other labels", mutate: rename(ownName, false)},
		{name: "the node agent in a workload namespace", mutate: unchanged, ns: "team-a"},
		{name: "another name under an exception written in " + ns, mutate: rename(otherName, true), extra: local,
			message: `honours only PolicyExceptions in the cluster exceptions namespace \"podsieve-system\" (spec.exceptions.clusterExceptionsOnly), not in \"` + ns + `\"`},
		{name: "the node agent in a workload namespace under a cluster exception naming the node policy", mutate: unchanged, ns: "team-a", extra: reaching},
		{name: "the host's root", mutate: hostPath("/")},
		{name: "another capability", mutate: adds(container, "SYS_MODULE")},
		{name: "a privileged container", mutate: privileged(container)},
	}...)
}

// exemptTargets returns the findings of eval's JSON output on the targets
// that an entry or exception still covers.
func exemptTargets(t *testing.T, out string, targets []string) []string {
	t.Helper()
	var report struct {
		Results []struct {
			Policies []struct {
				Violations []struct {
					Control    string   `json:"control"`
					Container  string   `json:"container"`
					Field      string   `json:"field"`
					Values     []string `json:"values"`
					ExemptedBy []string `json:"exemptedBy"`
				} `json:"violations"`
			} `json:"policies"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &report); err != nil {
		t.Fatalf("eval -o json: %v\n%s", err, out)
	}
	var exempt []string
	for _, r := range report.Results {
		for _, p := range r.Policies {
			for _, v := range p.Violations {
				if len(v.ExemptedBy) == 0 {
					continue
				}
				for _, target := range targets {
					c, what, _ := strings.Cut(target, "/")
					if c == v.Container && (what == "" || what == v.Control || strings.HasSuffix(v.Field, "."+what)) {
						exempt = append(exempt, fmt.Sprintf("%s %s %v (by %s)", v.Container, v.Field, v.Values, strings.Join(v.ExemptedBy, ", ")))
					}
				}
			}
		}
	}
	return exempt
}

func loadMeshFixture(t *testing.T, f meshFixture) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "meshes", f.file))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSuffix(strings.TrimSpace(string(data)), "---")
	for from, to := range f.images {
		if !strings.Contains(text, from) {
			t.Fatalf("%s does not use image %s", f.file, from)
		}
		text = strings.ReplaceAll(text, from, to)
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("%s: %v", f.file, err)
	}
	return obj
}

// evalMesh runs podsieve eval on the samples and the object (in namespace
// ns when set, with extra documents as the cluster's state when set), and
// returns its output and exit status.
func evalMesh(t *testing.T, sampleArgs []string, obj map[string]any, ns, extra string) (string, int) {
	t.Helper()
	obj = deepCopy(obj)
	if ns != "" {
		obj["metadata"].(map[string]any)["namespace"] = ns
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "object.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"eval", "--now", "2026-11-23T00:00:00Z", "-f", file}, sampleArgs...)
	if extra != "" {
		// An exception as it is in the cluster: one in the cluster
		// exceptions namespace counts only there.
		extraFile := filepath.Join(dir, "extra.yaml")
		if err := os.WriteFile(extraFile, []byte(extra), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--cluster-state", extraFile)
	}
	var stdout, stderr bytes.Buffer
	code := run(args, nil, &stdout, &stderr)
	return stdout.String() + stderr.String(), code
}

// TestMeshNodeAgentExceptionGenerate: for a policy with
// clusterExceptionsOnly, exception generate writes the node agent's
// exceptions in the cluster exceptions namespace, reaching the agent's
// namespace with match.namespaces, and they admit it.
func TestMeshNodeAgentExceptionGenerate(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(meshSamples, "istio-cni-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policyOnly := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyOnly, []byte(strings.Split(string(data), "\n---\n")[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	agent, err := yaml.Marshal(loadMeshFixture(t, istioCNINode))
	if err != nil {
		t.Fatal(err)
	}
	agentFile := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(agentFile, agent, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"exception", "generate", "-f", policyOnly, "-f", agentFile, "--justification", "Istio CNI node agent"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"  namespace: podsieve-system\n",
		"  name: istio-system-istio-cni-node-istio-system",
		"    namespaces: [\"istio-system\"]\n",
		`# Note: policy "istio-system" honours only PolicyExceptions in the cluster exceptions namespace (spec.exceptions.clusterExceptionsOnly): a cluster admin applies this one, in "podsieve-system".`,
	} {
		if strings.Count(out, want) != 2 {
			t.Errorf("want %q in both exceptions (the DaemonSet's and its pods'):\n%s", want, out)
		}
	}
	generated := filepath.Join(dir, "generated.yaml")
	if err := os.WriteFile(generated, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	// A cluster admin applies them: they are the cluster's state.
	if code := run([]string{"eval", "-f", policyOnly, "--cluster-state", generated, "-f", agentFile}, nil, &stdout, &stderr); code != exitOK {
		t.Errorf("the generated exceptions do not admit the agent (exit %d):\n%s%s", code, stdout.String(), stderr.String())
	}
	// The pods as the API server stores them carry the AppArmor profile in
	// the field too.
	pod, err := yaml.Marshal(podOfDaemonSet(t, loadMeshFixture(t, istioCNINode)))
	if err != nil {
		t.Fatal(err)
	}
	podFile := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(podFile, pod, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"eval", "-f", policyOnly, "--cluster-state", generated, "-f", podFile}, nil, &stdout, &stderr); code != exitOK {
		t.Errorf("the generated exceptions do not admit the agent's pod as stored (exit %d):\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestSampleGuardrailsNameRegistriesAndKinds: every sample policy that lets
// PolicyExceptions waive a control with container fields names the
// registries their images may come from (allowedRegistries, so that an
// exception cannot name a registry its author pushes to) and the kinds of
// container they may reach (allowedContainerKinds, so that an init
// container's waiver never covers a native sidecar or an app container).
func TestSampleGuardrailsNameRegistriesAndKinds(t *testing.T) {
	podLevel := []string{"Host Namespaces", "HostPath Volumes", "Sysctls", "Volume Types"}
	files, err := filepath.Glob(filepath.Join(samples, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	meshFiles, err := filepath.Glob(filepath.Join(meshSamples, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bounded := 0
	for _, file := range append(files, meshFiles...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for d, doc := range strings.Split(string(data), "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			if m["kind"] != "SecurityPolicy" {
				continue
			}
			controls, _ := dig(m, "spec", "exceptions", "controls").([]any)
			for i, c := range controls {
				control := c.(map[string]any)
				name, _ := control["controlName"].(string)
				if slices.Contains(podLevel, name) {
					continue
				}
				bounded++
				for _, field := range []string{"allowedRegistries", "allowedContainerKinds"} {
					if list, _ := control[field].([]any); len(list) == 0 {
						t.Errorf("%s document %d: spec.exceptions.controls[%d] (%s) has no %s", filepath.Base(file), d+1, i, name, field)
					}
				}
			}
		}
	}
	if bounded == 0 {
		t.Fatal("no sample bounds a control with container fields")
	}
}
