#!/usr/bin/env bash
# setup-cluster.sh builds the binaries of the end-to-end cluster from Go
# modules into bin/cluster/<k8s version>-kwok-<kwok version>/ and prints that
# directory (test/utils.Cluster reads it from E2E_CLUSTER_ASSETS):
#
#   etcd, kube-apiserver, kubectl   the envtest control plane (hack/setup-envtest.sh)
#   kube-controller-manager,        k8s.io/kubernetes at the same version, built
#   kube-scheduler                  the way setup-envtest.sh builds the API server
#   kwok                            sigs.k8s.io/kwok/cmd/kwok, the node agent that
#                                   runs fake nodes and moves their pods to Running
#
# Why build: these machines reach only the Go module proxy (see
# setup-envtest.sh). Nothing is downloaded as a binary.
#
# Idempotent: when all six binaries exist it prints the directory and exits.
# The binaries this script builds are also kept in
# ${XDG_CACHE_HOME:-~/.cache}/podsieve/envtest/cluster-k8s-<v>-kwok-<v>, so a
# fresh clone on the same machine copies them instead of rebuilding.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.36.3}"
# kwok v0.8.0's go.mod says go 1.26.0 and has no replace directives, so
# `go install module@version` builds it exactly as its release does.
KWOK_VERSION="${KWOK_VERSION:-0.8.0}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${E2E_CLUSTER_ASSETS_DIR:-${root}/bin/cluster/${K8S_VERSION}-kwok-${KWOK_VERSION}}"
cache="${XDG_CACHE_HOME:-${HOME}/.cache}/podsieve/envtest/cluster-k8s-${K8S_VERSION}-kwok-${KWOK_VERSION}"
built=(kube-controller-manager kube-scheduler kwok)
all=(etcd kube-apiserver kubectl "${built[@]}")

log() { echo "setup-cluster: $*" >&2; }
# shellcheck source=lib/build-kubernetes.sh
source "${root}/hack/lib/build-kubernetes.sh"
has() {
  local dir="$1" bin
  shift
  for bin in "$@"; do [[ -x "${dir}/${bin}" ]] || return 1; done
}
# link copies a file by hard link when the file system allows, else copies it.
link() { ln -f "$1" "$2" 2>/dev/null || cp -f "$1" "$2"; }

if has "${dest}" "${all[@]}"; then
  echo "${dest}"
  exit 0
fi
mkdir -p "${dest}"

envtest="$(K8S_VERSION="${K8S_VERSION}" "${root}/hack/setup-envtest.sh")"
for bin in etcd kube-apiserver kubectl; do link "${envtest}/${bin}" "${dest}/${bin}"; done

if ! has "${dest}" "${built[@]}" && has "${cache}" "${built[@]}"; then
  for bin in "${built[@]}"; do link "${cache}/${bin}" "${dest}/${bin}"; done
  log "copied kube-controller-manager, kube-scheduler and kwok from ${cache}"
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export CGO_ENABLED=0

if ! has "${dest}" kube-controller-manager kube-scheduler; then
  log "building kube-controller-manager and kube-scheduler v${K8S_VERSION} (once; several minutes on 2 cores)"
  start=${SECONDS}
  build_kubernetes "${work}/k8s" "${dest}" "${K8S_VERSION}" kube-controller-manager kube-scheduler
  log "built kube-controller-manager and kube-scheduler in $((SECONDS - start)) s"
fi

if ! has "${dest}" kwok; then
  log "building kwok v${KWOK_VERSION} (once)"
  start=${SECONDS}
  GOBIN="${work}/bin" GOFLAGS="" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@v${KWOK_VERSION}" >&2
  mv "${work}/bin/kwok" "${dest}/kwok"
  log "built kwok in $((SECONDS - start)) s"
fi

mkdir -p "${cache}"
# The binaries may already be the cache's (hard-linked above): cp refuses to
# copy a file onto itself.
for bin in "${built[@]}"; do
  [[ "${dest}/${bin}" -ef "${cache}/${bin}" ]] || cp -f "${dest}/${bin}" "${cache}/${bin}"
done
log "cluster binaries ready in ${dest}"
echo "${dest}"
