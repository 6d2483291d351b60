package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/generate"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/offline"
	"github.com/podsieve/podsieve/internal/render"
	"github.com/podsieve/podsieve/internal/words"
)

func newExceptionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exception",
		Short: "Write PolicyExceptions",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExceptionGenerateCommand())
	return cmd
}

// exceptionGenerateOptions are podsieve exception generate's flags.
type exceptionGenerateOptions struct {
	inputFlags
	name          string
	expiresIn     time.Duration
	justification string
	anyTag        bool
	includeAudit  bool
}

func newExceptionGenerateCommand() *cobra.Command {
	o := &exceptionGenerateOptions{}
	cmd := &cobra.Command{
		Use:   "generate -f WORKLOAD [-f POLICIES ...] [--expires-in DURATION] [--justification TEXT]",
		Short: "Print the PolicyException that waives exactly what refuses a workload",
		Long: `generate decides each pod-bearing object in the input as podsieve eval does
and prints, for each policy that refuses it, the PolicyException that waives
exactly the uncovered violations: one podSecurity entry per control, field,
image and set of values, naming the containers; match narrowed to the workload
(for a controller, two exceptions: one for the controller by its exact name
and kind, one for the objects it creates by name-* and kind; both select its
pod template labels); in the workload's namespace, or for a policy with
clusterExceptionsOnly in the cluster exceptions namespace with
match.namespaces. An entry for a missing
setting (no values) also waives any value of its field; a comment says so. Violations already
covered by a policy's exclusions or by an exception in the input are left out.

The policy's guardrails shape it: expiresAt is set within maxDuration (from
--expires-in, or the longest permitted), --justification fills a required
justification. When the guardrails would still refuse it (a control they do
not allow, a missing justification), the exception is printed with a comment
saying why.

Exit status: 0 when the exceptions printed are all permitted, or nothing
needed waiving (a comment says so); 1 when a policy's guardrails would refuse
what is needed, or a violation cannot be waived field by field; 2 on bad
input.`,
		Example: `  # The exception an Istio-injected Deployment needs, for review
  podsieve exception generate -f deploy.yaml -f policies/ --justification "Istio sidecar, SEC-123" > exception.yaml

  # Any tag of the same images, for 30 days
  podsieve exception generate -f deploy.yaml -f policies/ --any-tag --expires-in 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.bind(f, false)
	f.StringVar(&o.name, "name", "", "metadata.name of the exception (default <workload>-<policy>); -<policy> is appended when several policies need one, and -pods to a controller's second exception")
	f.DurationVar(&o.expiresIn, "expires-in", 0, "set expiresAt this long from now, for example 720h (default: only when a policy requires it, the longest it permits)")
	f.StringVar(&o.justification, "justification", "", "spec.justification: why the exception is needed, for its reviewers")
	f.BoolVar(&o.anyTag, "any-tag", false, "match each image's repository with any tag (docker.io/istio/proxyv2:*) instead of the image as written")
	f.BoolVar(&o.includeAudit, "include-audit", false, "waive the violations of Audit and Warn policies too, which report but do not refuse")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// maxJustification is spec.justification's MaxLength in the CRD.
const maxJustification = 1024

func (o *exceptionGenerateOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	if err := o.checkFlags(); err != nil {
		return err
	}
	in, err := o.load(stdin, stderr)
	if err != nil {
		return err
	}
	if err := requireWorkloads(in); err != nil {
		return err
	}
	if o.name != "" && len(in.Workloads) > 1 {
		return fmt.Errorf("--name %s names the exception of one workload, and the input holds %d; generate for one workload at a time, or leave out --name", o.name, len(in.Workloads))
	}
	if len(in.Set.Policies) == 0 {
		fmt.Fprintln(stderr, "Warning: the input holds no SecurityPolicy, so nothing is refused and nothing needs waiving; add the cluster's policies with -f or --cluster-state")
	}
	p := &exceptionPrinter{
		stdout: stdout, stderr: stderr,
		opts: generate.Options{
			Name: o.name, Now: in.Options.Now, ExpiresIn: o.expiresIn, Justification: o.justification,
			AnyTag: o.anyTag, IncludeAudit: o.includeAudit, ExceptionsNamespace: o.exceptionsNamespace,
		},
		names: map[types.NamespacedName]bool{},
	}
	decisions := in.Decide(engine.Admission)
	for wi, w := range in.Workloads {
		plan, err := generate.For(decisions[wi], p.opts)
		if err != nil {
			return err
		}
		p.print(w, plan)
		if len(plan.Unwaivable) == 0 && !anyRefused(plan) {
			if err := verifyGenerated(in, w, plan, o.includeAudit); err != nil {
				return err
			}
		}
	}
	return p.outcome()
}

// checkFlags refuses an --expires-in or --justification no exception could
// carry, before any input is read.
func (o *exceptionGenerateOptions) checkFlags() error {
	if o.expiresIn < 0 || (o.expiresIn > 0 && o.expiresIn < time.Minute) {
		return fmt.Errorf("--expires-in %s: use a duration of at least 1m, for example 720h", o.expiresIn)
	}
	if n := utf8.RuneCountInString(o.justification); n > maxJustification {
		return fmt.Errorf("--justification: %d characters, and spec.justification holds at most %d; shorten it and link to the details", n, maxJustification)
	}
	return nil
}

// exceptionPrinter prints the workloads' plans as one YAML stream and counts
// what the guardrails refuse and what cannot be waived, for the exit status.
type exceptionPrinter struct {
	stdout, stderr io.Writer
	opts           generate.Options
	// names are the exceptions printed so far: two workloads of one name
	// and namespace (a Deployment and a Pod) must not print two exceptions
	// of one name, which would replace each other.
	names               map[types.NamespacedName]bool
	printed             bool
	refused, unwaivable int
}

// print prints one workload's plan: its exceptions, or a comment that
// nothing needs waiving, and a warning for each violation no entry waives.
func (p *exceptionPrinter) print(w offline.Workload, plan generate.Plan) {
	for _, u := range plan.Unwaivable {
		fmt.Fprintf(p.stderr, "Warning: %s %s/%s: %s: this failure could not be placed on a field, so no podSecurity entry can waive it; only a PolicyException with an empty podSecurity (the whole rule) can, which is for a cluster admin to decide\n",
			w.Object.Kind, w.Object.Namespace, w.Object.Name, u)
		p.unwaivable++
	}
	if len(plan.Exceptions) == 0 {
		p.separate()
		render.NothingToWaive(p.stdout, w, plan)
		return
	}
	for i, ex := range plan.Exceptions {
		p.separate()
		p.unique(ex.Object, w.Object.Kind)
		var notWaived []string
		if i == 0 {
			notWaived = plan.NotWaived
		}
		render.GeneratedException(p.stdout, w, ex, notWaived, p.opts)
		if !ex.Permitted() {
			p.refused++
		}
	}
}

// separate starts a YAML document: "---" before every one but the first.
func (p *exceptionPrinter) separate() {
	if p.printed {
		fmt.Fprintln(p.stdout, "---")
	}
	p.printed = true
}

// unique renames pe, when an exception of its name was printed already, to
// <name>-<kind of the workload>, then <name>-<kind>-2 and so on.
func (p *exceptionPrinter) unique(pe *policyv1alpha1.PolicyException, kind string) {
	name := pe.Name
	for i := 1; p.names[types.NamespacedName{Namespace: pe.Namespace, Name: name}]; i++ {
		name = fmt.Sprintf("%s-%s", pe.Name, strings.ToLower(kind))
		if i > 1 {
			name = fmt.Sprintf("%s-%d", name, i)
		}
	}
	p.names[types.NamespacedName{Namespace: pe.Namespace, Name: name}] = true
	pe.Name = name
}

// outcome is the exit status: exitDenied when the guardrails would refuse
// an exception printed or a violation cannot be waived field by field.
func (p *exceptionPrinter) outcome() error {
	var problems []string
	if p.refused > 0 {
		problems = append(problems, fmt.Sprintf("the guardrails of its policy would refuse %s (see the comments)", words.Count(p.refused, "exception")))
	}
	if p.unwaivable > 0 {
		problems = append(problems, fmt.Sprintf("%s cannot be waived field by field", words.Count(p.unwaivable, "violation")))
	}
	if len(problems) > 0 {
		return &exitError{code: exitDenied, err: errors.New(strings.Join(problems, "; "))}
	}
	return nil
}

// anyRefused reports whether a policy's guardrails refuse one of the plan's
// exceptions.
func anyRefused(plan generate.Plan) bool {
	for _, ex := range plan.Exceptions {
		if !ex.Permitted() {
			return true
		}
	}
	return false
}

// verifyGenerated decides the workload again with the generated exceptions
// in the input (replacing any of the same name), through the same compile
// path as eval: the rules they target must now pass. It guards against the
// generator and the engine drifting apart.
func verifyGenerated(in *offline.Input, w offline.Workload, plan generate.Plan, includeAudit bool) error {
	set := in.Set
	check := &manifest.Set{Policies: set.Policies, Namespaces: set.Namespaces, Workloads: []manifest.Document{*w.Doc}}
	generated := map[types.NamespacedName]bool{}
	for i, ex := range plan.Exceptions {
		generated[types.NamespacedName{Namespace: ex.Object.Namespace, Name: ex.Object.Name}] = true
		// Verified as they will be once created, by whoever may create
		// them: a cluster admin, in the cluster exceptions namespace, and
		// created now, as the API server will stamp them.
		created := ex.Object.DeepCopy()
		created.CreationTimestamp = metav1.NewTime(in.Options.Now)
		check.Exceptions = append(check.Exceptions, manifest.Document{Source: "<generated>", Index: i + 1, ClusterState: true, Object: created})
	}
	for _, d := range set.Exceptions {
		pe := d.Object.(*policyv1alpha1.PolicyException)
		if !generated[types.NamespacedName{Namespace: pe.Namespace, Name: pe.Name}] {
			check.Exceptions = append(check.Exceptions, d)
		}
	}
	opts := in.Options
	opts.Warn = nil // the first load said it
	verified, err := offline.Compile(check, opts)
	if err != nil {
		return fmt.Errorf("podsieve bug: the generated exceptions for %s do not load: %w", w, err)
	}
	d := verified.Decide(engine.Admission)[0]
	for i := range d.Results {
		res := &d.Results[i]
		if res.Outcome == engine.Fail && (res.Enforced() || includeAudit) {
			return &exitError{code: exitDenied, err: fmt.Errorf("podsieve bug: the generated exceptions do not waive what refuses %s under %s/%s; please report it with the input",
				w, res.Rule.Policy.Name, res.Rule.Name)}
		}
	}
	return nil
}
