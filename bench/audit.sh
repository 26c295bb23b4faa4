#!/usr/bin/env bash
# The audit benchmark (BENCHMARKS.md, "The audit at scale"): a real
# kube-apiserver with SIZES PipelineRollouts across 100 namespaces, the
# release webhook auditing them into PolicyReports. Needs etcd,
# kube-apiserver and kubectl, found as the end-to-end tests find them
# (docs/end-to-end-tests.md): TEST_ASSET_ETCD, TEST_ASSET_KUBE_APISERVER and
# TEST_ASSET_KUBECTL naming the binaries, else the directory
# KUBEBUILDER_ASSETS (setup-envtest's), else (etcd, kubectl) the PATH.
#   bench/audit.sh                      # 1000, 3000 and 10000 rollouts
#   SIZES=1000 bench/audit.sh           # one size
#   SERVE_ARGS="--audit-qps=10" bench/audit.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
log() { printf '%s audit.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
MAX_LOAD="${MAX_LOAD:-1.5}"
MAX_WAIT="${MAX_WAIT:-120}"
SIZES="${SIZES:-1000,3000,10000}"
cargo build --release --locked --bin pipelinerollout-webhook
cargo build --locked -p bench --bin audit_bench
wait_for_quiet
extra=()
for a in ${SERVE_ARGS:-}; do extra+=("--serve-arg=$a"); done
target/debug/audit_bench --webhook target/release/pipelinerollout-webhook --sizes "$SIZES" "${extra[@]}"
