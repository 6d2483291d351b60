#!/usr/bin/env bash
# setup-envtest.sh builds the envtest control plane (etcd, kube-apiserver,
# kubectl) from Go modules into bin/k8s/<version>/ and prints that directory,
# ready for KUBEBUILDER_ASSETS.
#
# Why build instead of `setup-envtest use`: the machines this project is
# developed and tested on reach only the Go module proxy, so the release
# binaries that setup-envtest downloads are out of reach. Building them from
# the same source gives the same binaries.
#
# Idempotent: when all three binaries exist, it prints the directory and exits.
# Built binaries are also kept in ${XDG_CACHE_HOME:-~/.cache}/podsieve/envtest,
# so a fresh clone on the same machine (CI) copies them instead of rebuilding.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-3.6.8}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${ENVTEST_ASSETS_DIR:-${root}/bin/k8s/${K8S_VERSION}}"
mkdir -p "${dest}"

log() { echo "setup-envtest: $*" >&2; }
# shellcheck source=lib/build-kubernetes.sh
source "${root}/hack/lib/build-kubernetes.sh"

cache="${XDG_CACHE_HOME:-${HOME}/.cache}/podsieve/envtest/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"
complete() { [[ -x "$1/etcd" && -x "$1/kube-apiserver" && -x "$1/kubectl" ]]; }

if complete "${dest}"; then
  echo "${dest}"
  exit 0
fi
if complete "${cache}"; then
  cp "${cache}/etcd" "${cache}/kube-apiserver" "${cache}/kubectl" "${dest}/"
  log "copied the control plane from ${cache}"
  echo "${dest}"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export GOFLAGS="-mod=mod"
export CGO_ENABLED=0

if [[ ! -x "${dest}/etcd" ]]; then
  log "building etcd v${ETCD_VERSION} (once; cached in ${dest})"
  mkdir -p "${work}/etcd"
  (
    cd "${work}/etcd"
    go mod init envtest.local/etcd >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2
    go build -trimpath -o "${dest}/etcd" go.etcd.io/etcd/server/v3
  )
fi

if [[ ! -x "${dest}/kube-apiserver" || ! -x "${dest}/kubectl" ]]; then
  log "building kube-apiserver and kubectl v${K8S_VERSION} (once; several minutes on 2 cores)"
  build_kubernetes "${work}/k8s" "${dest}" "${K8S_VERSION}" kube-apiserver kubectl
fi

mkdir -p "${cache}"
cp "${dest}/etcd" "${dest}/kube-apiserver" "${dest}/kubectl" "${cache}/"
log "control plane ready in ${dest}"
echo "${dest}"
