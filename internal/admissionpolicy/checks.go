package admissionpolicy

import (
	"fmt"
	"strings"

	"k8s.io/pod-security-admission/policy"

	"github.com/podsieve/podsieve/internal/engine"
)

// Each upstream check's CEL mirror, written after the engine's
// check_<id>.go revision by revision: a CEL list of violation records,
// {control, check, scope, name, list, kind, image, field, values}, with the
// same fields and values the engine attributes. The records' order and
// repeated values differ from the engine's where that changes no decision
// (every violation must be covered, each of its values by a glob).
//
// The expressions read the policy's variables: spec (the pod spec, {} when
// the object bears none), meta (the pod or template metadata) and ctrs (every
// container as {c, s, l, k, n, img}: the container, its securityContext ({}
// when it has none), its list, its kind, name and image, in upstream's
// order).

// celCheck returns the CEL of one check at v1.minor; its list is "" when
// the check does not run at that version.
type celCheck func(b builder, minor int) violations

// violations is one check's CEL: the list of its violation records, and
// when that list is not empty, split so that a rule tests every check it
// runs in one pass over the containers before it builds any record (most
// objects violate nothing): a condition on the object (pod) or on one
// container x of variables.ctrs (ctr), "" for none. Both are written from
// the same conditions as the list, by the helpers below, so that the list
// is not empty exactly when pod || variables.ctrs.exists(x, ctr).
type violations struct {
	list     string
	pod, ctr string
}

// podCond is v.pod, or "true" when v has a list but says nothing of when
// it is empty: such a list is always built, never skipped.
func (v violations) podCond() string {
	if v.list != "" && v.pod == "" && v.ctr == "" {
		return "true"
	}
	return v.pod
}

// or is CEL for the disjunction of the conditions given, "" (false) when
// none is given. Each condition is parenthesised: one may be a ternary.
func or(conds ...string) string {
	var kept []string
	for _, c := range conds {
		if c != "" {
			kept = append(kept, "("+c+")")
		}
	}
	switch len(kept) {
	case 0:
		return ""
	case 1:
		return kept[0]
	}
	return "(" + strings.Join(kept, " || ") + ")"
}

// andNot is CEL for cond unless exempt, "" (false) when cond is.
func andNot(exempt, cond string) string {
	if cond == "" || exempt == "" {
		return cond
	}
	return fmt.Sprintf("(!(%s) && (%s))", exempt, cond)
}

// celChecks holds one mirror per upstream check the engine knows;
// CompilePolicy refuses (Unsupported) a rule whose checks one lacks, and
// TestFixturesDecideAsTheEngine runs every check of every level and version.
var celChecks = map[policy.CheckID]celCheck{
	"allowPrivilegeEscalation":   checkAllowPrivilegeEscalation,
	"appArmorProfile":            checkAppArmorProfile,
	"capabilities_baseline":      checkCapabilitiesBaseline,
	"capabilities_restricted":    checkCapabilitiesRestricted,
	"hostNamespaces":             checkHostNamespaces,
	"hostPathVolumes":            checkHostPathVolumes,
	"hostPorts":                  checkHostPorts,
	"hostProbesAndHostLifecycle": checkHostProbesAndHostLifecycle,
	"privileged":                 checkPrivileged,
	"procMount":                  checkProcMount,
	"procMount_restricted":       checkProcMountRestricted,
	"restrictedVolumes":          checkRestrictedVolumes,
	"runAsNonRoot":               checkRunAsNonRoot,
	"runAsUser":                  checkRunAsUser,
	"seLinuxOptions":             checkSELinuxOptions,
	"seccompProfile_baseline":    checkSeccompProfileBaseline,
	"seccompProfile_restricted":  checkSeccompProfileRestricted,
	"sysctls":                    checkSysctls,
	"windowsHostProcess":         checkWindowsHostProcess,
}

// builder writes the violation records of one check.
type builder struct {
	id policy.CheckID
}

func (b builder) head(scope string) []string {
	return []string{"control", quote(string(engine.CheckControl(b.id))), "check", quote(string(b.id)), "scope", quote(scope)}
}

// pod is a pod-level violation of field with the CEL list values.
func (b builder) pod(field, values string) string {
	return record(append(b.head("pod"), "name", `""`, "list", `""`, "kind", `""`, "image", `""`,
		"field", quote(field), "values", values)...)
}

// ctr is a violation of container x (a ctrs record) in the field
// spec.<list>[*].<suffix>.
func (b builder) ctr(x, suffix, values string) string {
	return b.ctrPath(x, fmt.Sprintf(`"spec." + %s.l + %s`, x, quote("[*]."+suffix)), values)
}

// ctrPath is a violation of container x in a field outside the container
// lists (an annotation), given as a CEL string expression.
func (b builder) ctrPath(x, field, values string) string {
	return record(append(b.head("container"), "name", x+".n", "list", x+".l", "kind", x+".k", "image", x+".img",
		"field", field, "values", values)...)
}

// each is the violations of every container for which cond holds.
func each(cond, violation string) violations {
	return violations{list: fmt.Sprintf("variables.ctrs.filter(x, %s).map(x, %s)", cond, violation), ctr: cond}
}

// when is [violation] if cond holds, else [].
func when(cond, violation string) violations {
	return violations{list: fmt.Sprintf("(%s ? [%s] : [])", cond, violation), pod: cond}
}

// nonEmpty is [violation] of the list expression values when it is not
// empty (values is bound to l in violation).
func nonEmpty(values, violation string) violations {
	return violations{list: fmt.Sprintf("[%s].filter(l, size(l) > 0).map(l, %s)", values, violation), pod: fmt.Sprintf("size(%s) > 0", values)}
}

func concat(parts ...violations) violations {
	var lists, pods, ctrs []string
	for _, p := range parts {
		if p.list != "" {
			lists = append(lists, p.list)
			pods = append(pods, p.podCond())
			ctrs = append(ctrs, p.ctr)
		}
	}
	return violations{list: concatLists(lists...), pod: or(pods...), ctr: or(ctrs...)}
}

// concatLists is CEL for the concatenation of the lists given.
func concatLists(lists ...string) string {
	if len(lists) == 0 {
		return "[]"
	}
	return "(" + strings.Join(lists, " + ") + ")"
}

// unless is [] when cond holds, else v.
func unless(cond string, v violations) violations {
	if cond == "" {
		return v
	}
	return violations{list: fmt.Sprintf("(%s ? [] : %s)", cond, v.list), pod: andNot(cond, v.pod), ctr: andNot(cond, v.ctr)}
}

const (
	podSC = "variables.spec.?securityContext"
	ctrSC = "x.s"
)

// windowsExempt: the v1.25 revisions of the Linux-only restricted checks
// pass pods that declare spec.os.name=windows.
func windowsExempt(minor int) string {
	if minor < 25 {
		return ""
	}
	return `variables.spec.?os.?name.orValue("") == "windows"`
}

// userNamespaceExempt: the v1.35 revisions pass pods in a user namespace.
func userNamespaceExempt(minor int) string {
	if minor < 35 {
		return ""
	}
	return `variables.spec.?hostUsers.orValue(true) == false`
}

func checkPrivileged(b builder, _ int) violations {
	return each(ctrSC+".?privileged.orValue(false) == true", b.ctr("x", "securityContext.privileged", `["true"]`))
}

func checkHostNamespaces(b builder, _ int) violations {
	var parts []violations
	for _, f := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		parts = append(parts, when("variables.spec.?"+f+".orValue(false) == true", b.pod("spec."+f, `["true"]`)))
	}
	return concat(parts...)
}

func checkCapabilitiesBaseline(b builder, _ int) violations {
	allowed := quoteList(engine.BaselineCapabilities())
	return each(ctrSC+".?capabilities.?add.orValue([]).exists(a, !(a in "+allowed+"))",
		b.ctr("x", "securityContext.capabilities.add", "x.s.capabilities.add.filter(a, !(a in "+allowed+"))"))
}

func checkCapabilitiesRestricted(b builder, minor int) violations {
	if minor < 22 {
		return violations{}
	}
	return unless(windowsExempt(minor), concat(
		each("!"+ctrSC+`.?capabilities.?drop.orValue([]).exists(d, d == "ALL")`,
			b.ctr("x", "securityContext.capabilities.drop", "[]")),
		each(ctrSC+`.?capabilities.?add.orValue([]).exists(a, a != "NET_BIND_SERVICE")`,
			b.ctr("x", "securityContext.capabilities.add", `x.s.capabilities.add.filter(a, a != "NET_BIND_SERVICE")`)),
	))
}

func checkHostPathVolumes(b builder, _ int) violations {
	return nonEmpty(`variables.spec.?volumes.orValue([]).filter(v, has(v.hostPath)).map(v, v.hostPath.?path.orValue(""))`,
		b.pod("spec.volumes[*].hostPath", "l"))
}

// checkHostPorts applies the API server's host port default as the engine
// does for every admitted object (engine.NewAdmissionObject): with
// hostNetwork, a port of an init or app container without a hostPort has
// hostPort = containerPort.
func checkHostPorts(b builder, _ int) violations {
	port := `(p.?hostPort.orValue(0) != 0 ? p.hostPort : ` +
		`(variables.spec.?hostNetwork.orValue(false) == true && x.l != "ephemeralContainers" ? p.?containerPort.orValue(0) : 0))`
	return violations{
		list: fmt.Sprintf(`variables.ctrs.map(x, [dyn(x), dyn(x.c.?ports.orValue([]).map(p, %s).filter(h, h != 0))]).filter(t, size(t[1]) > 0).map(t, %s)`,
			port, b.ctr("t[0]", "ports[*].hostPort", "t[1].map(h, string(h))")),
		ctr: fmt.Sprintf(`x.c.?ports.orValue([]).exists(p, %s != 0)`, port),
	}
}

func checkHostProbesAndHostLifecycle(b builder, minor int) violations {
	if minor < 34 {
		return violations{}
	}
	var parts []violations
	for _, h := range []string{"livenessProbe", "readinessProbe", "startupProbe", "lifecycle.postStart", "lifecycle.preStop"} {
		for _, a := range []string{"httpGet", "tcpSocket"} {
			path := "x.c.?" + strings.ReplaceAll(h, ".", ".?") + ".?" + a + ".?host"
			parts = append(parts, each(path+`.orValue("") != ""`, b.ctr("x", h+"."+a+".host", "["+path+`.orValue("")]`)))
		}
	}
	return concat(parts...)
}

const appArmorPrefix = "container.apparmor.security.beta.kubernetes.io/"

func checkAppArmorProfile(b builder, _ int) violations {
	allowedType := `["RuntimeDefault", "Localhost"]`
	pod := when(podSC+".?appArmorProfile.hasValue() && !(variables.spec.securityContext.appArmorProfile.?type.orValue(\"\") in "+allowedType+")",
		b.pod("spec.securityContext.appArmorProfile.type", `[variables.spec.securityContext.appArmorProfile.?type.orValue("")]`))
	ctr := each(ctrSC+".?appArmorProfile.hasValue() && !(x.s.appArmorProfile.?type.orValue(\"\") in "+allowedType+")",
		b.ctr("x", "securityContext.appArmorProfile.type", `[x.s.appArmorProfile.?type.orValue("")]`))
	// An annotation names its container; the violation takes the list,
	// kind and image of the first container of that name, or none.
	field := quote(`metadata.annotations["` + appArmorPrefix + `*"]`)
	value := "[variables.meta.annotations[k]]"
	name := fmt.Sprintf("k.substring(%d)", len(appArmorPrefix))
	found := record(append(b.head("container"), "name", name, "list", "m[0].l", "kind", "m[0].k", "image", "m[0].img", "field", field, "values", value)...)
	orphan := record(append(b.head("container"), "name", name, "list", `""`, "kind", `""`, "image", `""`, "field", field, "values", value)...)
	bad := fmt.Sprintf(`k.startsWith(%s) && !(variables.meta.annotations[k] == "" || variables.meta.annotations[k] == "runtime/default" || variables.meta.annotations[k].startsWith("localhost/"))`,
		quote(appArmorPrefix))
	annotations := violations{
		list: fmt.Sprintf(`variables.meta.?annotations.orValue({}).filter(k, %s).map(k, [variables.ctrs.filter(x, x.n == %s)].map(m, size(m) > 0 ? %s : %s)[0])`,
			bad, name, found, orphan),
		pod: fmt.Sprintf(`variables.meta.?annotations.orValue({}).exists(k, %s)`, bad),
	}
	return concat(pod, ctr, annotations)
}

func checkSELinuxOptions(b builder, minor int) violations {
	types := []string{"", "container_t", "container_init_t", "container_kvm_t"}
	if minor >= 31 {
		types = append(types, "container_engine_t")
	}
	allowed := quoteList(types)
	// The pod's options, bound to o.
	opts := "[" + podSC + ".?seLinuxOptions.orValue({})]"
	pod := func(cond, violation string) violations {
		return violations{list: opts + ".filter(o, " + cond + ").map(o, " + violation + ")", pod: opts + ".exists(o, " + cond + ")"}
	}
	return concat(
		pod(`!(o.?type.orValue("") in `+allowed+`)`, b.pod("spec.securityContext.seLinuxOptions.type", `[o.?type.orValue("")]`)),
		pod(`o.?user.orValue("") != ""`, b.pod("spec.securityContext.seLinuxOptions.user", "[o.user]")),
		pod(`o.?role.orValue("") != ""`, b.pod("spec.securityContext.seLinuxOptions.role", "[o.role]")),
		each("!("+ctrSC+`.?seLinuxOptions.?type.orValue("") in `+allowed+")",
			b.ctr("x", "securityContext.seLinuxOptions.type", "[x.s.seLinuxOptions.type]")),
		each(ctrSC+`.?seLinuxOptions.?user.orValue("") != ""`,
			b.ctr("x", "securityContext.seLinuxOptions.user", "[x.s.seLinuxOptions.user]")),
		each(ctrSC+`.?seLinuxOptions.?role.orValue("") != ""`,
			b.ctr("x", "securityContext.seLinuxOptions.role", "[x.s.seLinuxOptions.role]")),
	)
}

func procMount(b builder) violations {
	return each(ctrSC+`.?procMount.orValue("Default") != "Default"`, b.ctr("x", "securityContext.procMount", "[x.s.procMount]"))
}

func checkProcMount(b builder, minor int) violations {
	return unless(userNamespaceExempt(minor), procMount(b))
}

func checkProcMountRestricted(b builder, minor int) violations {
	if minor < 35 {
		return violations{}
	}
	return procMount(b)
}

const seccompValid = `["Localhost", "RuntimeDefault"]`

func checkSeccompProfileBaseline(b builder, minor int) violations {
	if minor >= 19 {
		return concat(
			when(podSC+".?seccompProfile.hasValue() && !(variables.spec.securityContext.seccompProfile.?type.orValue(\"\") in "+seccompValid+")",
				b.pod("spec.securityContext.seccompProfile.type", `[variables.spec.securityContext.seccompProfile.?type.orValue("")]`)),
			each(ctrSC+".?seccompProfile.hasValue() && !(x.s.seccompProfile.?type.orValue(\"\") in "+seccompValid+")",
				b.ctr("x", "securityContext.seccompProfile.type", `[x.s.seccompProfile.?type.orValue("")]`)),
		)
	}
	const podKey = "seccomp.security.alpha.kubernetes.io/pod"
	const ctrPrefix = "container.seccomp.security.alpha.kubernetes.io/"
	valid := func(v string) string {
		return fmt.Sprintf(`(%[1]s == "runtime/default" || %[1]s == "docker/default" || %[1]s.startsWith("localhost/"))`, v)
	}
	anns := "variables.meta.?annotations.orValue({})"
	pod := when(fmt.Sprintf("%s in %s && !%s", quote(podKey), anns, valid(anns+"["+quote(podKey)+"]")),
		b.pod(`metadata.annotations["`+podKey+`"]`, "["+anns+"["+quote(podKey)+"]]"))
	key := quote(ctrPrefix) + " + x.n"
	anyKey := fmt.Sprintf("%s.exists(k, k.startsWith(%s))", anns, quote(ctrPrefix))
	ctr := each(fmt.Sprintf("%s in %s && !%s", key, anns, valid(anns+"["+key+"]")),
		b.ctrPath("x", quote(`metadata.annotations["`+ctrPrefix+`*"]`), "["+anns+"["+key+"]]"))
	ctr = violations{list: fmt.Sprintf("(%s ? %s : [])", anyKey, ctr.list), ctr: fmt.Sprintf("(%s && (%s))", anyKey, ctr.ctr)}
	return concat(pod, ctr)
}

func checkSeccompProfileRestricted(b builder, minor int) violations {
	if minor < 19 {
		return violations{}
	}
	podValid := podSC + ".?seccompProfile.hasValue() && (variables.spec.securityContext.seccompProfile.?type.orValue(\"\") in " + seccompValid + ")"
	set := ctrSC + ".?seccompProfile.hasValue()"
	return unless(windowsExempt(minor), concat(
		when(podSC+".?seccompProfile.hasValue() && !(variables.spec.securityContext.seccompProfile.?type.orValue(\"\") in "+seccompValid+")",
			b.pod("spec.securityContext.seccompProfile.type", `[variables.spec.securityContext.seccompProfile.?type.orValue("")]`)),
		each(fmt.Sprintf("%s ? !(x.s.seccompProfile.?type.orValue(\"\") in %s) : !(%s)", set, seccompValid, podValid),
			b.ctr("x", "securityContext.seccompProfile.type", fmt.Sprintf(`(%s ? [x.s.seccompProfile.?type.orValue("")] : [])`, set))),
	))
}

func checkSysctls(b builder, minor int) violations {
	allowed := []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"}
	if minor >= 27 {
		allowed = append(allowed, "net.ipv4.ip_local_reserved_ports")
	}
	if minor >= 29 {
		allowed = append(allowed, "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
			"net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes")
	}
	if minor >= 32 {
		allowed = append(allowed, "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
	}
	if minor >= 37 {
		allowed = append(allowed, "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat")
	}
	return nonEmpty(podSC+`.?sysctls.orValue([]).map(s, s.?name.orValue("")).filter(n, !(n in `+quoteList(allowed)+"))",
		b.pod("spec.securityContext.sysctls[*].name", "l"))
}

func checkWindowsHostProcess(b builder, _ int) violations {
	return concat(
		when(podSC+".?windowsOptions.?hostProcess.orValue(false) == true", b.pod("spec.securityContext.windowsOptions.hostProcess", `["true"]`)),
		each(ctrSC+".?windowsOptions.?hostProcess.orValue(false) == true", b.ctr("x", "securityContext.windowsOptions.hostProcess", `["true"]`)),
	)
}

// volumeTypeExpr is the restricted type of volume v: "" when allowed, the
// source's name, or "*" for a volume with no source podsieve knows.
func volumeTypeExpr() string {
	var allowed []string
	// The allowed sources are tested before the forbidden ones, as upstream
	// does.
	for _, t := range engine.AllowedVolumeTypes() {
		allowed = append(allowed, "has(v."+t+")")
	}
	expr := "(" + strings.Join(allowed, " || ") + `) ? "" : `
	for _, t := range engine.ForbiddenVolumeTypes() {
		expr += "has(v." + t + ") ? " + quote(t) + " : "
	}
	return "(" + expr + `"*")`
}

func checkRestrictedVolumes(b builder, _ int) violations {
	// vols is every volume as [type, hostPath path, name]; each type present
	// is one violation, of the type's field, whose values are the volumes'
	// names (hostPath: their paths). One comprehension rather than one list
	// per type: the type checker's cost grows with each concatenation.
	typed := fmt.Sprintf(`variables.spec.?volumes.orValue([]).map(v, [dyn(%s), dyn(v.?hostPath.?path.orValue("")), dyn(v.?name.orValue(""))])`, volumeTypeExpr())
	types := quoteList(append(engine.ForbiddenVolumeTypes(), "*"))
	field := `(t == "*" ? "spec.volumes[*]" : "spec.volumes[*]." + t)`
	values := `vols.filter(v, v[0] == t).map(v, t == "hostPath" ? v[1] : v[2])`
	// Every type in types is one volumeTypeExpr gives, and every type it
	// gives but "" is in types.
	return violations{
		list: fmt.Sprintf("[%s].map(vols, %s.filter(t, vols.exists(v, v[0] == t)).map(t, %s))[0]", typed, types,
			record(append(b.head("pod"), "name", `""`, "list", `""`, "kind", `""`, "image", `""`, "field", field, "values", values)...)),
		pod: fmt.Sprintf(`variables.spec.?volumes.orValue([]).exists(v, %s != "")`, volumeTypeExpr()),
	}
}

func checkAllowPrivilegeEscalation(b builder, minor int) violations {
	if minor < 8 {
		return violations{}
	}
	return unless(windowsExempt(minor), each(ctrSC+".?allowPrivilegeEscalation.orValue(true) == true",
		b.ctr("x", "securityContext.allowPrivilegeEscalation", `(`+ctrSC+`.?allowPrivilegeEscalation.hasValue() ? ["true"] : [])`)))
}

func checkRunAsNonRoot(b builder, minor int) violations {
	podTrue := podSC + ".?runAsNonRoot.orValue(false) == true"
	set := ctrSC + ".?runAsNonRoot.hasValue()"
	return unless(userNamespaceExempt(minor), concat(
		when(podSC+".?runAsNonRoot.orValue(true) == false", b.pod("spec.securityContext.runAsNonRoot", `["false"]`)),
		each(fmt.Sprintf("%s ? x.s.runAsNonRoot == false : !(%s)", set, podTrue),
			b.ctr("x", "securityContext.runAsNonRoot", fmt.Sprintf(`(%s ? ["false"] : [])`, set))),
	))
}

func checkRunAsUser(b builder, minor int) violations {
	if minor < 23 {
		return violations{}
	}
	return unless(userNamespaceExempt(minor), concat(
		when(podSC+".?runAsUser.orValue(1) == 0", b.pod("spec.securityContext.runAsUser", `["0"]`)),
		each(ctrSC+".?runAsUser.orValue(1) == 0", b.ctr("x", "securityContext.runAsUser", `["0"]`)),
	))
}
