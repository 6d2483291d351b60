//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/podsieve/podsieve/test/utils"
)

// A stream is pod creates from several clients at once, each a kubectl
// process of its own, cycling through three kinds of pod.
type podKind string

const (
	// compliant passes baseline.
	compliant podKind = "compliant"
	// exempted adds NET_ADMIN to a named init container of an image from a
	// registry the sample policy's guardrails allow (Istio's proxyv2, which
	// programs iptables), which the namespace's PolicyException waives for
	// pods named exempted-*. (The sample guardrails allow capabilities only
	// for init containers of the meshes' registries, never for an app
	// container.)
	exempted podKind = "exempted"
	// refused is exempted's pod under another name: no exception reaches it,
	// so Enforce refuses it.
	refused podKind = "refused"
)

var kinds = []podKind{compliant, exempted, refused}

func streamPod(ns, name string, kind podKind) string {
	container := `
  - name: app
    image: docker.io/library/nginx:1.27`
	init := ""
	if kind != compliant {
		init = `
  initContainers:
  - name: net-init
    image: docker.io/istio/proxyv2:1.24.0
    securityContext:
      capabilities: {add: [NET_ADMIN]}`
	}
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: ` + ns + `
  labels: {stream: ` + string(kind) + `}
spec:` + init + `
  containers:` + container + "\n"
}

// netInitException waives NET_ADMIN for the init container of the exempted
// pods of ns, within the sample policy's guardrails.
func netInitException(ns, name string) string {
	return `apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  exceptions:
  - policyName: pod-security-standards
    ruleNames: ["baseline-service-mesh"]
  match:
    names: ["exempted-*"]
    kinds: ["Pod"]
  podSecurity:
  - controlName: Capabilities
    containerNames: ["net-init"]
    containerKinds: [Init]
    images: ["docker.io/istio/proxyv2"]
    restrictedField: spec.initContainers[*].securityContext.capabilities.add
    values: ["NET_ADMIN"]
  justification: "iptables for the mesh, ticket OPS-7"
  expiresAt: "` + time.Now().Add(30*24*time.Hour).UTC().Format(time.RFC3339) + `"
`
}

// outcome is what kubectl said about one create.
type outcome string

const (
	created outcome = "created"
	// denied: podsieve answered and refused, with its message.
	denied outcome = "denied by podsieve"
	// callFailed: the API server could not get an answer from a replica
	// (failurePolicy Fail refuses the request).
	callFailed outcome = "webhook call failed"
	// unfinished: podsieve answered that it could not finish deciding, and
	// refused what it had not checked.
	unfinished outcome = "podsieve could not finish"
	other      outcome = "other error"
)

type create struct {
	name       string
	kind       podKind
	start, end time.Time
	outcome    outcome
	message    string
}

func classify(err error) (outcome, string) {
	if err == nil {
		return created, ""
	}
	var kerr *utils.Error
	if !errors.As(err, &kerr) {
		return other, err.Error()
	}
	msg := kerr.Result.Stderr
	switch {
	case podsieveRefusal.MatchString(msg) && strings.Contains(msg, "is refused by SecurityPolicy"):
		return denied, msg
	case strings.Contains(msg, `failed calling webhook "pods`):
		return callFailed, msg
	case strings.Contains(msg, "podsieve could not finish deciding"):
		return unfinished, msg
	}
	return other, msg
}

type stream struct {
	ns        string
	workers   int
	perWorker int
	// started counts the creates begun so far.
	started atomic.Int64

	mu         sync.Mutex
	creates    []create
	start, end time.Time
}

// run creates pods from s.workers clients until each has made perWorker or
// stop is closed, and returns when all are done.
func (s *stream) run(ctx context.Context, stop <-chan struct{}) {
	var wg sync.WaitGroup
	s.start = time.Now()
	for w := range s.workers {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := range s.perWorker {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				kind := kinds[(w+i)%len(kinds)]
				c := create{name: fmt.Sprintf("%s-%d-%d", kind, w, i), kind: kind, start: time.Now()}
				s.started.Add(1)
				_, err := kubectl.Exec(ctx, streamPod(s.ns, c.name, kind), "create", "-f", "-")
				c.end = time.Now()
				c.outcome, c.message = classify(err)
				s.mu.Lock()
				s.creates = append(s.creates, c)
				s.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.end = time.Now()
}

// count is how many creates of each kind had each outcome.
func (s *stream) count() map[podKind]map[outcome]int {
	count := map[podKind]map[outcome]int{}
	for _, k := range kinds {
		count[k] = map[outcome]int{}
	}
	for _, c := range s.creates {
		count[c.kind][c.outcome]++
	}
	return count
}

// failed are the compliant and exempted creates that were not created,
// oldest first.
func (s *stream) failed() []create {
	var failed []create
	for _, c := range s.creates {
		if c.kind != refused && c.outcome != created {
			failed = append(failed, c)
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].start.Before(failed[j].start) })
	return failed
}

// inFlight counts the creates under way at t.
func (s *stream) inFlight(t time.Time) int {
	n := 0
	for _, c := range s.creates {
		if !c.start.After(t) && !c.end.Before(t) {
			n++
		}
	}
	return n
}

// describe says what the stream did, with each failed create's time
// relative to at.
func (s *stream) describe(at time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d creates from %d clients in %.1fs: %v\n", len(s.creates), s.workers, s.end.Sub(s.start).Seconds(), s.count())
	for _, c := range s.failed() {
		fmt.Fprintf(&b, "failed: %s %s, started %+.3fs, took %.3fs: %s\n",
			c.kind, c.name, c.start.Sub(at).Seconds(), c.end.Sub(c.start).Seconds(), strings.TrimSpace(c.message))
	}
	return b.String()
}

// connections says how many connections the API server opened to each
// replica through the balancer.
func connections() string {
	var conns []string
	for _, be := range podsieve.Balancer.Backends() {
		conns = append(conns, fmt.Sprintf("%s %d", be.Name, be.Conns()))
	}
	return strings.Join(conns, ", ")
}
