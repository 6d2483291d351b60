package main

import (
	"encoding/json"
	"strings"
	"testing"
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
