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

// A meshMutation changes a decoded object and returns what must then be
// refused: "container" (every finding on that container),
// "container/control" or "container/field" (a field's last part, such as
// capabilities.add or runAsUser), none covered by
// any entry, so that one entry still refusing cannot hide another that
// waives too much. An empty list asks only that the object be refused; ok
// is false when the mutation does not apply (the test then fails: every
// mutation must bite).
type meshMutation func(obj map[string]any) (targets []string, ok bool)

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

// TestMeshSamplesAreMinimal: every exclusion and exception entry of every
// mesh sample is needed by its mesh's output (a node agent's DaemonSet or
// the pod the API server stores for it; a proxy as a native sidecar or, as
// older releases inject it, an app container): dropping any one entry makes
// the sample refuse one of them, so no entry is there for nothing.
func TestMeshSamplesAreMinimal(t *testing.T) {
	for _, tt := range []struct {
		sample     string
		fixture    meshFixture
		restricted bool
	}{
		{"istio-sidecar-baseline.yaml", istioSidecar, false},
		{"istio-sidecar-restricted.yaml", istioSidecar, true},
		{"linkerd-baseline.yaml", linkerd, false},
		{"linkerd-restricted.yaml", linkerd, true},
		{"linkerd-cni-restricted.yaml", linkerdCNI, true},
		{"kuma-baseline.yaml", kuma, false},
		{"kuma-restricted.yaml", kuma, true},
		{"istio-cni-node.yaml", istioCNINode, false},
		{"linkerd-cni-node.yaml", linkerdCNINode, false},
	} {
		t.Run(tt.sample, func(t *testing.T) {
			obj := loadMeshFixture(t, tt.fixture)
			if tt.restricted {
				hardenApp(t, obj, !tt.fixture.rootInit)
			}
			objs := []map[string]any{obj}
			if obj["kind"] == "DaemonSet" {
				objs = append(objs, podOfDaemonSet(t, obj))
			}
			for _, proxy := range []string{"istio-proxy", "linkerd-proxy", "kuma-sidecar"} {
				older := deepCopy(obj)
				if _, ok := proxyAsApp(proxy)(older); ok {
					objs = append(objs, older)
				}
			}
			data, err := os.ReadFile(filepath.Join(meshSamples, tt.sample))
			if err != nil {
				t.Fatal(err)
			}
			docs := strings.Split(string(data), "\n---\n")
			for d, doc := range docs {
				var m map[string]any
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatal(err)
				}
				entries, path := meshEntries(m)
				// Each value of each entry is needed too, and each image is
				// one of the meshes' release images.
				for i, e := range entries {
					entry := e.(map[string]any)
					for _, image := range entryList(entry, "images") {
						if !slices.Contains(meshReleaseImages, image) {
							t.Errorf("document %d's %s entry %d names image %q, not a mesh's release image", d+1, path, i, image)
						}
					}
					values, _ := entry["values"].([]any)
					for j := 0; j < len(values) && len(values) > 1; j++ {
						trimmed := deepCopy(m)
						te, _ := meshEntries(trimmed)
						te[i].(map[string]any)["values"] = slices.Delete(slices.Clone(values), j, j+1)
						if !refusesOne(t, docs, d, trimmed, objs) {
							t.Errorf("without value %q of document %d's %s entry %d the sample still admits %s: the value waives nothing", values[j], d+1, path, i, tt.fixture.file)
						}
					}
				}
				for i := range entries {
					trimmed := deepCopy(m)
					e, _ := meshEntries(trimmed)
					setAt(trimmed, path, slices.Delete(e, i, i+1))
					if len(e) == 1 && m["kind"] == "PolicyException" {
						trimmed = nil // an exception without its one entry is no exception
					}
					if !refusesOne(t, docs, d, trimmed, objs) {
						t.Errorf("without document %d's %s entry %d the sample still admits %s: the entry waives nothing", d+1, path, i, tt.fixture.file)
					}
				}
			}
		})
	}
}

// meshReleaseImages are the images the meshes publish for their injected
// containers and node agents, on their own registries.
var meshReleaseImages = []string{
	"docker.io/istio/proxyv2", "gcr.io/istio-release/proxyv2",
	"docker.io/istio/install-cni", "gcr.io/istio-release/install-cni",
	"cr.l5d.io/linkerd/proxy", "cr.l5d.io/linkerd/proxy-init",
	"docker.io/kumahq/kuma-init", "docker.io/kumahq/kuma-dp",
}

func entryList(entry map[string]any, key string) []string {
	var out []string
	list, _ := entry[key].([]any)
	for _, v := range list {
		out = append(out, v.(string))
	}
	return out
}

// refusesOne reports whether the sample, with document d replaced by
// changed (left out when nil), refuses one of the objects.
func refusesOne(t *testing.T, docs []string, d int, changed map[string]any, objs []map[string]any) bool {
	t.Helper()
	rest := slices.Clone(docs)
	if changed == nil {
		rest = slices.Delete(rest, d, d+1)
	} else {
		out, err := yaml.Marshal(changed)
		if err != nil {
			t.Fatal(err)
		}
		rest[d] = string(out)
	}
	file := filepath.Join(t.TempDir(), "changed.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(rest, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if _, code := evalMesh(t, []string{"--cluster-state", file}, obj, "", ""); code == exitDenied {
			return true
		}
	}
	return false
}

// meshEntries returns a sample document's exclusion or exception entries,
// and where they are.
func meshEntries(m map[string]any) ([]any, []string) {
	switch m["kind"] {
	case "SecurityPolicy":
		rules, _ := dig(m, "spec", "rules").([]any)
		if len(rules) != 1 {
			return nil, nil
		}
		entries, _ := dig(rules[0].(map[string]any), "podSecurity", "exclude").([]any)
		return entries, []string{"spec", "rules", "0", "podSecurity", "exclude"}
	case "PolicyException":
		entries, _ := dig(m, "spec", "podSecurity").([]any)
		return entries, []string{"spec", "podSecurity"}
	}
	return nil, nil
}

func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func setAt(m map[string]any, path []string, v any) {
	cur := m
	for _, p := range path[:len(path)-1] {
		switch next := cur[p].(type) {
		case map[string]any:
			cur = next
		case []any:
			cur = next[0].(map[string]any) // rules[0]
		}
	}
	cur[path[len(path)-1]] = v
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

func deepCopy(obj map[string]any) map[string]any { return deepCopyValue(obj).(map[string]any) }

// podSpec returns the pod spec of a Pod or of a workload's template.
func podSpec(obj map[string]any) map[string]any {
	if obj["kind"] == "Pod" {
		return obj["spec"].(map[string]any)
	}
	return dig(obj, "spec", "template", "spec").(map[string]any)
}

// containerNamed finds a container, init container or native sidecar.
func containerNamed(obj map[string]any, name string) map[string]any {
	spec := podSpec(obj)
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := spec[list].([]any)
		for _, c := range cs {
			if c.(map[string]any)["name"] == name {
				return c.(map[string]any)
			}
		}
	}
	return nil
}

func appContainers(obj map[string]any) []map[string]any {
	var out []map[string]any
	cs, _ := podSpec(obj)["containers"].([]any)
	for _, c := range cs {
		out = append(out, c.(map[string]any))
	}
	return out
}

func securityContext(c map[string]any) map[string]any {
	sc, ok := c["securityContext"].(map[string]any)
	if !ok {
		sc = map[string]any{}
		c["securityContext"] = sc
	}
	return sc
}

// hardenApp makes what the user writes restricted: the pod's seccomp
// profile (and runAsNonRoot, unless an injected container runs as root),
// and the app containers' own settings. Injected containers stay as the
// mesh wrote them.
func hardenApp(t *testing.T, obj map[string]any, podNonRoot bool) {
	t.Helper()
	spec := podSpec(obj)
	psc, _ := spec["securityContext"].(map[string]any)
	if psc == nil {
		psc = map[string]any{}
		spec["securityContext"] = psc
	}
	psc["seccompProfile"] = map[string]any{"type": "RuntimeDefault"}
	if podNonRoot {
		psc["runAsNonRoot"] = true
	}
	apps := appContainers(obj)
	if len(apps) == 0 {
		t.Fatal("no app container")
	}
	for _, c := range apps {
		sc := securityContext(c)
		sc["allowPrivilegeEscalation"] = false
		sc["capabilities"] = map[string]any{"drop": []any{"ALL"}}
		sc["runAsNonRoot"] = true
		sc["runAsUser"] = 1000
	}
}

func noPodSeccomp(obj map[string]any) ([]string, bool) {
	psc, _ := podSpec(obj)["securityContext"].(map[string]any)
	if psc["seccompProfile"] == nil {
		return nil, false
	}
	delete(psc, "seccompProfile")
	return []string{}, true
}

func unchanged(map[string]any) ([]string, bool) { return []string{}, true }

// both applies two mutations; the targets are both's.
func both(a, b meshMutation) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		ta, ok := a(obj)
		if !ok {
			return nil, false
		}
		tb, ok := b(obj)
		return append(ta, tb...), ok
	}
}

// withImage rewrites a container's image; the rewrite reports false when
// the image has no part to change.
func withImage(name string, rewrite func(parts []string) bool) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		c := containerNamed(obj, name)
		if c == nil {
			return nil, false
		}
		parts := strings.Split(c["image"].(string), "/")
		if !rewrite(parts) {
			return nil, false
		}
		c["image"] = strings.Join(parts, "/")
		return []string{name}, true
	}
}

// otherRegistry serves the image's path from another registry.
func otherRegistry(name string) meshMutation {
	return withImage(name, func(parts []string) bool {
		parts[0] = "registry.attacker.example"
		return len(parts) > 1
	})
}

// otherRepository keeps the registry and the image's name, and changes the
// path between them (docker.io/istio/proxyv2 -> docker.io/attacker/proxyv2).
func otherRepository(name string) meshMutation {
	return withImage(name, func(parts []string) bool {
		if len(parts) < 3 {
			return false
		}
		parts[1] = "attacker"
		return true
	})
}

// copyContext gives container to the securityContext of container from;
// its findings for what from asks (added capabilities, user 0,
// runAsNonRoot: false) must then be refused.
func copyContext(from, to string) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		src, dst := containerNamed(obj, from), containerNamed(obj, to)
		if src == nil || dst == nil {
			return nil, false
		}
		sc, _ := src["securityContext"].(map[string]any)
		dst["securityContext"] = deepCopyValue(sc)
		var targets []string
		if dig(sc, "capabilities", "add") != nil {
			targets = append(targets, to+"/capabilities.add")
		}
		if u, ok := sc["runAsUser"].(float64); ok && u == 0 {
			targets = append(targets, to+"/runAsUser")
		}
		if n, ok := sc["runAsNonRoot"].(bool); ok && !n {
			targets = append(targets, to+"/runAsNonRoot")
		}
		return targets, len(targets) > 0
	}
}

// appAsks gives every app container the securityContext of an injected
// one, and with image its image too, under the app's own name.
func appAsks(from string, image bool) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		src := containerNamed(obj, from)
		if src == nil {
			return nil, false
		}
		var names []string
		for _, c := range appContainers(obj) {
			c["securityContext"] = deepCopyValue(src["securityContext"])
			if image {
				c["image"] = src["image"]
			}
			names = append(names, c["name"].(string))
		}
		return names, len(names) > 0
	}
}

// appAddsNetAdmin adds NET_ADMIN to every app container: what the mesh
// waives for its own proxy or init container must not reach the app.
func appAddsNetAdmin() meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		var names []string
		for _, c := range appContainers(obj) {
			addCapability(c, "NET_ADMIN")
			names = append(names, c["name"].(string))
		}
		return names, len(names) > 0
	}
}

// adds adds a capability to a container: its finding on the added
// capabilities must then be refused.
func adds(name, capability string) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		c := containerNamed(obj, name)
		if c == nil {
			return nil, false
		}
		addCapability(c, capability)
		return []string{name + "/capabilities.add"}, true
	}
}

func addCapability(c map[string]any, capability string) {
	sc := securityContext(c)
	caps, _ := sc["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
		sc["capabilities"] = caps
	}
	add, _ := caps["add"].([]any)
	caps["add"] = append(add, capability)
}

func privileged(name string) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		c := containerNamed(obj, name)
		if c == nil {
			return nil, false
		}
		securityContext(c)["privileged"] = true
		return []string{name + "/Privileged Containers"}, true
	}
}

// asSidecar turns an init container into a native sidecar, which runs for
// the pod's life.
func asSidecar(name string) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		c := containerNamed(obj, name)
		if c == nil || c["restartPolicy"] != nil {
			return nil, false
		}
		c["restartPolicy"] = "Always"
		return []string{name}, true
	}
}

// proxyAsApp moves a native sidecar to the app containers, as meshes inject
// their proxy where native sidecars are off (older releases, or off by
// configuration).
func proxyAsApp(name string) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		spec := podSpec(obj)
		inits, _ := spec["initContainers"].([]any)
		for i, c := range inits {
			cm := c.(map[string]any)
			if cm["name"] != name || cm["restartPolicy"] != "Always" {
				continue
			}
			delete(cm, "restartPolicy")
			spec["initContainers"] = append(inits[:i:i], inits[i+1:]...)
			apps, _ := spec["containers"].([]any)
			spec["containers"] = append(apps, cm)
			return []string{name}, true
		}
		return nil, false
	}
}

// rename renames the object and, with keepLabels false, gives its pods
// other labels too.
func rename(name string, keepLabels bool) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		obj["metadata"].(map[string]any)["name"] = name
		if !keepLabels {
			labels := map[string]any{"app": name}
			if obj["kind"] == "Pod" {
				obj["metadata"].(map[string]any)["labels"] = labels
			} else {
				dig(obj, "spec", "template", "metadata").(map[string]any)["labels"] = labels
				obj["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": labels}
			}
		}
		return []string{}, true
	}
}

func hostPath(path string) meshMutation {
	return func(obj map[string]any) ([]string, bool) {
		spec := podSpec(obj)
		vols, _ := spec["volumes"].([]any)
		spec["volumes"] = append(vols, map[string]any{"name": "extra", "hostPath": map[string]any{"path": path}})
		return []string{}, true
	}
}

// deepCopyValue copies a decoded JSON value.
func deepCopyValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

// podOfDaemonSet returns a pod as the DaemonSet controller creates it and
// the API server stores it: the template, a generated name, and the AppArmor
// annotation copied to each container's appArmorProfile field (the API
// server does this for pods since Kubernetes 1.30).
func podOfDaemonSet(t *testing.T, ds map[string]any) map[string]any {
	t.Helper()
	meta := dig(ds, "spec", "template", "metadata").(map[string]any)
	podMeta := deepCopy(meta)
	podMeta["name"] = ds["metadata"].(map[string]any)["name"].(string) + "-x7k2p"
	podMeta["namespace"] = ds["metadata"].(map[string]any)["namespace"]
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": podMeta, "spec": deepCopy(dig(ds, "spec", "template", "spec").(map[string]any))}
	annotations, _ := podMeta["annotations"].(map[string]any)
	for key, value := range annotations {
		name, ok := strings.CutPrefix(key, "container.apparmor.security.beta.kubernetes.io/")
		if !ok {
			continue
		}
		c := containerNamed(pod, name)
		if c == nil {
			t.Fatalf("AppArmor annotation for missing container %s", name)
		}
		profile := map[string]any{"type": "RuntimeDefault"}
		if value == "unconfined" {
			profile["type"] = "Unconfined"
		}
		securityContext(c)["appArmorProfile"] = profile
	}
	return pod
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
