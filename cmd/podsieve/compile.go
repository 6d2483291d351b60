package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/admissionpolicy"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/offline"
)

// compileOptions are podsieve compile's flags.
type compileOptions struct {
	inputFlags
	output          string
	includeExpiring bool
}

func newCompileCommand() *cobra.Command {
	o := &compileOptions{}
	cmd := &cobra.Command{
		Use:   "compile -f PATH [-f PATH ...] [--cluster-state PATH ...] [-o yaml|json] [--now RFC3339] [--include-expiring]",
		Short: "Print the ValidatingAdmissionPolicies that enforce SecurityPolicies with no podsieve running",
		Long: `compile reads SecurityPolicies, PolicyExceptions and Namespaces, as podsieve
eval reads them, and prints what the API server needs to enforce the policies
itself, in the order to kubectl apply -f:

  1. the PodSecurityParams CustomResourceDefinition, when a policy honours
     PolicyExceptions;
  2. for each SecurityPolicy, in input order, its ValidatingAdmissionPolicy
     and bindings;
  3. one PodSecurityParams object per namespace, by name, holding the
     PolicyExceptions in force that reach it: for every Namespace in the input
     and every namespace that holds an input PolicyException.

An Enforce policy that honours PolicyExceptions refuses every pod in a
namespace that has no PodSecurityParams object (fail closed): give every
namespace as a Namespace, with --cluster-state for its labels to count, as
for eval.

Exceptions are judged as eval judges them, at --now; those not in force
waive nothing (a note on stderr says why) and are written with that reason,
which a refusal quotes. A ValidatingAdmissionPolicy has no clock, so
an exception in force with spec.expiresAt is refused unless
--include-expiring is given. Pods and workloads in the input are ignored
(use eval to decide them).

Exit status: 0 when everything was compiled; 2 on bad input (the message
names the file, the document, the object and the field), including a policy
the CEL form cannot say exactly and an expiring exception. Nothing is
printed on stdout then.`,
		Example: `  # Enforce the policies and exceptions of a directory without podsieve
  kubectl get namespaces -o yaml > namespaces.yaml
  podsieve compile -f policies/ --cluster-state namespaces.yaml | kubectl apply -f -

  # As one JSON List
  podsieve compile -f policies/ -o json > compiled.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.bind(f, false)
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml (documents separated by ---) or json (a v1 List)")
	f.BoolVar(&o.includeExpiring, "include-expiring", false, "compile exceptions in force that have spec.expiresAt, with a warning: "+
		"the compiled waiver outlives the expiry until the output is compiled and applied again")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *compileOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	if !slices.Contains([]string{"yaml", "json"}, o.output) {
		return fmt.Errorf("-o %s: use yaml or json", o.output)
	}
	in, err := o.load(stdin, stderr)
	if err != nil {
		return err
	}
	if len(in.Set.Policies) == 0 {
		fmt.Fprintln(stderr, "Warning: the input holds no SecurityPolicy, so nothing is compiled; add the policies with -f")
	}
	objs, err := o.compile(in, stderr)
	if err != nil {
		return err
	}
	// Written only when all of it compiled: a pipe into kubectl apply never
	// applies half.
	var out []byte
	if o.output == "json" {
		out, err = jsonList(objs)
	} else {
		out, err = yamlStream(objs)
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// load reads -f and --cluster-state as offline.Load does and compiles them
// with offline.Compile, but without the pod-bearing objects: compile
// decides none, so none may ask for a namespace's labels (offline.Compile's
// check for eval). Each ignored object is a note on stderr.
func (o *compileOptions) load(stdin io.Reader, stderr io.Writer) (*offline.Input, error) {
	now, err := parseNow(o.now)
	if err != nil {
		return nil, err
	}
	if slices.Contains(o.files, manifest.Stdin) && slices.Contains(o.clusterState, manifest.Stdin) {
		return nil, errors.New("-f - and --cluster-state -: standard input can be read only once; write one of them to a file")
	}
	set := &manifest.Set{}
	var errs []error
	var workloads []manifest.Document
	if len(o.clusterState) > 0 {
		state, err := manifest.Load(o.clusterState, stdin)
		errs = append(errs, err)
		for _, list := range []*[]manifest.Document{&state.Policies, &state.Exceptions, &state.Namespaces} {
			for i := range *list {
				(*list)[i].ClusterState = true
			}
		}
		set.Policies, set.Exceptions, set.Namespaces = state.Policies, state.Exceptions, state.Namespaces
		workloads = state.Workloads
	}
	change, err := manifest.Load(o.files, stdin)
	errs = append(errs, err)
	set.Policies = append(set.Policies, change.Policies...)
	set.Exceptions = append(set.Exceptions, change.Exceptions...)
	set.Namespaces = append(set.Namespaces, change.Namespaces...)
	set.Ignored = change.Ignored
	for _, d := range append(workloads, change.Workloads...) {
		fmt.Fprintf(stderr, "Note: %s (%s) is ignored: compile decides no object; decide it with podsieve eval\n", objectName(d.Object), d.Where())
	}
	for _, s := range change.Ignored {
		fmt.Fprintf(stderr, "Note: %s is ignored: compile reads SecurityPolicies, PolicyExceptions and Namespaces\n", s)
	}
	in, err := offline.Compile(set, offline.Options{
		Namespace: o.namespace, ExceptionsNamespace: o.exceptionsNamespace, Now: now, ClusterState: o.clusterState, Mode: engine.Admission,
		Warn: func(msg string) { fmt.Fprintln(stderr, "Warning:", msg) },
	})
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	return in, nil
}

// objectName is "<Kind> <namespace>/<name>" for notes.
func objectName(o any) string {
	kind := reflect.TypeOf(o).Elem().Name()
	m, err := meta.Accessor(o)
	if err != nil {
		return kind
	}
	if m.GetNamespace() == "" {
		return kind + " " + m.GetName()
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}

// inForce is an exception compiled into the parameters.
type inForce struct {
	e     *engine.Exception
	param *admissionpolicy.ParamException
}

// compile is the objects to apply, in order: the parameters' CRD when a
// policy reads parameters, each policy's ValidatingAdmissionPolicy and
// bindings, the PodSecurityParams of each namespace. Every problem is
// returned, each naming its document, in input order.
func (o *compileOptions) compile(in *offline.Input, stderr io.Writer) ([]any, error) {
	c := &vapCompilation{o: o, in: in, snap: in.Index.Snapshot(), stderr: stderr}
	policies, params := c.policies()
	namespaces, excs, err := c.exceptions()
	if err != nil {
		return nil, err
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	if !params {
		return policies, nil
	}
	// One PodSecurityParams per namespace, with the labels the index holds
	// (a Namespace of --cluster-state; else only its name label).
	for _, d := range in.Set.Namespaces {
		namespaces[d.Object.(*corev1.Namespace).Name] = true
	}
	crd, err := admissionpolicy.ParamsCRD()
	if err != nil {
		return nil, err
	}
	objs := append([]any{crd}, policies...)
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		obj, err := c.paramsOf(ns, excs)
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// vapCompilation is one run of compile: the problems found so far, each
// naming its document.
type vapCompilation struct {
	o        *compileOptions
	in       *offline.Input
	snap     *index.Snapshot
	stderr   io.Writer
	problems []vapProblem
}

// vapProblem is an error about one document.
type vapProblem struct {
	doc *manifest.Document
	err error
}

func (c *vapCompilation) bad(d *manifest.Document, err error) {
	c.problems = append(c.problems, vapProblem{d, fmt.Errorf("%s: %w", d.Where(), err)})
}

// err is every problem, in input order.
func (c *vapCompilation) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	slices.SortStableFunc(c.problems, func(a, b vapProblem) int { return manifest.Compare(a.doc, b.doc) })
	errs := make([]error, len(c.problems))
	for i, p := range c.problems {
		errs[i] = p.err
	}
	return errors.Join(errs...)
}

// policies are each policy's ValidatingAdmissionPolicy and bindings; params
// reports whether one reads parameters.
func (c *vapCompilation) policies() (policies []any, params bool) {
	// The webhook's configuration leaves these out; so do the policies.
	system := []string{"kube-system"}
	if ns := c.in.Options.ExceptionsNamespace; ns != "" && ns != "kube-system" {
		system = append(system, ns)
	}
	for i := range c.in.Set.Policies {
		d := &c.in.Set.Policies[i]
		sp := d.Object.(*policyv1alpha1.SecurityPolicy)
		cp, err := admissionpolicy.CompilePolicy(sp, c.snap.Policy(sp.Name), admissionpolicy.Options{SystemNamespaces: system})
		if err != nil {
			c.bad(d, err)
			continue
		}
		params = params || cp.Params
		policies = append(policies, cp.Policy)
		for _, b := range cp.Bindings {
			policies = append(policies, b)
		}
	}
	return policies, params
}

// exceptions compiles the exceptions in force, as offline judged them, and
// the refusals the others quote; the namespaces they are in each get
// parameters. The error is a podsieve bug: an exception without its
// document.
func (c *vapCompilation) exceptions() (namespaces map[string]bool, excs []inForce, _ error) {
	namespaces = map[string]bool{}
	for _, st := range c.in.Exceptions {
		namespaces[st.Namespace] = true
		d := exceptionDoc(c.in.Set, st.Source)
		if d == nil {
			return nil, nil, fmt.Errorf("PolicyException %s/%s: no document %s in the input", st.Namespace, st.Name, st.Source)
		}
		var x *inForce
		if st.Ready {
			x = c.inForce(d, st)
		} else {
			x = c.notInForce(d, st)
		}
		if x != nil {
			excs = append(excs, *x)
		}
	}
	return namespaces, excs, nil
}

// notInForce compiles an exception that is not in force: it waives
// nothing; the refusals of the rules it names quote why, as the manager's
// parameters do. nil when there is nothing to quote.
func (c *vapCompilation) notInForce(d *manifest.Document, st offline.ExceptionStatus) *inForce {
	pe := d.Object.(*policyv1alpha1.PolicyException)
	fmt.Fprintf(c.stderr, "Note: PolicyException %s/%s (%s) is not in force and waives nothing: %s: %s\n", st.Namespace, st.Name, st.Source, st.Reason, st.Message)
	e := c.snap.HeldInactive(st.Namespace, st.Name)
	if e == nil {
		return nil
	}
	p, err := admissionpolicy.CompileRefused(pe, e, c.snap.Policy, c.in.Options.Now)
	if err != nil {
		c.bad(d, err)
		return nil
	}
	if p == nil {
		return nil
	}
	return &inForce{e, p}
}

// inForce compiles an exception in force. One with an expiry is refused
// unless --include-expiring: a ValidatingAdmissionPolicy has no clock.
func (c *vapCompilation) inForce(d *manifest.Document, st offline.ExceptionStatus) *inForce {
	pe := d.Object.(*policyv1alpha1.PolicyException)
	e := c.snap.Exception(st.Namespace, st.Name)
	if e.ExpiresAt != nil {
		at := e.ExpiresAt.UTC().Format(time.RFC3339)
		if !c.o.includeExpiring {
			c.bad(d, fmt.Errorf("PolicyException %s/%s: spec.expiresAt: %s: a ValidatingAdmissionPolicy has no clock, so the compiled waiver would outlive the expiry; "+
				"podsieve's manager removes it at expiry, the compiled output cannot: drop expiresAt, apply the output again after expiry without it, or pass --include-expiring",
				pe.Namespace, pe.Name, at))
			return nil
		}
		fmt.Fprintf(c.stderr, "Warning: %s: PolicyException %s/%s: spec.expiresAt: %s: compiled with no expiry (--include-expiring): "+
			"the API server honours it after %s too, until you compile again after then and apply the output\n",
			d.Where(), pe.Namespace, pe.Name, at, at)
	}
	p, err := admissionpolicy.CompileException(pe, e, c.snap.Policy)
	if err != nil {
		c.bad(d, err)
		return nil
	}
	return &inForce{e, p}
}

// paramsOf is namespace ns's PodSecurityParams: the exceptions that reach
// it, which must fit in one object.
func (c *vapCompilation) paramsOf(ns string, excs []inForce) (*policyv1alpha1.PodSecurityParams, error) {
	labels := c.snap.NamespaceLabels(ns)
	var list []*admissionpolicy.ParamException
	for _, x := range excs {
		if x.e.ReachesNamespace(ns, labels) {
			list = append(list, x.param)
		}
	}
	if _, dropped := admissionpolicy.FitParams(list); len(dropped) > 0 {
		return nil, fmt.Errorf("namespace %s: its PolicyExceptions compile to more than the %d bytes a PodSecurityParams object holds (%s does not fit): "+
			"the API server could not honour them all; split them across fewer rules, shorten their globs and selectors, or enforce them with podsieve's webhook",
			ns, admissionpolicy.MaxParamsBytes, dropped[0].Source)
	}
	return admissionpolicy.ParamsObject(ns, list), nil
}

// exceptionDoc is the document offline compiled an exception from (its
// ExceptionStatus.Source), or nil.
func exceptionDoc(set *manifest.Set, where string) *manifest.Document {
	for i := range set.Exceptions {
		if d := &set.Exceptions[i]; d.Where() == where {
			return d
		}
	}
	return nil
}

// applyable is an object as JSON, without what a typed object writes that
// the user never set (an empty status, a zero creationTimestamp), so that
// kubectl apply records no noise.
func applyable(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	return m, nil
}

// yamlStream is the objects as YAML documents separated by ---.
func yamlStream(objs []any) ([]byte, error) {
	var b bytes.Buffer
	for i, obj := range objs {
		m, err := applyable(obj)
		if err != nil {
			return nil, err
		}
		data, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// jsonList is the objects as one v1 List, as kubectl get -o json prints
// several.
func jsonList(objs []any) ([]byte, error) {
	items := make([]any, 0, len(objs))
	for _, obj := range objs {
		m, err := applyable(obj)
		if err != nil {
			return nil, err
		}
		items = append(items, m)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// CEL's && and < stay readable.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
