package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Limits bound one decision. A decision that reaches them stops and fails
// closed: every Enforce rule it did not finish refuses the object
// (Decision.Err says why). The zero value is DefaultLimits without
// cancellation.
type Limits struct {
	// MaxSteps is the work budget of one decision, in steps: 0 means
	// DefaultMaxSteps. A step is about a nanosecond of one core's work: a
	// word operation of a glob automaton (each glob byte scanned costs its
	// words plus one), stepsPerEntry for each exclusion entry tested against
	// a violation and each exception offered to a rule, and for each rule,
	// before its checks run, the price of checking the object and
	// attributing its failures (checkSteps: its containers, the entries of
	// the lists the checks walk, their bytes). Steps are counted from the
	// inputs only, so the same review stops at the same point on every
	// machine.
	MaxSteps int64
	// Done, when closed, stops the decision: a context's Done(), for a review
	// whose deadline passed. It is polled every pollSteps steps.
	Done <-chan struct{}
}

// DefaultMaxSteps is the budget of one decision. It is set by the largest
// review that must still be decided: one maximal PolicyException (16 image
// globs of 256 bytes that all run) on a pod of 256 containers with distinct
// images of maxImageReference bytes, about 11 million steps
// (BenchmarkWorstCase/largest-exception-largest-pod). Reaching it costs
// under 10 ms of one core on the 2-core development machine
// (docs/performance.md, "Worst-case review"); the realistic cases of
// BenchmarkEvaluate spend less than 1% of it.
const DefaultMaxSteps = 12_000_000

// DefaultLimits are the limits of Decide.
var DefaultLimits = Limits{MaxSteps: DefaultMaxSteps}

// Step weights, calibrated against a glob automaton's word operation
// (BenchmarkGlobBytes, BenchmarkWorstCase): testing one entry against one
// violation (control, field, names and values, besides their globs' own
// steps) or offering one exception to a rule costs about as much as 24 of
// them.
const (
	stepsPerEntry = 24
	pollSteps     = 1 << 16
)

// What one rule's checks and attribution cost per container and per entry
// of the lists they walk, calibrated on the largest objects a request can
// hold at restricted, where every container fails every check that reads
// its security context (BenchmarkWorstCase's many-containers and long-lists
// cases, against the glob steps of its other cases in the same run): upstream
// puts each listed capability, port, volume and sysctl in a set, sorts the
// set and joins it into its message, and attribution collects them again,
// for each of the checks that read the list. The bytes of the strings the
// checks quote into their messages and attribution copies into findings
// (SELinux options, probe and lifecycle hosts, annotation values, profiles)
// cost more than those only compared.
const (
	stepsPerContainer  = 2500
	stepsPerCapability = 900
	stepsPerPort       = 900
	stepsPerVolume     = 500
	stepsPerSysctl     = 600
	stepsPerAnnotation = 100
	stepsPerByte       = 2
	stepsPerQuotedByte = 12
	// stepsPerAnnotationByte prices an annotation value's bytes.
	stepsPerAnnotationByte = 18
)

// StoppedError is why a decision stopped before it was complete: its work
// budget ran out, or its caller cancelled it.
type StoppedError struct {
	// Cancelled is true when Limits.Done was closed, false when the budget
	// ran out.
	Cancelled bool
	// Budget and Spent are in steps (Limits.MaxSteps).
	Budget, Spent int64
	// Containers is the number of containers in the object; Entries the
	// number of exclusion entries (the rule's and its exceptions') offered to
	// the rule that was being decided, and Exceptions the number of its
	// exceptions.
	Containers, Entries, Exceptions int
	// Policy and Rule name the rule that was being decided.
	Policy, Rule string
	// CheckSteps is what checking the object costs per rule, set when
	// the budget could not pay it: the object itself is too large.
	CheckSteps int64
}

func (e *StoppedError) Error() string {
	if e.Cancelled {
		return fmt.Sprintf("podsieve stopped evaluating SecurityPolicy %q rule %q: the review was cancelled (its deadline passed) after %d steps of work; "+
			"it refuses what it has not checked", e.Policy, e.Rule, e.Spent)
	}
	if e.CheckSteps > 0 {
		return fmt.Sprintf("podsieve stopped evaluating SecurityPolicy %q rule %q: the review exceeded its work budget of %d steps "+
			"before checking the object, which costs %d steps per rule (%d containers, the entries of its capability, port, "+
			"volume, sysctl and annotation lists, and the bytes of the strings the checks read); it refuses what it has not checked: "+
			"split the workload into pods with fewer containers, and remove repeated or unneeded list entries and overlong strings",
			e.Policy, e.Rule, e.Budget, e.CheckSteps, e.Containers)
	}
	return fmt.Sprintf("podsieve stopped evaluating SecurityPolicy %q rule %q: the review exceeded its work budget of %d steps "+
		"(%d containers × %d exclusion entries, of the rule and of %d PolicyExceptions); "+
		"it refuses what it has not checked: split the workload into pods with fewer containers, "+
		"or merge or narrow the PolicyExceptions that apply to it (fewer entries, image globs that start with their registry)",
		e.Policy, e.Rule, e.Budget, e.Containers, e.Entries, e.Exceptions)
}

// budget counts one decision's work against its limits.
type budget struct {
	max, left int64
	poll      int64 // poll done when left drops below
	done      <-chan struct{}
	stopped   *StoppedError
	// What the stop message reports: set as the decision goes.
	containers, entries, exceptions int
	policy, rule                    string
	// checkSteps is what one rule's checks and attribution cost on the
	// object (sizeUp), charged before they run; checking is set while it is.
	checkSteps int64
	checking   bool
}

func newBudget(l Limits) budget {
	max := l.MaxSteps
	if max == 0 {
		max = DefaultMaxSteps
	}
	return budget{max: max, left: max, poll: max - pollSteps, done: l.Done}
}

// spend charges n steps and reports whether the decision may go on.
func (b *budget) spend(n int64) bool {
	if b.stopped != nil {
		return false
	}
	b.left -= n
	if b.left < 0 {
		b.stop(false)
		return false
	}
	if b.left < b.poll {
		b.poll = b.left - pollSteps
		return b.checkDone()
	}
	return true
}

// checkDone stops the decision if its caller cancelled it.
func (b *budget) checkDone() bool {
	if b.stopped != nil {
		return false
	}
	if b.done != nil {
		select {
		case <-b.done:
			b.stop(true)
			return false
		default:
		}
	}
	return true
}

func (b *budget) stop(cancelled bool) {
	b.stopped = &StoppedError{
		Cancelled: cancelled, Budget: b.max, Spent: b.max - b.left,
		Containers: b.containers, Entries: b.entries, Exceptions: b.exceptions,
		Policy: b.policy, Rule: b.rule,
	}
	if b.checking && !cancelled {
		b.stopped.CheckSteps = b.checkSteps
	}
}

// StoppedCheckID is the CheckID of the finding that a rule whose evaluation
// stopped reports (its Detail is the StoppedError's message): no entry
// covers it, so the rule fails.
const StoppedCheckID = "podsieve-stopped"

// stoppedFinding is that finding.
func stoppedFinding(err *StoppedError) Finding {
	return Finding{
		Violation: Violation{Control: "Evaluation stopped", CheckID: StoppedCheckID, Scope: ScopePod, Values: []string{}},
		Detail:    err.Error(),
	}
}

// decideState is what one decision carries from rule to rule: its budget,
// the glob automaton's scratch, and what it learnt of the object's images.
type decideState struct {
	budget
	sc       globScratch
	images   []*imageInfo
	imageIdx map[string]*imageInfo // once there are many images
}

func newDecideState(l Limits) *decideState {
	st := new(decideState)
	st.init(l)
	return st
}

func (st *decideState) init(l Limits) {
	st.budget = newBudget(l)
	st.sc.keep = true
}

// image returns what the decision knows of an image, parsing it the first
// time.
func (st *decideState) image(image string) *imageInfo {
	if st.imageIdx != nil {
		if info, ok := st.imageIdx[image]; ok {
			return info
		}
	} else {
		for _, info := range st.images {
			if info.image == image {
				return info
			}
		}
	}
	info := new(imageInfo)
	*info = newImageInfo(image)
	st.images = append(st.images, info)
	if st.imageIdx == nil && len(st.images) > 8 {
		st.imageIdx = make(map[string]*imageInfo, 2*len(st.images))
		for _, i := range st.images {
			st.imageIdx[i.image] = i
		}
	} else if st.imageIdx != nil {
		st.imageIdx[image] = info
	}
	return info
}

// countContainers is the number of containers of every kind in a pod spec.
func countContainers(spec *corev1.PodSpec) int {
	if spec == nil {
		return 0
	}
	return len(spec.InitContainers) + len(spec.Containers) + len(spec.EphemeralContainers)
}

// sizeUp prices what running a rule's checks on o and attributing their
// failures costs (checkSteps), before any of it runs, so that an object too
// large for the budget is stopped before the work rather than after it.
func (st *decideState) sizeUp(o *Object) {
	st.containers = countContainers(o.Spec)
	st.checkSteps = checkSteps(o)
}

// checkSteps prices one rule's checks and attribution on o: each container,
// each entry of the lists the checks walk (the pod's annotations, volumes and
// sysctls; each container's added and dropped capabilities and ports), and
// each byte of the strings they compare, hash and sort. The lists are
// written by whoever writes the pod, unbounded but for the request's size,
// and the checks and attribution walk them whole for every rule, so each is
// priced by its length rather than found out by running it.
func checkSteps(o *Object) int64 {
	spec := o.Spec
	if spec == nil {
		return stepsPerContainer
	}
	steps := int64(countContainers(spec)+1) * stepsPerContainer
	// bytes are compared, hashed or sorted; quoted are also quoted into
	// upstream's messages and copied into findings; annotations' values too,
	// at a higher price (BenchmarkWorstCase/long-strings). An image is
	// neither: the checks do not read it, matching it is charged as its
	// globs run, and messages print it clipped.
	var bytes, quoted, valueBytes int64
	if o.Meta != nil {
		steps += int64(len(o.Meta.Annotations)) * stepsPerAnnotation
		for k, v := range o.Meta.Annotations {
			bytes += int64(len(k))
			valueBytes += int64(len(v))
		}
	}
	steps += int64(len(spec.Volumes)) * stepsPerVolume
	for i := range spec.Volumes {
		bytes += int64(len(spec.Volumes[i].Name))
		if hp := spec.Volumes[i].HostPath; hp != nil {
			bytes += int64(len(hp.Path))
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		steps += int64(len(sc.Sysctls)) * stepsPerSysctl
		for i := range sc.Sysctls {
			bytes += int64(len(sc.Sysctls[i].Name))
		}
		quoted += seLinuxBytes(sc.SELinuxOptions) + profileBytes(sc.SeccompProfile, sc.AppArmorProfile)
	}
	for _, c := range containers(spec) {
		steps += int64(len(c.Ports)) * stepsPerPort
		quoted += probeBytes(c.LivenessProbe) + probeBytes(c.ReadinessProbe) + probeBytes(c.StartupProbe)
		if c.Lifecycle != nil {
			quoted += handlerBytes(c.Lifecycle.PostStart) + handlerBytes(c.Lifecycle.PreStop)
		}
		sc := c.SecurityContext
		if sc == nil {
			continue
		}
		quoted += seLinuxBytes(sc.SELinuxOptions) + profileBytes(sc.SeccompProfile, sc.AppArmorProfile)
		if sc.ProcMount != nil {
			quoted += int64(len(*sc.ProcMount))
		}
		if caps := sc.Capabilities; caps != nil {
			steps += int64(len(caps.Add)+len(caps.Drop)) * stepsPerCapability
			for _, c := range caps.Add {
				bytes += int64(len(c))
			}
			for _, c := range caps.Drop {
				bytes += int64(len(c))
			}
		}
	}
	return steps + bytes*stepsPerByte + quoted*stepsPerQuotedByte + valueBytes*stepsPerAnnotationByte
}

func seLinuxBytes(o *corev1.SELinuxOptions) int64 {
	if o == nil {
		return 0
	}
	return int64(len(o.User) + len(o.Role) + len(o.Type) + len(o.Level))
}

func profileBytes(seccomp *corev1.SeccompProfile, appArmor *corev1.AppArmorProfile) int64 {
	var n int
	if seccomp != nil && seccomp.LocalhostProfile != nil {
		n += len(*seccomp.LocalhostProfile)
	}
	if appArmor != nil && appArmor.LocalhostProfile != nil {
		n += len(*appArmor.LocalhostProfile)
	}
	return int64(n)
}

func probeBytes(p *corev1.Probe) int64 {
	if p == nil {
		return 0
	}
	return handlerBytes(&corev1.LifecycleHandler{HTTPGet: p.HTTPGet, TCPSocket: p.TCPSocket})
}

func handlerBytes(h *corev1.LifecycleHandler) int64 {
	if h == nil {
		return 0
	}
	var n int
	if h.HTTPGet != nil {
		n += len(h.HTTPGet.Host)
	}
	if h.TCPSocket != nil {
		n += len(h.TCPSocket.Host)
	}
	return int64(n)
}
