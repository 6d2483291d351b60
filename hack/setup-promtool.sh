#!/usr/bin/env bash
# setup-promtool.sh builds promtool (Prometheus' rule checker and rule unit
# test runner) from its Go module into bin/promtool/<version>/ and prints the
# binary's path, ready for PROMTOOL. cmd/podsieve's monitoring tests run it on
# config/prometheus.
#
# PROMTOOL_VERSION is the Go module version of github.com/prometheus/prometheus
# without the "v": 0.316.0 is Prometheus 3.16.0 (v0.3xx.y tags are 3.xx.y).
# Built, never downloaded as a binary: the machines this project is tested on
# reach only the Go module proxy.
#
# -tags remove_all_sd leaves out every service discovery plugin: promtool
# needs none to check and test rules, and the module proxy does not serve the
# pseudo-version of one of their dependencies (github.com/hashicorp/nomad/api)
# that Prometheus pins.
#
# Idempotent: when the binary exists, it prints its path and exits. Built
# binaries are also kept in ${XDG_CACHE_HOME:-~/.cache}/podsieve/promtool, so
# a fresh clone on the same machine copies instead of rebuilding.
set -euo pipefail

PROMTOOL_VERSION="${PROMTOOL_VERSION:-0.316.0}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${root}/bin/promtool/${PROMTOOL_VERSION}"
cache="${XDG_CACHE_HOME:-${HOME}/.cache}/podsieve/promtool/${PROMTOOL_VERSION}"
log() { echo "setup-promtool: $*" >&2; }

if [[ -x "${dest}/promtool" ]]; then
  echo "${dest}/promtool"
  exit 0
fi
mkdir -p "${dest}"
if [[ -x "${cache}/promtool" ]]; then
  cp "${cache}/promtool" "${dest}/"
  log "copied promtool from ${cache}"
  echo "${dest}/promtool"
  exit 0
fi

minor="$(cut -d. -f2 <<<"${PROMTOOL_VERSION}")"
patch="$(cut -d. -f3 <<<"${PROMTOOL_VERSION}")"
release="3.${minor#3}.${patch}"
log "building promtool v${PROMTOOL_VERSION} (Prometheus ${release}; once, about two minutes on 2 cores)"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
# The version as a release build stamps it, for `promtool --version`.
GOBIN="${work}" CGO_ENABLED=0 GOFLAGS="-mod=mod" go install -trimpath -tags remove_all_sd \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=${release}" \
  "github.com/prometheus/prometheus/cmd/promtool@v${PROMTOOL_VERSION}" >&2
cp "${work}/promtool" "${dest}/promtool"
mkdir -p "${cache}"
cp "${work}/promtool" "${cache}/promtool"
log "promtool ready in ${dest}"
echo "${dest}/promtool"
