#!/usr/bin/env bash
# Build (once) and run a REAL kube-apiserver 1.20.2 + etcd 3.4.23 from Debian bookworm packages, offline
# apart from the Debian mirror, with nothing installed system-wide; then run the contract suite against it:
#
#   tests/contract/real_apiserver.sh build  WORKDIR          # 4-7 min on 2 cores, ~3 GB of disk
#   tests/contract/real_apiserver.sh start  WORKDIR RUNDIR   # prints the kubeconfig path once ready
#   GANG_CONTRACT_KUBECONFIG=RUNDIR/kubeconfig .venv/bin/python -m pytest tests/contract
#   tests/contract/real_apiserver.sh stop   RUNDIR
#
# Flags follow https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/ (the vendored
# modern-go/reflect2 1.0.1 is swapped for Debian's 1.0.2, which Go >= 1.18 needs). Runs no
# controller-manager, scheduler or kubelet: pods stay Pending, nothing is garbage-collected.
set -euo pipefail
command=${1:?build|start|stop}

build() {
    local W; W=$(realpath -m "$1"); mkdir -p "$W"/{apt/lists/partial,debs,pkgroot,src,bin,home}; cd "$W"
    local mirror; mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources | head -n 1)
    printf 'deb-src %s bookworm main\n' "$mirror" > apt/sources.list
    local apt=(-o "Dir::Etc::SourceList=$W/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$W/apt/lists")
    apt-get "${apt[@]}" update -qq
    (cd src && apt-get "${apt[@]}" source --download-only kubernetes)
    (cd debs && apt-get download golang-1.19-go golang-1.19-src rsync libpopt0 libxxhash0 \
        golang-github-modern-go-reflect2-dev etcd-server)
    for deb in debs/*.deb; do dpkg-deb -x "$deb" pkgroot; done
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$W/pkgroot/usr/lib/x86_64-linux-gnu" "$W/pkgroot/usr/bin/rsync" > bin/rsync
    chmod +x bin/rsync
    tar xzf src/kubernetes_*.orig.tar.gz -C src
    local K="$W/src/kubernetes-1.20.2" GOROOT="$W/pkgroot/usr/lib/go-1.19"
    rm -rf "$K/vendor/github.com/modern-go/reflect2"/*
    cp "$W"/pkgroot/usr/share/gocode/src/github.com/modern-go/reflect2/*.{go,s} "$K/vendor/github.com/modern-go/reflect2/"
    (cd "$K" && nice -n 19 env HOME="$W/home" GOROOT="$GOROOT" PATH="$W/bin:$GOROOT/bin:$PATH" GOPROXY=off CGO_ENABLED=0 \
        make WHAT=cmd/kube-apiserver)
    cp -f "$K/_output/bin/kube-apiserver" "$W/pkgroot/usr/bin/etcd" "$W/bin/"  # -f: replaces running binaries too
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() {
    local W R; W=$(realpath "$1"); R=$(realpath -m "$2"); mkdir -p "$R/certs"; rm -rf "$R/etcd-data"
    local port etcd_client etcd_peer; port=$(free_port); etcd_client=$(free_port); etcd_peer=$(free_port)
    openssl genrsa -out "$R/sa.key" 2048 2>/dev/null; openssl rsa -in "$R/sa.key" -pubout -out "$R/sa.pub" 2>/dev/null
    echo 'devtoken,admin,admin,system:masters' > "$R/tokens.csv"
    "$W/bin/etcd" --name local --data-dir "$R/etcd-data" \
        --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-cluster "local=http://127.0.0.1:$etcd_peer" > "$R/etcd.log" 2>&1 &
    echo $! > "$R/etcd.pid"
    "$W/bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_client" \
        --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" --cert-dir="$R/certs" \
        --token-auth-file="$R/tokens.csv" --authorization-mode=AlwaysAllow \
        --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$R/sa.pub" \
        --service-account-signing-key-file="$R/sa.key" --service-cluster-ip-range=10.0.0.0/24 \
        --disable-admission-plugins=ServiceAccount --enable-priority-and-fairness=false \
        --endpoint-reconciler-type=none > "$R/apiserver.log" 2>&1 &
    echo $! > "$R/apiserver.pid"
    cat > "$R/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: real, cluster: {server: "https://127.0.0.1:$port", certificate-authority: "$R/certs/apiserver.crt"}}]
users: [{name: admin, user: {token: devtoken}}]
contexts: [{name: real, context: {cluster: real, user: admin, namespace: default}}]
current-context: real
KUBECONFIG
    for _ in $(seq 1 120); do
        if curl -sk -H 'Authorization: Bearer devtoken' "https://127.0.0.1:$port/readyz" | grep -q '^ok$'; then
            echo "$R/kubeconfig"; return 0
        fi
        sleep 0.5
    done
    echo "kube-apiserver did not become ready; see $R/apiserver.log" >&2; return 1
}

stop() {
    local R; R=$(realpath "$1")
    for name in apiserver etcd; do
        if [[ -f "$R/$name.pid" ]]; then kill "$(cat "$R/$name.pid")" 2>/dev/null || true; rm -f "$R/$name.pid"; fi
    done
}

case "$command" in
    build) build "${2:?WORKDIR}" ;;
    start) start "${2:?WORKDIR}" "${3:?RUNDIR}" ;;
    stop) stop "${2:?RUNDIR}" ;;
    *) echo "usage: $0 build WORKDIR | start WORKDIR RUNDIR | stop RUNDIR" >&2; exit 2 ;;
esac
