package offline

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/manifest"
)

// Compile compiles policies and exceptions, loads the index and wraps the
// workloads. Every problem is reported, each naming its document: a policy
// or exception that does not compile, an exception that names a policy or
// rule the input does not hold, two objects with one name, a decision that
// depends on labels of a namespace the cluster state does not hold. An
// exception without a namespace gets opts.Namespace in the set itself, which
// Input.Set shares; a workload without one gets it in its engine.Object.
//
// Documents not marked ClusterState are the change (see the package
// comment): their Namespaces and their exceptions in the cluster exceptions
// namespace are ignored, and their exceptions count as created at opts.Now;
// an exception of the change with the name of one of the cluster state is
// its update, which keeps the cluster's creationTimestamp. Two objects of
// one name are otherwise an error, across both.
func Compile(set *manifest.Set, opts Options) (*Input, error) {
	c := &compilation{set: set, opts: opts, seen: map[string]*manifest.Document{}}
	defer c.warn.report(opts)
	policies, bounded := c.policies()
	excs := c.exceptions(bounded)
	namespaces := c.namespaces()
	in := &Input{Set: set, Options: opts, Index: index.New(opts.ExceptionsNamespace), Exceptions: []ExceptionStatus{}}
	active := c.judge(in, policies, excs, namespaces)
	c.workloads(in, policies, active, namespaces)
	if err := c.err(); err != nil {
		return nil, err
	}
	return in, nil
}

// compilation is one run of Compile: the problems found so far, each with
// its document, the warnings, and the objects seen by "<Kind> <name>".
type compilation struct {
	set      *manifest.Set
	opts     Options
	problems []problem
	warn     warnings
	seen     map[string]*manifest.Document
}

// problem is an error about one document.
type problem struct {
	doc *manifest.Document
	err error
}

// compiled is an exception the engine compiled, with its document.
type compiled struct {
	doc *manifest.Document
	e   *engine.Exception
}

func (c *compilation) bad(d *manifest.Document, err error) {
	c.problems = append(c.problems, problem{d, err})
}

// claim records d under key in seen, or reports it as a second object of
// one name (shown as what) and returns false.
func claim[K comparable](c *compilation, seen map[K]*manifest.Document, key K, what string, d *manifest.Document) bool {
	if first, ok := seen[key]; ok {
		c.bad(d, fmt.Errorf("%s is also defined in %s; names must be unique", what, first.Where()))
		return false
	}
	seen[key] = d
	return true
}

// unique claims a name among the policies, namespaces and workloads.
func (c *compilation) unique(d *manifest.Document, what string) bool {
	return claim(c, c.seen, what, what, d)
}

// err is every problem, in input order whichever step found it.
func (c *compilation) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	slices.SortStableFunc(c.problems, func(a, b problem) int { return manifest.Compare(a.doc, b.doc) })
	errs := make([]error, len(c.problems))
	for i, p := range c.problems {
		errs[i] = fmt.Errorf("%s: %w", p.doc.Where(), p.err)
	}
	return errors.Join(errs...)
}

// policies compiles the SecurityPolicies; bounded names those that bound
// how long an exception lasts (maxDuration).
func (c *compilation) policies() (policies []*engine.Policy, bounded []string) {
	for i := range c.set.Policies {
		d := &c.set.Policies[i]
		sp := d.Object.(*policyv1alpha1.SecurityPolicy)
		if !c.unique(d, "SecurityPolicy "+sp.Name) {
			continue
		}
		if g := sp.Spec.Exceptions; g != nil && g.MaxDuration != nil {
			bounded = append(bounded, sp.Name)
		}
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			c.bad(d, fmt.Errorf("SecurityPolicy %s: %w", sp.Name, err))
			continue
		}
		policies = append(policies, p)
	}
	return policies, bounded
}

// exceptionKey is where a PolicyException is, by its namespace and name.
func exceptionKey(pe *policyv1alpha1.PolicyException) types.NamespacedName {
	return types.NamespacedName{Namespace: pe.Namespace, Name: pe.Name}
}

// sortExceptions gives an exception without a namespace opts.Namespace, and
// sorts the exceptions into the cluster's and the change's, each unique
// within its own; a change's exception of a name the cluster holds updates
// it.
func (c *compilation) sortExceptions() (cluster, change map[types.NamespacedName]*manifest.Document) {
	cluster, change = map[types.NamespacedName]*manifest.Document{}, map[types.NamespacedName]*manifest.Document{}
	for i := range c.set.Exceptions {
		d := &c.set.Exceptions[i]
		pe := d.Object.(*policyv1alpha1.PolicyException)
		if pe.Namespace == "" {
			pe.Namespace = c.opts.Namespace
		}
		what := "PolicyException " + pe.Namespace + "/" + pe.Name
		switch {
		case d.ClusterState:
			claim(c, cluster, exceptionKey(pe), what, d)
		case pe.Namespace == c.opts.ExceptionsNamespace:
			// Only a cluster admin creates exceptions there; a change that
			// holds one does not get it by writing it.
			c.warn.add(d, "%s: PolicyException %s/%s is ignored: it is in the cluster exceptions namespace %q, where a cluster admin, not a change, creates exceptions; "+
				"give the cluster's own exceptions with --cluster-state", d.Where(), pe.Namespace, pe.Name, c.opts.ExceptionsNamespace)
		default:
			claim(c, change, exceptionKey(pe), what, d)
		}
	}
	return cluster, change
}

// exceptions compiles the exceptions in force as the cluster would hold
// them: the cluster's, each replaced by the change's update of it, and the
// change's, as created (asCreated).
func (c *compilation) exceptions(bounded []string) []compiled {
	cluster, change := c.sortExceptions()
	var excs []compiled
	for i := range c.set.Exceptions {
		d := &c.set.Exceptions[i]
		pe := d.Object.(*policyv1alpha1.PolicyException)
		key := exceptionKey(pe)
		if d.ClusterState {
			if pe.CreationTimestamp.IsZero() && len(bounded) > 0 {
				// Read as created now, it could pass a maxDuration the
				// cluster judged from its real creation, and so could a
				// change that updates it.
				c.bad(d, fmt.Errorf("PolicyException %s/%s in the cluster state has no metadata.creationTimestamp, which starts its window under "+
					"the maxDuration of SecurityPolicy %s: give the cluster's copy as `kubectl get policyexceptions -A -o yaml` exports it",
					pe.Namespace, pe.Name, strings.Join(bounded, ", ")))
				continue
			}
			if cluster[key] != d || change[key] != nil {
				continue // a duplicate (reported), or updated by the change
			}
		} else if change[key] != d {
			continue // ignored or a duplicate, both reported
		} else {
			pe = asCreated(d, pe, cluster[key], c.opts.Now, &c.warn)
		}
		e, err := engine.CompileException(pe, c.opts.ExceptionsNamespace)
		if err != nil {
			c.bad(d, fmt.Errorf("PolicyException %s/%s: %w", pe.Namespace, pe.Name, err))
			continue
		}
		excs = append(excs, compiled{d, e})
	}
	return excs
}

// namespaces are the labels of the cluster state's Namespaces, by name,
// with the kubernetes.io/metadata.name label the API server sets.
func (c *compilation) namespaces() map[string]map[string]string {
	namespaces := map[string]map[string]string{}
	for i := range c.set.Namespaces {
		d := &c.set.Namespaces[i]
		ns := d.Object.(*corev1.Namespace)
		if !d.ClusterState {
			// A namespace's labels are what the cluster holds: a change
			// that could label its own namespace could choose which
			// policies select it.
			c.warn.add(d, "%s: Namespace %s is ignored: a change does not give a namespace its labels; "+
				"give the cluster's Namespaces with --cluster-state", d.Where(), ns.Name)
			continue
		}
		if !c.unique(d, "Namespace "+ns.Name) {
			continue
		}
		labels := map[string]string{"kubernetes.io/metadata.name": ns.Name}
		maps.Copy(labels, ns.Labels)
		namespaces[ns.Name] = labels
	}
	return namespaces
}

// judge judges each exception at opts.Now, records its status in
// in.Exceptions and loads the index with all of them, each placed as the
// cluster places it. As in the cluster, only Ready exceptions are in force
// (returned as active); the others are kept to explain refusals.
func (c *compilation) judge(in *Input, policies []*engine.Policy, excs []compiled, namespaces map[string]map[string]string) (active []*engine.Exception) {
	byName := map[string]*engine.Policy{}
	for _, p := range policies {
		byName[p.Name] = p
	}
	judged := make([]index.Judged, 0, len(excs))
	for _, x := range excs {
		st := x.e.State(func(name string) *engine.Policy { return byName[name] }, c.opts.Now)
		judged = append(judged, index.Judged{Exception: x.e, State: st})
		switch st.Reason {
		case policyv1alpha1.ReasonPolicyNotFound:
			c.bad(x.doc, fmt.Errorf("PolicyException %s/%s: %s in the input; add the policy's file with -f, or fix the name", x.e.Namespace, x.e.Name, st.Message))
			continue
		case policyv1alpha1.ReasonRuleNotFound:
			c.bad(x.doc, fmt.Errorf("PolicyException %s/%s: %s", x.e.Namespace, x.e.Name, st.Message))
			continue
		}
		if st.Ready {
			active = append(active, x.e)
		}
		in.Exceptions = append(in.Exceptions, ExceptionStatus{
			Namespace: x.e.Namespace, Name: x.e.Name, Source: x.doc.Where(),
			Ready: st.Ready, Reason: st.Reason, Message: st.Message,
		})
	}
	// One snapshot for all of them.
	in.Index.LoadJudged(policies, judged, namespaces)
	return active
}

// workloads wraps the pod-bearing objects to decide, each in its namespace
// (opts.Namespace when it names none), and reports a decision that depends
// on labels of a namespace the cluster state does not hold.
func (c *compilation) workloads(in *Input, policies []*engine.Policy, active []*engine.Exception, namespaces map[string]map[string]string) {
	for i := range c.set.Workloads {
		d := &c.set.Workloads[i]
		o, err := engine.NewObject(d.Object)
		if err != nil {
			c.bad(d, err)
			continue
		}
		if o.Namespace == "" {
			o.Namespace = c.opts.Namespace
		}
		if !c.unique(d, o.Kind+" "+o.Namespace+"/"+o.Name) {
			continue
		}
		in.Workloads = append(in.Workloads, Workload{d, o})
		if _, known := namespaces[o.Namespace]; !known {
			for _, err := range unknownLabels(d, o, policies, active, c.set, c.opts.Mode, &c.warn) {
				c.bad(d, err)
			}
		}
	}
}

// asCreated is a change's exception as the API server would store it: with
// the creationTimestamp of the cluster's copy (inCluster, when the change
// updates an exception the cluster state holds), else none, which the
// engine's guardrails read as created at the time of the decision. The
// document's own creationTimestamp is the developer's to write, so it would
// let a future one stretch a policy's maxDuration; it is reported when it
// differs. pe itself is not changed.
func asCreated(d *manifest.Document, pe *policyv1alpha1.PolicyException, inCluster *manifest.Document, now time.Time, warn *warnings) *policyv1alpha1.PolicyException {
	out := *pe
	out.CreationTimestamp = metav1.Time{}
	when := now.UTC().Format(time.RFC3339) + ", the time of the decision"
	if inCluster != nil {
		out.CreationTimestamp = inCluster.Object.(*policyv1alpha1.PolicyException).CreationTimestamp
		when = out.CreationTimestamp.UTC().Format(time.RFC3339) + ", as the cluster state's copy (" + inCluster.Where() + ")"
	}
	if !pe.CreationTimestamp.IsZero() && !pe.CreationTimestamp.Equal(&out.CreationTimestamp) {
		warn.add(d, "%s: PolicyException %s/%s: metadata.creationTimestamp %s is ignored: the API server sets it when the exception is created; "+
			"spec.expiresAt is judged as if it was created at %s (give an existing exception's cluster copy with --cluster-state)",
			d.Where(), pe.Namespace, pe.Name, pe.CreationTimestamp.UTC().Format(time.RFC3339), when)
	}
	return &out
}
