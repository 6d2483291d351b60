package main

import (
	"bytes"
	"os"
	"path/filepath"
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
	istioSidecar = meshFixture{file: "istio-sidecar.yaml", images: map[string]string{
		"registry.istio.io/testing/proxyv2:latest": "docker.io/istio/proxyv2:1.28.0",
	}}
	istioCNI = meshFixture{file: "istio-cni.yaml", images: map[string]string{
		"registry.istio.io/testing/proxyv2:latest": "gcr.io/istio-release/proxyv2:1.28.0-distroless",
	}}
	istioCNINode = meshFixture{file: "istio-cni-node.yaml", images: map[string]string{
		"registry.istio.io/testing/install-cni:latest": "docker.io/istio/install-cni:1.28.0",
	}}
	linkerd = meshFixture{file: "linkerd.yaml", images: map[string]string{
		"cr.l5d.io/linkerd/proxy:test-inject-proxy-version": "cr.l5d.io/linkerd/proxy:edge-25.11.1",
	}}
	linkerdCNI = meshFixture{file: "linkerd-cni.yaml", images: map[string]string{
		"cr.l5d.io/linkerd/proxy:test-inject-proxy-version": "cr.l5d.io/linkerd/proxy:edge-25.11.1",
	}}
	linkerdCNINode = meshFixture{file: "linkerd-cni-node.yaml", images: map[string]string{}}
	kuma           = meshFixture{file: "kuma.yaml", rootInit: true, images: map[string]string{
		"kuma/kuma-init:latest":    "docker.io/kumahq/kuma-init:2.12.4",
		"kuma/kuma-sidecar:latest": "docker.io/kumahq/kuma-dp:2.12.4",
	}}
)

// A meshMutation changes a decoded object; it returns false when it does not
// apply to the object (the test then fails: every meshMutation must bite).
type meshMutation func(obj map[string]any) bool

// TestMeshSamples: each sample of config/samples/meshes admits its mesh's
// real injector output (at restricted, with the app's own containers
// hardened as restricted asks of them, and the pod-level seccomp profile
// the samples tell users to set), and refuses the same object when an
// injected container's image comes from another registry, when an app
// container asks for the injected container's privileges, or when the init
// container becomes a native sidecar (which runs for the pod's life). The
// CNI node agents are admitted in their own namespace only, under their own
// names.
func TestMeshSamples(t *testing.T) {
	type refusal struct {
		name   string
		mutate meshMutation
		ns     string // decide the mutated object in this namespace
	}
	tests := []struct {
		name       string
		samples    []string
		fixture    meshFixture
		restricted bool
		refused    []refusal
	}{
		{
			name: "istio sidecar baseline", samples: []string{"istio-sidecar-baseline.yaml"}, fixture: istioSidecar,
			refused: []refusal{
				{name: "istio-init from another registry", mutate: otherRegistry("istio-init")},
				{name: "app container asks for istio-init's capabilities", mutate: appAsks("istio-init")},
				{name: "istio-init as a native sidecar", mutate: asSidecar("istio-init")},
				{name: "istio-proxy asks for istio-init's capabilities", mutate: copyContext("istio-init", "istio-proxy")},
			},
		},
		{
			name: "istio sidecar restricted", samples: []string{"istio-sidecar-restricted.yaml"}, fixture: istioSidecar, restricted: true,
			refused: []refusal{
				{name: "istio-init from another registry", mutate: otherRegistry("istio-init")},
				{name: "app container asks for istio-init's privileges", mutate: appAsks("istio-init")},
				{name: "istio-init as a native sidecar", mutate: asSidecar("istio-init")},
				{name: "no pod-level seccomp profile", mutate: noPodSeccomp},
			},
		},
		{
			name: "istio cni baseline", samples: []string{"istio-cni-baseline.yaml", "istio-cni-node.yaml"}, fixture: istioCNI,
			refused: []refusal{
				{name: "app container asks for NET_ADMIN", mutate: appAdds("NET_ADMIN")},
				{name: "istio-validation asks for NET_ADMIN", mutate: adds("istio-validation", "NET_ADMIN")},
			},
		},
		{
			name: "istio cni restricted", samples: []string{"istio-cni-restricted.yaml", "istio-cni-node.yaml"}, fixture: istioCNI, restricted: true,
			refused: []refusal{
				{name: "app container asks for NET_ADMIN", mutate: appAdds("NET_ADMIN")},
				{name: "no pod-level seccomp profile", mutate: noPodSeccomp},
			},
		},
		{
			name: "istio cni node agent", samples: []string{"istio-cni-baseline.yaml", "istio-cni-node.yaml"}, fixture: istioCNINode,
			refused: []refusal{
				{name: "install-cni from another registry", mutate: otherRegistry("install-cni")},
				{name: "another name in istio-system", mutate: rename("istio-cni-node-debug", true)},
				{name: "another DaemonSet with its labels in istio-system", mutate: rename("cni-node", false)},
				{name: "the node agent in a workload namespace", mutate: func(map[string]any) bool { return true }, ns: "team-a"},
				{name: "another host path", mutate: hostPath("/")},
				{name: "another capability", mutate: adds("install-cni", "SYS_MODULE")},
			},
		},
		{
			name: "istio cni node agent pod as the API server stores it", samples: []string{"istio-cni-restricted.yaml", "istio-cni-node.yaml"}, fixture: istioCNINode,
			refused: []refusal{{name: "install-cni from another registry", mutate: otherRegistry("install-cni")}},
		},
		{
			name: "linkerd baseline", samples: []string{"linkerd-baseline.yaml"}, fixture: linkerd,
			refused: []refusal{
				{name: "linkerd-init from another registry", mutate: otherRegistry("linkerd-init")},
				{name: "app container asks for linkerd-init's capabilities", mutate: appAsks("linkerd-init")},
				{name: "linkerd-init as a native sidecar", mutate: asSidecar("linkerd-init")},
				{name: "linkerd-proxy asks for linkerd-init's capabilities", mutate: copyContext("linkerd-init", "linkerd-proxy")},
			},
		},
		{
			name: "linkerd restricted", samples: []string{"linkerd-restricted.yaml"}, fixture: linkerd, restricted: true,
			refused: []refusal{
				{name: "linkerd-init from another registry", mutate: otherRegistry("linkerd-init")},
				{name: "linkerd-proxy from another registry", mutate: otherRegistry("linkerd-proxy")},
				{name: "app container asks for linkerd-init's privileges", mutate: appAsks("linkerd-init")},
				{name: "linkerd-init as a native sidecar", mutate: asSidecar("linkerd-init")},
				{name: "linkerd-proxy asks for linkerd-init's capabilities", mutate: copyContext("linkerd-init", "linkerd-proxy")},
			},
		},
		{
			name: "linkerd cni baseline", samples: []string{"linkerd-cni-baseline.yaml", "linkerd-cni-node.yaml"}, fixture: linkerdCNI,
			refused: []refusal{
				{name: "app container asks for NET_ADMIN", mutate: appAdds("NET_ADMIN")},
				{name: "linkerd-network-validator asks for NET_ADMIN", mutate: adds("linkerd-network-validator", "NET_ADMIN")},
			},
		},
		{
			name: "linkerd cni restricted", samples: []string{"linkerd-cni-restricted.yaml", "linkerd-cni-node.yaml"}, fixture: linkerdCNI, restricted: true,
			refused: []refusal{
				{name: "linkerd-proxy from another registry", mutate: otherRegistry("linkerd-proxy")},
				{name: "app container asks for NET_ADMIN", mutate: appAdds("NET_ADMIN")},
				{name: "linkerd-proxy asks for NET_ADMIN", mutate: adds("linkerd-proxy", "NET_ADMIN")},
			},
		},
		{
			name: "linkerd cni node agent", samples: []string{"linkerd-cni-baseline.yaml", "linkerd-cni-node.yaml"}, fixture: linkerdCNINode,
			refused: []refusal{
				{name: "another name in linkerd-cni", mutate: rename("linkerd-cni-debug", true)},
				{name: "the DaemonSet in a workload namespace", mutate: func(map[string]any) bool { return true }, ns: "team-a"},
				{name: "another host path", mutate: hostPath("/var/run/containerd")},
				{name: "a privileged container", mutate: privileged("install-cni")},
			},
		},
		{
			name: "kuma baseline", samples: []string{"kuma-baseline.yaml"}, fixture: kuma,
			refused: []refusal{
				{name: "kuma-init from another registry", mutate: otherRegistry("kuma-init")},
				{name: "app container asks for kuma-init's capabilities", mutate: appAsks("kuma-init")},
				{name: "kuma-init as a native sidecar", mutate: asSidecar("kuma-init")},
				{name: "kuma-sidecar asks for kuma-init's capabilities", mutate: copyContext("kuma-init", "kuma-sidecar")},
			},
		},
		{
			name: "kuma restricted", samples: []string{"kuma-restricted.yaml"}, fixture: kuma, restricted: true,
			refused: []refusal{
				{name: "kuma-init from another registry", mutate: otherRegistry("kuma-init")},
				{name: "kuma-sidecar from another registry", mutate: otherRegistry("kuma-sidecar")},
				{name: "app container asks for kuma-init's privileges", mutate: appAsks("kuma-init")},
				{name: "kuma-init as a native sidecar", mutate: asSidecar("kuma-init")},
				{name: "kuma-sidecar runs as root", mutate: copyContext("kuma-init", "kuma-sidecar")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := loadMeshFixture(t, tt.fixture)
			if tt.restricted {
				hardenApp(t, obj, !tt.fixture.rootInit)
			}
			if strings.HasSuffix(tt.name, "as the API server stores it") {
				obj = podOfDaemonSet(t, obj)
			}
			var args []string
			for _, s := range tt.samples {
				args = append(args, "-f", filepath.Join(meshSamples, s))
			}
			if out, code := evalMesh(t, args, obj, ""); code != exitOK {
				t.Fatalf("the mesh's own output is refused (exit %d):\n%s", code, out)
			}
			for _, r := range tt.refused {
				mutated := deepCopy(t, obj)
				if !r.mutate(mutated) {
					t.Fatalf("%s: the meshMutation does not apply to %s", r.name, tt.fixture.file)
				}
				if out, code := evalMesh(t, args, mutated, r.ns); code != exitDenied {
					t.Errorf("%s: exit %d, want %d (refused):\n%s", r.name, code, exitDenied, out)
				}
			}
		})
	}
}

// TestMeshSamplesAreMinimal: every exclusion and exception entry of every
// mesh sample is needed by its mesh's output (a node agent's DaemonSet or
// the pod the API server stores for it): dropping any one entry makes the
// sample refuse what it admitted, so no entry is there for nothing.
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
				for i := range entries {
					trimmed := deepCopy(t, m)
					e, _ := meshEntries(trimmed)
					setAt(trimmed, path, append(append([]any{}, e[:i]...), e[i+1:]...))
					rest := append(append([]string{}, docs[:d]...), docs[d+1:]...)
					if len(e) > 1 || m["kind"] != "PolicyException" {
						out, err := yaml.Marshal(trimmed)
						if err != nil {
							t.Fatal(err)
						}
						rest = append(rest, string(out))
					} // else: an exception without its one entry is no exception
					file := filepath.Join(t.TempDir(), "trimmed.yaml")
					if err := os.WriteFile(file, []byte(strings.Join(rest, "\n---\n")), 0o644); err != nil {
						t.Fatal(err)
					}
					refused := false
					for _, obj := range objs {
						if _, code := evalMesh(t, []string{"-f", file}, obj, ""); code == exitDenied {
							refused = true
						}
					}
					if !refused {
						t.Errorf("without document %d's %s entry %d the sample still admits %s: the entry waives nothing", d+1, path, i, tt.fixture.file)
					}
				}
			}
		})
	}
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
// ns when set), and returns its output and exit status.
func evalMesh(t *testing.T, sampleArgs []string, obj map[string]any, ns string) (string, int) {
	t.Helper()
	obj = deepCopy(t, obj)
	if ns != "" {
		obj["metadata"].(map[string]any)["namespace"] = ns
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "object.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"eval", "--now", "2026-11-23T00:00:00Z", "-f", file}, sampleArgs...), nil, &stdout, &stderr)
	return stdout.String() + stderr.String(), code
}

func deepCopy(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

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

func noPodSeccomp(obj map[string]any) bool {
	psc, _ := podSpec(obj)["securityContext"].(map[string]any)
	if psc["seccompProfile"] == nil {
		return false
	}
	delete(psc, "seccompProfile")
	return true
}

func otherRegistry(name string) meshMutation {
	return func(obj map[string]any) bool {
		c := containerNamed(obj, name)
		if c == nil {
			return false
		}
		image := c["image"].(string)
		_, path, ok := strings.Cut(image, "/")
		if !ok {
			return false
		}
		c["image"] = "registry.attacker.example/" + path
		return true
	}
}

// copyContext gives container to the securityContext of container from.
func copyContext(from, to string) meshMutation {
	return func(obj map[string]any) bool {
		src, dst := containerNamed(obj, from), containerNamed(obj, to)
		if src == nil || dst == nil {
			return false
		}
		dst["securityContext"] = src["securityContext"]
		return true
	}
}

// appAsks gives every app container the securityContext of an injected one.
func appAsks(from string) meshMutation {
	return func(obj map[string]any) bool {
		src := containerNamed(obj, from)
		if src == nil {
			return false
		}
		for _, c := range appContainers(obj) {
			c["securityContext"] = src["securityContext"]
		}
		return true
	}
}

func appAdds(capability string) meshMutation {
	return func(obj map[string]any) bool {
		for _, c := range appContainers(obj) {
			addCapability(c, capability)
		}
		return len(appContainers(obj)) > 0
	}
}

func adds(name, capability string) meshMutation {
	return func(obj map[string]any) bool {
		c := containerNamed(obj, name)
		if c == nil {
			return false
		}
		addCapability(c, capability)
		return true
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
	return func(obj map[string]any) bool {
		c := containerNamed(obj, name)
		if c == nil {
			return false
		}
		securityContext(c)["privileged"] = true
		return true
	}
}

// asSidecar turns an init container into a native sidecar, which runs for
// the pod's life.
func asSidecar(name string) meshMutation {
	return func(obj map[string]any) bool {
		c := containerNamed(obj, name)
		if c == nil || c["restartPolicy"] != nil {
			return false
		}
		c["restartPolicy"] = "Always"
		return true
	}
}

// rename renames the object and, with keepLabels false, gives its template
// other labels too.
func rename(name string, keepLabels bool) meshMutation {
	return func(obj map[string]any) bool {
		obj["metadata"].(map[string]any)["name"] = name
		if !keepLabels {
			labels := map[string]any{"app": name}
			dig(obj, "spec", "template", "metadata").(map[string]any)["labels"] = labels
			obj["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": labels}
		}
		return true
	}
}

func hostPath(path string) meshMutation {
	return func(obj map[string]any) bool {
		spec := podSpec(obj)
		vols, _ := spec["volumes"].([]any)
		spec["volumes"] = append(vols, map[string]any{"name": "extra", "hostPath": map[string]any{"path": path}})
		return true
	}
}

// podOfDaemonSet returns a pod as the DaemonSet controller creates it and
// the API server stores it: the template, a generated name, and the AppArmor
// annotation copied to each container's appArmorProfile field (the API
// server does this for pods since Kubernetes 1.30).
func podOfDaemonSet(t *testing.T, ds map[string]any) map[string]any {
	t.Helper()
	meta := dig(ds, "spec", "template", "metadata").(map[string]any)
	podMeta := deepCopy(t, meta)
	podMeta["name"] = ds["metadata"].(map[string]any)["name"].(string) + "-x7k2p"
	podMeta["namespace"] = ds["metadata"].(map[string]any)["namespace"]
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": podMeta, "spec": deepCopy(t, dig(ds, "spec", "template", "spec").(map[string]any))}
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
