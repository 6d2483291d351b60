package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// head is the start of every exception in these tests.
const head = "exceptions: [{policyName: p, ruleNames: [r]}]\n"

// capEntry is an exception entry for Capabilities on init containers.
func capEntry(extra string) string {
	return head + "podSecurity:\n- {controlName: Capabilities, restrictedField: \"spec.initContainers[*].securityContext.capabilities.add\"" + extra + "}"
}

func TestGuardrails(t *testing.T) {
	const rule = baselineRule + "\n"
	meshLimits := "exceptions:\n  allowedControls: [Capabilities, Host Ports, HostPath Volumes]\n  controls:\n" +
		"  - {controlName: Capabilities, allowedValues: [NET_ADMIN, NET_RAW, \"NET_*\"], requireContainerNames: true, requirePinnedRegistry: true}\n" +
		"  - {controlName: Host Ports, allowedValues: [\"9100\"], requireImages: true}\n" +
		"  - {controlName: HostPath Volumes, allowedValues: [\"/var/log/**\"]}\n" + rule
	pinned := `, containerNames: [istio-init], images: ["docker.io/istio/proxyv2"]`
	registries := "exceptions:\n  controls:\n" +
		"  - {controlName: Capabilities, allowedValues: [NET_ADMIN, NET_RAW], allowedRegistries: [docker.io, gcr.io/istio-release], allowedContainerKinds: [Init]}\n" + rule
	// regEntry is an init container's entry with these images, which the
	// registries policy permits but for the images.
	regEntry := func(images string) string {
		return capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], containerKinds: [Init], images: [` + images + `]`)
	}
	tests := []struct {
		name      string
		policy    string
		exception string
		refused   string // "" when permitted; else a part of the message
	}{
		{"a policy without spec.exceptions honours none", rule, capEntry(""),
			`policy "p" honours no PolicyExceptions: it has no spec.exceptions; a cluster admin opts it in by setting spec.exceptions`},
		{"a policy without spec.exceptions refuses a whole-rule waiver", rule, head, `honours no PolicyExceptions`},
		{"spec.exceptions: {} opts in for every control", "exceptions: {}\n" + rule, capEntry(""), ""},
		{"spec.exceptions: {} permits a whole-rule waiver", "exceptions: {}\n" + rule, head, ""},
		{"allow: false honours none", "exceptions: {allow: false}\n" + rule, capEntry(""), `allows no exceptions (spec.exceptions.allow is false)`},
		{"allowedControls: [] allows no control", "exceptions: {allowedControls: []}\n" + rule, capEntry(""),
			`policy "p" allows exceptions for no control (spec.exceptions.allowedControls is empty); remove control "Capabilities"`},
		{"allowedControls: [] refuses a whole-rule waiver", "exceptions: {allowedControls: []}\n" + rule, head, `spec.podSecurity is empty, which waives every control`},
		{"a control outside allowedControls", "exceptions: {allowedControls: [Host Ports]}\n" + rule, capEntry(""),
			`policy "p" allows exceptions only for controls "Host Ports"; remove control "Capabilities"`},
		{"values within the allowed values", meshLimits, capEntry(`, values: [NET_ADMIN, NET_RAW]` + pinned), ""},
		{"a glob written exactly as an allowed glob", meshLimits, capEntry(`, values: ["NET_*"]` + pinned), ""},
		{"a value outside the allowed values", meshLimits, capEntry(`, values: [NET_ADMIN, SYS_ADMIN]` + pinned),
			`spec.podSecurity[0].values[1]: "SYS_ADMIN" is not within the values policy "p" allows for control "Capabilities": "NET_ADMIN", "NET_RAW", "NET_*"`},
		{"a glob narrower than allowed but not written as one", meshLimits, capEntry(`, values: ["NET_A*"]` + pinned),
			`spec.podSecurity[0].values[0]: "NET_A*" is not within`},
		{"a glob broader than allowed", meshLimits, capEntry(`, values: ["*"]` + pinned), `spec.podSecurity[0].values[0]: "*" is not within`},
		{"no values where values are bounded", meshLimits, capEntry(pinned),
			`spec.podSecurity[0]: policy "p" allows exceptions for control "Capabilities" only for the values "NET_ADMIN", "NET_RAW", "NET_*" (spec.exceptions.controls); this entry has no values, so it would waive any value`},
		{"containers required", meshLimits, capEntry(`, values: [NET_ADMIN], images: ["docker.io/istio/proxyv2"]`),
			`spec.podSecurity[0]: policy "p" requires exceptions for control "Capabilities" to name containers (spec.exceptions.controls): set spec.podSecurity[0].containerNames`},
		{"a pinned registry requires images", meshLimits, capEntry(`, values: [NET_ADMIN], containerNames: [istio-init]`),
			`spec.podSecurity[0]: policy "p" requires exceptions for control "Capabilities" to name images`},
		{"a wildcard registry is not pinned", meshLimits, capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], images: ["docker.io/istio/proxyv2", "*/istio/proxyv2*"]`),
			`spec.podSecurity[0].images[1]: "*/istio/proxyv2*" does not pin its registry, and policy "p" requires a literal registry host for control "Capabilities"`},
		{"a familiar name is not pinned", meshLimits, capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], images: ["istio/proxyv2"]`),
			`"istio/proxyv2" does not pin its registry`},
		{"images required", meshLimits, head + `podSecurity: [{controlName: Host Ports, restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]`,
			`requires exceptions for control "Host Ports" to name images`},
		{"a host port within the allowed ones", meshLimits, head + `podSecurity: [{controlName: Host Ports, images: ["quay.io/prometheus/node-exporter"], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]`, ""},
		{"a host path within the allowed glob", meshLimits, head + `podSecurity: [{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/log/pods"]}]`, ""},
		{"a host path outside the allowed glob", meshLimits, head + `podSecurity: [{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/"]}]`,
			`spec.podSecurity[0].values[0]: "/" is not within the values policy "p" allows for control "HostPath Volumes": "/var/log/**"`},
		{"an unbounded control next to bounded ones", "exceptions:\n  controls: [{controlName: Capabilities, allowedValues: [NET_ADMIN]}]\n" + rule,
			head + `podSecurity: [{controlName: Host Namespaces}]`, ""},
		{"per-control limits refuse a whole-rule waiver", "exceptions:\n  controls: [{controlName: Capabilities, allowedValues: [NET_ADMIN]}]\n" + rule, head,
			`within the limits of spec.exceptions.controls ("Capabilities"); spec.podSecurity is empty, which waives every control`},
		{"a field within allowedFields", "exceptions: {controls: [{controlName: Host Namespaces, allowedFields: [spec.hostNetwork]}]}\n" + rule,
			head + `podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostNetwork}]`, ""},
		{"a field outside allowedFields", "exceptions: {controls: [{controlName: Host Namespaces, allowedFields: [spec.hostNetwork]}]}\n" + rule,
			head + `podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostPID, values: ["true"]}]`,
			`spec.podSecurity[0].restrictedField: spec.hostPID is not among the fields policy "p" allows for control "Host Namespaces": spec.hostNetwork`},
		{"no field where fields are bounded", "exceptions: {controls: [{controlName: Host Namespaces, allowedFields: [spec.hostNetwork]}]}\n" + rule,
			head + `podSecurity: [{controlName: Host Namespaces}]`, `this entry has no restrictedField, so it would waive every field: set spec.podSecurity[0].restrictedField`},
		{"a wildcard-only image where images are required", meshLimits, capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], images: ["**"]`),
			`spec.podSecurity[0].images[0]: "**" matches any image`},
		{"a wildcard-only container name where names are required", meshLimits, capEntry(`, values: [NET_ADMIN], containerNames: ["*"], images: ["docker.io/istio/proxyv2"]`),
			`spec.podSecurity[0].containerNames[0]: "*" matches any container`},
		{"a universal glob where images are required", meshLimits, head + `podSecurity: [{controlName: Host Ports, images: ["**:*"], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]`,
			`spec.podSecurity[0].images[0]: "**:*" matches any image (it writes out no registry host and no whole repository path segment), and policy "p" requires exceptions for control "Host Ports" to name images`},
		{"*/** where images are required", meshLimits, head + `podSecurity: [{controlName: Host Ports, images: ["quay.io/prometheus/node-exporter", "*/**"], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]`,
			`spec.podSecurity[0].images[1]: "*/**" matches any image`},
		{"**@* where images are required", meshLimits, head + `podSecurity: [{controlName: Host Ports, images: ["**@*"], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]`,
			`spec.podSecurity[0].images[0]: "**@*" matches any image`},
		{"a repository segment is a literal part", meshLimits, head + `podSecurity: [{controlName: Host Ports, images: ["**/node-exporter:*"], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]`, ""},
		{"a universal glob under a pinned registry", meshLimits, capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], images: ["**:*"]`),
			`spec.podSecurity[0].images[0]: "**:*" matches any image`},

		// allowedRegistries: the registries (and path prefixes) image globs may reach.
		{"an image under an allowed path prefix", registries, regEntry(`"gcr.io/istio-release/proxyv2:*"`), ""},
		{"an image under an allowed registry", registries, regEntry(`"docker.io/istio/proxyv2"`), ""},
		{"a familiar name on an allowed registry", registries, regEntry(`"istio/proxyv2:*"`), ""},
		{"index.docker.io is docker.io", registries, regEntry(`"index.docker.io/istio/proxyv2"`), ""},
		{"the attacker's registry", registries, regEntry(`"registry.attacker.example/istio/proxyv2"`),
			`spec.podSecurity[0].images[0]: "registry.attacker.example/istio/proxyv2" can match images outside the registries and path prefixes the policy allows, ` +
				`and policy "p" allows images for control "Capabilities" only from "docker.io", "gcr.io/istio-release" (spec.exceptions.controls[].allowedRegistries): ` +
				`start the glob with one of them and "/", for example docker.io/<repository>:*`},
		{"a sibling of the path prefix", registries, regEntry(`"gcr.io/istio-release-evil/proxyv2"`), `"gcr.io/istio-release-evil/proxyv2" can match images outside`},
		{"the path prefix followed by more characters", registries, regEntry(`"gcr.io/istio-releasex"`), `"gcr.io/istio-releasex" can match images outside`},
		{"a wildcard right after the path prefix", registries, regEntry(`"gcr.io/istio-release*/proxyv2"`), `"gcr.io/istio-release*/proxyv2" can match images outside`},
		{"a wildcard in the registry host", registries, regEntry(`"*.gcr.io/istio-release/proxyv2"`),
			`"*.gcr.io/istio-release/proxyv2" has a wildcard in its registry host, so it matches images on any registry`},
		{"another host whose name starts like an allowed one", registries, regEntry(`"gcr.io.attacker.example/istio-release/proxyv2"`), `can match images outside`},
		{"the host with another port", registries, regEntry(`"docker.io:5000/istio/proxyv2"`), `can match images outside`},
		{"one segment with ** reaches past a /", registries, regEntry(`"proxyv2:**"`), `"proxyv2:**" matches any image`},
		{"every image of the allowed registry's other path", registries, regEntry(`"gcr.io/**"`), `"gcr.io/**" can match images outside`},
		{"registries require images", registries, capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], containerKinds: [Init]`),
			`spec.podSecurity[0]: policy "p" requires exceptions for control "Capabilities" to name images (spec.exceptions.controls): set spec.podSecurity[0].images, for example ["docker.io/<repository>:*"]`},

		// allowedContainerKinds: requires and bounds containerKinds.
		{"init only, for an init container", registries, regEntry(`"docker.io/istio/proxyv2"`), ""},
		{"no containerKinds where kinds are bounded", registries,
			capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], images: ["docker.io/istio/proxyv2"]`),
			`spec.podSecurity[0]: policy "p" allows exceptions for control "Capabilities" only for containers of kinds "Init" (spec.exceptions.controls[].allowedContainerKinds); ` +
				`this entry has no containerKinds, so it would cover every kind (a native sidecar is an init container too): set spec.podSecurity[0].containerKinds: [Init]`},
		{"a sidecar where only init containers are allowed", registries,
			capEntry(`, values: [NET_ADMIN], containerNames: [istio-init], containerKinds: [Init, Sidecar], images: ["docker.io/istio/proxyv2"]`),
			`spec.podSecurity[0].containerKinds[1]: Sidecar is not among the kinds of container policy "p" allows for control "Capabilities": "Init"; remove it`},
		{"an app container where only init containers are allowed", registries,
			head + `podSecurity: [{controlName: Capabilities, containerKinds: [App], containerNames: [app], images: ["docker.io/istio/proxyv2"], restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]`,
			`spec.podSecurity[0].containerKinds[0]: App is not among the kinds`},
		{"the second entry is named", meshLimits, head + "podSecurity:\n" +
			`- {controlName: Capabilities, containerNames: [istio-init], images: ["docker.io/istio/proxyv2"], restrictedField: "spec.initContainers[*].securityContext.capabilities.add", values: [NET_RAW]}` + "\n" +
			`- {controlName: Capabilities, containerNames: [app], images: ["docker.io/istio/proxyv2"], restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [SYS_ADMIN]}`,
			`spec.podSecurity[1].values[0]: "SYS_ADMIN" is not within`},
	}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, "p", tt.policy)
			e := mustException(t, "staging", "e", tt.exception)
			for range 2 { // the second answer comes from the memo
				err := p.Permits(e, now)
				switch {
				case tt.refused == "" && err != nil:
					t.Fatalf("refused: %v", err)
				case tt.refused != "" && err == nil:
					t.Fatalf("permitted, want refused with %q", tt.refused)
				case tt.refused != "" && !strings.Contains(err.Error(), tt.refused):
					t.Fatalf("refused with\n  %v\nwant it to contain\n  %s", err, tt.refused)
				}
			}
		})
	}
}

// TestClusterExceptionsOnly: with clusterExceptionsOnly a policy honours an
// exception in the cluster exceptions namespace and refuses the same
// exception in any other, whatever its entries, with where to create it.
func TestClusterExceptionsOnly(t *testing.T) {
	const rule = baselineRule + "\n"
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		policy    string
		namespace string
		exception string
		refused   string
	}{
		{"in the cluster exceptions namespace", "exceptions: {clusterExceptionsOnly: true}\n" + rule, "podsieve-system",
			head + "match: {namespaces: [istio-system]}\n" + `podSecurity: [{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/opt/cni/bin"]}]`, ""},
		{"in the namespace it waives for", "exceptions: {clusterExceptionsOnly: true}\n" + rule, "istio-system",
			head + `podSecurity: [{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/opt/cni/bin"]}]`,
			`policy "p" honours only PolicyExceptions in the cluster exceptions namespace "podsieve-system" (spec.exceptions.clusterExceptionsOnly), not in "istio-system": a cluster admin creates it there, with match.namespaces: ["istio-system"]`},
		{"a whole-rule waiver elsewhere", "exceptions: {clusterExceptionsOnly: true}\n" + rule, "team-a", head, `honours only PolicyExceptions in the cluster exceptions namespace`},
		{"false honours every namespace's", "exceptions: {clusterExceptionsOnly: false}\n" + rule, "team-a", capEntry(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPolicy(t, "p", tt.policy)
			e := mustException(t, tt.namespace, "e", tt.exception)
			// The copy without entries the index keeps of an exception it does not
			// apply must say the same.
			bare := e.WithoutEntries(func(string) *Policy { return p })
			for _, e := range []*Exception{e, bare} {
				err := p.Permits(e, now)
				switch {
				case tt.refused == "" && err != nil:
					t.Fatalf("refused: %v", err)
				case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
					t.Fatalf("got %v, want a refusal containing %q", err, tt.refused)
				}
			}
		})
	}
}

// TestGuardrailsFollowThePolicy: the remembered answer belongs to one
// compiled policy; a recompiled policy is judged afresh.
func TestGuardrailsFollowThePolicy(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	e := mustException(t, "staging", "e", capEntry(`, values: [SYS_ADMIN]`))
	open := mustPolicy(t, "p", "exceptions: {}\n"+baselineRule)
	tight := mustPolicy(t, "p", "exceptions: {controls: [{controlName: Capabilities, allowedValues: [NET_ADMIN]}]}\n"+baselineRule)
	for i, want := range []bool{true, false, true, false} {
		p := []*Policy{open, tight}[i%2]
		if got := p.Permits(e, now) == nil; got != want {
			t.Fatalf("step %d: permitted %v, want %v", i, got, want)
		}
	}
}

func TestCompileGuardrails(t *testing.T) {
	tests := []struct {
		name, spec, wantErr string
	}{
		{"a control listed twice", "exceptions: {controls: [{controlName: Capabilities}, {controlName: Capabilities}]}",
			`spec.exceptions.controls[1].controlName: control "Capabilities" is listed twice`},
		{"a bounded control outside allowedControls", "exceptions: {allowedControls: [Host Ports], controls: [{controlName: Capabilities}]}",
			`spec.exceptions.controls[0].controlName: "Capabilities" is not in spec.exceptions.allowedControls`},
		{"empty allowedValues", "exceptions: {controls: [{controlName: Capabilities, allowedValues: []}]}",
			`spec.exceptions.controls[0].allowedValues: an empty list would allow no value`},
		{"empty controls", "exceptions: {controls: []}", `spec.exceptions.controls: an empty list bounds nothing`},
		{"images on a pod-level control", "exceptions: {controls: [{controlName: Host Namespaces, requireImages: true}]}",
			`control "Host Namespaces" has only pod-level fields`},
		{"a bad allowed glob", `exceptions: {controls: [{controlName: Capabilities, allowedValues: ["NET_[A]"]}]}`,
			`spec.exceptions.controls[0].allowedValues[0]: glob "NET_[A]"`},
		{"allowedValues on Volume Types", "exceptions: {controls: [{controlName: Volume Types, allowedValues: [data]}]}",
			`spec.exceptions.controls[0].allowedValues: the values of Volume Types are volume names, which the workload chooses`},
		{"a field of another control", "exceptions: {controls: [{controlName: Host Namespaces, allowedFields: [\"spec.volumes[*].hostPath\"]}]}",
			`spec.exceptions.controls[0].allowedFields[0]: "spec.volumes[*].hostPath" is not a field of control "Host Namespaces"`},
		{"an unknown allowed control", `exceptions: {allowedControls: ["Root"]}`, `spec.exceptions.allowedControls[0]: unknown control "Root"`},
		{"empty allowedRegistries", "exceptions: {controls: [{controlName: Capabilities, allowedRegistries: []}]}",
			`spec.exceptions.controls[0].allowedRegistries: an empty list would allow no image`},
		{"a registry with a wildcard", `exceptions: {controls: [{controlName: Capabilities, allowedRegistries: ["docker.io", "*.gcr.io"]}]}`,
			`spec.exceptions.controls[0].allowedRegistries[1]: "*.gcr.io" is not a registry: write a lowercase registry host`},
		{"a registry without a host", `exceptions: {controls: [{controlName: Capabilities, allowedRegistries: ["istio"]}]}`,
			`spec.exceptions.controls[0].allowedRegistries[0]: "istio" is not a registry`},
		{"a registry with a trailing slash", `exceptions: {controls: [{controlName: Capabilities, allowedRegistries: ["gcr.io/istio-release/"]}]}`,
			`spec.exceptions.controls[0].allowedRegistries[0]: "gcr.io/istio-release/" is not a registry`},
		{"a registry with a scheme", `exceptions: {controls: [{controlName: Capabilities, allowedRegistries: ["https://gcr.io"]}]}`,
			`spec.exceptions.controls[0].allowedRegistries[0]: "https://gcr.io" is not a registry`},
		{"registries on a pod-level control", "exceptions: {controls: [{controlName: HostPath Volumes, allowedRegistries: [docker.io]}]}",
			`control "HostPath Volumes" has only pod-level fields, so no entry of it can name images, containers or container kinds`},
		{"empty allowedContainerKinds", "exceptions: {controls: [{controlName: Capabilities, allowedContainerKinds: []}]}",
			`spec.exceptions.controls[0].allowedContainerKinds: an empty list would allow no container`},
		{"an unknown container kind", "exceptions: {controls: [{controlName: Capabilities, allowedContainerKinds: [Job]}]}",
			`spec.exceptions.controls[0].allowedContainerKinds[0]: unknown kind "Job"`},
		{"container kinds on a pod-level control", "exceptions: {controls: [{controlName: Sysctls, allowedContainerKinds: [Init]}]}",
			`control "Sysctls" has only pod-level fields`},
		{"empty namespaces in match", "rules:\n- name: r\n  match: {namespaces: []}\n  podSecurity: {level: baseline}",
			`spec.rules[0].match.namespaces: an empty list would match no namespace; remove the field to mean any namespace`},
		{"empty images in an exclusion", "rules:\n- name: r\n  podSecurity: {level: baseline, exclude: [{controlName: Capabilities, images: []}]}",
			`spec.rules[0].podSecurity.exclude[0].images: an empty list would match no image; remove the field to mean any image`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			if !strings.Contains(spec, "rules:") {
				spec += "\n" + baselineRule
			}
			sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
				t.Fatal(err)
			}
			_, err := CompilePolicy(sp)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCompileExceptionRefusesEmptyLists(t *testing.T) {
	tests := []struct{ name, spec, wantErr string }{
		{"podSecurity", head + "podSecurity: []", "spec.podSecurity: an empty list is ambiguous"},
		{"values", capEntry(", values: []"), "spec.podSecurity[0].values: an empty list would match no value; remove the field to mean any value"},
		{"containerNames", capEntry(", containerNames: []"), "spec.podSecurity[0].containerNames: an empty list would match no container"},
		{"match.names", head + "match: {names: []}", "spec.match.names: an empty list would match no object; remove the field to mean any name"},
		{"match.kinds", head + "match: {kinds: []}", "spec.match.kinds: an empty list would match no object; remove the field to mean any kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "e"}}
			if err := yaml.UnmarshalStrict([]byte(tt.spec), &pe.Spec); err != nil {
				t.Fatal(err)
			}
			_, err := CompileException(pe, "podsieve-system")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestPinnedRegistry(t *testing.T) {
	for glob, want := range map[string]bool{
		"docker.io/istio/proxyv2":       true,
		"docker.io/istio/proxyv2:*":     true,
		"gcr.io/istio-release/proxyv2*": true,
		"registry.local:5000/mesh/init": true,
		"localhost/mesh/init":           true,
		"*/istio/proxyv2*":              false,
		"**/proxyv2":                    false,
		"docker.*/istio/proxyv2":        false,
		"istio/proxyv2:*":               false,
		"nginx":                         false,
		"docker.io/":                    false,
		"*":                             false,
	} {
		if got := PinnedRegistry(glob); got != want {
			t.Errorf("PinnedRegistry(%q) = %v, want %v", glob, got, want)
		}
	}
}

func TestExclusionWarnings(t *testing.T) {
	tests := []struct {
		name  string
		entry string
		want  []string // each must be a part of one warning, in order; none when empty
	}{
		{"a pinned, named entry", `{controlName: Capabilities, containerNames: [istio-init], images: ["docker.io/istio/proxyv2"], restrictedField: "spec.initContainers[*].securityContext.capabilities.add", values: [NET_ADMIN]}`, nil},
		{"a wildcard registry", `{controlName: Capabilities, images: ["*/istio/proxyv2*", "docker.io/istio/proxyv2"]}`,
			[]string{`x.images[0] "*/istio/proxyv2*" matches its path on any registry, including one an attacker can push to`}},
		{"a leading double star", `{controlName: Capabilities, images: ["**proxyv2"]}`, []string{`x.images[0] "**proxyv2" matches its path on any registry`}},
		{"containers by name only", `{controlName: Capabilities, containerNames: [istio-init]}`,
			[]string{`x selects containers by name only: any image can run under the names "istio-init"; add images`}},
		{"a wildcard probe host", `{controlName: Host Probes / Lifecycle Hooks, restrictedField: "spec.containers[*].livenessProbe.httpGet.host", values: ["10.0.0.*"]}`,
			[]string{`x.values[0] "10.0.0.*" is a glob on spec.containers[*].livenessProbe.httpGet.host: a wildcard in a host or path matches more than it seems`}},
		{"a host path one level down", `{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/log/*"]}`,
			[]string{`x.values[0] "/var/log/*": * does not cross "/", so it matches no path below /var/log; write "/var/log/**" for the paths below it`,
				`x.values[0] "/var/log/*" is a glob on spec.volumes[*].hostPath`}},
		{"a host path prefix", `{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/log*"]}`,
			[]string{`x.values[0] "/var/log*": * does not cross "/", so it matches no path below /var/log; write "/var/log/**" for the paths below it`,
				`x.values[0] "/var/log*" is a glob on spec.volumes[*].hostPath`}},
		{"a host path with **", `{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/log/**"]}`,
			[]string{`x.values[0] "/var/log/**" is a glob on spec.volumes[*].hostPath`}},
		{"every path below /: no ** hint, which would waive every path", `{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/*"]}`,
			[]string{`x.values[0] "/*" is a glob on spec.volumes[*].hostPath`}},
		{"a lone *: no ** hint", `{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["*"]}`,
			[]string{`x.values[0] "*" is a glob on spec.volumes[*].hostPath`}},
		{"a * inside the path: no hint about the paths below", `{controlName: HostPath Volumes, restrictedField: "spec.volumes[*].hostPath", values: ["/var/*/pods"]}`,
			[]string{`x.values[0] "/var/*/pods" is a glob on spec.volumes[*].hostPath`}},
		{"a wildcard capability is not a host", `{controlName: Capabilities, images: ["docker.io/x/y"], restrictedField: "spec.containers[*].securityContext.capabilities.add", values: ["NET_*"]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e policyv1alpha1.PodSecurityExclusion
			if err := yaml.UnmarshalStrict([]byte(tt.entry), &e); err != nil {
				t.Fatal(err)
			}
			got := ExclusionWarnings(e, "x")
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d %q lacks %q", i, got[i], w)
				}
			}
		})
	}
}

func TestPolicyWarnsOnUnboundedExceptions(t *testing.T) {
	sp := &policyv1alpha1.SecurityPolicy{Spec: policyv1alpha1.SecurityPolicySpec{Exceptions: &policyv1alpha1.ExceptionGuardrails{}}}
	if got := PolicyWarnings(sp); !slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "spec.exceptions has no allowedControls") }) {
		t.Errorf("warnings %q lack the unbounded-exceptions warning", got)
	}
	sp.Spec.Exceptions.AllowedControls = []policyv1alpha1.ControlName{}
	if got := PolicyWarnings(sp); len(got) != 0 {
		t.Errorf("warnings %q for allowedControls: []", got)
	}
}

// TestPolicyWarnsOnPinnedRegistryAlone: requirePinnedRegistry without
// allowedRegistries is warned about, since any registry host passes it.
func TestPolicyWarnsOnPinnedRegistryAlone(t *testing.T) {
	tests := []struct {
		name     string
		controls string
		warn     bool
	}{
		{"pinned alone", "[{controlName: Capabilities, requirePinnedRegistry: true}]", true},
		{"pinned with registries", "[{controlName: Capabilities, requirePinnedRegistry: true, allowedRegistries: [docker.io/istio]}]", false},
		{"registries alone", "[{controlName: Capabilities, allowedRegistries: [docker.io/istio]}]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := &policyv1alpha1.SecurityPolicy{}
			if err := yaml.UnmarshalStrict([]byte("exceptions: {allowedControls: [Capabilities], controls: "+tt.controls+"}\nrules: [{name: r, podSecurity: {level: baseline}}]"), &sp.Spec); err != nil {
				t.Fatal(err)
			}
			got := PolicyWarnings(sp)
			warned := slices.ContainsFunc(got, func(w string) bool {
				return strings.Contains(w, `spec.exceptions.controls[0] (Capabilities) has requirePinnedRegistry but no allowedRegistries`)
			})
			if warned != tt.warn || len(got) > 1 {
				t.Errorf("warnings %q, want the pinned-registry warning %v", got, tt.warn)
			}
		})
	}
}

// TestHintFollowsControlLimits: the last line of a denial says exactly what
// an exception could waive under the policy's guardrails: who can waive
// what they allow; for what they allow only in part, which fields, kinds,
// images or values they allow; "change the workload" only for what no
// exception may waive.
func TestHintFollowsControlLimits(t *testing.T) {
	p := mustPolicy(t, "p", `exceptions:
  allowedControls: [Capabilities, Host Ports, Privileged Containers]
  controls:
  - {controlName: Capabilities, allowedValues: [NET_ADMIN, "NET_*"]}
  - {controlName: Host Ports, allowedFields: ["spec.initContainers[*].ports[*].hostPort"]}
  - {controlName: Privileged Containers, allowedRegistries: [docker.io/istio], allowedContainerKinds: [Init]}
rules:
- name: r
  podSecurity: {level: baseline}`)
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	yes := true
	privileged := &corev1.SecurityContext{Privileged: &yes}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"an allowed value", mkPod(withContainers(ctr("app", caps([]corev1.Capability{"NET_ADMIN"}, nil)))),
			`A PolicyException in namespace "staging" naming policy "p" rule "r" can waive these.`},
		{"a value outside allowedValues", mkPod(withContainers(ctr("app", caps([]corev1.Capability{"SYS_ADMIN"}, nil)))),
			`Policy "p" allows PolicyExceptions for "Capabilities" only for the values NET_ADMIN, NET_*: change the workload.`},
		{"a field outside allowedFields", mkPod(withContainers(corev1.Container{Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}})),
			`Policy "p" allows PolicyExceptions for "Host Ports" only for the fields spec.initContainers[*].ports[*].hostPort: change the workload.`},
		{"a kind outside allowedContainerKinds", mkPod(withContainers(corev1.Container{Name: "app", Image: "docker.io/istio/proxyv2:1", SecurityContext: privileged})),
			`Policy "p" allows PolicyExceptions for "Privileged Containers" only for containers of kind Init: change the workload.`},
		{"an image outside allowedRegistries", func() *corev1.Pod {
			pod := mkPod(withContainers(ctr("app", nil)))
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/init:1", SecurityContext: privileged}}
			return pod
		}(), `Policy "p" allows PolicyExceptions for "Privileged Containers" only for images under docker.io/istio: change the workload.`},
		{"a control not allowed, and one limited", func() *corev1.Pod {
			pod := mkPod(withContainers(ctr("app", caps([]corev1.Capability{"SYS_ADMIN"}, nil))))
			pod.Spec.HostPID = true
			return pod
		}(), `Policy "p" does not allow PolicyExceptions for "Host Namespaces", and allows them for "Capabilities" only for the values NET_ADMIN, NET_*: change the workload.`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.pod.Name = "web"
			d := Decide([]*Policy{p}, AllExceptions(nil), podObject("staging", tt.pod), nil, now, Admission)
			if msg := d.Results[0].DenyMessage(d.Object); !strings.HasSuffix(msg, tt.want) {
				t.Errorf("deny message\n%s\nwant it to end with\n%s", msg, tt.want)
			}
		})
	}
	// A policy that honours only cluster exceptions points there, not at
	// the workload's namespace, where any exception is NotPermitted.
	clusterOnly := mustPolicy(t, "p", "exceptions: {clusterExceptionsOnly: true}\n"+baselineRule)
	pod := mkPod(withContainers(ctr("app", caps([]corev1.Capability{"NET_ADMIN"}, nil))))
	pod.Name = "web"
	d := Decide([]*Policy{clusterOnly}, AllExceptions(nil), podObject("staging", pod), nil, now, Admission)
	want := `Only a PolicyException in the cluster exceptions namespace, written by a cluster admin with match.namespaces: ["staging"], naming policy "p" rule "r" can waive these (spec.exceptions.clusterExceptionsOnly).`
	if msg := d.Results[0].DenyMessage(d.Object); !strings.HasSuffix(msg, want) {
		t.Errorf("clusterExceptionsOnly: deny message\n%s\nwant it to end with\n%s", msg, want)
	}
}

// TestPinnedRegistryIsNotSpoofedThroughDockerHub: an image on Docker Hub (or
// a mirror of it) whose path starts like another registry's host is not
// matched by a glob that pins that registry.
func TestPinnedRegistryIsNotSpoofedThroughDockerHub(t *testing.T) {
	for _, glob := range []string{"gcr.io/istio-release/proxyv2", "gcr.io/istio-release/**", "gcr.io/istio-release/proxyv2*"} {
		x, err := CompileExclusion(policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", Images: []string{glob}}, PolicyRuleSource("x", "x"), "e")
		if err != nil {
			t.Fatal(err)
		}
		for image, want := range map[string]bool{
			"gcr.io/istio-release/proxyv2:1.24.0":                 true,
			"docker.io/gcr.io/istio-release/proxyv2:1.24.0":       false,
			"index.docker.io/gcr.io/istio-release/proxyv2:1.24.0": false,
		} {
			v := Violation{Control: "Capabilities", Scope: ScopeContainer, Container: "c", Image: image, Field: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}
			if got := x.WhyNot(&v) == ""; got != want {
				t.Errorf("%s on %s: covers %v, want %v", glob, image, got, want)
			}
		}
	}
}

// TestControllerUsernameWarning: exempting a controller's or a node's user
// is warned about at write time; a person's or a CI robot's is not.
func TestControllerUsernameWarning(t *testing.T) {
	for _, tt := range []struct {
		user string
		warn bool
	}{{"system:serviceaccount:kube-system:replicaset-controller", true}, {"system:node:worker-1", true}, {"system:kube-controller-manager", true},
		{"system:serviceaccount:ci:image-builder", false}, {"alice@example.com", false}} {
		sp := &policyv1alpha1.SecurityPolicy{}
		sp.Spec.Rules = []policyv1alpha1.PolicyRule{{Name: "r", Exclude: &policyv1alpha1.ResourceFilter{Usernames: []string{tt.user}},
			PodSecurity: policyv1alpha1.PodSecurity{Level: "baseline"}}}
		got := PolicyWarnings(sp)
		if warned := len(got) == 1 && strings.Contains(got[0], "spec.rules[0].exclude.usernames[0]"); warned != tt.warn || (!tt.warn && len(got) > 0) {
			t.Errorf("%s: warnings %q, want a warning %v", tt.user, got, tt.warn)
		}
	}
}
