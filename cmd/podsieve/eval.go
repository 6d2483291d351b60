package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/podsieve/podsieve/internal/render"
)

// evalOptions are podsieve eval's flags.
type evalOptions struct {
	inputFlags
	output string
}

func newEvalCommand() *cobra.Command {
	o := &evalOptions{}
	cmd := &cobra.Command{
		Use:   "eval -f PATH [-f PATH ...] [--cluster-state PATH ...] [-n NAMESPACE] [-o text|json|sarif|junit] [--now RFC3339]",
		Short: "Decide offline, as the admission webhook would, on pods and workloads in files",
		Long: `eval reads SecurityPolicies, PolicyExceptions, Namespaces and pod-bearing
objects (Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
ReplicationController, PodTemplate) and decides every pod-bearing object with
the same engine and index as the cluster. Other kinds are ignored.

Exceptions apply as in the cluster: only in their own namespace (unless they
are in --exceptions-namespace), only before expiresAt, only when the policy's
guardrails permit them.

-f is the change to decide, which its author writes; --cluster-state is the
cluster's own objects, which the platform provides, trusted as the cluster
holds them. From -f, as the cluster would: a Namespace does not give a
namespace its labels, an exception in --exceptions-namespace is not honoured
(a cluster admin creates those), and an exception counts as created at --now
(the API server sets creationTimestamp), or when the cluster state's copy of
it was; each ignored part is a warning on stderr. Namespaces given with
--cluster-state provide the labels that namespaceSelectors match. When an
Enforce policy's rule, or a cluster exception, selects namespaces by a label
of a namespace the cluster state does not hold, eval says so and exits 2.

Exit status: 0 when every object is admitted, 1 when an Enforce policy refuses
an object, 2 on bad input (the message names the file, the document and the
field), including a decision that needs a namespace's labels.`,
		Example: `  # Check a chart's rendered manifests against the cluster's policies in CI
  helm template ./chart | podsieve eval -f policies/ -f - -n staging

  # ... with the cluster's Namespaces and exceptions, as the platform exports them
  podsieve eval --cluster-state cluster/ -f policies/ -f deploy/

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
	in, err := o.load(stdin, stderr)
	if err != nil {
		if o.output == "junit" {
			// A CI test view shows why nothing was decided.
			return errors.Join(err, render.JUnitError(stdout, err))
		}
		return err
	}
	if len(in.Set.Policies) == 0 {
		fmt.Fprintln(stderr, "Warning: the input holds no SecurityPolicy, so nothing is enforced; add the cluster's policies with -f or --cluster-state")
	}
	decisions := in.Decide(o.mode())
	switch o.output {
	case "json":
		err = render.JSON(stdout, decisions, in)
	case "sarif":
		err = render.SARIF(stdout, decisions, in)
	case "junit":
		err = render.JUnit(stdout, decisions, in)
	default:
		render.Text(stdout, decisions, in)
	}
	if err != nil {
		return err
	}
	return refusedError(decisions)
}
