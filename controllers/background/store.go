package background

import (
	"context"
	"fmt"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/report"
)

// ReportAPI is where the scan writes its results (--report-api).
type ReportAPI string

const (
	// ReportAPIAuto writes OpenReports when its CRD is served, else
	// wgpolicyk8s.io PolicyReports when theirs is, else nothing (the scan
	// waits for one to appear).
	ReportAPIAuto ReportAPI = "auto"
	// ReportAPIOpenReports writes openreports.io/v1alpha1 Reports, the
	// policy working group's successor format.
	ReportAPIOpenReports ReportAPI = "openreports"
	// ReportAPIWGPolicy writes wgpolicyk8s.io/v1alpha2 PolicyReports.
	ReportAPIWGPolicy ReportAPI = "wgpolicyk8s"
)

// ReportAPIs are the values --report-api accepts.
var ReportAPIs = []ReportAPI{ReportAPIAuto, ReportAPIOpenReports, ReportAPIWGPolicy}

// groupVersion is the API group and version a (not auto) writes.
func (a ReportAPI) groupVersion() string {
	if a == ReportAPIOpenReports {
		return openreportsv1alpha1.SchemeGroupVersion.String()
	}
	return reportv1alpha2.GroupVersion.String()
}

// Reports, in the API that serves them: the scan writes and removes them;
// it reads them from the API server (reader), not a cache.
// +kubebuilder:rbac:groups=openreports.io,resources=reports,verbs=get;list;watch;create;update;patch;delete

// store reads and writes one API's reports, in the form package report
// computes them (wgpolicyk8s.io/v1alpha2); each API's stores are the same
// results under its own names (report.ToOpenReport).
type store interface {
	// api is the API the store writes.
	api() ReportAPI
	// list returns podsieve's reports in namespace ("": every namespace).
	list(ctx context.Context, namespace string) ([]reportv1alpha2.PolicyReport, error)
	create(ctx context.Context, r *reportv1alpha2.PolicyReport) error
	// update writes r over the report of its name; r carries the
	// resourceVersion read.
	update(ctx context.Context, r *reportv1alpha2.PolicyReport) error
	delete(ctx context.Context, r *reportv1alpha2.PolicyReport) error
	// holdsAny reports whether podsieve wrote any report there.
	holdsAny(ctx context.Context) (bool, error)
}

func newStore(api ReportAPI, c client.Client, reader client.Reader) store {
	if api == ReportAPIOpenReports {
		return openReportsStore{c: c, reader: reader}
	}
	return policyReportStore{c: c, reader: reader}
}

func managedBy(namespace string) []client.ListOption {
	opts := []client.ListOption{client.MatchingLabels{report.LabelManagedBy: report.ManagedBy}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	return opts
}

// policyReportStore writes wgpolicyk8s.io/v1alpha2 PolicyReports.
type policyReportStore struct {
	c      client.Client
	reader client.Reader
}

func (policyReportStore) api() ReportAPI { return ReportAPIWGPolicy }

func (s policyReportStore) list(ctx context.Context, namespace string) ([]reportv1alpha2.PolicyReport, error) {
	var l reportv1alpha2.PolicyReportList
	if err := s.reader.List(ctx, &l, managedBy(namespace)...); err != nil {
		return nil, fmt.Errorf("list PolicyReports: %w", err)
	}
	return l.Items, nil
}

func (s policyReportStore) holdsAny(ctx context.Context) (bool, error) {
	var l reportv1alpha2.PolicyReportList
	if err := s.reader.List(ctx, &l, append(managedBy(""), client.Limit(1))...); err != nil {
		return false, fmt.Errorf("list PolicyReports: %w", err)
	}
	return len(l.Items) > 0, nil
}

func (s policyReportStore) create(ctx context.Context, r *reportv1alpha2.PolicyReport) error {
	if err := s.c.Create(ctx, r); err != nil {
		return fmt.Errorf("create PolicyReport %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

func (s policyReportStore) update(ctx context.Context, r *reportv1alpha2.PolicyReport) error {
	if err := s.c.Update(ctx, r); err != nil {
		return fmt.Errorf("update PolicyReport %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

func (s policyReportStore) delete(ctx context.Context, r *reportv1alpha2.PolicyReport) error {
	if err := s.c.Delete(ctx, r); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete PolicyReport %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

// openReportsStore writes openreports.io/v1alpha1 Reports.
type openReportsStore struct {
	c      client.Client
	reader client.Reader
}

func (openReportsStore) api() ReportAPI { return ReportAPIOpenReports }

func (s openReportsStore) list(ctx context.Context, namespace string) ([]reportv1alpha2.PolicyReport, error) {
	var l openreportsv1alpha1.ReportList
	if err := s.reader.List(ctx, &l, managedBy(namespace)...); err != nil {
		return nil, fmt.Errorf("list Reports (openreports.io): %w", err)
	}
	out := make([]reportv1alpha2.PolicyReport, len(l.Items))
	for i := range l.Items {
		out[i] = *report.FromOpenReport(&l.Items[i])
	}
	return out, nil
}

func (s openReportsStore) holdsAny(ctx context.Context) (bool, error) {
	var l openreportsv1alpha1.ReportList
	if err := s.reader.List(ctx, &l, append(managedBy(""), client.Limit(1))...); err != nil {
		return false, fmt.Errorf("list Reports (openreports.io): %w", err)
	}
	return len(l.Items) > 0, nil
}

func (s openReportsStore) create(ctx context.Context, r *reportv1alpha2.PolicyReport) error {
	if err := s.c.Create(ctx, report.ToOpenReport(r)); err != nil {
		return fmt.Errorf("create Report (openreports.io) %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

func (s openReportsStore) update(ctx context.Context, r *reportv1alpha2.PolicyReport) error {
	if err := s.c.Update(ctx, report.ToOpenReport(r)); err != nil {
		return fmt.Errorf("update Report (openreports.io) %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

func (s openReportsStore) delete(ctx context.Context, r *reportv1alpha2.PolicyReport) error {
	if err := s.c.Delete(ctx, report.ToOpenReport(r)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Report (openreports.io) %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}
