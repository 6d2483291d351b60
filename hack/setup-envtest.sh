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
  mkdir -p "${work}/k8s"
  cd "${work}/k8s"
  go mod init envtest.local/k8s >/dev/null 2>&1
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
  # with ./staging paths; a consumer must replace each with its published
  # v0.<minor>.<patch> tag. Read the list from kubernetes' own go.mod.
  gomod="$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  staging_version="v0.${K8S_VERSION#1.}"
  {
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    echo "replace ("
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "${gomod}" \
      | awk -v v="${staging_version}" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >>go.mod
  cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  go mod tidy >&2
  minor="$(cut -d. -f2 <<<"${K8S_VERSION}")"
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
  go build -trimpath -ldflags "${ldflags}" -o "${dest}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  go build -trimpath -ldflags "${ldflags}" -o "${dest}/kubectl" k8s.io/kubernetes/cmd/kubectl
fi

mkdir -p "${cache}"
cp "${dest}/etcd" "${dest}/kube-apiserver" "${dest}/kubectl" "${cache}/"
log "control plane ready in ${dest}"
echo "${dest}"
