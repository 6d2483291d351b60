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
	// a violation and each exception offered to a rule, stepsPerContainer
	// for each container the checks and attribution visit, per rule. Steps
	// are counted from the inputs only, so the same review stops at the same
	// point on every machine.
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
// BenchmarkEvaluate spend less than a thousand steps.
const DefaultMaxSteps = 12_000_000

// DefaultLimits are the limits of Decide.
var DefaultLimits = Limits{MaxSteps: DefaultMaxSteps}

// Step weights, calibrated against a glob automaton's word operation
// (BenchmarkGlobBytes, BenchmarkWorstCase): testing one entry against one
// violation (control, field, names and values, besides their globs' own
// steps) or offering one exception to a rule costs about as much as 24 of
// them; running the checks and attributing one container, about 150.
const (
	stepsPerEntry     = 24
	stepsPerContainer = 150
	pollSteps         = 1 << 16
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
}

func (e *StoppedError) Error() string {
	if e.Cancelled {
		return fmt.Sprintf("podsieve stopped evaluating SecurityPolicy %q rule %q: the review was cancelled (its deadline passed) after %d steps of work; "+
			"it refuses what it has not checked", e.Policy, e.Rule, e.Spent)
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
