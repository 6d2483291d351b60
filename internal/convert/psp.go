package convert

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// The PSP annotations that governed seccomp and AppArmor.
const (
	seccompAllowed  = "seccomp.security.alpha.kubernetes.io/allowedProfileNames"
	seccompDefault  = "seccomp.security.alpha.kubernetes.io/defaultProfileName"
	appArmorAllowed = "apparmor.security.beta.kubernetes.io/allowedProfileNames"
	appArmorDefault = "apparmor.security.beta.kubernetes.io/defaultProfileName"
)

// pspVolumeTypes are the volume types the restricted level admits that a
// PSP can name: image volumes came after PodSecurityPolicy was removed.
var pspVolumeTypes = slices.DeleteFunc(engine.AllowedVolumeTypes(), func(t string) bool { return t == "image" })

var containerLists = []string{"containers", "initContainers", "ephemeralContainers"}

// perContainerList is one entry per container list for a container field
// such as "securityContext.capabilities.add".
func perContainerList(control policyv1alpha1.ControlName, suffix string, values []string) []policyv1alpha1.PodSecurityExclusion {
	var out []policyv1alpha1.PodSecurityExclusion
	for _, l := range containerLists {
		out = append(out, policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlName(control),
			RestrictedField: "spec." + l + "[*]." + suffix, Values: slices.Clone(values)})
	}
	return out
}

func whole(control policyv1alpha1.ControlName) policyv1alpha1.PodSecurityExclusion {
	return policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlName(control)}
}

// pspReads are the kinds the PSP converter reads; it notes and ignores the
// others.
var pspReads = reads{kinds: "policy/v1beta1 PodSecurityPolicy", is: func(d *Document) bool {
	return d.Kind == "PodSecurityPolicy" && (d.APIVersion == "policy/v1beta1" || d.APIVersion == "extensions/v1beta1")
}}

// PSPOptions are the choices a conversion of PodSecurityPolicies cannot
// make alone.
type PSPOptions struct {
	// EveryPolicyApplies accepts, for several PSPs, SecurityPolicies that
	// each apply to every pod: podsieve then admits a pod only when all of
	// them do, where PSP admitted it when any PSP granted to its creator or
	// ServiceAccount did. Without it, several PSPs are refused (ErrPSPAny).
	EveryPolicyApplies bool
}

// ErrPSPAny is the refusal to guess which workloads each of several
// PodSecurityPolicies was for.
var ErrPSPAny = errors.New("PodSecurityPolicy admits a pod when any PodSecurityPolicy that its creator or its ServiceAccount may use allows it; " +
	"podsieve admits it when every SecurityPolicy that matches it does, and each converted SecurityPolicy matches every pod, " +
	"so the strictest would refuse what the others admitted (a privileged DaemonSet's pods under a converted restricted policy). " +
	"Decide which workloads each PSP was for (the subjects its RBAC bindings grant \"use\" to): convert each PSP alone, " +
	"give its SecurityPolicy a spec.rules[].match for those workloads (namespaces or selector) and exclude them from the stricter ones (spec.rules[].exclude); " +
	"or pass --every-policy-applies to convert them all for every pod, stricter than PSP")

// PSP converts policy/v1beta1 (or extensions/v1beta1) PodSecurityPolicies
// into SecurityPolicies: the closest level, with the exclusions that the
// PSP's allowances need, and a note for every PSP restriction the output
// does not enforce. Other kinds are noted and ignored; the error is bad input.
// Several PSPs are refused (ErrPSPAny) unless opts.EveryPolicyApplies.
func PSP(docs []Document, opts PSPOptions) (*Result, error) {
	res := &Result{}
	var errs []error
	var converted []string // the PSPs' names
	for i := range docs {
		d := &docs[i]
		if !pspReads.is(d) {
			pspReads.ignore(res, d)
			continue
		}
		p := &podSecurityPolicy{}
		if err := decodeStrict(d, p); err != nil {
			errs = append(errs, err)
			continue
		}
		if p.Metadata.Name == "" {
			errs = append(errs, atDoc(d.Loc, fmt.Errorf("%s: PodSecurityPolicy: metadata.name is required", d.Where())))
			continue
		}
		sp, err := convertPSP(newNoter(res, d), p)
		if err != nil {
			errs = append(errs, atDoc(d.Loc, fmt.Errorf("%s: PodSecurityPolicy %s: %w", d.Where(), d.Name, err)))
			continue
		}
		res.Objects = append(res.Objects, Output{From: fmt.Sprintf("%s (PodSecurityPolicy %s)", d.Where(), d.Name), Object: sp})
		converted = append(converted, p.Metadata.Name)
	}
	if len(converted) > 1 && !opts.EveryPolicyApplies {
		// With the other errors, so that one run says everything.
		errs = append(errs, fmt.Errorf("%d PodSecurityPolicies (%s): %w", len(converted), strings.Join(converted, ", "), ErrPSPAny))
	}
	res.sortNotes()
	return res, SortErrors(errs...)
}

// pspConversion is what converting one PSP learns, control by control, as
// its phases run.
type pspConversion struct {
	n *noter
	p *podSecurityPolicy
	s *pspSpec
	// baseline are the exclusions a baseline rule needs.
	baseline []policyv1alpha1.PodSecurityExclusion
	// restricted are the exclusions a restricted rule needs, when gaps is empty.
	restricted []policyv1alpha1.PodSecurityExclusion
	// gaps are the restricted controls the PSP does not enforce at all, by
	// the PSP field responsible.
	gaps [][2]string

	// added are the capabilities a container may add: allowedCapabilities
	// and defaultAddCapabilities.
	added []string
	// allVolumes is true when spec.volumes holds "*".
	allVolumes bool
	// seccomp are the allowed seccomp profiles; seccompUnset names the
	// annotation behind them when, at baseline, the converted rule admits
	// pods without a profile, which a PSP with a list and no default refused.
	seccomp      []string
	seccompUnset string
}

// both adds exclusions that a rule of either level needs.
func (c *pspConversion) both(xs ...policyv1alpha1.PodSecurityExclusion) {
	c.baseline = append(c.baseline, xs...)
	c.restricted = append(c.restricted, xs...)
}

// pspPhases convert one family of PSP fields each, in this order, which is
// the order of the notes they write.
var pspPhases = []func(*pspConversion) error{
	(*pspConversion).privilegeAndCapabilities,
	(*pspConversion).volumes,
	(*pspConversion).hostNamespacesAndPorts,
	(*pspConversion).seLinux,
	(*pspConversion).procMountAndSysctls,
	(*pspConversion).seccompAndAppArmor,
	(*pspConversion).usersGroupsAndEscalation,
	(*pspConversion).withoutCounterpart,
}

func convertPSP(n *noter, p *podSecurityPolicy) (*policyv1alpha1.SecurityPolicy, error) {
	c := &pspConversion{n: n, p: p, s: &p.Spec}
	for _, phase := range pspPhases {
		if err := phase(c); err != nil {
			return nil, err
		}
	}
	sp := c.policy()
	if _, err := engine.CompilePolicy(sp); err != nil {
		return nil, fmt.Errorf("the converted SecurityPolicy does not compile: %w", err)
	}
	return sp, nil
}

// privilegeAndCapabilities: privileged, allowedCapabilities,
// defaultAddCapabilities and requiredDropCapabilities.
func (c *pspConversion) privilegeAndCapabilities() error {
	s := c.s
	if s.Privileged {
		c.both(whole(policyv1alpha1.ControlPrivilegedContainers))
	}
	// What a container may add is allowedCapabilities and
	// defaultAddCapabilities.
	c.added = append(slices.Clone(s.AllowedCapabilities), s.DefaultAddCapabilities...)
	if slices.Contains(c.added, "*") {
		c.both(perContainerList(policyv1alpha1.ControlCapabilities, "securityContext.capabilities.add", []string{"*"})...)
	} else {
		var overBaseline, overRestricted []string
		baseline := engine.BaselineCapabilities()
		for _, capability := range c.added {
			if !slices.Contains(baseline, capability) && !slices.Contains(overBaseline, capability) {
				overBaseline = append(overBaseline, capability)
			}
			if capability != "NET_BIND_SERVICE" && !slices.Contains(overRestricted, capability) {
				overRestricted = append(overRestricted, capability)
			}
		}
		if len(overBaseline) > 0 {
			c.baseline = append(c.baseline, perContainerList(policyv1alpha1.ControlCapabilities, "securityContext.capabilities.add", overBaseline)...)
		}
		if len(overRestricted) > 0 {
			c.restricted = append(c.restricted, perContainerList(policyv1alpha1.ControlCapabilities, "securityContext.capabilities.add", overRestricted)...)
		}
	}
	if !slices.ContainsFunc(s.RequiredDropCapabilities, func(d string) bool { return strings.EqualFold(d, "ALL") }) {
		c.gaps = append(c.gaps, [2]string{"spec.requiredDropCapabilities", "does not include ALL, which restricted requires"})
	}
	if len(s.DefaultAddCapabilities) > 0 {
		c.n.warn("spec.defaultAddCapabilities", "podsieve does not mutate pods: containers must add these capabilities themselves")
	}
	return nil
}

// volumes: volumes and allowedHostPaths.
func (c *pspConversion) volumes() error {
	s := c.s
	c.allVolumes = slices.Contains(s.Volumes, "*")
	if c.allVolumes || slices.Contains(s.Volumes, "hostPath") {
		x := whole(policyv1alpha1.ControlHostPathVolumes)
		if len(s.AllowedHostPaths) > 0 {
			x.RestrictedField = "spec.volumes[*].hostPath"
			for i, h := range s.AllowedHostPaths {
				prefix := strings.TrimRight(h.PathPrefix, "/")
				x.Values = append(x.Values, cmpOr(prefix, "/"), prefix+"/**")
				if h.ReadOnly {
					c.n.untranslated(fmt.Sprintf("spec.allowedHostPaths[%d].readOnly", i), "podsieve cannot require a hostPath volume to be mounted read-only; %s is admitted writable", h.PathPrefix)
				}
			}
		}
		c.both(x)
	}
	if c.allVolumes {
		c.gaps = append(c.gaps, [2]string{"spec.volumes", "allows every volume type"})
		return nil
	}
	for _, v := range s.Volumes {
		if v == "hostPath" || slices.Contains(pspVolumeTypes, v) {
			continue
		}
		field := "spec.volumes[*]." + cmp.Or(pspVolumeFields[v], v)
		if !slices.Contains(engine.FieldsOf(policyv1alpha1.ControlVolumeTypes), field) {
			// A type the restricted check does not know is not refused.
			continue
		}
		c.restricted = append(c.restricted, policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlVolumeTypes, RestrictedField: field})
	}
	return nil
}

// pspVolumeFields are the PodSecurityPolicy volume types (its FSType
// names) whose pod volume field is spelled otherwise.
var pspVolumeFields = map[string]string{"cephFS": "cephfs"}

// hostNamespacesAndPorts: hostNetwork, hostPID, hostIPC and hostPorts.
func (c *pspConversion) hostNamespacesAndPorts() error {
	s := c.s
	for _, h := range []struct {
		on    bool
		field string
	}{{s.HostNetwork, "spec.hostNetwork"}, {s.HostPID, "spec.hostPID"}, {s.HostIPC, "spec.hostIPC"}} {
		if h.on {
			c.both(policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlHostNamespaces, RestrictedField: h.field, Values: []string{"true"}})
		}
	}
	if len(s.HostPorts) == 0 {
		return nil
	}
	var globs []string
	for _, r := range s.HostPorts {
		globs = append(globs, portGlobs(max(r.Min, 1), min(r.Max, 65535))...)
	}
	if slices.Contains(globs, "*") {
		globs = []string{"*"}
	}
	if len(globs) > 64 {
		c.n.untranslated("spec.hostPorts", "the ranges need %d globs, more than an entry holds (64); every host port is admitted", len(globs))
		globs = []string{"*"}
	}
	if len(globs) > 0 {
		c.both(perContainerList(policyv1alpha1.ControlHostPorts, "ports[*].hostPort", globs)...)
	}
	return nil
}

// seLinux: seLinux.
func (c *pspConversion) seLinux() error {
	s := c.s
	switch s.SELinux.Rule {
	case "RunAsAny", "":
		c.both(whole(policyv1alpha1.ControlSELinux))
	case "MustRunAs":
		if o := s.SELinux.SELinuxOptions; o != nil {
			c.n.untranslated("spec.seLinux", "MustRunAs required these options (%s) and set them on pods; podsieve does not mutate pods and cannot require options: pods without them, or with the level or a standard type, user or role, are admitted", seLinuxString(o))
			switch o.Type {
			case "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t":
			default:
				c.both(seLinuxEntries("type", o.Type)...)
			}
			if o.User != "" {
				c.both(seLinuxEntries("user", o.User)...)
			}
			if o.Role != "" {
				c.both(seLinuxEntries("role", o.Role)...)
			}
		}
	default:
		return fmt.Errorf("spec.seLinux.rule: %q is not a rule; use MustRunAs or RunAsAny", s.SELinux.Rule)
	}
	return nil
}

// procMountAndSysctls: allowedProcMountTypes, allowedUnsafeSysctls and
// forbiddenSysctls.
func (c *pspConversion) procMountAndSysctls() error {
	s := c.s
	if slices.ContainsFunc(s.AllowedProcMountTypes, func(t string) bool { return t != "Default" }) {
		c.both(whole(policyv1alpha1.ControlProcMountType))
	}
	if slices.Contains(s.AllowedUnsafeSysctls, "*") {
		c.both(whole(policyv1alpha1.ControlSysctls))
	} else if len(s.AllowedUnsafeSysctls) > 0 {
		c.both(policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlSysctls, RestrictedField: "spec.securityContext.sysctls[*].name", Values: slices.Clone(s.AllowedUnsafeSysctls)})
	}
	if len(s.ForbiddenSysctls) > 0 {
		c.n.untranslated("spec.forbiddenSysctls", "podsieve cannot forbid the safe sysctls that the Pod Security Standards allow; %s stay admitted where they are safe", strings.Join(s.ForbiddenSysctls, ", "))
	}
	return nil
}

// seccompAndAppArmor: the seccomp and AppArmor annotations. Without a list of
// allowed seccomp profiles, the PSP admitted pods without one and refused any
// profile; baseline refuses Unconfined already, so no exclusion is needed,
// and restricted would refuse the pods without a profile. With a list, only
// the listed profiles were admitted, and a pod without one only when a
// default filled it in.
func (c *pspConversion) seccompAndAppArmor() error {
	ann := c.p.Metadata.Annotations
	c.seccomp, _ = profiles(ann, seccompAllowed)
	_, seccompHasDefault := ann[seccompDefault]
	switch {
	case len(c.seccomp) == 0:
		c.gaps = append(c.gaps, [2]string{"metadata.annotations[" + seccompAllowed + "]", "is not set, so the PSP admits pods without a seccomp profile"})
		c.n.warn("metadata.annotations["+seccompAllowed+"]", "is not set: the PSP refused pods that set any seccomp profile; the converted policy admits RuntimeDefault and Localhost profiles, and refuses Unconfined")
	case slices.Contains(c.seccomp, "*") || slices.Contains(c.seccomp, "unconfined"):
		c.both(whole(policyv1alpha1.ControlSeccomp))
		c.gaps = append(c.gaps, [2]string{"metadata.annotations[" + seccompAllowed + "]", "admits unconfined pods"})
	}
	if len(c.seccomp) > 0 && !slices.Contains(c.seccomp, "*") && !seccompHasDefault {
		c.seccompUnset = "metadata.annotations[" + seccompAllowed + "]"
	}
	if seccompHasDefault {
		c.n.warn("metadata.annotations["+seccompDefault+"]", "podsieve does not mutate pods: at restricted, pods must set seccompProfile themselves")
	}
	apparmor, apparmorSet := profiles(ann, appArmorAllowed)
	if !apparmorSet || slices.ContainsFunc(apparmor, func(p string) bool {
		return p != "runtime/default" && !strings.HasPrefix(p, "localhost/")
	}) {
		c.both(whole(policyv1alpha1.ControlAppArmor))
	}
	// A PSP with a list and no default refused containers without an
	// AppArmor profile; no level requires one.
	_, apparmorHasDefault := ann[appArmorDefault]
	if len(apparmor) > 0 && !apparmorHasDefault {
		c.n.untranslated("metadata.annotations["+appArmorAllowed+"]", "the PSP refused containers without an AppArmor profile (it sets no default); the Pod Security Standards do not require one, so they are admitted")
	}
	if apparmorHasDefault {
		c.n.warn("metadata.annotations["+appArmorDefault+"]", "podsieve does not mutate pods; it does not set an AppArmor profile")
	}
	return nil
}

// usersGroupsAndEscalation: allowPrivilegeEscalation,
// defaultAllowPrivilegeEscalation, runAsUser, runAsGroup,
// supplementalGroups and fsGroup.
func (c *pspConversion) usersGroupsAndEscalation() error {
	s := c.s
	if s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
		c.gaps = append(c.gaps, [2]string{"spec.allowPrivilegeEscalation", "is not false"})
	}
	if s.DefaultAllowPrivilegeEscalation != nil {
		c.n.warn("spec.defaultAllowPrivilegeEscalation", "podsieve does not mutate pods: at restricted, containers must set allowPrivilegeEscalation: false themselves")
	}
	switch s.RunAsUser.Rule {
	case "MustRunAsNonRoot":
	case "MustRunAs":
		if slices.ContainsFunc(s.RunAsUser.Ranges, func(r pspRange) bool { return r.Min <= 0 }) || len(s.RunAsUser.Ranges) == 0 {
			c.gaps = append(c.gaps, [2]string{"spec.runAsUser", "admits UID 0"})
		}
		c.n.untranslated("spec.runAsUser.ranges", "podsieve cannot require UIDs in ranges (%s); it requires only a non-root user at restricted", ranges(s.RunAsUser.Ranges))
	case "RunAsAny", "":
		c.gaps = append(c.gaps, [2]string{"spec.runAsUser", "admits root (RunAsAny)"})
	default:
		return fmt.Errorf("spec.runAsUser.rule: %q is not a rule; use MustRunAs, MustRunAsNonRoot or RunAsAny", s.RunAsUser.Rule)
	}
	for _, g := range []struct {
		field string
		r     *pspRunAs
	}{{"spec.runAsGroup", s.RunAsGroup}, {"spec.supplementalGroups", &s.SupplementalGroups}, {"spec.fsGroup", &s.FSGroup}} {
		if g.r != nil && (g.r.Rule == "MustRunAs" || g.r.Rule == "MayRunAs") {
			c.n.untranslated(g.field, "%s (%s) has no Pod Security Standards counterpart; group IDs are not checked", g.r.Rule, ranges(g.r.Ranges))
		}
	}
	return nil
}

// withoutCounterpart: the fields the Pod Security Standards have nothing
// for (readOnlyRootFilesystem, allowedFlexVolumes, allowedCSIDrivers,
// runtimeClass).
func (c *pspConversion) withoutCounterpart() error {
	s := c.s
	if s.ReadOnlyRootFilesystem {
		c.n.untranslated("spec.readOnlyRootFilesystem", "has no Pod Security Standards counterpart; a writable root filesystem is admitted")
	}
	if len(s.AllowedFlexVolumes) > 0 {
		c.n.untranslated("spec.allowedFlexVolumes", "has no Pod Security Standards counterpart; flexVolume drivers are not checked")
	}
	if len(s.AllowedCSIDrivers) > 0 {
		c.n.untranslated("spec.allowedCSIDrivers", "has no Pod Security Standards counterpart; CSI drivers are not checked")
	}
	if s.RuntimeClass != nil && len(s.RuntimeClass.AllowedRuntimeClassNames) > 0 && !slices.Contains(s.RuntimeClass.AllowedRuntimeClassNames, "*") {
		c.n.untranslated("spec.runtimeClass", "has no Pod Security Standards counterpart; runtime classes are not checked")
	}
	return nil
}

// policy picks the level: restricted when the PSP enforces every restricted
// control (allowances within them become exclusions); privileged when it
// allows what makes a container the host's equal; baseline otherwise.
func (c *pspConversion) policy() *policyv1alpha1.SecurityPolicy {
	s, n := c.s, c.n
	sp := newPolicy(c.p.Metadata.Name)
	sp.Spec.Action = policyv1alpha1.ActionEnforce
	rule := policyv1alpha1.PolicyRule{PodSecurity: policyv1alpha1.PodSecurity{Version: policyv1alpha1.VersionLatest}}
	seccompUnset := c.seccompUnset
	switch {
	case len(c.gaps) == 0:
		// restricted requires a seccomp profile, as the PSP did.
		seccompUnset = ""
		rule.Name, rule.PodSecurity.Level, rule.PodSecurity.Exclude = "restricted", policyv1alpha1.LevelRestricted, c.restricted
		if !c.allVolumes {
			var lost []string
			for _, v := range pspVolumeTypes {
				if !slices.Contains(s.Volumes, v) {
					lost = append(lost, v)
				}
			}
			if len(lost) > 0 {
				n.untranslated("spec.volumes", "restricted admits %s, which the PSP did not", strings.Join(lost, ", "))
			}
		}
	case s.Privileged && slices.Contains(c.added, "*") && s.HostNetwork && s.HostPID && s.HostIPC && (c.allVolumes || slices.Contains(s.Volumes, "hostPath")) && len(s.AllowedHostPaths) == 0:
		rule.Name, rule.PodSecurity.Level = "privileged", policyv1alpha1.LevelPrivileged
		n.warn("spec", "allows privileged containers, every capability, the host's namespaces and paths: converted to level privileged, which checks nothing")
	default:
		rule.Name, rule.PodSecurity.Level, rule.PodSecurity.Exclude = "baseline", policyv1alpha1.LevelBaseline, c.baseline
		var why []string
		for _, g := range c.gaps {
			why = append(why, g[0]+" "+g[1])
		}
		n.warn("spec", "converted to level baseline because restricted would refuse what it admits: %s", strings.Join(why, "; "))
		if !c.allVolumes && len(s.Volumes) > 0 {
			n.untranslated("spec.volumes", "baseline admits every volume type but hostPath; the PSP's list (%s) is not enforced", strings.Join(s.Volumes, ", "))
		}
	}
	if seccompUnset != "" {
		n.untranslated(seccompUnset, "the PSP refused pods without a seccomp profile (it lists %s and sets no default); %s admits them", strings.Join(c.seccomp, ", "), rule.PodSecurity.Level)
	}
	sp.Spec.Rules = []policyv1alpha1.PolicyRule{rule}
	n.warn("", "a PSP applied to the pods whose creator or service account could use it (RBAC); the converted policy applies in every namespace: narrow its match to where the PSP was granted")
	return sp
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func seLinuxEntries(part, value string) []policyv1alpha1.PodSecurityExclusion {
	out := []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlSELinux, RestrictedField: "spec.securityContext.seLinuxOptions." + part, Values: []string{value}}}
	return append(out, perContainerList(policyv1alpha1.ControlSELinux, "securityContext.seLinuxOptions."+part, []string{value})...)
}

func seLinuxString(o *pspSELinuxOptions) string {
	var out []string
	for _, kv := range [][2]string{{"user", o.User}, {"role", o.Role}, {"type", o.Type}, {"level", o.Level}} {
		if kv[1] != "" {
			out = append(out, kv[0]+" "+kv[1])
		}
	}
	return strings.Join(out, ", ")
}

// profiles reads a comma-separated profile annotation.
func profiles(ann map[string]string, key string) ([]string, bool) {
	v, ok := ann[key]
	if !ok {
		return nil, false
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, true
}

func ranges(rs []pspRange) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d-%d", r.Min, r.Max))
	}
	if len(out) == 0 {
		return "no ranges"
	}
	return strings.Join(out, ", ")
}

// portGlobs returns globs that match exactly the decimal numbers lo..hi:
// "80??" is 8000-8099. Values are numbers without leading zeros, so "?"
// stands for one digit.
func portGlobs(lo, hi int64) []string {
	if lo > hi {
		return nil
	}
	if lo <= 1 && hi >= 65535 {
		return []string{"*"}
	}
	var out []string
	for d := digits(lo); d <= digits(hi); d++ {
		a, b := max(lo, pow10(d-1)), min(hi, pow10(d)-1)
		if a == pow10(d-1) && b == pow10(d)-1 {
			out = append(out, strings.Repeat("?", d))
			continue
		}
		for a <= b {
			k := 0
			for a%pow10(k+1) == 0 && a+pow10(k+1)-1 <= b {
				k++
			}
			out = append(out, strconv.FormatInt(a/pow10(k), 10)+strings.Repeat("?", k))
			a += pow10(k)
		}
	}
	return out
}

func digits(v int64) int { return len(strconv.FormatInt(v, 10)) }

func pow10(k int) int64 { return int64(math.Pow10(k)) }
