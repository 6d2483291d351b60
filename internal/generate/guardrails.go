package generate

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// clusterOnly reports whether the policy honours only exceptions in the
// cluster exceptions namespace.
func clusterOnly(p *engine.Policy) bool {
	g := p.Guardrails()
	return g != nil && g.ClusterExceptionsOnly != nil && *g.ClusterExceptionsOnly
}

// Permitted reports whether the policy's guardrails permit the exception.
func (ex *Exception) Permitted() bool { return len(ex.Refused) == 0 && len(ex.RefusedEntries) == 0 }

// justificationPlaceholder stands in for a justification when checking what
// else the guardrails say; it is never printed.
const justificationPlaceholder = "(checking the other guardrails)"

// judge asks the policy's guardrails, through the engine, whether they permit
// the exception, and if not, which entries and which of its other fields
// they refuse, so that the comments name every problem at once.
func (ex *Exception) judge(pe *policyv1alpha1.PolicyException, opts Options) error {
	// permits returns the guardrails' refusal, "" when they permit.
	permits := func(pe *policyv1alpha1.PolicyException) (string, error) {
		compiled, err := engine.CompileException(pe, opts.ExceptionsNamespace)
		if err != nil {
			// A generated exception that does not compile is podsieve's bug.
			return "", fmt.Errorf("generated PolicyException %s/%s does not compile: %w", pe.Namespace, pe.Name, err)
		}
		if refusal := ex.Policy.Permits(compiled, opts.Now); refusal != nil {
			return refusal.Error(), nil
		}
		return "", nil
	}
	refusal, err := permits(pe)
	if err != nil || refusal == "" {
		return err
	}
	g := ex.Policy.Guardrails()
	if !ex.Policy.PermitsAny() {
		ex.Refused = []string{refusal}
		return nil
	}
	// Each entry alone, with a justification, meets only the control
	// guardrail.
	var permitted []policyv1alpha1.PodSecurityExclusion
	for j, entry := range pe.Spec.PodSecurity {
		one := pe.DeepCopy()
		one.Spec.PodSecurity = []policyv1alpha1.PodSecurityExclusion{entry}
		one.Spec.Justification = justificationPlaceholder
		r, err := permits(one)
		if err != nil {
			return err
		}
		if r != "" {
			if ex.RefusedEntries == nil {
				ex.RefusedEntries = map[int]string{}
			}
			// Judged alone, the entry was spec.podSecurity[0]; say where
			// it is in the exception the developer reads.
			ex.RefusedEntries[j] = strings.ReplaceAll(r, "spec.podSecurity[0]", fmt.Sprintf("spec.podSecurity[%d]", j))
			continue
		}
		permitted = append(permitted, entry)
	}
	rest := pe.DeepCopy()
	rest.Spec.PodSecurity = permitted
	if len(permitted) == 0 {
		// Without entries the exception would waive whole rules, which is
		// another question; ask only about the justification.
		if g.RequireJustification != nil && *g.RequireJustification && strings.TrimSpace(pe.Spec.Justification) == "" {
			ex.Refused = append(ex.Refused, fmt.Sprintf("policy %q requires a justification: set spec.justification", ex.Policy.Name))
		}
		return nil
	}
	r, err := permits(rest)
	if err != nil {
		return err
	}
	if r != "" {
		ex.Refused = append(ex.Refused, r)
	}
	return nil
}

// expiry is expiresAt: Now+ExpiresIn, or the latest the policy's maxDuration
// permits when that is sooner or when the policy requires an expiry and
// none was asked for. Seconds are dropped, as RFC3339 in the API keeps none.
func expiry(p *engine.Policy, opts Options) (*time.Time, string) {
	var exp *time.Time
	if opts.ExpiresIn > 0 {
		t := opts.Now.Add(opts.ExpiresIn).UTC().Truncate(time.Second)
		exp = &t
	}
	var maxDuration *metav1.Duration
	if g := p.Guardrails(); g != nil {
		maxDuration = g.MaxDuration
	}
	if maxDuration == nil {
		return exp, ""
	}
	limit := opts.Now.Add(maxDuration.Duration).UTC().Truncate(time.Second)
	switch {
	case exp == nil:
		return &limit, ""
	case exp.After(limit):
		return &limit, fmt.Sprintf("--expires-in %s is longer than policy %q permits (maxDuration %s); expiresAt is set to %s",
			shortDuration(opts.ExpiresIn), p.Name, shortDuration(maxDuration.Duration), limit.Format(time.RFC3339))
	}
	return exp, ""
}

// shortDuration writes 720h for 720h0m0s, as people write durations.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
