# shellcheck shell=bash
# build_kubernetes WORKDIR DEST VERSION CMD... builds the commands of
# k8s.io/kubernetes (kube-apiserver, kubectl, kube-controller-manager, ...)
# at VERSION from the Go module proxy into DEST, with the version stamped as
# a release build stamps it. Sourced by setup-envtest.sh and setup-cluster.sh.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
# with ./staging paths; a consumer must replace each with its published
# v0.<minor>.<patch> tag. The list is read from kubernetes' own go.mod.
build_kubernetes() {
  local work="$1" dest="$2" version="$3"
  shift 3
  mkdir -p "${work}"
  (
    cd "${work}"
    export GOFLAGS="-mod=mod" CGO_ENABLED=0
    go mod init envtest.local/k8s >/dev/null 2>&1
    local gomod staging_version minor ldflags cmd
    gomod="$(go mod download -json "k8s.io/kubernetes@v${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    staging_version="v0.${version#1.}"
    {
      echo "require k8s.io/kubernetes v${version}"
      echo "replace ("
      grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "${gomod}" \
        | awk -v v="${staging_version}" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } >>go.mod
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for cmd in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "${cmd}"; done
      printf ')\n'
    } >tools.go
    go mod tidy >&2
    minor="$(cut -d. -f2 <<<"${version}")"
    ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v${version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
    for cmd in "$@"; do
      go build -trimpath -ldflags "${ldflags}" -o "${dest}/${cmd}" "k8s.io/kubernetes/cmd/${cmd}"
    done
  )
}
