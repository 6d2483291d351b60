package report

import (
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
)

// The same results in both APIs: the scan computes wgpolicyk8s.io/v1alpha2
// PolicyReports (Reports) and, on a cluster that serves the policy working
// group's successor, writes them as openreports.io/v1alpha1 Reports. The two
// schemas differ only in names: a Report has a top-level source, and its
// results call resources "subjects" and message "description" (the JSON
// keys stay resources and message).

// ToOpenReport is r as an openreports.io/v1alpha1 Report: the same metadata,
// scope, summary and results.
func ToOpenReport(r *reportv1alpha2.PolicyReport) *openreportsv1alpha1.Report {
	out := &openreportsv1alpha1.Report{
		TypeMeta:      openreportsTypeMeta(),
		ObjectMeta:    *r.ObjectMeta.DeepCopy(),
		Source:        Source,
		Scope:         r.Scope.DeepCopy(),
		ScopeSelector: r.ScopeSelector.DeepCopy(),
		Summary: openreportsv1alpha1.ReportSummary{
			Pass: r.Summary.Pass, Fail: r.Summary.Fail, Warn: r.Summary.Warn, Error: r.Summary.Error, Skip: r.Summary.Skip,
		},
	}
	if r.Results != nil {
		out.Results = make([]openreportsv1alpha1.ReportResult, len(r.Results))
	}
	for i := range r.Results {
		res := r.Results[i].DeepCopy()
		out.Results[i] = openreportsv1alpha1.ReportResult{
			Source: res.Source, Policy: res.Policy, Rule: res.Rule, Category: res.Category,
			Severity:  openreportsv1alpha1.ResultSeverity(res.Severity),
			Timestamp: res.Timestamp,
			Result:    openreportsv1alpha1.Result(res.Result),
			Scored:    res.Scored, Subjects: res.Resources, ResourceSelector: res.ResourceSelector,
			Description: res.Message, Properties: res.Properties,
		}
	}
	return out
}

// FromOpenReport is ToOpenReport's inverse, for comparing what a cluster
// holds with what a scan computed.
func FromOpenReport(r *openreportsv1alpha1.Report) *reportv1alpha2.PolicyReport {
	out := &reportv1alpha2.PolicyReport{
		TypeMeta:      reportTypeMeta(),
		ObjectMeta:    *r.ObjectMeta.DeepCopy(),
		Scope:         r.Scope.DeepCopy(),
		ScopeSelector: r.ScopeSelector.DeepCopy(),
		Summary: reportv1alpha2.PolicyReportSummary{
			Pass: r.Summary.Pass, Fail: r.Summary.Fail, Warn: r.Summary.Warn, Error: r.Summary.Error, Skip: r.Summary.Skip,
		},
	}
	if r.Results != nil {
		out.Results = make([]reportv1alpha2.PolicyReportResult, len(r.Results))
	}
	for i := range r.Results {
		res := r.Results[i].DeepCopy()
		out.Results[i] = reportv1alpha2.PolicyReportResult{
			Source: res.Source, Policy: res.Policy, Rule: res.Rule, Category: res.Category,
			Severity:  reportv1alpha2.PolicySeverity(res.Severity),
			Timestamp: res.Timestamp,
			Result:    reportv1alpha2.PolicyResult(res.Result),
			Scored:    res.Scored, Resources: res.Subjects, ResourceSelector: res.ResourceSelector,
			Message: res.Description, Properties: res.Properties,
		}
	}
	return out
}

func reportTypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: reportv1alpha2.GroupVersion.String(), Kind: "PolicyReport"}
}

func openreportsTypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: openreportsv1alpha1.SchemeGroupVersion.String(), Kind: "Report"}
}
