// Package offline compiles files into the index the cluster uses, for the
// commands that decide objects without a cluster (podsieve eval, explain and
// exception generate): the SecurityPolicies and PolicyExceptions compiled by
// the engine, each exception judged at a given time and placed with
// index.Place as the PolicyException controller places it, the Namespaces'
// labels, and the pod-bearing objects to decide. What did load is compiled
// even when some documents did not, so that one run reports every problem in
// the input, each naming its file and document.
//
// It owns loading and judging, not presenting: internal/render prints the
// decisions, cmd/podsieve parses flags and maps errors to exit codes. It must
// not import cobra, pflag, client-go or controller-runtime.
package offline

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	// Now is the time to decide at; expiresAt is compared with it.
	Now time.Time
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

// Load reads the files ("-" is stdin) with manifest.Load and compiles them.
// The errors of reading and of compiling are returned together.
func Load(files []string, stdin io.Reader, opts Options) (*Input, error) {
	set, loadErr := manifest.Load(files, stdin)
	in, err := Compile(set, opts)
	if err := errors.Join(loadErr, err); err != nil {
		return nil, err
	}
	return in, nil
}

// Compile compiles policies and exceptions, loads the index and wraps the
// workloads. Every problem is reported, each naming its document: a policy
// or exception that does not compile, an exception that names a policy or
// rule the input does not hold, two objects with one name. An exception
// without a namespace gets opts.Namespace in the set itself, which Input.Set
// shares; a workload without one gets it in its engine.Object.
func Compile(set *manifest.Set, opts Options) (*Input, error) {
	type problem struct {
		doc *manifest.Document
		err error
	}
	var problems []problem
	bad := func(d *manifest.Document, err error) { problems = append(problems, problem{d, err}) }
	seen := map[string]*manifest.Document{}
	unique := func(d *manifest.Document, key string) bool {
		if first, ok := seen[key]; ok {
			bad(d, fmt.Errorf("%s is also defined in %s; names must be unique", key, first.Where()))
			return false
		}
		seen[key] = d
		return true
	}

	var policies []*engine.Policy
	for i := range set.Policies {
		d := &set.Policies[i]
		sp := d.Object.(*policyv1alpha1.SecurityPolicy)
		if !unique(d, "SecurityPolicy "+sp.Name) {
			continue
		}
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			bad(d, fmt.Errorf("SecurityPolicy %s: %w", sp.Name, err))
			continue
		}
		policies = append(policies, p)
	}

	type compiled struct {
		doc *manifest.Document
		e   *engine.Exception
	}
	var excs []compiled
	for i := range set.Exceptions {
		d := &set.Exceptions[i]
		pe := d.Object.(*policyv1alpha1.PolicyException)
		if pe.Namespace == "" {
			pe.Namespace = opts.Namespace
		}
		if !unique(d, "PolicyException "+pe.Namespace+"/"+pe.Name) {
			continue
		}
		e, err := engine.CompileException(pe, opts.ExceptionsNamespace)
		if err != nil {
			bad(d, fmt.Errorf("PolicyException %s/%s: %w", pe.Namespace, pe.Name, err))
			continue
		}
		excs = append(excs, compiled{d, e})
	}

	namespaces := map[string]map[string]string{}
	for i := range set.Namespaces {
		d := &set.Namespaces[i]
		ns := d.Object.(*corev1.Namespace)
		if !unique(d, "Namespace "+ns.Name) {
			continue
		}
		labels := map[string]string{"kubernetes.io/metadata.name": ns.Name}
		for k, v := range ns.Labels {
			labels[k] = v
		}
		namespaces[ns.Name] = labels
	}

	// As in the cluster, only Ready exceptions are in force; the others are
	// kept to explain refusals.
	in := &Input{Set: set, Options: opts, Index: index.New(opts.ExceptionsNamespace), Exceptions: []ExceptionStatus{}}
	byName := map[string]*engine.Policy{}
	for _, p := range policies {
		byName[p.Name] = p
	}
	judged := make([]index.Judged, 0, len(excs))
	for _, c := range excs {
		st := c.e.State(func(name string) *engine.Policy { return byName[name] }, opts.Now)
		judged = append(judged, index.Judged{Exception: c.e, State: st})
		switch st.Reason {
		case policyv1alpha1.ReasonPolicyNotFound:
			bad(c.doc, fmt.Errorf("PolicyException %s/%s: %s in the input; add the policy's file with -f, or fix the name", c.e.Namespace, c.e.Name, st.Message))
			continue
		case policyv1alpha1.ReasonRuleNotFound:
			bad(c.doc, fmt.Errorf("PolicyException %s/%s: %s", c.e.Namespace, c.e.Name, st.Message))
			continue
		}
		in.Exceptions = append(in.Exceptions, ExceptionStatus{
			Namespace: c.e.Namespace, Name: c.e.Name, Source: c.doc.Where(),
			Ready: st.Ready, Reason: st.Reason, Message: st.Message,
		})
	}
	// One snapshot for all of them, each placed as the cluster places it.
	in.Index.LoadJudged(policies, judged, namespaces)

	for i := range set.Workloads {
		d := &set.Workloads[i]
		o, err := engine.NewObject(d.Object)
		if err != nil {
			bad(d, err)
			continue
		}
		if o.Namespace == "" {
			o.Namespace = opts.Namespace
		}
		if !unique(d, o.Kind+" "+o.Namespace+"/"+o.Name) {
			continue
		}
		in.Workloads = append(in.Workloads, Workload{d, o})
	}
	if len(problems) == 0 {
		return in, nil
	}
	// Report in input order, whichever step found the problem.
	slices.SortStableFunc(problems, func(a, b problem) int { return manifest.Compare(a.doc, b.doc) })
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = fmt.Errorf("%s: %w", p.doc.Where(), p.err)
	}
	return nil, errors.Join(errs...)
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
