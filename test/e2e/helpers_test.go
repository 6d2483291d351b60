//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsieve/podsieve/test/utils"
)

// kubectlStderr is what kubectl printed on its standard error when err is
// its failure: the message a user reads when the API server refuses.
func kubectlStderr(err error) string {
	GinkgoHelper()
	var kerr *utils.Error
	Expect(errors.As(err, &kerr)).To(BeTrue(), "not a kubectl failure: %v", err)
	return kerr.Result.Stderr
}

// metricSum adds up a counter over every running replica, as a Prometheus
// query sum(name{labels}) does: each line of the exposition whose name is
// name and whose labels include every one of labels (`kind="Pod"`).
func metricSum(ctx context.Context, name string, labels ...string) float64 {
	GinkgoHelper()
	var sum float64
	for _, r := range podsieve.Replicas {
		if exited, _ := r.Process().Exited(); exited {
			continue
		}
		m, err := podsieve.Metrics(ctx, r, scraper)
		Expect(err).NotTo(HaveOccurred())
		sum += sumLines(m, name, labels...)
	}
	return sum
}

// sumLines adds up the samples of one Prometheus exposition whose name is
// name and whose labels include every one of labels.
func sumLines(exposition, name string, labels ...string) float64 {
	GinkgoHelper()
	var sum float64
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		Expect(err).NotTo(HaveOccurred(), line)
		sum += v
	}
	return sum
}

// eventMessages returns the messages of the events in ns that match the
// field selector, oldest first, as `kubectl get events` lists them.
func eventMessages(ctx context.Context, g Gomega, ns, fieldSelector string) []string {
	out, err := kubectl.Run(ctx, "get", "events", "-n", ns, "--field-selector", fieldSelector, "--sort-by=.lastTimestamp", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var list struct {
		Items []struct {
			Message string `json:"message"`
		} `json:"items"`
	}
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
	msgs := make([]string, 0, len(list.Items))
	for _, e := range list.Items {
		msgs = append(msgs, e.Message)
	}
	return msgs
}

// policyResults reads a namespace's podsieve reports (one per object, each
// labelled with the policies whose results it holds) as Policy Reporter
// would, and returns that policy's results, "Kind/name" of each report's
// scope → outcome. Each report must have a scope.
func policyResults(ctx context.Context, g Gomega, ns, policy string) map[string]string {
	out, err := kubectl.Run(ctx, "get", "polr", "-n", ns, "-l", "policy.podsieve.dev/"+policy, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var list struct {
		Items []struct {
			Scope struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"scope"`
			Results []struct {
				Policy     string            `json:"policy"`
				Result     string            `json:"result"`
				Properties map[string]string `json:"properties"`
			} `json:"results"`
		} `json:"items"`
	}
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
	results := map[string]string{}
	for _, r := range list.Items {
		g.Expect(r.Scope.Kind).NotTo(BeEmpty(), "a report without a scope")
		for _, res := range r.Results {
			if res.Policy == policy {
				results[r.Scope.Kind+"/"+r.Scope.Name] = res.Result
			}
		}
	}
	return results
}

// countResults counts results by outcome.
func countResults(results map[string]string) map[string]int {
	n := map[string]int{}
	for _, r := range results {
		n[r]++
	}
	return n
}

// podsieveRefusal matches podsieve's refusal of a pod-bearing write, whichever
// answers first: the API server's own form of the policies (the
// ValidatingAdmissionPolicy podsieve compiled, which the API server
// evaluates before any webhook), or the webhook's. Both quote the engine's
// message after the prefix.
var podsieveRefusal = regexp.MustCompile(`(admission webhook "pods\.podsieve\.dev" denied the request|ValidatingAdmissionPolicy 'podsieve\.[^']+' with binding 'podsieve\.[^']+' denied request): `)
