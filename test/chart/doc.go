// Package chart holds no code: its tests keep charts/podsieve, the Helm
// chart, true to config/default and to its own values. They lint the chart
// and render it (helm template) with the value sets in charts/podsieve/ci,
// check the rendered objects decoded into their API types, check that
// values.schema.json refuses bad values with a message that names them,
// apply the rendered chart to envtest's API server (a server-side dry run,
// then a real install and uninstall), compare the default render with
// `kubectl kustomize config/default`, and keep the values table of
// charts/podsieve/README.md generated from values.yaml.
//
// They also run promtool's rule unit tests (testdata/prometheus) on the
// alerts the chart renders with values other than the defaults, whose
// thresholds follow those values.
//
// The tests need helm, built from its Go module by hack/setup-helm.sh,
// envtest's control plane and kubectl (hack/setup-envtest.sh), and promtool
// (hack/setup-promtool.sh); `make test` passes their paths in HELM,
// KUBEBUILDER_ASSETS and PROMTOOL.
package chart
