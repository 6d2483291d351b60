package background

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/index"
)

// eventsFixture decides pods against one policy, a rule per level, and sends the
// scan's events to a fake recorder.
type eventsFixture struct {
	t   *testing.T
	s   *Scanner
	ix  *index.Index
	rec *events.FakeRecorder
}

func newEventsFixture(t *testing.T, perSecond float64, levels ...string) *eventsFixture {
	spec := "exceptions: {}\nrules:"
	for _, l := range levels {
		spec += "\n- {name: " + l + ", podSecurity: {level: " + l + "}}"
	}
	return newEventsFixtureSpec(t, perSecond, spec)
}

// newEventsFixtureSpec is newEventsFixture with the policy's spec written out.
func newEventsFixtureSpec(t *testing.T, perSecond float64, spec string) *eventsFixture {
	p := enginetest.MustPolicy(t, "pss", spec)
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{p}, nil, nil, nil)
	rec := events.NewFakeRecorder(100)
	s := newScanner(nil, nil, nil, ix, Options{Events: rec, ResyncPeriod: time.Hour, EventsPerSecond: perSecond})
	return &eventsFixture{t: t, s: s, ix: ix, rec: rec}
}

func testPod(name string, mut func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	if mut != nil {
		mut(p)
	}
	return p
}

func privileged(p *corev1.Pod) {
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
}

// scan decides pods and sends their events as the scan of team-a does.
func (f *eventsFixture) scan(now time.Time, pods ...*corev1.Pod) {
	f.t.Helper()
	var found []violation
	for _, p := range pods {
		o, err := engine.NewObject(p.DeepCopy())
		if err != nil {
			f.t.Fatal(err)
		}
		o.APIVersion, o.Kind = "v1", "Pod"
		found = append(found, violationsOf(p, f.ix.Snapshot().Decide(o, now, engine.Background))...)
	}
	f.s.sendEvents("team-a", found, now)
}

// sent drains the recorder.
func (f *eventsFixture) sent() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestViolationEvents(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	t.Run("one Warning per failing rule, in the refusal's words", func(t *testing.T) {
		f := newEventsFixture(t, 5, "baseline", "restricted")
		f.scan(at, testPod("root", privileged), testPod("fine", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}))
		got := f.sent()
		if len(got) != 2 {
			t.Fatalf("sent %d events, want 2 (baseline and restricted on root, none on fine):\n%s", len(got), strings.Join(got, "\n"))
		}
		for i, rule := range []string{"baseline", "restricted"} {
			want := `Warning PolicyViolation Pod team-a/root violates SecurityPolicy "pss" rule "` + rule + `"`
			if !strings.HasPrefix(got[i], want) || !strings.Contains(got[i], "Privileged Containers") {
				t.Errorf("event %d:\n%s\nwant it to start %q and name the control", i, got[i], want)
			}
		}
	})
	t.Run("nothing for a pod a controller owns: its workload carries the event", func(t *testing.T) {
		f := newEventsFixture(t, 5, "baseline")
		f.scan(at, testPod("web-1", func(p *corev1.Pod) {
			privileged(p)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}
		}))
		if got := f.sent(); len(got) != 0 {
			t.Errorf("sent %q", got)
		}
	})
	t.Run("a rescan says nothing twice, then repeats before the API server forgets", func(t *testing.T) {
		f := newEventsFixture(t, 5, "baseline")
		root := testPod("root", func(p *corev1.Pod) { p.Spec.HostPID = true })
		f.scan(at, root)
		if got := f.sent(); len(got) != 1 {
			t.Fatalf("first scan sent %q, want one event", got)
		}
		f.scan(at.Add(10*time.Minute), root)
		if got := f.sent(); len(got) != 0 {
			t.Fatalf("a rescan 10 minutes later sent %q, want nothing", got)
		}
		f.scan(at.Add(55*time.Minute), root)
		if got := f.sent(); len(got) != 1 {
			t.Fatalf("a rescan 55 minutes later (nine tenths of the resync period) sent %q, want the event again", got)
		}
	})
	t.Run("new words are said at once", func(t *testing.T) {
		f := newEventsFixture(t, 5, "baseline")
		f.scan(at, testPod("root", func(p *corev1.Pod) { p.Spec.HostPID = true }))
		f.sent()
		f.scan(at.Add(time.Minute), testPod("root", func(p *corev1.Pod) { p.Spec.HostPID, p.Spec.HostIPC = true, true }))
		if got := f.sent(); len(got) != 1 || !strings.Contains(got[0], "hostIPC") {
			t.Fatalf("sent %q, want the new violation at once", got)
		}
	})
	t.Run("fixed and come back: said again", func(t *testing.T) {
		f := newEventsFixture(t, 5, "baseline")
		f.scan(at, testPod("root", func(p *corev1.Pod) { p.Spec.HostPID = true }))
		f.sent()
		f.scan(at.Add(time.Minute), testPod("root", nil))
		f.scan(at.Add(2*time.Minute), testPod("root", func(p *corev1.Pod) { p.Spec.HostPID = true }))
		if got := f.sent(); len(got) != 1 {
			t.Fatalf("sent %q, want the returning violation once", got)
		}
		if len(f.s.sent) != 1 || len(f.s.sent["team-a"]) != 1 {
			t.Errorf("remembered %v, want only the violation that exists", f.s.sent)
		}
	})
	t.Run("beyond the rate, events wait for a later scan", func(t *testing.T) {
		f := newEventsFixture(t, 1, "baseline") // a burst of 5
		var pods []*corev1.Pod
		for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			pods = append(pods, testPod(name, func(p *corev1.Pod) { p.Spec.HostPID = true }))
		}
		f.scan(at, pods...)
		if got := f.sent(); len(got) != 5 {
			t.Fatalf("sent %d events, want the burst of 5", len(got))
		}
		if !f.s.eventsDeferred["team-a"] {
			t.Error("the namespace is not marked for an early rescan")
		}
		f.s.eventTokens = rate.NewLimiter(1, 5) // the tokens back, as time would give them
		f.scan(at.Add(time.Minute), pods...)
		if got := f.sent(); len(got) != 3 {
			t.Fatalf("the next scan sent %d events, want the 3 deferred ones", len(got))
		}
	})
	t.Run("a note within the API server's 1 KiB", func(t *testing.T) {
		long := strings.Repeat("é", 600)
		if got := truncateNote(long, maxEventNote); len(got) > maxEventNote || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
			t.Errorf("truncated to %d bytes, suffix %q", len(got), got[len(got)-3:])
		}
	})
}

func TestViolationEventSeverity(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	hostPID := func(p *corev1.Pod) { p.Spec.HostPID = true }
	manyContainers := func(p *corev1.Pod) {
		for i := range 20 {
			c := corev1.Container{Name: fmt.Sprintf("container-%d", i), Image: "registry.example/app:1",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
	}
	const critical = "\n  controlSeverities: [{controlName: Privileged Containers, severity: critical}, {controlName: Host Namespaces, severity: low}]"
	for _, tc := range []struct {
		name, spec string
		pod        func(*corev1.Pod)
		want       string
	}{
		{"baseline default", "rules:\n- {name: baseline, podSecurity: {level: baseline}}", privileged, "high"},
		{"restricted default", "rules:\n- {name: restricted, podSecurity: {level: restricted}}", privileged, "medium"},
		{"the rule's severity", "rules:\n- {name: baseline, severity: info, podSecurity: {level: baseline}}", privileged, "info"},
		{"a control's severity", "rules:\n- name: baseline\n  podSecurity: {level: baseline}" + critical, privileged, "critical"},
		{"a control set lower than the rule", "rules:\n- name: baseline\n  podSecurity: {level: baseline}" + critical, hostPID, "low"},
		{"the highest of the violations' controls", "rules:\n- name: baseline\n  podSecurity: {level: baseline}" + critical,
			func(p *corev1.Pod) { privileged(p); hostPID(p) }, "critical"},
		{"kept when the note is cut", "rules:\n- name: baseline\n  podSecurity: {level: baseline}" + critical, manyContainers, "critical"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEventsFixtureSpec(t, 5, tc.spec)
			f.scan(at, testPod("root", tc.pod))
			got := f.sent()
			if len(got) != 1 {
				t.Fatalf("sent %q, want one event", got)
			}
			if !strings.HasSuffix(got[0], "\nSeverity: "+tc.want) || !strings.Contains(got[0], `Pod team-a/root violates SecurityPolicy "pss"`) {
				t.Errorf("event:\n%s\nwant the refusal's words, then the line Severity: %s", got[0], tc.want)
			}
		})
	}
	t.Run("a cut note stays within 1 KiB", func(t *testing.T) {
		f := newEventsFixtureSpec(t, 5, "rules:\n- {name: baseline, podSecurity: {level: baseline}}")
		f.scan(at, testPod("root", manyContainers))
		got := f.sent()
		if len(got) != 1 {
			t.Fatalf("sent %q, want one event", got)
		}
		note := got[0][strings.Index(got[0], "Pod team-a/root"):]
		if len(note) > maxEventNote || !strings.Contains(note, "…\nSeverity: high") {
			t.Errorf("note of %d bytes ends %q; want at most %d, cut before the severity line", len(note), note[max(0, len(note)-40):], maxEventNote)
		}
	})
}
