//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsieve/podsieve/test/utils"
)

// The suite's cluster and podsieve, shared by the specs, which run in order
// (the HA spec kills replicas) and each in namespaces of their own.
var (
	cluster  *utils.Cluster
	podsieve *utils.Podsieve
	// kubectl is a cluster admin's.
	kubectl *utils.Kubectl
	// scraper is the bearer token of a ServiceAccount bound to
	// podsieve-metrics-reader, as docs/install.md tells Prometheus to use.
	scraper string
	root    string
	// podsieveBinary is the built podsieve, for its CLI too: make
	// test-e2e's is the linux/amd64 binary of the released image.
	podsieveBinary string
	// podsieveChart is the chart the Helm spec installs: make test-e2e's
	// is the released one (E2E_CHART), charts/podsieve when "".
	podsieveChart string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "podsieve e2e suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	assets := os.Getenv("E2E_CLUSTER_ASSETS")
	Expect(assets).NotTo(BeEmpty(), "E2E_CLUSTER_ASSETS: run `make test-e2e`, or set it to what hack/setup-cluster.sh prints")
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	binary := os.Getenv("E2E_PODSIEVE")
	if binary == "" {
		binary = filepath.Join(root, "bin", "podsieve")
	}
	Expect(binary).To(BeAnExistingFile(), "build it with `make build`")
	podsieveBinary = binary
	podsieveChart = os.Getenv("E2E_CHART")
	if podsieveChart != "" {
		Expect(podsieveChart).To(BeAnExistingFile(), "E2E_CHART: build it with `make release`")
	}
	// Kept after the run for reading when E2E_DIR is set; a temporary
	// directory, removed when the suite passes, otherwise.
	dir := os.Getenv("E2E_DIR")
	if dir == "" {
		dir, err = os.MkdirTemp("", "podsieve-e2e-")
		Expect(err).NotTo(HaveOccurred())
	} else {
		Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	}
	DeferCleanup(func() {
		// Whatever failed before: nothing this suite started outlives it.
		Expect(utils.StopAll()).To(Succeed())
		if os.Getenv("E2E_DIR") == "" && !CurrentSpecReport().Failed() && !suiteFailed {
			_ = os.RemoveAll(dir)
		} else {
			GinkgoWriter.Printf("cluster data, kubeconfigs and logs kept in %s\n", dir)
		}
	})

	start := time.Now()
	cluster, err = utils.StartCluster(ctx, utils.ClusterOptions{Assets: assets, Dir: dir})
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry("cluster start", time.Since(start).Round(time.Millisecond).String())
	kubectl = cluster.Kubectl()

	start = time.Now()
	podsieve, err = utils.Install(ctx, cluster, utils.InstallOptions{Root: root, Binary: binary, Replicas: 3})
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry("podsieve install (3 replicas ready, caBundle set)", time.Since(start).Round(time.Millisecond).String())
	DeferCleanup(func() {
		// Unless "Installed elsewhere" removed it already.
		if podsieve != nil {
			Expect(podsieve.Stop()).To(Succeed())
		}
	})

	// A scraper, as docs/install.md binds Prometheus.
	run(ctx, "create", "namespace", "monitoring")
	run(ctx, "create", "serviceaccount", "prometheus", "-n", "monitoring")
	run(ctx, "create", "clusterrolebinding", "podsieve-metrics-reader", "--clusterrole=podsieve-metrics-reader", "--serviceaccount=monitoring:prometheus")
	scraper = strings.TrimSpace(run(ctx, "create", "token", "prometheus", "-n", "monitoring", "--duration=12h"))

	// A cluster admin applies the sample policies and a developer the
	// sample exceptions, which live in staging (opted into the restricted
	// profile, in Audit): every spec runs under them, as in a cluster.
	// The samples create staging (kubectl apply -k works on a fresh
	// cluster); a cluster admin labels it, outside the samples.
	samples := filepath.Join(root, "config", "samples")
	run(ctx, "apply", "-k", samples)
	run(ctx, "label", "namespace", "staging", "security.podsieve.dev/profile=restricted")
	waitReady(ctx, "secpol/pod-security-standards")
	waitReady(ctx, "secpol/restricted-workloads")
	// Judged: mesh-init is Active. (The time-boxed sample is not in the
	// kustomization: it needs a date.)
	run(ctx, "wait", "podex/mesh-init", "-n", "staging", "--for=condition=Ready", "--timeout=60s")

	// GitOps (docs/gitops.md): once the controllers have judged them,
	// applying the samples again changes nothing, and neither a
	// client-side nor a server-side diff finds drift: podsieve writes
	// only status, never what a user's manifest says.
	for _, line := range strings.Split(strings.TrimSpace(run(ctx, "apply", "-k", samples)), "\n") {
		Expect(line).To(HaveSuffix(" unchanged"), "applying the samples again")
	}
	out, err := kubectl.Run(ctx, "diff", "-k", samples)
	Expect(err).NotTo(HaveOccurred(), "kubectl diff found drift (or failed):\n%s", out)
	// Server-side: the applier takes the fields over (a GitOps tool moving
	// to server-side apply), then finds no drift either.
	run(ctx, "apply", "--server-side", "-k", samples)
	out, err = kubectl.Run(ctx, "diff", "--server-side", "-k", samples)
	Expect(err).NotTo(HaveOccurred(), "kubectl diff --server-side found drift (or failed):\n%s", out)
}, NodeTimeout(5*time.Minute))

// suiteFailed is set by ReportAfterEach, so that the cleanup keeps the
// logs of a failed run.
var suiteFailed bool

var _ = ReportAfterEach(func(r SpecReport) {
	if !r.Failed() {
		return
	}
	suiteFailed = true
	if cluster == nil {
		return
	}
	// What a failed spec needs to be read: the end of every log.
	for _, p := range append(cluster.Processes(), replicaProcesses()...) {
		AddReportEntry("log of "+p.Name, p.Tail(15), ReportEntryVisibilityFailureOrVerbose)
	}
})

func replicaProcesses() []*utils.Process {
	if podsieve == nil {
		return nil
	}
	var out []*utils.Process
	for _, r := range podsieve.Replicas {
		if p := r.Process(); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// run is kubectl as a cluster admin; it fails the spec when kubectl fails.
func run(ctx context.Context, args ...string) string {
	GinkgoHelper()
	out, err := kubectl.Run(ctx, args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// apply applies a manifest as a cluster admin and fails the spec when
// kubectl fails.
func apply(ctx context.Context, manifest string) string {
	GinkgoHelper()
	out, err := kubectl.RunStdin(ctx, manifest, "apply", "-f", "-")
	Expect(err).NotTo(HaveOccurred())
	return out
}

// newNamespace creates a namespace for one spec, deleted after it.
func newNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)
	run(ctx, "create", "namespace", name)
	DeferCleanup(func(ctx SpecContext) {
		_, _ = kubectl.Run(ctx, "delete", "namespace", name, "--wait=false")
	})
	return name
}

// waitReady waits until the controllers have written a podsieve object's
// Ready condition for its current generation: the index holds it.
func waitReady(ctx context.Context, obj string, ns ...string) {
	GinkgoHelper()
	args := []string{"wait", obj, "--for=condition=Ready", "--timeout=60s"}
	if len(ns) > 0 {
		args = append(args, "-n", ns[0])
	}
	run(ctx, args...)
}

// The specs run in this order (Ginkgo would shuffle top-level containers),
// each in namespaces of its own; a failure does not skip the rest. The last
// ones stop replicas, or uninstall, and restore what they stopped.
var _ = Describe("podsieve", Ordered, ContinueOnFailure, func() {
	Describe("The installation", installSpecs)
	Describe("The mission, through the controllers", missionSpecs)
	Describe("A policy tightened under a running Deployment", tightenSpecs)
	Describe("High availability", haSpecs)
	Describe("Enforcement by the API server itself", apiServerSpecs)
	Describe("A rolling restart of podsieve", rolloutSpecs)
	Describe("Lock-out safety", lockoutSpecs)
	Describe("Uninstall", uninstallSpecs)
	Describe("Installed elsewhere", elsewhereSpecs)
})
