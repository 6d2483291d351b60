// Package e2e is podsieve's end-to-end suite: podsieve installed with
// `kubectl apply -k` into a cluster of real components (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, built from Go
// modules) with kwok as the node agent of fake nodes, its manager run as
// three local replicas with leader election, each with a token of its own
// ServiceAccount. The specs drive the cluster with the built kubectl and
// assert what a user reads. See README.md in this directory.
//
// The specs carry the build tag e2e, so `go test ./...` (make test) does
// not run them; `make test-e2e` does.
package e2e
