package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/podsieve/podsieve/internal/convert"
	"github.com/podsieve/podsieve/internal/words"
)

// convertOptions are podsieve convert's flags.
type convertOptions struct {
	from                string
	files               []string
	cluster             bool
	context             string
	exceptionsNamespace string
	everyPolicyApplies  bool
}

// listClusterNamespaces reads the live cluster's Namespaces; tests replace it.
var listClusterNamespaces = clusterNamespaces

func newConvertCommand() *cobra.Command {
	o := &convertOptions{}
	cmd := &cobra.Command{
		Use:   "convert --from kyverno|psa-labels|psp -f PATH [-f PATH ...]",
		Short: "Translate Kyverno podSecurity policies, Pod Security Admission labels or PodSecurityPolicies into podsieve objects",
		Long: `convert writes SecurityPolicies and PolicyExceptions, as multi-document YAML
on stdout, from:

  --from kyverno     ClusterPolicies and Policies with validate.podSecurity
                     rules, and PolicyExceptions with podSecurity; and
                     policies.kyverno.io ValidatingPolicies of Kyverno's CEL
                     Pod Security library, and PolicyExceptions naming them
  --from psa-labels  the pod-security.kubernetes.io labels of Namespaces, from
                     files or, with --cluster, from the cluster in the kubeconfig
  --from psp         policy/v1beta1 PodSecurityPolicies: the closest level with
                     the exclusions that the PSP's allowances need

Every part of the input that podsieve cannot express is listed on stderr with
its file, document and field, and the reason; where podsieve cannot say
exactly what the source said, the output enforces more, except where stderr
says it admits more (PSP fields without a Pod Security Standards counterpart,
a Kyverno rule at level privileged, Kyverno CEL library checks that refuse
pods the Pod Security Standards allow) and where podsieve's engine deliberately
decides differently (docs/semantics.md). Check the output with podsieve eval
on your workloads before you apply it.

Exit status: 0 when everything was translated, 1 when something could not be
(the output is still printed), 2 on bad input, including an input that holds
no object of the --from kind.`,
		Example: `  # Kyverno policies and exceptions exported from a cluster
  kubectl get clusterpolicies,policyexceptions -A -o yaml | podsieve convert --from kyverno -f - > podsieve.yaml

  # The namespaces' Pod Security Admission labels, from the current kubectl context
  podsieve convert --from psa-labels --cluster

  # A PodSecurityPolicy
  podsieve convert --from psp -f psp-restricted.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "what to convert: kyverno, psa-labels or psp (required)")
	f.StringArrayVarP(&o.files, "filename", "f", nil, "file, directory (its kustomization's resources, else recursively *.yaml, *.yml, *.json) or - for stdin; repeatable")
	f.BoolVar(&o.cluster, "cluster", false, "with --from psa-labels: read the Namespaces of the cluster in the kubeconfig")
	f.StringVar(&o.context, "context", "", "with --cluster: the kubeconfig context to use")
	f.StringVar(&o.exceptionsNamespace, "exceptions-namespace", "podsieve-system", "with --from kyverno: the cluster exceptions namespace, for exceptions that reach namespaces by glob or selector")
	f.BoolVar(&o.everyPolicyApplies, "every-policy-applies", false, "with --from psp and several PodSecurityPolicies: convert them all to SecurityPolicies that each apply to every pod (a pod must pass all of them, where PSP needed any one); without it, several PSPs are refused")
	goflags := flag.NewFlagSet("convert", flag.ContinueOnError)
	addKubeconfigFlag(goflags)
	f.AddGoFlagSet(goflags)
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

func (o *convertOptions) run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := o.checkFlags(); err != nil {
		return err
	}
	// Convert what did load even when some documents did not, so that one
	// run reports every problem in the input.
	docs, readErr := convert.Read(o.files, stdin)
	if readErr == nil && !o.cluster {
		if err := o.checkSources(docs); err != nil {
			return err
		}
	}
	var res *convert.Result
	var err error
	switch o.from {
	case "kyverno":
		res, err = convert.Kyverno(docs, convert.KyvernoOptions{ExceptionsNamespace: o.exceptionsNamespace})
	case "psp":
		res, err = convert.PSP(docs, convert.PSPOptions{EveryPolicyApplies: o.everyPolicyApplies})
	case "psa-labels":
		res, err = o.psaLabels(ctx, docs)
	}
	if err := convert.SortErrors(readErr, err); err != nil {
		return err
	}
	if err := convert.WriteYAML(stdout, res.Objects); err != nil {
		return err
	}
	untranslated, warnings := 0, 0
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, n.String())
		if n.Severity == convert.Untranslated {
			untranslated++
		} else {
			warnings++
		}
	}
	fmt.Fprintf(stderr, "%s written; %d not translated, %s\n", words.Count(len(res.Objects), "object"), untranslated, words.Count(warnings, "warning"))
	if untranslated > 0 {
		return &exitError{code: exitDenied, err: fmt.Errorf("%s of the input could not be translated (listed above); review them before applying the output", words.Count(untranslated, "part"))}
	}
	return nil
}

// checkFlags refuses flags that do not go together, before any input is
// read.
func (o *convertOptions) checkFlags() error {
	switch o.from {
	case "kyverno", "psa-labels", "psp":
	default:
		return fmt.Errorf("--from %s: use kyverno, psa-labels or psp", o.from)
	}
	if o.everyPolicyApplies && o.from != "psp" {
		return fmt.Errorf("--every-policy-applies is a choice for several PodSecurityPolicies, for --from psp only")
	}
	if o.cluster && o.from != "psa-labels" {
		return fmt.Errorf("--cluster reads Namespaces, for --from psa-labels only; give --from %s its input with -f", o.from)
	}
	if o.exceptionsNamespace == "" {
		return errors.New("--exceptions-namespace: give the cluster exceptions namespace, podsieve-system unless the manager runs elsewhere")
	}
	if !o.cluster && len(o.files) == 0 {
		return errors.New(`required flag(s) "filename" not set; give the input with -f (or, for psa-labels, --cluster)`)
	}
	return nil
}

// psaLabels converts the Namespaces of the input, and with --cluster the
// cluster's, with Pod Security Admission's configuration if the input
// holds one. The result holds what converted even when err is set.
func (o *convertOptions) psaLabels(ctx context.Context, docs []convert.Document) (*convert.Result, error) {
	res := &convert.Result{}
	nss, err := convert.Namespaces(docs, res)
	if err == nil && o.cluster {
		var live []corev1.Namespace
		live, err = listClusterNamespaces(ctx, o.context)
		if err != nil {
			err = fmt.Errorf("--cluster: %w", err)
		}
		for i := range live {
			nss = append(nss, convert.Namespace{Where: "cluster", Namespace: &live[i]})
		}
	}
	var cfg *convert.PSAConfig
	if err == nil {
		cfg, err = convert.PSAConfigs(docs)
	}
	if err == nil {
		res = convert.PSALabels(nss, cfg, res)
	}
	return res, err
}

// checkSources refuses an input that holds nothing to convert (an empty
// file, Deployments given to --from kyverno): printing "0 objects written"
// and exiting 0 would pass a CI job that converted nothing.
func (o *convertOptions) checkSources(docs []convert.Document) error {
	kinds, is, _ := convert.Reads(o.from)
	found := map[string]bool{}
	var order []string
	for i := range docs {
		d := &docs[i]
		if is(d) {
			return nil
		}
		if !found[d.Kind] {
			found[d.Kind] = true
			order = append(order, d.Kind)
		}
	}
	inputs := make([]string, len(o.files))
	for i, f := range o.files {
		inputs[i] = f
		if f == "-" {
			inputs[i] = "stdin"
		}
	}
	what := "no document"
	if len(order) > 0 {
		what = "only " + strings.Join(order, ", ")
	}
	return fmt.Errorf("--from %s converts %s objects, and the input (%s) holds %s: give the files that hold them, or the --from that matches the input",
		o.from, kinds, strings.Join(inputs, ", "), what)
}

// clusterNamespaces lists the Namespaces of the cluster in the kubeconfig
// (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster).
func clusterNamespaces(ctx context.Context, kubeContext string) ([]corev1.Namespace, error) {
	cfg, err := config.GetConfigWithContext(kubeContext)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	var list corev1.NamespaceList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list Namespaces: %w", err)
	}
	return list.Items, nil
}
