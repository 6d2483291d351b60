//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsieve/podsieve/test/utils"
)

// The stream of the HA spec: workers × perWorker pod creates.
const (
	streamWorkers   = 8
	streamPerWorker = 24
	// The leader is killed once this many creates have started.
	killAfter = streamWorkers * streamPerWorker / 3
	// controller-runtime's default lease: a new leader takes over at most
	// LeaseDuration (15 s) after the old one's last renewal, plus a retry
	// period (2 s) and jitter.
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
)

// haSpecs are the specs of "High availability".
func haSpecs() {
	It("admits nothing Enforce refuses while the leader is killed with SIGKILL during a stream of creates, and a new leader resumes status and report writes", func(ctx SpecContext) {
		ns := newNamespace(ctx, "ha")
		apply(ctx, netInitException(ns, "net-init"))
		waitReady(ctx, "podex/net-init", ns)
		Expect(podsieve.Balancer.ReadyCount()).To(Equal(3))

		var leader *utils.Replica
		Eventually(func() error {
			var err error
			leader, err = podsieve.Leader(ctx, scraper)
			return err
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			// Back to three replicas for what follows.
			if exited, _ := leader.Process().Exited(); exited {
				Expect(podsieve.Start(ctx, leader)).To(Succeed())
				Expect(podsieve.WaitReady(ctx, leader, time.Minute)).To(Succeed())
			}
		})

		By(fmt.Sprintf("%d clients create %d pods each (compliant, exempted, refused in turn); %s is killed once %d have started (and it has answered some, or %d more have)",
			streamWorkers, streamPerWorker, leader.Name, killAfter, killAfter))
		s := &stream{ns: ns, workers: streamWorkers, perWorker: streamPerWorker}
		var (
			// Set by the killer before it closes killed.
			killAt        time.Time
			killedAfter   int64
			leaderReviews float64
			killed        = make(chan struct{})
			streamDone    = make(chan struct{})
		)
		reviews := func() float64 {
			m, err := podsieve.Metrics(ctx, leader, scraper)
			if err != nil {
				return -1
			}
			return sumLines(m, "podsieve_admission_requests_total", `kind="Pod"`)
		}
		base := reviews()
		Expect(base).To(BeNumerically(">=", 0))
		// The killer waits until killAfter creates have started, and then
		// until the leader has answered some of this stream's reviews, for
		// at most another killAfter creates: the API server keeps its
		// connections and reuses the last used, so a replica may carry no
		// review for a while, in a cluster as here. Then it kills the leader
		// in any case; the figures say how many reviews it had answered.
		go func() {
			defer GinkgoRecover()
			defer close(killed)
			for {
				if n := s.started.Load(); n >= killAfter {
					if r := reviews(); r > base || n >= 2*killAfter {
						leaderReviews = r - base
						break
					}
				}
				select {
				case <-streamDone:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			killedAfter = s.started.Load()
			killAt = time.Now()
			Expect(podsieve.Signal(leader, syscall.SIGKILL)).To(Succeed())
		}()
		s.run(ctx, nil)
		close(streamDone)
		<-killed
		Expect(killAt.IsZero()).To(BeFalse(), "the stream ended before the leader was killed")

		count, failed, inFlight := s.count(), s.failed(), s.inFlight(killAt)
		AddReportEntry("stream outcomes", fmt.Sprintf("killed after %d creates had started; in flight at the kill: %d; pod reviews of the stream the leader had answered: %d; "+
			"connections from the API server per replica: %s\n%s", killedAfter, inFlight, int(leaderReviews), connections(), s.describe(killAt)))

		By("nothing that Enforce refuses was admitted")
		Expect(count[refused][created]).To(BeZero())
		Expect(run(ctx, "get", "pods", "-n", ns, "-l", "stream=refused", "-o", "name")).To(BeEmpty())
		Expect(count[refused][other]).To(BeZero(),
			"every refused create is refused by podsieve, or by the API server when no replica answered")

		By("compliant and exempted creates failed only if they were in flight at the kill")
		for _, c := range failed {
			Expect(c.start.After(killAt)).To(BeFalse(), "%s started after the kill and failed: %s", c.name, c.message)
		}
		Expect(len(failed)).To(BeNumerically("<=", inFlight))

		By("a surviving replica takes the lease, and writes status and reports again")
		var newLeader *utils.Replica
		Eventually(func() error {
			var err error
			newLeader, err = podsieve.Leader(ctx, scraper)
			return err
		}).WithContext(ctx).WithTimeout(leaseDuration + retryPeriod + 15*time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		Expect(newLeader.Name).NotTo(Equal(leader.Name))
		// When the lease was taken, as the new leader wrote it: the stream
		// goes on after the kill, and on a slow machine ends after the
		// takeover, so the time this spec looks is later than the takeover.
		acquired, err := time.Parse(time.RFC3339Nano, run(ctx, "get", "lease", utils.LeaseName, "-n", podsieve.Namespace,
			"-o", "jsonpath={.spec.acquireTime}"))
		Expect(err).NotTo(HaveOccurred())
		leaderAfter := acquired.Sub(killAt)

		// A status write: a new exception's Ready condition, which only the
		// leader writes.
		apply(ctx, netInitException(ns, "net-init-2"))
		waitReady(ctx, "podex/net-init-2", ns)
		statusAfter := time.Since(killAt)

		// Report writes: every pod that was created has its report
		// (compliant pass, exempted skip).
		want := map[string]int{}
		for outcome, n := range map[string]int{"pass": count[compliant][created], "skip": count[exempted][created]} {
			if n > 0 {
				want[outcome] = n
			}
		}
		Eventually(func(g Gomega) map[string]int {
			return countResults(policyResults(ctx, g, ns, "pod-security-standards"))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).
			Should(Equal(want))
		reportAfter := time.Since(killAt)
		AddReportEntry("failover", fmt.Sprintf("killed %s; %s leads %.1fs after the kill; a status write %.1fs after; the report of every created pod %.1fs after",
			leader.Name, newLeader.Name, leaderAfter.Seconds(), statusAfter.Seconds(), reportAfter.Seconds()))
		writeFigures(fmt.Sprintf("ha: %d creates from %d clients in %.1fs, leader SIGKILLed after %d (it had answered %d); in flight at the kill %d; "+
			"compliant/exempted failed %d; refused admitted %d; new leader after %.1fs; status write after %.1fs; reports after %.1fs",
			len(s.creates), streamWorkers, s.end.Sub(s.start).Seconds(), killedAfter, int(leaderReviews), inFlight,
			len(failed), count[refused][created], leaderAfter.Seconds(), statusAfter.Seconds(), reportAfter.Seconds()))
		Expect(leaderAfter).To(BeNumerically("<=", leaseDuration+retryPeriod+5*time.Second),
			"the lease is taken over within its duration after the kill")
	}, SpecTimeout(6*time.Minute))
}

// writeFigures appends a line to $E2E_FIGURES, when set, for the docs.
func writeFigures(line string) {
	path := os.Getenv("E2E_FIGURES")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	_, err = fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
	Expect(err).NotTo(HaveOccurred())
}
