#!/usr/bin/env bash
# setup-helm.sh builds helm from its Go module into bin/helm/<version>/ and
# prints the binary's path, ready for HELM. test/chart's tests run it on
# charts/podsieve (lint, template, and the rendered chart against envtest's
# API server).
#
# HELM_VERSION is the version of the helm.sh/helm/v4 module (Helm 4) without
# the "v". Built, never downloaded as a binary: the machines this project is
# tested on reach only the Go module proxy. The first build takes about four
# minutes on 2 cores, with helm's dependencies fetched from the proxy.
#
# Idempotent: when the binary exists, it prints its path and exits. Built
# binaries are also kept in ${XDG_CACHE_HOME:-~/.cache}/podsieve/helm, so a
# fresh clone on the same machine copies instead of rebuilding.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-4.3.1}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${root}/bin/helm/${HELM_VERSION}"
cache="${XDG_CACHE_HOME:-${HOME}/.cache}/podsieve/helm/${HELM_VERSION}"
log() { echo "setup-helm: $*" >&2; }

if [[ -x "${dest}/helm" ]]; then
  echo "${dest}/helm"
  exit 0
fi
mkdir -p "${dest}"
if [[ -x "${cache}/helm" ]]; then
  cp "${cache}/helm" "${dest}/"
  log "copied helm from ${cache}"
  echo "${dest}/helm"
  exit 0
fi

log "building helm v${HELM_VERSION} (once; about four minutes on 2 cores)"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
# The version as helm's own Makefile stamps it, for `helm version`.
GOBIN="${work}" CGO_ENABLED=0 GOFLAGS="-mod=mod" go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v${HELM_VERSION} -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v4/cmd/helm@v${HELM_VERSION}" >&2
cp "${work}/helm" "${dest}/helm"
mkdir -p "${cache}"
cp "${work}/helm" "${cache}/helm"
log "helm ready in ${dest}"
echo "${dest}/helm"
