package background

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestLastCompleteScan: podsieve_background_last_complete_scan_timestamp_seconds
// moves only when every namespace a resync listed has been scanned without
// error (or is gone), to the scanner's clock when that full scan started; a namespace whose reports
// cannot be listed keeps the full scan open, and a resync meanwhile does
// not start another one, so a slow full scan still completes.
func TestLastCompleteScan(t *testing.T) {
	ctx := context.Background()
	failing := map[string]bool{"b": true}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c"}}).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if _, ok := list.(*reportv1alpha2.PolicyReportList); ok && failing[lo.Namespace] {
				return errors.New("the API server is unhappy")
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	s := newScanner(c, c, nil, index.New("podsieve-system"), Options{Clock: clk})
	q := &recordingQueue{added: map[string]time.Duration{}}
	lastCompleteScan.Set(0)

	started := clk.Now()
	if err := s.queueEveryNamespace(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a", "c"} {
		if err := s.scanNamespace(ctx, ns); err != nil {
			t.Fatalf("scan %s: %v", ns, err)
		}
	}
	if err := s.scanNamespace(ctx, "b"); err == nil {
		t.Fatal("the scan of b did not fail")
	}
	if got := testenv.GaugeValue(t, lastCompleteScan); got != 0 {
		t.Fatalf("with b failing, the last complete scan is at %v, want none (0)", got)
	}

	// A resync while the full scan is open does not restart it: a and c
	// stay done, and b completes it.
	clk.Step(time.Hour)
	if err := s.queueEveryNamespace(ctx, q); err != nil {
		t.Fatal(err)
	}
	failing["b"] = false
	clk.Step(time.Minute)
	if err := s.scanNamespace(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got, want := testenv.GaugeValue(t, lastCompleteScan), float64(started.Unix()); got != want {
		t.Fatalf("last complete scan at %v, want %v (when the full scan started, not when b was scanned an hour later)", got, want)
	}

	// The next full scan: a namespace deleted meanwhile counts as done.
	started = clk.Now()
	if err := s.queueEveryNamespace(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	for _, ns := range []string{"a", "b"} {
		if err := s.scanNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	if got := testenv.GaugeValue(t, lastCompleteScan); got == float64(started.Unix()) {
		t.Fatal("the full scan completed before c, deleted, was seen gone")
	}
	if err := s.scanNamespace(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got, want := testenv.GaugeValue(t, lastCompleteScan), float64(started.Unix()); got != want {
		t.Fatalf("last complete scan at %v, want %v", got, want)
	}
}
