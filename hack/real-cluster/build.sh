#!/usr/bin/env bash
# Builds the real control plane used by tests/real from Go modules only (no containers, no downloads
# besides the Go module proxy), into a cache outside the repository keyed by versions:
#   ${GANG_REAL_CLUSTER_CACHE:-~/.cache/airflow-provider-gang/real-cluster}/<kubernetes version>/bin
# Idempotent: a binary that exists is kept; each binary's version is printed at the end.
#
# Recipes follow upstream's own builds:
# - k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging paths
#   (kubernetes/kubernetes go.mod), so a wrapper module requires k8s.io/kubernetes vX and replaces
#   each staging module with v0.<minor>.<patch>, as kubernetes-sigs/cluster-autoscaler's go.mod does;
#   build flags and version stamps as in kubernetes/kubernetes hack/lib/version.sh.
# - etcd's server module carries local replace directives (etcd-io/etcd#18501): a wrapper requires it.
# - kwok and Kueue carry no replace directives: `go build` of their cmd packages in a wrapper.
set -euo pipefail

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
KUEUE_VERSION="${KUEUE_VERSION:-v0.17.0}"
CLUSTER_AUTOSCALER_MODULE="${CLUSTER_AUTOSCALER_MODULE:-sigs.k8s.io/cluster-autoscaler}"

CACHE_ROOT="${GANG_REAL_CLUSTER_CACHE:-$HOME/.cache/airflow-provider-gang/real-cluster}"
OUT="$CACHE_ROOT/$KUBERNETES_VERSION"
BIN="$OUT/bin"
WORK="$OUT/work"
mkdir -p "$BIN" "$WORK" "$OUT/manifests"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
staging_version="v0.${KUBERNETES_VERSION#v1.}"
log() { printf '[real-cluster] %s\n' "$*" >&2; }

wrapper() {  # wrapper DIR MODULE-LINES...: a fresh go.mod in DIR
    local dir="$1"; shift
    mkdir -p "$dir"
    printf 'module gang.dev/real-cluster/%s\n\ngo 1.26\n' "$(basename "$dir")" >"$dir/go.mod"
    printf '%s\n' "$@" >>"$dir/go.mod"
}

build_kubernetes() {
    local want=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
    local missing=0; for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing=1; done
    [ "$missing" = 1 ] || { log "kubernetes $KUBERNETES_VERSION: cached"; return; }
    local dir="$WORK/kubernetes" mod
    mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
    local staging; staging="$(grep -E '^\s*k8s.io/\S+ => ./staging' "$mod" | awk '{print $1}')"
    local lines=("require k8s.io/kubernetes $KUBERNETES_VERSION" "replace (")
    for m in $staging; do lines+=("	$m => $m $staging_version"); done
    lines+=(")")
    wrapper "$dir" "${lines[@]}"
    printf 'package main\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n)\n\nfunc main() {}\n' >"$dir/main.go"
    log "kubernetes $KUBERNETES_VERSION: resolving modules"
    (cd "$dir" && go mod tidy >/dev/null 2>&1 || true; cd "$dir" && go get "k8s.io/kubernetes@$KUBERNETES_VERSION" >/dev/null)
    local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
    log "kubernetes $KUBERNETES_VERSION: building ${want[*]}"
    (cd "$dir" && go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "$ldflags" -o "$BIN/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
}

build_etcd() {
    [ -x "$BIN/etcd" ] && { log "etcd $ETCD_VERSION: cached"; return; }
    local dir="$WORK/etcd"
    wrapper "$dir" "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    printf 'package main\n\nimport _ "go.etcd.io/etcd/server/v3/embed"\n\nfunc main() {}\n' >"$dir/main.go"
    (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null)
    log "etcd $ETCD_VERSION: building"
    (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
}

module_dir() {  # module_dir MODULE@VERSION: its directory in the module cache (downloaded if needed)
    (cd "$WORK" && go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
}

build_kwok() {
    local dir="$WORK/kwok"
    if [ -x "$BIN/kwok" ]; then
        log "kwok $KWOK_VERSION: cached"
    else
        wrapper "$dir" "require sigs.k8s.io/kwok $KWOK_VERSION"
        printf 'package main\n\nimport _ "sigs.k8s.io/kwok/pkg/kwok/cmd"\n\nfunc main() {}\n' >"$dir/main.go"
        (cd "$dir" && go get "sigs.k8s.io/kwok@$KWOK_VERSION" >/dev/null)
        log "kwok $KWOK_VERSION: building"
        (cd "$dir" && go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
            -o "$BIN/kwok" sigs.k8s.io/kwok/cmd/kwok)
    fi
    [ -d "$OUT/manifests/kwok" ] && return
    # kwok's own stages (node initialization, lease heartbeat, pod creation, init containers,
    # deletion) from the module; the harness adds the gang member stages beside them.
    local src; src="$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")"
    mkdir -p "$OUT/manifests/kwok.partial"
    cp "$src/kustomize/stage/node/fast/node-initialize.yaml" \
        "$src/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
        "$src/kustomize/stage/pod/general/pod-create.yaml" \
        "$src/kustomize/stage/pod/general/pod-init-container-running.yaml" \
        "$src/kustomize/stage/pod/general/pod-init-container-completed.yaml" \
        "$src/kustomize/stage/pod/general/pod-delete.yaml" "$OUT/manifests/kwok.partial/"
    chmod -R u+w "$OUT/manifests/kwok.partial"
    mv "$OUT/manifests/kwok.partial" "$OUT/manifests/kwok"
}

build_kueue() {
    local dir="$WORK/kueue"
    if [ -x "$BIN/kueue" ]; then
        log "kueue $KUEUE_VERSION: cached"
    else
        wrapper "$dir" "require sigs.k8s.io/kueue $KUEUE_VERSION"
        printf 'package main\n\nimport _ "sigs.k8s.io/kueue/pkg/controller/core"\n\nfunc main() {}\n' >"$dir/main.go"
        (cd "$dir" && go get "sigs.k8s.io/kueue@$KUEUE_VERSION" >/dev/null)
        log "kueue $KUEUE_VERSION: building"
        (cd "$dir" && go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
            -o "$BIN/kueue" sigs.k8s.io/kueue/cmd/kueue)
    fi
    [ -d "$OUT/manifests/kueue" ] && return
    # The module zip carries the manifests: CRDs, their conversion patches, webhook configurations;
    # and the ProvisioningRequest CRD of the autoscaler API module Kueue requires.
    local src apis
    src="$(module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")"
    apis="$(cd "$dir" && go list -m -f '{{.Dir}}' k8s.io/autoscaler/cluster-autoscaler/apis)"
    mkdir -p "$OUT/manifests/kueue.partial"
    cp -r "$src/config/components/crd/bases" "$OUT/manifests/kueue.partial/crd"
    cp -r "$src/config/components/crd/patches" "$OUT/manifests/kueue.partial/crd-patches"
    cp "$src/config/components/webhook/manifests.yaml" "$OUT/manifests/kueue.partial/webhooks.yaml"
    cp "$apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" "$OUT/manifests/"
    chmod -R u+w "$OUT/manifests/kueue.partial" "$OUT/manifests/autoscaling.x-k8s.io_provisioningrequests.yaml"
    mv "$OUT/manifests/kueue.partial" "$OUT/manifests/kueue"
}

build_cluster_autoscaler() {
    [ -x "$BIN/cluster-autoscaler" ] && { log "cluster-autoscaler: cached"; return; }
    local error
    if ! error="$(cd "$WORK" && go list -m -versions "$CLUSTER_AUTOSCALER_MODULE" 2>&1)" || \
        [ "$error" = "$CLUSTER_AUTOSCALER_MODULE" ]; then
        printf '%s\n' "$error" >"$OUT/cluster-autoscaler.unavailable"
        log "cluster-autoscaler: not buildable from the module proxy: $error"
        return 0
    fi
}

start=$(date +%s)
step="${1:-all}"
case "$step" in
    all) build_etcd; build_kubernetes; build_kwok; build_kueue; build_cluster_autoscaler ;;
    etcd|kubernetes|kwok|kueue|cluster_autoscaler) "build_$step" ;;
    *) echo "usage: $0 [all|etcd|kubernetes|kwok|kueue|cluster_autoscaler]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - start )) s; $(du -sh "$BIN" | cut -f1) of binaries in $BIN"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kueue; do
    [ -x "$BIN/$b" ] || continue
    case "$b" in
        etcd) printf '%-26s %s\n' "$b" "$("$BIN/$b" --version | head -1)" ;;
        kubectl) printf '%-26s %s\n' "$b" "$("$BIN/$b" version --client 2>/dev/null | head -1)" ;;
        kueue) printf '%-26s %s\n' "$b" "$KUEUE_VERSION (sigs.k8s.io/kueue)" ;;
        *) printf '%-26s %s\n' "$b" "$("$BIN/$b" --version 2>&1 | head -1)" ;;
    esac
done
