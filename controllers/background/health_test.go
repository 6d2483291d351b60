package background

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

func TestScanHealth(t *testing.T) {
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name              string
		activeSince, last time.Time
		now               time.Time
		status            metav1.ConditionStatus // "" for no condition
		reason, inMessage string
	}{
		{name: "first scan under way", activeSince: start, now: start.Add(time.Hour)},
		{name: "first scan overdue", activeSince: start, now: start.Add(2*time.Hour + 11*time.Minute),
			status: metav1.ConditionFalse, reason: policyv1alpha1.ReasonScanStalled, inMessage: "started at 2026-11-23T12:00:00Z on this leader"},
		{name: "a scan completed", activeSince: start, last: start.Add(time.Hour), now: start.Add(2 * time.Hour),
			status: metav1.ConditionTrue, reason: policyv1alpha1.ReasonScanComplete, inMessage: "started at 2026-11-23T13:00:00Z and completed"},
		{name: "the last one completed too long ago", activeSince: start, last: start.Add(time.Hour), now: start.Add(3*time.Hour + 11*time.Minute),
			status: metav1.ConditionFalse, reason: policyv1alpha1.ReasonScanStalled, inMessage: "since the one that started at 2026-11-23T13:00:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScanner(nil, nil, nil, nil, Options{ResyncPeriod: time.Hour})
			s.activeSince, s.lastComplete = tc.activeSince, tc.last
			c := s.scanHealth(tc.now)
			if tc.status == "" {
				if c != nil {
					t.Errorf("condition %+v, want none", c)
				}
				return
			}
			if c == nil || c.Type != policyv1alpha1.ConditionScanned || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.inMessage) {
				t.Errorf("condition %+v, want %s %s with %q", c, tc.status, tc.reason, tc.inMessage)
			}
		})
	}
}
