# podsieve: `make help` lists the targets.

# Tools are the tool directives of hack/tools/go.mod, built from Go modules
# and kept out of podsieve's own go.mod; nothing is downloaded as a binary.
# GOLANGCI_LINT is golangci-lint v2 with kube-api-linter compiled in as a module
# plugin (the binary `golangci-lint custom` would build); .golangci.yml
# configures it.
CONTROLLER_GEN ?= go tool -modfile=hack/tools/go.mod controller-gen
GOLANGCI_LINT ?= go tool -modfile=hack/tools/go.mod golangci-lint-kube-api-linter

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/podsieve/podsieve/internal/buildinfo.Version=$(VERSION) \
	-X github.com/podsieve/podsieve/internal/buildinfo.Commit=$(COMMIT)

# The image `make docker-build` builds; config/default names the released one.
IMG ?= ghcr.io/podsieve/podsieve:$(VERSION)

# The envtest control plane is built from Go modules (see hack/setup-envtest.sh).
ENVTEST_K8S_VERSION ?= 1.36.3
# The e2e cluster adds kube-controller-manager, kube-scheduler (the same
# Kubernetes version) and kwok, also built from Go modules (hack/setup-cluster.sh).
KWOK_VERSION ?= 0.8.0
# promtool checks config/prometheus's alerts and runs their unit tests; it is
# built from the Go module github.com/prometheus/prometheus at this version
# (0.316.0 is Prometheus 3.16.0; hack/setup-promtool.sh).
PROMTOOL_VERSION ?= 0.316.0
# helm renders and lints charts/podsieve in test/chart; it is built from the
# Go module helm.sh/helm/v4 at this version (hack/setup-helm.sh).
HELM_VERSION ?= 4.3.1
# actionlint checks .github/workflows in `make verify`; it is built from the
# Go module github.com/rhysd/actionlint at this version (hack/setup-actionlint.sh).
ACTIONLINT_VERSION ?= 1.7.12
# More flags for the e2e suite, such as E2E_FLAGS=-ginkgo.focus=High.
E2E_FLAGS ?=

# `make release` (docs/release.md): the tag on HEAD, else
# v0.0.0-dev.g<short commit>, with .dirty when the tree has changes; every
# timestamp in the image is the commit's time.
RELEASE_VERSION ?= $(shell v="$$(git describe --tags --exact-match --match 'v*' 2>/dev/null)" || v="v0.0.0-dev.g$$(git rev-parse --short HEAD)"; \
	git diff --quiet HEAD 2>/dev/null || v="$$v.dirty"; echo "$$v")
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
# Where the image is published and the chart points.
RELEASE_REPOSITORY ?= ghcr.io/podsieve/podsieve
RELEASE_DIR ?= dist
# The release tool (hack/release, a module of its own, with ko).
RELEASE_TOOL = cd hack/release && go run .
# The binary the e2e suite runs, taken out of the image: this machine's
# architecture (linux/amd64 here and in CI).
IMAGE_PLATFORM ?= linux/$(shell go env GOARCH)
IMAGE_BINARY = bin/image/$(subst /,-,$(IMAGE_PLATFORM))/podsieve

# -timeout: internal/admissionpolicy decides the 4,537 upstream fixtures
# through a real API server under the race detector, about 6 minutes on two
# shared cores; go test's default of 10 minutes per package left no margin.
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
	/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
	/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deep-copy code for the API types and the webhook's JSON decoders (internal/podjson).
	$(CONTROLLER_GEN) object paths="./api/..."
	go run ./hack/podjson-gen

.PHONY: manifests
manifests: ## Generate CRDs (config/crd/bases, and the PolicyReport CRDs in config/policyreport/bases) from the API types and the manager's ClusterRole (config/rbac/role.yaml) from +kubebuilder:rbac markers (controllers and the manager's certificate rotation).
	$(CONTROLLER_GEN) crd paths="./api/v1alpha1/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) crd paths="./api/wgpolicyk8s/..." output:crd:artifacts:config=config/policyreport/bases
	$(CONTROLLER_GEN) rbac:roleName=podsieve-manager paths="./controllers/...;./cmd/..." output:rbac:artifacts:config=config/rbac
	@# charts/podsieve/files: the chart's copies of the generated CRDs and role and of the alert rules; never edit them there.
	rm -rf charts/podsieve/files && mkdir -p charts/podsieve/files/crds charts/podsieve/files/policyreport-crds charts/podsieve/files/openreports-crds charts/podsieve/files/rbac charts/podsieve/files/prometheus charts/podsieve/files/grafana
	cp config/crd/bases/*.yaml charts/podsieve/files/crds/
	cp config/policyreport/bases/*.yaml charts/podsieve/files/policyreport-crds/
	@# The OpenReports CRDs of the module podsieve imports their types from (read-only in the module cache).
	cp "$$(go list -m -f '{{.Dir}}' github.com/openreports/reports-api)"/config/crd/*.yaml charts/podsieve/files/openreports-crds/
	chmod u+w charts/podsieve/files/openreports-crds/*.yaml
	cp config/rbac/role.yaml charts/podsieve/files/rbac/
	cp config/prometheus/rules.yaml charts/podsieve/files/prometheus/
	cp config/grafana/podsieve-dashboard.json charts/podsieve/files/grafana/

.PHONY: fmt
fmt: ## Format Go code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: ## Check formatting and run golangci-lint (.golangci.yml: import boundaries, aliases, staticcheck, kube-api-linter on api/, size limits, doc comments, gci), and refuse //nolint.
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GOLANGCI_LINT) run ./...
	@# Limits the linter cannot say: no //nolint outside generated code, and
	@# the engine sees only compiled exceptions (freezing lives in the index).
	@if git grep -n '//nolint' -- '*.go' ':!*zz_generated*'; then \
		echo "lint: fix the finding instead of //nolint"; exit 1; fi
	@if git grep -nE 'Thaw|frozen|Slim' -- internal/engine; then \
		echo "lint: the engine sees only compiled exceptions; freezing, thawing and slimming live in internal/index"; exit 1; fi

.PHONY: envtest
envtest: ## Build the envtest control plane (etcd, kube-apiserver, kubectl) into bin/k8s.
	K8S_VERSION=$(ENVTEST_K8S_VERSION) hack/setup-envtest.sh

.PHONY: promtool
promtool: ## Build promtool (Prometheus' rule checker and rule test runner) from its Go module into bin/promtool.
	PROMTOOL_VERSION=$(PROMTOOL_VERSION) hack/setup-promtool.sh

.PHONY: prometheus-rule
prometheus-rule: ## Generate config/prometheus/prometheusrule.yaml (the PrometheusRule) from config/prometheus/rules.yaml.
	go test -count=1 -run '^TestPrometheusRule$$' ./cmd/podsieve -args -update

.PHONY: helm
helm: ## Build helm from its Go module into bin/helm (test/chart lints and renders charts/podsieve with it).
	HELM_VERSION=$(HELM_VERSION) hack/setup-helm.sh

.PHONY: test
test: manifests generate vet ## Run unit tests and envtest suites (with -race).
	KUBEBUILDER_ASSETS="$$(K8S_VERSION=$(ENVTEST_K8S_VERSION) hack/setup-envtest.sh)" \
		PROMTOOL="$$(PROMTOOL_VERSION=$(PROMTOOL_VERSION) hack/setup-promtool.sh)" \
		HELM="$$(HELM_VERSION=$(HELM_VERSION) hack/setup-helm.sh)" \
		go test $(GO_TEST_FLAGS) ./...

# The packages whose tests need an API server (envtest), helm or promtool;
# `make test-unit` runs every other package.
NEEDS_TOOLS_PKGS = api/v1alpha1|cmd/podsieve|controllers|controllers/background|hack/demo|internal/admissionpolicy|test/.*|webhooks
UNIT_TEST_FLAGS ?= -count=1

.PHONY: test-unit
test-unit: ## The inner loop: the tests of every package that needs no envtest, helm or promtool (no -race); `make test` runs them all.
	go test $(UNIT_TEST_FLAGS) $$(go list ./... | grep -vE '^github.com/podsieve/podsieve/($(NEEDS_TOOLS_PKGS))$$')

.PHONY: cluster
cluster: ## Build the e2e cluster (envtest's control plane, kube-controller-manager, kube-scheduler, kwok) into bin/cluster.
	K8S_VERSION=$(ENVTEST_K8S_VERSION) KWOK_VERSION=$(KWOK_VERSION) hack/setup-cluster.sh

.PHONY: test-e2e
test-e2e: build release ## Run the e2e suite (test/e2e) and the demo's test: podsieve installed with kubectl apply -k into a cluster with kwok's fake nodes, three replicas, running the binary of the released image (linux/amd64 here); and the released chart.
	$(RELEASE_TOOL) extract -layout $(abspath $(RELEASE_DIR))/image -platform $(IMAGE_PLATFORM) -o $(abspath $(IMAGE_BINARY))
	@assets="$$(K8S_VERSION=$(ENVTEST_K8S_VERSION) KWOK_VERSION=$(KWOK_VERSION) hack/setup-cluster.sh)"; \
	E2E_CLUSTER_ASSETS="$$assets" go test -tags e2e -count=1 -timeout 10m ./test/utils/ ./hack/demo/ && \
	E2E_CLUSTER_ASSETS="$$assets" E2E_PODSIEVE="$(abspath $(IMAGE_BINARY))" \
		E2E_CHART="$(abspath $(RELEASE_DIR))/podsieve-$(patsubst v%,%,$(RELEASE_VERSION)).tgz" \
		E2E_HELM="$$(HELM_VERSION=$(HELM_VERSION) hack/setup-helm.sh)" \
		go test -tags e2e -count=1 -timeout 30m -v ./test/e2e/ -args -ginkgo.v $(E2E_FLAGS)

.PHONY: test-release
test-release: ## Build the release into a temporary directory, twice, and inspect it (hack/release's test: platforms, user, labels, SBOMs, the chart's image digest, checksums, the same digest twice).
	cd hack/release && HELM="$$(cd $(CURDIR) && HELM_VERSION=$(HELM_VERSION) hack/setup-helm.sh)" go test -count=1 -timeout 30m ./...

.PHONY: test-scale
test-scale: ## Time the first full background scan of 5,000 pods in 100 namespaces, bare and in Deployments (figures for docs/performance.md).
	KUBEBUILDER_ASSETS="$$(K8S_VERSION=$(ENVTEST_K8S_VERSION) hack/setup-envtest.sh)" \
		SCALE_PODS=5000 SCALE_NAMESPACES=100 go test -count=1 -v -run TestBackgroundScale ./controllers/ && \
	KUBEBUILDER_ASSETS="$$(K8S_VERSION=$(ENVTEST_K8S_VERSION) hack/setup-envtest.sh)" \
		SCALE_PODS=5000 SCALE_NAMESPACES=100 SCALE_REPLICAS=5 go test -count=1 -v -run TestBackgroundScale ./controllers/

.PHONY: actionlint
actionlint: ## Build actionlint from its Go module into bin/actionlint and check .github/workflows.
	"$$(ACTIONLINT_VERSION=$(ACTIONLINT_VERSION) hack/setup-actionlint.sh)" -no-color .github/workflows/*.yml

.PHONY: verify
verify: generate manifests fmt lint actionlint ## Regenerate everything, lint (with the GitHub workflows), and fail if the tree changed.
	go mod tidy
	cd hack/tools && go mod tidy
	cd hack/release && go mod tidy
	cd hack/release && gofmt -l . | (! grep .) && go vet ./...
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "verify: generated files or formatting are out of date; run 'make generate manifests fmt' and 'go mod tidy' and commit:"; \
		git status --porcelain; git --no-pager diff --stat; exit 1; fi

##@ Build

.PHONY: demo
demo: build ## Start a cluster with kwok's fake nodes, install podsieve with kubectl apply -k, and walk through the mission (DEMO_EXIT=1 to exit after it).
	@assets="$$(K8S_VERSION=$(ENVTEST_K8S_VERSION) KWOK_VERSION=$(KWOK_VERSION) hack/setup-cluster.sh)" && \
	go run ./hack/demo "$$assets" bin/podsieve

.PHONY: build
build: ## Build bin/podsieve.
	go build -ldflags "$(LDFLAGS)" -o bin/podsieve ./cmd/podsieve

.PHONY: release
release: ## Build the release into dist/ with Go alone (docs/release.md): the multi-arch image as an OCI layout, its SBOMs, the chart with the image by digest, checksums.
	rm -rf $(RELEASE_DIR)
	$(RELEASE_TOOL) build -root $(CURDIR) -out $(abspath $(RELEASE_DIR)) -version $(RELEASE_VERSION) -revision $(COMMIT) \
		-source-date-epoch $(SOURCE_DATE_EPOCH) -repository $(RELEASE_REPOSITORY) \
		-helm "$$(cd $(CURDIR) && HELM_VERSION=$(HELM_VERSION) hack/setup-helm.sh)"

.PHONY: docker-build
docker-build: ## Build the image IMG (needs a container engine; none runs on the development machines).
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMG) .
