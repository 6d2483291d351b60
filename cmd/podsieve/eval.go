package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/manifest"
)

// inputFlags are the flags of the commands that decide objects from files
// (eval, explain, exception generate): what to read, and the cluster to
// decide it as.
type inputFlags struct {
	files               []string
	namespace           string
	now                 string
	exceptionsNamespace string
	background          bool
}

// bind adds the flags; --background only when the command offers it.
func (in *inputFlags) bind(f *pflag.FlagSet, background bool) {
	f.StringArrayVarP(&in.files, "filename", "f", nil, "file, directory (recursively *.yaml, *.yml, *.json) or - for stdin; repeatable")
	f.StringVarP(&in.namespace, "namespace", "n", "default", "namespace of objects and exceptions that do not set one")
	f.StringVar(&in.now, "now", "", "the time to decide at, RFC3339 (default: the current time); expiresAt is compared with it")
	f.StringVar(&in.exceptionsNamespace, "exceptions-namespace", "podsieve-system", "the cluster exceptions namespace, whose exceptions may reach other namespaces")
	if background {
		f.BoolVar(&in.background, "background", false, "decide as the background scan does: only policies and exceptions with background: true count")
	}
}

// mode is whom the decisions are for: admission, or the background scan.
func (in *inputFlags) mode() engine.Mode {
	if in.background {
		return engine.Background
	}
	return engine.Admission
}

// load reads the files and compiles them into the index the cluster uses,
// at --now. What did load is compiled even when some documents did not, so
// that one run reports every problem in the input.
func (in *inputFlags) load(stdin io.Reader) (*manifest.Set, *input, time.Time, error) {
	now, err := parseNow(in.now)
	if err != nil {
		return nil, nil, now, err
	}
	set, loadErr := manifest.Load(in.files, stdin)
	compiled, err := compileSet(set, in.namespace, in.exceptionsNamespace, now)
	if err := errors.Join(loadErr, err); err != nil {
		return nil, nil, now, err
	}
	return set, compiled, now, nil
}

func parseNow(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now %s: use RFC3339, for example 2027-01-01T00:00:00Z", s)
	}
	return t, nil
}

// requireWorkloads refuses an input with nothing to decide, for the commands
// that are about one workload.
func requireWorkloads(in *input) error {
	if len(in.workloads) == 0 {
		return fmt.Errorf("the input holds no pod-bearing object (%s): add the workload's file with -f", kindList())
	}
	return nil
}

// evalOptions are podsieve eval's flags.
type evalOptions struct {
	inputFlags
	output string
}

func newEvalCommand() *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval -f PATH [-f PATH ...] [-n NAMESPACE] [-o text|json|sarif|junit] [--now RFC3339]",
		Short: "Decide offline, as the admission webhook would, on pods and workloads in files",
		Long: `eval reads SecurityPolicies, PolicyExceptions, Namespaces and pod-bearing
objects (Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
ReplicationController, PodTemplate) and decides every pod-bearing object with
the same engine and index as the cluster. Other kinds are ignored.

Exceptions apply as in the cluster: only in their own namespace (unless they
are in --exceptions-namespace), only before expiresAt, only when the policy's
guardrails permit them. Namespaces given as input provide the labels that
namespaceSelectors match; any other namespace has only its
kubernetes.io/metadata.name label.

Exit status: 0 when every object is admitted, 1 when an Enforce policy refuses
an object, 2 on bad input (the message names the file, the document and the
field).`,
		Example: `  # Check a chart's rendered manifests against the cluster's policies in CI
  helm template ./chart | podsieve eval -f policies/ -f - -n staging

  # Machine-readable results at a fixed date
  podsieve eval -f policies/ -f deploy.yaml -o json --now 2027-01-01T00:00:00Z

  # Code-scanning alerts (SARIF 2.1.0) or a CI test report (JUnit XML); see docs/ci.md
  podsieve eval -f policies/ -f deploy/ -o sarif > podsieve.sarif
  podsieve eval -f policies/ -f deploy/ -o junit > podsieve-junit.xml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.bind(f, true)
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, json, sarif (SARIF 2.1.0, for code scanning) or junit (JUnit XML, for CI test reports)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *evalOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	if !slices.Contains([]string{"text", "json", "sarif", "junit"}, o.output) {
		return fmt.Errorf("-o %s: use text, json, sarif or junit", o.output)
	}
	set, in, now, err := o.load(stdin)
	if err != nil {
		if o.output == "junit" {
			// A CI test view shows why nothing was decided.
			return errors.Join(err, writeJUnitError(stdout, err))
		}
		return err
	}
	if len(set.Policies) == 0 {
		fmt.Fprintln(stderr, "Warning: the input holds no SecurityPolicy, so nothing is enforced; add the cluster's policies with -f")
	}
	mode := o.mode()
	denied := false
	snap := in.index.Snapshot()
	decisions := make([]engine.Decision, len(in.workloads))
	for i, w := range in.workloads {
		decisions[i] = snap.Decide(w.object, now, mode)
		denied = denied || !decisions[i].Allowed
	}
	switch o.output {
	case "json":
		out := evalOutput{Results: []objectResult{}, Exceptions: in.exceptions}
		for i, d := range decisions {
			out.Results = append(out.Results, newObjectResult(in.workloads[i].doc, d))
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	case "sarif":
		if err := writeSARIF(stdout, decisions, in); err != nil {
			return err
		}
	case "junit":
		if err := writeJUnit(stdout, decisions, in); err != nil {
			return err
		}
	default:
		writeText(stdout, decisions, in, set.Ignored)
	}
	if denied {
		return &exitError{code: exitDenied, err: fmt.Errorf("%s refused by an Enforce policy", plural(refusedCount(decisions), "object"))}
	}
	return nil
}

// input is a manifest set compiled into the same index the cluster uses.
type input struct {
	index      *index.Index
	workloads  []workload
	exceptions []exceptionResult
}

type workload struct {
	doc    *manifest.Document
	object *engine.Object
}

// compileSet compiles policies and exceptions, loads the index and wraps the
// workloads. Every problem is reported, each naming its document: a policy
// or exception that does not compile, an exception that names a policy or
// rule the input does not hold, two objects with one name.
func compileSet(set *manifest.Set, namespace, exceptionsNamespace string, now time.Time) (*input, error) {
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
			pe.Namespace = namespace
		}
		if !unique(d, "PolicyException "+pe.Namespace+"/"+pe.Name) {
			continue
		}
		e, err := engine.CompileException(pe, exceptionsNamespace)
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
	in := &input{index: index.New(exceptionsNamespace), exceptions: []exceptionResult{}}
	byName := map[string]*engine.Policy{}
	for _, p := range policies {
		byName[p.Name] = p
	}
	in.index.Load(policies, nil, nil, namespaces)
	for _, c := range excs {
		st := c.e.State(func(name string) *engine.Policy { return byName[name] }, now)
		in.index.Place(c.e.Namespace, c.e.Name, c.e, st)
		switch st.Reason {
		case policyv1alpha1.ReasonPolicyNotFound:
			bad(c.doc, fmt.Errorf("PolicyException %s/%s: %s in the input; add the policy's file with -f, or fix the name", c.e.Namespace, c.e.Name, st.Message))
			continue
		case policyv1alpha1.ReasonRuleNotFound:
			bad(c.doc, fmt.Errorf("PolicyException %s/%s: %s", c.e.Namespace, c.e.Name, st.Message))
			continue
		}
		in.exceptions = append(in.exceptions, exceptionResult{
			Namespace: c.e.Namespace, Name: c.e.Name, Source: c.doc.Where(),
			Ready: st.Ready, Reason: st.Reason, Message: st.Message,
		})
	}

	for i := range set.Workloads {
		d := &set.Workloads[i]
		o, err := engine.NewObject(d.Object)
		if err != nil {
			bad(d, err)
			continue
		}
		if o.Namespace == "" {
			o.Namespace = namespace
		}
		if !unique(d, o.Kind+" "+o.Namespace+"/"+o.Name) {
			continue
		}
		in.workloads = append(in.workloads, workload{d, o})
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

// evalOutput is podsieve eval -o json.
type evalOutput struct {
	Results []objectResult `json:"results"`
	// Exceptions are the input's exceptions and whether each is in force,
	// as their Ready condition would say in the cluster.
	Exceptions []exceptionResult `json:"exceptions"`
}

type objectResult struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	Source     string         `json:"source"`
	Allowed    bool           `json:"allowed"`
	Policies   []policyResult `json:"policies"`
}

type policyResult struct {
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule"`
	Action     string            `json:"action"`
	Level      string            `json:"level"`
	Version    string            `json:"version"`
	Result     string            `json:"result"`
	Violations []violationResult `json:"violations"`
	// RefusedExceptions name the rule and match the object but do not count.
	RefusedExceptions []engine.Refusal `json:"refusedExceptions,omitempty"`
	// Message is what the webhook would answer when the rule refuses.
	Message string `json:"message,omitempty"`
}

type violationResult struct {
	Control       policyv1alpha1.ControlName `json:"control"`
	Check         string                     `json:"check"`
	Scope         string                     `json:"scope"`
	Container     string                     `json:"container,omitempty"`
	ContainerType string                     `json:"containerType,omitempty"`
	Image         string                     `json:"image,omitempty"`
	Field         string                     `json:"field"`
	Path          string                     `json:"path"`
	Values        []string                   `json:"values"`
	ExemptedBy    []engine.Source            `json:"exemptedBy"`
	Detail        string                     `json:"detail,omitempty"`
}

type exceptionResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Source    string `json:"source"`
	Ready     bool   `json:"ready"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

func newObjectResult(doc *manifest.Document, d engine.Decision) objectResult {
	o := d.Object
	r := objectResult{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
		Source: doc.Where(), Allowed: d.Allowed, Policies: []policyResult{}}
	for i := range d.Results {
		res := &d.Results[i]
		pr := policyResult{
			Policy: res.Rule.Policy.Name, Rule: res.Rule.Name, Action: string(res.Rule.Policy.Action),
			Level: string(res.Rule.Level), Version: res.Rule.Version, Result: string(res.Outcome),
			Violations: []violationResult{}, RefusedExceptions: res.Refused,
		}
		if res.Outcome == engine.Fail {
			pr.Message = res.DenyMessage(o)
		}
		for j := range res.Findings {
			f := &res.Findings[j]
			pr.Violations = append(pr.Violations, violationResult{
				Control: f.Control, Check: f.CheckID, Scope: string(f.Scope), Container: f.Container,
				ContainerType: string(f.ContainerType), Image: f.Image, Field: f.Field, Path: f.FieldPath(o),
				Values: nonNil(f.Values), ExemptedBy: nonNil(f.ExemptedBy), Detail: f.Detail,
			})
		}
		r.Policies = append(r.Policies, pr)
	}
	return r
}

func nonNil[T any](ss []T) []T {
	if ss == nil {
		return []T{}
	}
	return ss
}

// writeText is what a person reads in a CI log: a block per object, then the
// exceptions, then one summary line.
func writeText(w io.Writer, decisions []engine.Decision, in *input, ignored []string) {
	admitted, refused, warned := 0, 0, 0
	for i, d := range decisions {
		o := d.Object
		verdict := "admitted"
		if d.Allowed {
			admitted++
		} else {
			verdict = "REFUSED"
			refused++
		}
		fmt.Fprintf(w, "%s %s/%s (%s): %s\n", o.Kind, o.Namespace, o.Name, in.workloads[i].doc.Where(), verdict)
		if len(d.Results) == 0 {
			fmt.Fprintln(w, "  no policy rule matches")
		}
		softFail := false
		for j := range d.Results {
			res := &d.Results[j]
			r := res.Rule
			fmt.Fprintf(w, "  %s/%s (%s, %s): %s\n", r.Policy.Name, r.Name, r.LevelVersion(), r.Policy.Action, res.Outcome)
			softFail = softFail || (res.Outcome == engine.Fail && !res.Enforced())
			for k := range res.Findings {
				f := &res.Findings[k]
				if f.Covered() {
					fmt.Fprintf(w, "    exempt: %s [by %s]\n", f.Describe(o), engine.JoinSources(f.ExemptedBy, ", "))
				} else {
					fmt.Fprintf(w, "    VIOLATION: %s\n", f.Describe(o))
				}
			}
			for _, rf := range res.Refused {
				fmt.Fprintf(w, "    not applied: %s: %s\n", rf.Source, rf.Message)
			}
			if res.Outcome == engine.Fail {
				fmt.Fprintf(w, "    %s\n", res.Hint(o))
			}
		}
		if softFail && d.Allowed {
			warned++
		}
	}
	if len(in.exceptions) > 0 {
		fmt.Fprintln(w, "Exceptions:")
		for _, e := range in.exceptions {
			fmt.Fprintf(w, "  %s/%s (%s): %s: %s\n", e.Namespace, e.Name, e.Source, e.Reason, e.Message)
		}
	}
	summary := fmt.Sprintf("%s: %d admitted, %d refused", plural(len(decisions), "object"), admitted, refused)
	if warned > 0 {
		summary += fmt.Sprintf(", %d admitted with Audit or Warn violations", warned)
	}
	if len(ignored) > 0 {
		summary += fmt.Sprintf("; %s of other kinds ignored", plural(len(ignored), "object"))
	}
	fmt.Fprintln(w, summary)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func refusedCount(decisions []engine.Decision) int {
	n := 0
	for _, d := range decisions {
		if !d.Allowed {
			n++
		}
	}
	return n
}

// kindList names the pod-bearing kinds, for messages.
func kindList() string {
	names := make([]string, len(engine.PodBearingKinds))
	for i, k := range engine.PodBearingKinds {
		names[i] = string(k.Kind)
	}
	return strings.Join(names, ", ")
}
