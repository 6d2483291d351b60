// Package offline compiles files into the index the cluster uses, for the
// commands that decide objects without a cluster (podsieve eval, explain and
// exception generate): the SecurityPolicies and PolicyExceptions compiled by
// the engine, each exception judged at a given time and placed with
// index.Place as the PolicyException controller places it, the Namespaces'
// labels, and the pod-bearing objects to decide. What did load is compiled
// even when some documents did not, so that one run reports every problem in
// the input, each naming its file and document.
//
// It trusts only what the cluster would. The input is two sets of files: the
// change to decide (-f), which a developer writes, and the cluster's own
// state (--cluster-state), which the platform provides. A developer can write
// anything in a change, and the API server would not take all of it as
// written: a Namespace in the change does not label the namespace (a
// namespace's labels are the cluster's), an exception's creationTimestamp is
// the API server's (set at create, kept on update), and an exception in the
// cluster exceptions namespace is a cluster admin's. So, from the change,
// Namespaces are ignored, an exception counts as created at Options.Now
// (or when the cluster state's copy of it was), and exceptions in the
// cluster exceptions namespace are ignored; each is reported through
// Options.Warn. A decision that depends on labels of a namespace the cluster
// state does not hold (a rule or cluster exception that selects namespaces
// by label) is an error for an Enforce policy, and a warning for another.
//
// It owns loading and judging, not presenting: internal/render prints the
// decisions, cmd/podsieve parses flags and maps errors to exit codes. It must
// not import cobra, pflag, client-go or controller-runtime.
package offline

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/manifest"
)

// Options are the cluster to decide the input as.
type Options struct {
	// Namespace is the namespace of objects and exceptions that do not set
	// one.
	Namespace string
	// ExceptionsNamespace is the cluster exceptions namespace, whose
	// exceptions may reach other namespaces.
	ExceptionsNamespace string
	// Now is the time to decide at; expiresAt is compared with it. An
	// exception of the change counts as created at Now.
	Now time.Time
	// ClusterState are the paths (as for Load's files) of the cluster's own
	// objects, trusted as the cluster holds them: Namespaces and their
	// labels, PolicyExceptions (those of the cluster exceptions namespace
	// too) with their creationTimestamp, SecurityPolicies. Load reads them;
	// Compile trusts the documents marked manifest.Document.ClusterState.
	ClusterState []string
	// Warn, when set, is told each part of the input that is ignored or not
	// taken as written, one message naming its document.
	Warn func(string)
	// Mode is whom the input will be decided for (Decide's mode): in
	// engine.Background, policies and exceptions without background: true
	// cannot make a decision depend on a namespace's labels.
	Mode engine.Mode
}

// warn reports a message through Warn, if set.
func (o Options) warn(format string, args ...any) {
	if o.Warn != nil {
		o.Warn(fmt.Sprintf(format, args...))
	}
}

// warnings are what Compile reports through Options.Warn, kept to be
// reported in input order whichever step found them.
type warnings struct {
	list []warning
	seen map[string]bool
}

type warning struct {
	doc *manifest.Document
	msg string
}

// add keeps a warning about (or first seen at) document d.
func (w *warnings) add(d *manifest.Document, format string, args ...any) {
	w.list = append(w.list, warning{d, fmt.Sprintf(format, args...)})
}

// once is add, for the first call with key only.
func (w *warnings) once(key string, d *manifest.Document, format string, args ...any) {
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	if !w.seen[key] {
		w.seen[key] = true
		w.add(d, format, args...)
	}
}

// report tells opts.Warn every warning, in input order.
func (w *warnings) report(opts Options) {
	slices.SortStableFunc(w.list, func(a, b warning) int { return manifest.Compare(a.doc, b.doc) })
	for _, x := range w.list {
		opts.warn("%s", x.msg)
	}
}

// Input is a manifest set compiled into the same index the cluster uses.
type Input struct {
	// Set is what was read, every document with its file and position.
	Set *manifest.Set
	// Options are those the input was compiled with.
	Options Options
	// Index holds the policies, the judged exceptions and the namespaces.
	Index *index.Index
	// Workloads are the pod-bearing objects, in input order.
	Workloads []Workload
	// Exceptions are the input's exceptions and whether each is in force.
	Exceptions []ExceptionStatus
}

// Workload is a pod-bearing object to decide and the document it came from.
type Workload struct {
	Doc    *manifest.Document
	Object *engine.Object
}

// String names the workload for messages:
// "Deployment staging/web (deploy.yaml, document 2)".
func (w Workload) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", w.Object.Kind, w.Object.Namespace, w.Object.Name, w.Doc.Where())
}

// ExceptionStatus is an input exception and whether it is in force, as its
// Ready condition would say in the cluster. podsieve eval -o json prints it
// as it is, so its JSON keys are a documented contract.
type ExceptionStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Source    string `json:"source"`
	Ready     bool   `json:"ready"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// Load reads the files and opts.ClusterState ("-" is stdin, once) with
// manifest.Load and compiles them together, the cluster state's documents
// marked manifest.Document.ClusterState (and first). Pod-bearing objects in
// the cluster state are not decided; other kinds there are skipped
// silently, as a dump of a cluster holds many. The errors of reading and of
// compiling are returned together.
func Load(files []string, stdin io.Reader, opts Options) (*Input, error) {
	if slices.Contains(files, manifest.Stdin) && slices.Contains(opts.ClusterState, manifest.Stdin) {
		return nil, errors.New("-f - and --cluster-state -: standard input can be read only once; write one of them to a file")
	}
	var errs []error
	var statePaths []string
	for _, p := range opts.ClusterState {
		if p != manifest.Stdin {
			if _, err := os.Stat(p); err != nil {
				errs = append(errs, fmt.Errorf("--cluster-state %s: %w", p, errors.Unwrap(err)))
				continue
			}
		}
		statePaths = append(statePaths, p)
	}
	set := &manifest.Set{}
	if len(statePaths) > 0 {
		state, err := manifest.Load(statePaths, stdin)
		errs = append(errs, err)
		for _, d := range state.Workloads {
			opts.warn("%s: %s is in --cluster-state, which says what the cluster holds, and is not decided; give the objects to decide with -f",
				d.Where(), nameOf(d.Object))
		}
		for _, list := range []*[]manifest.Document{&state.Policies, &state.Exceptions, &state.Namespaces} {
			for i := range *list {
				(*list)[i].ClusterState = true
			}
		}
		set.Policies, set.Exceptions, set.Namespaces = state.Policies, state.Exceptions, state.Namespaces
	}
	change, err := manifest.Load(files, stdin)
	errs = append(errs, err)
	set.Policies = append(set.Policies, change.Policies...)
	set.Exceptions = append(set.Exceptions, change.Exceptions...)
	set.Namespaces = append(set.Namespaces, change.Namespaces...)
	set.Workloads, set.Ignored = change.Workloads, change.Ignored
	in, err := Compile(set, opts)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	return in, nil
}

// nameOf is "<Kind> <namespace>/<name>" for messages.
func nameOf(o runtime.Object) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", o), "*")
	kind = kind[strings.LastIndex(kind, ".")+1:]
	m, ok := o.(metav1.Object)
	if !ok {
		return kind
	}
	if m.GetNamespace() == "" {
		return kind + " " + m.GetName()
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}

// Decide decides every workload at the input's time with one snapshot of
// the index, as the webhook (engine.Admission) or the background scan
// (engine.Background) would; the i-th decision is the i-th workload's.
func (in *Input) Decide(mode engine.Mode) []engine.Decision {
	snap := in.Index.Snapshot()
	decisions := make([]engine.Decision, len(in.Workloads))
	for i, w := range in.Workloads {
		decisions[i] = snap.Decide(w.Object, in.Options.Now, mode)
	}
	return decisions
}

// unknownLabels are the errors for a workload whose namespace the cluster
// state does not hold, one for each rule of an Enforce policy, and each
// exception in force reaching into an Enforce policy's rule, whose answer
// depends on that namespace's labels: decided with only its name label, it
// could pass where the cluster refuses. A rule of an Audit or Warn policy,
// which refuses nothing, is a warning, once per rule and namespace.
func unknownLabels(d *manifest.Document, o *engine.Object, policies []*engine.Policy, active []*engine.Exception, set *manifest.Set, mode engine.Mode, warn *warnings) []error {
	const fix = "give the cluster's Namespace with --cluster-state (kubectl get namespace %s -o yaml); a Namespace in the change does not count"
	if mode == engine.Background {
		// As engine.DecideWithin: the others do not take part.
		policies = slices.DeleteFunc(slices.Clone(policies), func(p *engine.Policy) bool { return !p.Background })
		active = slices.DeleteFunc(slices.Clone(active), func(e *engine.Exception) bool { return !e.Background })
	}
	var errs []error
	for _, p := range policies {
		for _, r := range p.Rules {
			field := r.NamespaceLabelsDecide(o)
			if field == "" {
				continue
			}
			where := ruleField(set, p.Name, r.Name, field)
			if p.Action != policyv1alpha1.ActionEnforce {
				warn.once(p.Name+"\x00"+r.Name+"\x00"+o.Namespace, d,
					"%s SecurityPolicy %q rule %q selects namespaces by label (%s), and the cluster state holds no Namespace %q, so its findings there are left out; "+
						"give the cluster's Namespace with --cluster-state", p.Action, p.Name, r.Name, where, o.Namespace)
				continue
			}
			errs = append(errs, fmt.Errorf("%s %s/%s: whether rule %q of SecurityPolicy %q (Enforce) applies depends on the labels of namespace %q (%s), and the cluster state holds no Namespace %q: "+fix,
				o.Kind, o.Namespace, o.Name, r.Name, p.Name, o.Namespace, where, o.Namespace, o.Namespace))
		}
	}
	for _, e := range active {
		if !e.NamespaceLabelsDecide(o) || !reachesEnforced(e, o, policies) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s %s/%s: whether PolicyException %s/%s applies depends on the labels of namespace %q (its spec.match.namespaceSelector%s), and the cluster state holds no Namespace %q: "+fix,
			o.Kind, o.Namespace, o.Name, e.Namespace, e.Name, o.Namespace, exceptionSelector(set, e), o.Namespace, o.Namespace))
	}
	return errs
}

// reachesEnforced reports whether the exception names a rule of an Enforce
// policy that applies to o, or may (its own namespaceSelector leaves it
// open).
func reachesEnforced(e *engine.Exception, o *engine.Object, policies []*engine.Policy) bool {
	nameOnly := map[string]string{engine.NamespaceNameLabel: o.Namespace}
	for _, p := range policies {
		if p.Action != policyv1alpha1.ActionEnforce {
			continue
		}
		for _, r := range p.Rules {
			if e.Targets(p.Name, r.Name) && (r.Matches(o, nameOnly) || r.NamespaceLabelsDecide(o) != "") {
				return true
			}
		}
	}
	return false
}

// ruleField is where a rule's namespaceSelector is written, with the
// selector: spec.rules[0].match.namespaceSelector "profile=restricted".
func ruleField(set *manifest.Set, policy, rule, field string) string {
	for _, d := range set.Policies {
		sp := d.Object.(*policyv1alpha1.SecurityPolicy)
		if sp.Name != policy {
			continue
		}
		for i, pr := range sp.Spec.Rules {
			if pr.Name != rule {
				continue
			}
			f := pr.Match
			if strings.HasPrefix(field, "exclude.") {
				f = pr.Exclude
			}
			if f != nil && f.NamespaceSelector != nil {
				return fmt.Sprintf("spec.rules[%d].%s %q", i, field, metav1.FormatLabelSelector(f.NamespaceSelector))
			}
			return fmt.Sprintf("spec.rules[%d].%s", i, field)
		}
	}
	return field
}

// exceptionSelector is ` "cni=acme"`, the exception's namespaceSelector as
// written, or "".
func exceptionSelector(set *manifest.Set, e *engine.Exception) string {
	for _, d := range set.Exceptions {
		pe := d.Object.(*policyv1alpha1.PolicyException)
		if d.ClusterState && pe.Namespace == e.Namespace && pe.Name == e.Name && pe.Spec.Match != nil && pe.Spec.Match.NamespaceSelector != nil {
			return fmt.Sprintf(" %q", metav1.FormatLabelSelector(pe.Spec.Match.NamespaceSelector))
		}
	}
	return ""
}
