package webhooks

import (
	"context"
	"time"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// SlowDecisions makes h's decisions take as long as slow takes (slow should
// return when ctx ends, as the engine does): for tests of the limits, which
// need expensive reviews without expensive policies. Call it before h
// serves.
func SlowDecisions(h *PodAdmission, slow func(ctx context.Context, o *engine.Object)) {
	h.decide = func(ctx context.Context, snap *index.Snapshot, o *engine.Object, labels map[string]string, now time.Time) (engine.Decision, error) {
		slow(ctx, o)
		return h.decideWithin(ctx, snap, o, labels, now)
	}
}

// LimitSteps sets h's work budget per decision. Call it before h serves.
func LimitSteps(h *PodAdmission, steps int64) {
	h.limits = engine.Limits{MaxSteps: steps}
}
