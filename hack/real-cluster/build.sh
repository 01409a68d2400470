#!/usr/bin/env bash
# Builds the real control plane used by tests/real from Go modules (no containers, no downloads besides
# the Go module proxy) and the cluster-autoscaler from its upstream source (below), into a cache outside
# the repository keyed by versions:
#   ${GANG_REAL_CLUSTER_CACHE:-~/.cache/airflow-provider-gang/real-cluster}/<kubernetes version>/bin
# Idempotent: a binary that exists is kept; each binary's version is printed at the end. One build of
# a cache at a time: a second run waits for the first (flock), then finds its binaries.
# Usage: build.sh [all|etcd|kubernetes|kwok|kueue|cluster_autoscaler]
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

CACHE_ROOT="${GANG_REAL_CLUSTER_CACHE:-$HOME/.cache/airflow-provider-gang/real-cluster}"
OUT="$CACHE_ROOT/$KUBERNETES_VERSION"
BIN="$OUT/bin"
WORK="$OUT/work"
mkdir -p "$BIN" "$WORK" "$OUT/manifests"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
staging_version="v0.${KUBERNETES_VERSION#v1.}"
log() { printf '[real-cluster %s] %s\n' "$(date +%T)" "$*" >&2; }

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

# The cluster-autoscaler (its kwok cloud provider's main package, sigs.k8s.io/cluster-autoscaler/kwok)
# is built from upstream source: the module proxy serves no version of sigs.k8s.io/cluster-autoscaler
# nor of k8s.io/autoscaler/cluster-autoscaler/apis. The source is a folder, GANG_CLUSTER_AUTOSCALER_SRC,
# by default the nearest shared/third_party/cluster-autoscaler in a folder above this checkout or above
# its main checkout (a git worktree's), holding for each of the two trees either the `git archive`
# tarball or the folder: cluster-autoscaler-*.tar.gz or cluster-autoscaler/ (kubernetes-sigs/
# cluster-autoscaler at $CLUSTER_AUTOSCALER_COMMIT), autoscaler-apis-*.tar.gz or autoscaler-apis/
# (the cluster-autoscaler/apis folder of kubernetes/autoscaler). Its go.mod pins Kubernetes release
# candidates the proxy refuses: every k8s.io module it replaces with a version of itself is retargeted
# to $staging_version and k8s.io/kubernetes to $KUBERNETES_VERSION, the apis module is replaced by the
# unpacked folder, `go mod tidy` resolves the rest from the proxy, and `go build ./kwok` builds it as
# upstream's `make build-kwok` does.
CLUSTER_AUTOSCALER_COMMIT="${CLUSTER_AUTOSCALER_COMMIT:-33c3f97bf2749b1385d9223f1f8856fe345011f7}"
CLUSTER_AUTOSCALER_TREES=(cluster-autoscaler autoscaler-apis)

cluster_autoscaler_source() {  # the source folder, or nothing
    if [ -n "${GANG_CLUSTER_AUTOSCALER_SRC:-}" ]; then echo "$GANG_CLUSTER_AUTOSCALER_SRC"; return; fi
    local repository common dir
    repository="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    common="$(git -C "$repository" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)" || common=""
    for dir in "$repository" ${common:+"$(dirname "$common")"}; do
        while [ "$dir" != / ]; do
            dir="$(dirname "$dir")"
            [ -d "$dir/shared/third_party/cluster-autoscaler" ] && { echo "$dir/shared/third_party/cluster-autoscaler"; return; }
        done
    done
}

CLUSTER_AUTOSCALER_SRC="$(cluster_autoscaler_source)"

has_cluster_autoscaler_source() {  # has_cluster_autoscaler_source: both trees there, else one line naming the variable
    local tree
    for tree in "${CLUSTER_AUTOSCALER_TREES[@]}"; do
        if [ -z "$CLUSTER_AUTOSCALER_SRC" ] || { [ ! -d "$CLUSTER_AUTOSCALER_SRC/$tree" ] && \
            ! compgen -G "$CLUSTER_AUTOSCALER_SRC/$tree-*.tar.gz" >/dev/null; }; then
            log "cluster-autoscaler: no source (${CLUSTER_AUTOSCALER_SRC:-no shared/third_party/cluster-autoscaler above this checkout} has no $tree/ nor $tree-*.tar.gz): set GANG_CLUSTER_AUTOSCALER_SRC (README: The real control plane)"
            return 1
        fi
    done
}

unpack_cluster_autoscaler() {  # unpack_cluster_autoscaler DIR: both trees into DIR/<tree>, without .git
    local dir="$1" tree
    rm -rf "$dir"; mkdir -p "$dir"
    for tree in "${CLUSTER_AUTOSCALER_TREES[@]}"; do
        if [ -d "$CLUSTER_AUTOSCALER_SRC/$tree" ]; then
            mkdir "$dir/$tree"
            tar -C "$CLUSTER_AUTOSCALER_SRC/$tree" --exclude=.git -cf - . | tar -C "$dir/$tree" -xf -
        else
            tar -xzf "$(compgen -G "$CLUSTER_AUTOSCALER_SRC/$tree-*.tar.gz" | head -1)" -C "$dir"
        fi
    done
    chmod -R u+w "$dir"
}

cluster_autoscaler_commit() {  # the source's upstream commit: its git checkout's, else the archive's header
    local tree="$CLUSTER_AUTOSCALER_SRC/cluster-autoscaler" archive
    if [ -d "$tree" ]; then
        [ "$(git -C "$tree" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$tree" && pwd -P)" ] && git -C "$tree" rev-parse HEAD
        return 0
    fi
    archive="$(compgen -G "$CLUSTER_AUTOSCALER_SRC/cluster-autoscaler-*.tar.gz" | head -1)"
    gzip -dc "$archive" | git get-tar-commit-id || true
}

build_cluster_autoscaler() {
    if [ -x "$BIN/cluster-autoscaler" ]; then
        log "cluster-autoscaler $(cat "$OUT/cluster-autoscaler.commit" 2>/dev/null || echo '(commit unknown)'): cached"
        return
    fi
    has_cluster_autoscaler_source
    local commit dir="$WORK/cluster-autoscaler"
    commit="$(cluster_autoscaler_commit)"
    if [ -n "$commit" ] && [ "$commit" != "$CLUSTER_AUTOSCALER_COMMIT" ]; then
        log "cluster-autoscaler: $CLUSTER_AUTOSCALER_SRC is at $commit, not $CLUSTER_AUTOSCALER_COMMIT: check it out at that commit, or set CLUSTER_AUTOSCALER_COMMIT=$commit to build it"
        return 1
    fi
    commit="${commit:-unknown}"  # a folder that is not a git checkout
    log "cluster-autoscaler $commit: unpacking $CLUSTER_AUTOSCALER_SRC"
    unpack_cluster_autoscaler "$dir"
    local module edits=()
    for module in $(sed -nE 's/^\s*(replace\s+)?(k8s\.io\/[a-z0-9-]+) => \2 v\S+\s*$/\2/p' "$dir/cluster-autoscaler/go.mod"); do
        edits+=("-replace=$module=$module@$staging_version")
    done
    (cd "$dir/cluster-autoscaler" && go mod edit "${edits[@]}" \
        -replace="k8s.io/kubernetes=k8s.io/kubernetes@$KUBERNETES_VERSION" \
        -require="k8s.io/kubernetes@$KUBERNETES_VERSION" \
        -replace="k8s.io/autoscaler/cluster-autoscaler/apis=../autoscaler-apis")
    log "cluster-autoscaler $commit: resolving modules (Kubernetes $KUBERNETES_VERSION, staging modules $staging_version; ${#edits[@]} retargeted)"
    (cd "$dir/cluster-autoscaler" && go mod tidy >/dev/null)
    log "cluster-autoscaler $commit: building sigs.k8s.io/cluster-autoscaler/kwok"
    (cd "$dir/cluster-autoscaler" && go build -trimpath \
        -ldflags "-s -w -X sigs.k8s.io/cluster-autoscaler/pkg/version.ClusterAutoscalerVersion=$commit" \
        -o "$BIN/cluster-autoscaler.partial" ./kwok)
    printf '%s\n' "$commit" >"$OUT/cluster-autoscaler.commit"
    mv "$BIN/cluster-autoscaler.partial" "$BIN/cluster-autoscaler"
    rm -f "$OUT/cluster-autoscaler.unavailable"
}

step="${1:-all}"
exec 9>"$OUT/build.lock"
if ! flock -n 9; then
    log "another build of $OUT is running: waiting for it"
    flock 9
fi
start=$(date +%s)
case "$step" in
    all)
        # The autoscaler's source is checked first: a missing one fails now, not after the rest.
        [ -x "$BIN/cluster-autoscaler" ] || has_cluster_autoscaler_source
        build_etcd; build_kubernetes; build_kwok; build_kueue; build_cluster_autoscaler ;;
    etcd|kubernetes|kwok|kueue|cluster_autoscaler) "build_$step" ;;
    *) echo "usage: $0 [all|etcd|kubernetes|kwok|kueue|cluster_autoscaler]" >&2; exit 2 ;;
esac
log "done in $(( $(date +%s) - start )) s; $(du -sh "$BIN" | cut -f1) of binaries in $BIN"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kueue cluster-autoscaler; do
    [ -x "$BIN/$b" ] || continue
    case "$b" in
        etcd) printf '%-26s %s\n' "$b" "$("$BIN/$b" --version | head -1)" ;;
        kubectl) printf '%-26s %s\n' "$b" "$("$BIN/$b" version --client 2>/dev/null | head -1)" ;;
        kueue) printf '%-26s %s\n' "$b" "$KUEUE_VERSION (sigs.k8s.io/kueue)" ;;
        cluster-autoscaler) printf '%-26s %s\n' "$b" "$(cat "$OUT/cluster-autoscaler.commit") (sigs.k8s.io/cluster-autoscaler/kwok)" ;;
        *) printf '%-26s %s\n' "$b" "$("$BIN/$b" --version 2>&1 | head -1)" ;;
    esac
done
