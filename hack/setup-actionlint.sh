#!/usr/bin/env bash
# setup-actionlint.sh builds actionlint (the linter of GitHub Actions
# workflows) from its Go module into bin/actionlint/<version>/ and prints the
# binary's path. `make verify` (the actionlint target) runs it on
# .github/workflows, which cannot run on the machines this project is tested
# on: they reach no registry to publish to.
#
# ACTIONLINT_VERSION is the version of github.com/rhysd/actionlint without
# the "v". Built, never downloaded as a binary: the machines reach only the
# Go module proxy. The first build takes about half a minute.
#
# Idempotent: when the binary exists, it prints its path and exits. Built
# binaries are also kept in ${XDG_CACHE_HOME:-~/.cache}/podsieve/actionlint,
# so a fresh clone on the same machine copies instead of rebuilding.
set -euo pipefail

ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-1.7.12}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${root}/bin/actionlint/${ACTIONLINT_VERSION}"
cache="${XDG_CACHE_HOME:-${HOME}/.cache}/podsieve/actionlint/${ACTIONLINT_VERSION}"
log() { echo "setup-actionlint: $*" >&2; }

if [[ -x "${dest}/actionlint" ]]; then
  echo "${dest}/actionlint"
  exit 0
fi
mkdir -p "${dest}"
if [[ -x "${cache}/actionlint" ]]; then
  cp "${cache}/actionlint" "${dest}/"
  log "copied actionlint from ${cache}"
  echo "${dest}/actionlint"
  exit 0
fi

log "building actionlint v${ACTIONLINT_VERSION} (once)"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
# The version as actionlint's own release stamps it, for `actionlint -version`.
GOBIN="${work}" CGO_ENABLED=0 GOFLAGS="-mod=mod" go install -trimpath \
  -ldflags "-s -w -X github.com/rhysd/actionlint.version=v${ACTIONLINT_VERSION}" \
  "github.com/rhysd/actionlint/cmd/actionlint@v${ACTIONLINT_VERSION}" >&2
cp "${work}/actionlint" "${dest}/actionlint"
mkdir -p "${cache}"
cp "${work}/actionlint" "${cache}/actionlint"
log "actionlint ready in ${dest}"
echo "${dest}/actionlint"
