package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/render"
	"github.com/podsieve/podsieve/internal/words"
)

// explainOptions are podsieve explain's flags.
type explainOptions struct {
	inputFlags
	control string
}

func newExplainCommand() *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain -f WORKLOAD [-f POLICIES ...] [--control NAME]",
		Short: "Say, violation by violation, why a workload is admitted or refused",
		Long: `explain decides each pod-bearing object in the input as podsieve eval does,
and says for every rule of every policy why: whether the rule applies (and
which part of its match or exclude decides when it does not); each violation
and the entries that cover it, by file, document and path (a policy's
spec.rules[i].podSecurity.exclude[j], an exception's spec.podSecurity[j]);
for a violation nothing covers, the entries of its control that come closest
and the field that does not match; the exceptions that name the rule but do
not apply, and why.

Exit status: as podsieve eval: 0 when every object is admitted, 1 when an
Enforce policy refuses an object, 2 on bad input.`,
		Example: `  # Why is this Deployment refused?
  podsieve explain -f policies/ -f deploy.yaml

  # Only the Capabilities control
  podsieve explain -f policies/ -f deploy.yaml --control Capabilities`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.bind(f, true)
	f.StringVar(&o.control, "control", "", `explain only the violations of this control, for example "Capabilities"`)
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *explainOptions) run(stdin io.Reader, stdout, stderr io.Writer) error {
	var control policyv1alpha1.ControlName
	if o.control != "" {
		for _, c := range policyv1alpha1.Controls {
			if strings.EqualFold(string(c), strings.TrimSpace(o.control)) {
				control = c
			}
		}
		if control == "" {
			return fmt.Errorf("--control %q: not a control; use one of %s", o.control, strings.Join(words.Quote(policyv1alpha1.Controls), ", "))
		}
	}
	in, err := o.load(stdin, stderr)
	if err != nil {
		return err
	}
	if err := requireWorkloads(in); err != nil {
		return err
	}
	if len(in.Set.Policies) == 0 {
		fmt.Fprintln(stderr, "Warning: the input holds no SecurityPolicy, so nothing is enforced; add the cluster's policies with -f or --cluster-state")
	}
	mode := o.mode()
	decisions := in.Decide(mode)
	render.Explain(stdout, decisions, in, mode, control)
	return refusedError(decisions)
}
