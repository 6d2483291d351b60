package background

import (
	"hash/fnv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podsieve/podsieve/internal/engine"
)

// Events on the workloads themselves: where developers look first
// (`kubectl describe deployment`), the scan says what the webhook would
// refuse, in the same words. Only for objects no controller owns (a
// Deployment, a CronJob, a bare pod): the pods of a Deployment would repeat
// their Deployment's event once per replica.
const (
	// EventReason is the reason of the scan's events on violating objects.
	EventReason = "PolicyViolation"
	eventAction = "Scan"
	// maxEventNote is the API server's limit on an event's note (1 KiB).
	maxEventNote = 1024
	// eventRetry is how soon a namespace whose events the rate limit held
	// back is scanned again to send them.
	eventRetry = 30 * time.Second
)

// eventKey identifies one rule's violation on one object.
type eventKey struct {
	uid          types.UID
	policy, rule string
}

// eventSent is what was last said about a violation (a hash of the note:
// the leader keeps one per violation that exists, and a note is up to
// 1 KiB), and when.
type eventSent struct {
	note uint64
	at   time.Time
}

func noteHash(note string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(note))
	return h.Sum64()
}

// violation is an event the scan of a namespace would send.
type violation struct {
	obj  client.Object
	key  eventKey
	note string
}

// violationsOf are the events a decision on obj calls for: one per rule that
// fails on it (Warn policies included: their violations are real), none
// when a controller owns obj.
func violationsOf(obj client.Object, d engine.Decision) []violation {
	if metav1.GetControllerOf(obj) != nil {
		return nil
	}
	var out []violation
	for i := range d.Results {
		res := &d.Results[i]
		if res.Outcome != engine.Fail {
			continue
		}
		out = append(out, violation{
			obj:  obj,
			key:  eventKey{uid: obj.GetUID(), policy: res.Rule.Policy.Name, rule: res.Rule.Name},
			note: eventNote(res, d.Object),
		})
	}
	return out
}

// eventNote is the refusal's words for the rule, then a line with the
// result's severity (engine.RuleResult.Reporting, as the PolicyReport
// result has it), which a cut to the API server's limit keeps.
func eventNote(res *engine.RuleResult, o *engine.Object) string {
	severity, _ := res.Reporting()
	last := "\nSeverity: " + string(severity)
	return truncateNote(res.ViolationMessage(o), maxEventNote-len(last)) + last
}

// sendEvents sends the events of one namespace's scan. A violation is
// announced once, then again when its words change or after nine tenths of
// a resync period (the API server keeps events an hour by default), so a
// rescan caused by an unrelated change says nothing twice; events beyond
// EventsPerSecond wait for a rescan eventRetry later. What was sent is
// remembered, in this replica's memory, per namespace for the violations
// that still exist, and nothing else: a new leader announces them again.
func (s *Scanner) sendEvents(namespace string, found []violation, now time.Time) {
	if s.opts.Events == nil {
		return
	}
	s.mu.Lock()
	before := s.sent[namespace]
	s.mu.Unlock()
	again := s.opts.ResyncPeriod * 9 / 10
	sent := make(map[eventKey]eventSent, len(found))
	deferred := false
	for _, v := range found {
		note := noteHash(v.note)
		if last, ok := before[v.key]; ok && last.note == note && now.Sub(last.at) < again {
			sent[v.key] = last
			continue
		}
		if !s.eventTokens.Allow() {
			eventsDropped.Inc()
			deferred = true
			continue
		}
		s.opts.Events.Eventf(v.obj, nil, corev1.EventTypeWarning, EventReason, eventAction, "%s", v.note)
		eventsSent.Inc()
		sent[v.key] = eventSent{note: note, at: now}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if deferred {
		s.eventsDeferred[namespace] = true
	}
	if len(sent) == 0 {
		delete(s.sent, namespace)
		return
	}
	s.sent[namespace] = sent
}

// truncateNote cuts a note to max bytes, at a rune boundary.
func truncateNote(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const more = "…"
	cut := max - len(more)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + more
}
