//go:build e2e

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// deploymentSeconds reads a duration in seconds from the installed
// Deployment: how a kubelet would stop its pods.
func deploymentSeconds(ctx SpecContext, jsonpath string) time.Duration {
	GinkgoHelper()
	out := run(ctx, "get", "deployment", "podsieve-manager", "-n", "podsieve-system", "-o", "jsonpath={"+jsonpath+"}")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	Expect(err).NotTo(HaveOccurred(), "%s: %q", jsonpath, out)
	return time.Duration(n) * time.Second
}

// rolloutSpecs are the specs of "A rolling restart of podsieve".
func rolloutSpecs() {
	It("replaces each replica as the Deployment's strategy does while pods are created: nothing refused is admitted, and no compliant create fails", func(ctx SpecContext) {
		ns := newNamespace(ctx, "rollout")
		apply(ctx, netInitException(ns, "net-init"))
		waitReady(ctx, "podex/net-init", ns)
		Expect(podsieve.Balancer.ReadyCount()).To(Equal(3))

		// What the kubelet does with a pod of the Deployment: run its
		// preStop hook, then SIGTERM, then SIGKILL at the grace period.
		preStop := deploymentSeconds(ctx, ".spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds")
		grace := deploymentSeconds(ctx, ".spec.template.spec.terminationGracePeriodSeconds")
		Expect(run(ctx, "get", "deployment", "podsieve-manager", "-n", "podsieve-system",
			"-o", "jsonpath={.spec.strategy.rollingUpdate.maxSurge} {.spec.strategy.rollingUpdate.maxUnavailable}")).To(Equal("1 0"))

		s := &stream{ns: ns, workers: 6, perWorker: 200}
		stop, streamDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(streamDone)
			s.run(ctx, stop)
		}()
		var once sync.Once
		halt := func() {
			once.Do(func() { close(stop) })
			<-streamDone
		}
		defer halt()
		Eventually(s.started.Load).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 12))

		By(fmt.Sprintf("maxSurge 1, maxUnavailable 0: a new replica, ready, then an old one stopped (preStop %s, then SIGTERM, grace %s)", preStop, grace))
		var steps []string
		restartStart := time.Now()
		dialFailures := podsieve.Balancer.DialFailures()
		for _, old := range append(podsieve.Replicas[:0:0], podsieve.Replicas...) {
			t := time.Now()
			r, err := podsieve.AddReplica(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(podsieve.WaitReady(ctx, r, time.Minute)).To(Succeed())
			ready := time.Since(t)
			t = time.Now()
			term, err := podsieve.Terminate(old, preStop, grace)
			Expect(err).NotTo(HaveOccurred())
			Expect(term.Killed).To(BeFalse(), "%s did not exit within the grace period after SIGTERM", old.Name)
			exited, exitErr := old.Process().Exited()
			Expect(exited).To(BeTrue())
			Expect(exitErr).NotTo(HaveOccurred(), "%s's exit after SIGTERM", old.Name)
			steps = append(steps, fmt.Sprintf("%s ready in %.1fs; %s stopped in %.1fs: preStop %s, SIGTERM at %+.3fs, exited %.3fs later",
				r.Name, ready.Seconds(), old.Name, time.Since(t).Seconds(), preStop,
				term.SIGTERM.Sub(restartStart).Seconds(), term.Exited.Sub(term.SIGTERM).Seconds()))
		}
		restart := time.Since(restartStart)
		halt()

		count, failed := s.count(), s.failed()
		AddReportEntry("rolling restart", fmt.Sprintf("%s\nall replaced in %.1fs\nconnections from the API server per replica: %s; "+
			"connections the balancer could not forward: %d\n%s",
			strings.Join(steps, "\n"), restart.Seconds(), connections(),
			podsieve.Balancer.DialFailures()-dialFailures, s.describe(restartStart)))
		writeFigures(fmt.Sprintf("rolling restart: 3 replicas replaced in %.1fs under %d creates from %d clients; compliant/exempted failed %d; refused admitted %d",
			restart.Seconds(), len(s.creates), s.workers, len(failed), count[refused][created]))

		By("nothing refused was admitted")
		Expect(count[refused][created]).To(BeZero())

		By("no compliant or exempted create failed")
		// A replica that gets SIGTERM drains first (--webhook-shutdown-drain):
		// not ready, answering with "Connection: close", so that the API
		// server's kept-alive connection moves to another replica, and only
		// then stops, after the reviews in flight (webhooks.DrainingServer).
		for _, c := range failed {
			Expect(c.outcome).NotTo(BeElementOf(callFailed, unfinished), "%s: %s", c.name, c.message)
		}
		Expect(failed).To(BeEmpty())
		Expect(podsieve.Replicas).To(HaveLen(3))
		Expect(podsieve.Balancer.ReadyCount()).To(Equal(3))

		By("a new replica leads")
		Eventually(func() error {
			_, err := podsieve.Leader(ctx, scraper)
			return err
		}).WithContext(ctx).WithTimeout(leaseDuration + retryPeriod + 15*time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
}
