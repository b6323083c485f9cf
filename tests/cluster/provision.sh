#!/usr/bin/env bash
# Installs what the end-to-end suite needs on a Debian bookworm machine and builds
# kube-apiserver, kube-controller-manager, kube-proxy and kubelet 1.20.2 from Debian's
# source package, cached under ~/.cache/edgegate; the node's runtime (containerd, runc, CNI
# plugins, iptables, conntrack, busybox) comes from Debian's packages.
# Idempotent: a second run only checks. Prints the cache directory on success.
set -euo pipefail

K8S_VERSION=1.20.2
# Bump when the recipe below changes, so a cached build from an older recipe is not reused.
RECIPE=4
BINARIES=(kube-apiserver kube-controller-manager kube-proxy kubelet)
CACHE=${EDGEGATE_CACHE:-$HOME/.cache/edgegate}
BIN=$CACHE/k8s-$K8S_VERSION-r$RECIPE
mkdir -p "$BIN"

log() { printf '[provision] %s\n' "$*" >&2; }

sudo_if() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need_pkgs=()
command -v etcd >/dev/null || need_pkgs+=(etcd-server)
command -v go >/dev/null || need_pkgs+=(golang-go)
[ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ] || need_pkgs+=(golang-github-modern-go-reflect2-dev)
command -v rsync >/dev/null || need_pkgs+=(rsync)
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v wrk >/dev/null || need_pkgs+=(wrk)
# The edge node: container runtime, CNI plugins, kube-proxy's tools, and the busybox the
# test image is made of.
command -v containerd >/dev/null || need_pkgs+=(containerd)
command -v runc >/dev/null || need_pkgs+=(runc)
[ -x /usr/lib/cni/bridge ] || need_pkgs+=(containernetworking-plugins)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v conntrack >/dev/null || need_pkgs+=(conntrack)
[ -x /bin/busybox ] || need_pkgs+=(busybox-static)
command -v nsenter >/dev/null || need_pkgs+=(util-linux)
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v tc >/dev/null || need_pkgs+=(iproute2)
# The disk-fault tests: an ext4 image on a loop device (findmnt, losetup: util-linux).
command -v mkfs.ext4 >/dev/null || need_pkgs+=(e2fsprogs)
command -v findmnt >/dev/null || need_pkgs+=(util-linux)
# The soak's plot labels (benches: edgegate-load soak).
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_pkgs+=(fonts-dejavu-core)
# What `deploy/` is built and checked with: the image (buildah, strip), the unit (systemd).
command -v buildah >/dev/null || need_pkgs+=(buildah)
command -v strip >/dev/null || need_pkgs+=(binutils)
command -v systemd-analyze >/dev/null || need_pkgs+=(systemd)
# tests/prune-target reads `cargo metadata` with jq.
# The Python filters' toolchain (filters-py/toolchain.sh) installs componentize-py into a venv.
python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3 python3-venv)
# The JavaScript filters' toolchain (filters-js/toolchain.sh) installs componentize-js with npm.
command -v npm >/dev/null || need_pkgs+=(nodejs npm)
command -v jq >/dev/null || need_pkgs+=(jq)
# The filter-fleet e2e's registry (tests/src/registry.rs): its server, users and probes.
command -v docker-registry >/dev/null || need_pkgs+=(docker-registry)
command -v htpasswd >/dev/null || need_pkgs+=(apache2-utils)
command -v curl >/dev/null || need_pkgs+=(curl)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  sudo_if apt-get update -qq
  sudo_if env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
# The packaged etcd may start a system instance; the suite runs its own on free ports.

# kubectl: Debian's 1.20.2 client, unpacked into the cache so the version matches the apiserver.
if [ ! -x "$BIN/kubectl" ]; then
  log "fetching kubectl $K8S_VERSION (kubernetes-client)"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download kubernetes-client >/dev/null 2>&1) || {
    sudo_if apt-get update -qq; (cd "$tmp" && apt-get download kubernetes-client >/dev/null); }
  dpkg-deb -x "$tmp"/kubernetes-client_*.deb "$tmp/x"
  install -m 0755 "$tmp/x/usr/bin/kubectl" "$BIN/kubectl"
  rm -rf "$tmp"
fi

# A current kubectl beside 1.20's, as kubectl-current/kubectl (its User-Agent still says
# kubectl): from 1.31 on, kubectl tries WebSocket before SPDY for exec, attach and
# port-forward; the node scenario exec:: runs both kubectls. From Debian sid, as that is
# where Debian packages the newest kubectl (bookworm has none after 1.20). apt fetches it
# with a private configuration (its own sources list, lists and cache, and no dpkg status,
# so that a kubectl installed from elsewhere is no candidate): the machine's sources stay
# as they are, and the package is checked against sid's signed Release as apt checks any.
if [ ! -x "$BIN/kubectl-current/kubectl" ]; then
  log "fetching a current kubectl (Debian sid's kubectl)"
  tmp=$(mktemp -d)
  # apt's sandbox user (_apt) reads the lists and writes the download.
  chmod 0755 "$tmp"
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/deb"
  if [ "$(id -u)" = 0 ]; then chown _apt "$tmp/deb"; fi
  echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main' \
    >"$tmp/sources.list"
  private=(-o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o Dir::State::status=/dev/null
    -o Acquire::Languages=none)
  apt-get -qq "${private[@]}" update
  (cd "$tmp/deb" && apt-get -qq "${private[@]}" download kubectl)
  dpkg-deb -x "$tmp"/deb/kubectl_*.deb "$tmp/x"
  "$tmp/x/usr/bin/kubectl" version --client >/dev/null
  install -D -m 0755 "$tmp/x/usr/bin/kubectl" "$BIN/kubectl-current/kubectl"
  rm -rf "$tmp"
fi

missing=()
for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} $K8S_VERSION from Debian's source package (5–20 minutes on 2 cores for all four)"
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    cat <<SRC | sudo_if tee /etc/apt/sources.list.d/edgegate-src.sources >/dev/null
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    sudo_if apt-get update -qq
  fi
  work=$CACHE/build
  rm -rf "$work"; mkdir -p "$work/src"
  (cd "$work/src" && apt-get source --download-only kubernetes >/dev/null)
  orig=$(ls "$work"/src/kubernetes_*.orig.tar.* | head -n1)
  export GOPATH=$work/gopath
  k8s=$GOPATH/src/k8s.io/kubernetes
  mkdir -p "$k8s"
  tar -xf "$orig" -C "$k8s" --strip-components=1
  # The vendored reflect2 1.0.1 segfaults under Go >= 1.18; Debian's packaged one does not.
  rm -rf "$k8s/vendor/github.com/modern-go/reflect2"
  rsync -a /usr/share/gocode/src/github.com/modern-go/reflect2/ "$k8s/vendor/github.com/modern-go/reflect2/"
  export GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOCACHE=$work/gocache
  cd "$k8s"
  go build -o "$work/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
  inputs=$(grep -rl --include='*.go' '+k8s:openapi-gen=' pkg staging/src vendor/k8s.io 2>/dev/null \
    | xargs -n1 dirname | sort -u \
    | sed -e 's#^staging/src/#vendor/#' -e 's#^vendor/##' -e 's#^pkg/#k8s.io/kubernetes/pkg/#' \
    | sort -u | paste -sd, -)
  "$work/openapi-gen" \
    --input-dirs "$inputs" \
    --output-package k8s.io/kubernetes/pkg/generated/openapi \
    --output-file-base zz_generated.openapi \
    --go-header-file hack/boilerplate/boilerplate.generatego.txt \
    --output-base "$GOPATH/src" \
    --report-filename /dev/null
  # As Kubernetes' own build (hack/lib/version.sh) stamps it: component-base's version for
  # `--version`, client-go's for what the apiserver answers on /version.
  ldflags="-s -w"
  for version_pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version \
    k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $version_pkg.gitVersion=v$K8S_VERSION -X $version_pkg.gitMajor=1"
    ldflags="$ldflags -X $version_pkg.gitMinor=20 -X $version_pkg.gitTreeState=clean"
  done
  for b in "${missing[@]}"; do
    log "go build $b"
    # kubelet needs cgo (cadvisor, the container manager); the others build static.
    cgo=0; [ "$b" = kubelet ] && cgo=1
    CGO_ENABLED=$cgo go build -ldflags "$ldflags" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b"
    mv "$BIN/$b.tmp" "$BIN/$b"
  done
  cd /; rm -rf "$work"
fi

for b in "${BINARIES[@]}"; do "$BIN/$b" --version >/dev/null; done
echo "$BIN"
