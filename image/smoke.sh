#!/usr/bin/env bash
# Starts the container image as the Deployment runs it and talks to it;
# fails, saying why, when the image does not start, does not answer or
# answers wrongly. What CI runs after image/build.sh:
#
#   image/smoke.sh localhost/pipelinerollout-webhook:0.1.0
#
# Nothing is pulled: the image is run from buildah's local store with
# `buildah run --isolation chroot`, which needs no daemon and shares this
# machine's network, so the server is reached on loopback at its default
# ports (8443 and 8080, which must be free). Needs buildah, curl, python3,
# git (or GIT_COMMIT) and root.
#
# It checks, in order:
# - the image's configuration (user 65532:65532, entrypoint, ports, the
#   revision label) and its files: the binary, the CA certificates,
#   /etc/passwd and /etc/group, nothing else (so no shell), and its size
#   (at most IMAGE_SIZE_LIMIT bytes, 25 MB by default);
# - that /bin/sh cannot run in it, and that `--version` prints the
#   version and the commit;
# - a serving certificate laid out as kubelet mounts the Secret (tls.crt
#   and tls.key mode 0440, owned by root and group 65532, behind ..data
#   symlinks), mounted read-only at the Deployment's path; a key the group
#   cannot read stops `serve` with an error naming it;
# - `serve` with the Deployment's arguments and environment, but the
#   built-in policy and no API server, as uid 65532 with supplementary
#   group 65532: it logs that RBAC and Events are off, turns ready, answers
#   real AdmissionReviews over HTTPS (allowed, denied, mutated; the JSON
#   Patch is applied and checked), counts them in /metrics, and stops
#   cleanly on SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -eq 1 ] || {
    echo "usage: image/smoke.sh IMAGE" >&2
    exit 2
}
image=$1
size_limit=${IMAGE_SIZE_LIMIT:-25000000}
commit=${GIT_COMMIT:-$(git rev-parse --verify HEAD)}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
binary=/usr/local/bin/pipelinerollout-webhook
fixtures=tests/fixtures/admission
# The Service's DNS name, which the serving certificate is for; curl
# resolves it to loopback.
host=pipelinerollout-webhook.pipelinerollout-webhook.svc
https_port=8443
admin_port=8080

work=$(mktemp -d)
container=
runner=
server=

fail() {
    echo "image/smoke.sh: FAIL: $*" >&2
    exit 1
}

cleanup() {
    if [ -n "$runner" ]; then
        # The server this script started, found now if it failed before.
        [ -n "$server" ] || server=$(pgrep -f "^$binary serve" | head -n 1 || true)
        if [ -n "$server" ]; then
            kill -KILL "$server" 2>/dev/null || true
        fi
        kill "$runner" 2>/dev/null || true
        wait "$runner" 2>/dev/null || true
    fi
    if [ -n "$container" ]; then
        buildah umount "$container" >/dev/null 2>&1 || true
        buildah rm "$container" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# short_run LOG PATTERN BUILDAH-RUN-ARGS...: runs a command that ends at
# once in the image's working container, its output in LOG, and returns its
# exit status. Now and then, on a
# busy machine, buildah's chroot isolation relays none of the output of a
# process that exits within milliseconds; when LOG lacks PATTERN, the
# command runs again, three times at most.
short_run() {
    local log=$1 pattern=$2 status
    shift 2
    for _ in 1 2 3; do
        status=0
        timeout 30 buildah run --isolation chroot "$@" >"$log" 2>&1 || status=$?
        if grep -q -- "$pattern" "$log"; then
            break
        fi
    done
    return "$status"
}

echo "-- the image: $image"
buildah inspect --type image "$image" >"$work/inspect.json" \
    || fail "no image $image in buildah's store (build it with image/build.sh)"
image/check_answers.py config "$work/inspect.json" "$commit"

container=$(buildah from --pull-never "$image")
root=$(buildah mount "$container")
(cd "$root" && find . -mindepth 1 -not -type d | sort) >"$work/files"
printf '%s\n' ./etc/group ./etc/passwd ./etc/ssl/certs/ca-certificates.crt ".$binary" >"$work/expected-files"
diff -u "$work/expected-files" "$work/files" >&2 \
    || fail "the image holds other files than the binary, the CA certificates, /etc/passwd and /etc/group (above: - expected, + found)"
echo "ok: files: $(paste -sd' ' "$work/files") (no shell, nothing else)"
grep -qx 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' "$root/etc/passwd" \
    || fail "/etc/passwd has no nonroot user 65532"
size=$(du -sb "$root" | cut -f1)
buildah umount "$container" >/dev/null
echo "ok: size: $size bytes uncompressed ($(awk -v b="$size" 'BEGIN { printf "%.1f MB", b / 1e6 }')); buildah images says $(buildah images --format '{{.Size}}' "$image")"
[ "$size" -le "$size_limit" ] || fail "the image is $size bytes, above the limit of $size_limit"

if short_run "$work/sh.log" '/bin/sh: no such file or directory' --user 65532:65532 "$container" -- /bin/sh -c true; then
    fail "/bin/sh ran in the image"
fi
grep -q '/bin/sh: no such file or directory' "$work/sh.log" \
    || fail "/bin/sh failed in the image, but not for want of a shell: $(cat "$work/sh.log")"
echo "ok: /bin/sh does not run in the image: no such file"

short_run "$work/version" 'pipelinerollout-webhook ' --user 65532:65532 "$container" -- "$binary" --version \
    || fail "the image's binary does not run: $(cat "$work/version")"
printed=$(cat "$work/version")
[ "$printed" = "pipelinerollout-webhook $version (commit $commit)" ] \
    || fail "--version printed '$printed', not 'pipelinerollout-webhook $version (commit $commit)'"
echo "ok: --version: $printed"

echo "-- the serving certificate, as kubelet mounts the Secret"
mkdir -m 0777 "$work/gen"
buildah run --isolation chroot --user 65532:65532 --volume "$work/gen:/out" "$container" -- \
    "$binary" gen-certs --out /out/certs >"$work/gen-certs.log" 2>&1 || true
for file in ca.crt tls.crt tls.key; do
    [ -s "$work/gen/certs/$file" ] || fail "gen-certs in the image wrote no $file: $(cat "$work/gen-certs.log")"
done
# kubelet's layout: the files in a timestamped directory, ..data pointing
# at it, and each name a symbolic link through ..data; the Secret's
# defaultMode 0440 and the pod's fsGroup 65532 make the files root:65532
# 0440. mount_tls DIR KEY_GROUP KEY_MODE writes that into DIR.
mount_tls() {
    local dir=$1 stamp=..2026_01_01_00_00_00.000000001
    mkdir -p "$dir/$stamp"
    cp "$work/gen/certs/tls.crt" "$work/gen/certs/tls.key" "$dir/$stamp/"
    chown 0:65532 "$dir/$stamp/tls.crt"
    chmod 0440 "$dir/$stamp/tls.crt"
    chown "0:$2" "$dir/$stamp/tls.key"
    chmod "$3" "$dir/$stamp/tls.key"
    ln -s "$stamp" "$dir/..data"
    ln -s ..data/tls.crt "$dir/tls.crt"
    ln -s ..data/tls.key "$dir/tls.key"
}
mount_tls "$work/tls" 65532 0440
mount_tls "$work/tls-unreadable" 0 0400

# The Deployment's arguments (manifests/base/deployment.yaml), without
# --policy: the built-in policy, as no ConfigMap is mounted here.
mapfile -t args < <(sed -n '/^        args:$/,/^        env:$/s/^        - //p' manifests/base/deployment.yaml | grep -v '^--policy=')
[ "${args[0]:-}" = serve ] || fail "no serve arguments found in manifests/base/deployment.yaml: ${args[*]}"
tls_dir=$(dirname "$(printf '%s\n' "${args[@]}" | sed -n 's/^--tls-cert=//p')")
[ "$tls_dir" = /etc/webhook/tls ] || fail "the Deployment's --tls-cert is not in /etc/webhook/tls, where it mounts the Secret"
env_args=(--env POD_NAME=pipelinerollout-webhook-smoke --env POD_NAMESPACE=pipelinerollout-webhook
    --env WEBHOOK_RESET_STALE_FORCE=true --env MALLOC_MMAP_THRESHOLD_=131072)
echo "serve arguments: ${args[*]}"

if short_run "$work/unreadable.log" 'tls.key' --user 65532:65532 --volume "$work/tls-unreadable:$tls_dir:ro" \
    "${env_args[@]}" "$container" -- "$binary" "${args[@]}"; then
    fail "serve started with a key only root can read"
fi
grep -q 'tls.key' "$work/unreadable.log" \
    || fail "serve stopped, without naming the key it could not read: $(cat "$work/unreadable.log")"
echo "ok: a key the group cannot read stops serve: $(grep -m1 'tls.key' "$work/unreadable.log" | cut -c1-200)"

echo "-- serve"
for port in "$https_port" "$admin_port"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        fail "something already listens on port $port; the image's defaults need it"
    fi
done
buildah run --isolation chroot --user 65532:65532 --volume "$work/tls:$tls_dir:ro" \
    "${env_args[@]}" "$container" -- "$binary" "${args[@]}" >"$work/serve.log" 2>&1 &
runner=$!
ready=
for _ in $(seq 300); do
    if ! kill -0 "$runner" 2>/dev/null; then
        cat "$work/serve.log" >&2
        fail "the image exited before it was ready (its log above)"
    fi
    if [ "$(curl --silent --max-time 2 "http://127.0.0.1:$admin_port/readyz" || true)" = ready ]; then
        ready=yes
        break
    fi
    sleep 0.1
done
[ -n "$ready" ] || {
    cat "$work/serve.log" >&2
    fail "/readyz did not answer ready within 30 seconds (the log above)"
}
echo "ok: /readyz: ready"
server=$(pgrep -f "^$binary serve" | head -n 1)
[ -n "$server" ] || fail "no process $binary serve"
grep -E '^(Uid|Gid|Groups):' "/proc/$server/status" | tr -s '\t ' ' ' >"$work/ids"
printf '%s\n' 'Uid: 65532 65532 65532 65532' 'Gid: 65532 65532 65532 65532' 'Groups: 65532 ' >"$work/expected-ids"
diff -u "$work/expected-ids" "$work/ids" >&2 \
    || fail "the server does not run as uid 65532, gid 65532, with the one supplementary group 65532 (above)"
echo "ok: runs as $(paste -sd' ' "$work/ids")"
# The log sink writes in batches: the line may reach the log after /readyz
# answers, so it is waited for (10 s at most).
no_api_server='"message":"no API server: RBAC checks, Events and the background controllers are off"'
for _ in $(seq 100); do
    grep -q "$no_api_server" "$work/serve.log" && break
    sleep 0.1
done
grep -q "$no_api_server" "$work/serve.log" \
    || fail "serve did not log that RBAC and Events are off: $(head -n 5 "$work/serve.log")"
echo "ok: logged: no API server: RBAC checks, Events and the background controllers are off"

# review WEBHOOK FIXTURE CHECK: sends the fixture over HTTPS, trusting only
# the CA of the serving certificate, and checks the answer.
review() {
    local webhook=$1 fixture=$fixtures/$2 check=$3
    curl --fail --silent --show-error --max-time 10 \
        --cacert "$work/gen/certs/ca.crt" --resolve "$host:$https_port:127.0.0.1" \
        --header 'Content-Type: application/json' --data-binary "@$fixture" \
        --output "$work/answer.json" "https://$host:$https_port/$webhook" \
        || fail "POST /$webhook with $fixture got no answer"
    echo -n "/$webhook $(basename "$fixture"): "
    image/check_answers.py "$check" "$fixture" "$work/answer.json"
}
review validate 01-create-kubectl-apply-validate.json allowed
review validate 07-allow-data-loss-true-kubectl-annotate-alice-validate.json denied
review mutate 11-create-no-lifecycle-kubectl-create-mutate.json mutate

curl --fail --silent --show-error --max-time 10 --output "$work/metrics.txt" \
    "http://127.0.0.1:$admin_port/metrics" || fail "/metrics did not answer"
image/check_answers.py metrics "$work/metrics.txt"

kill -TERM "$server"
status=0
# --shutdown-delay (5 s) and --shutdown-grace (15 s) at most.
timeout 30 tail --pid="$server" -f /dev/null || fail "serve did not stop within 30 s of SIGTERM"
wait "$runner" || status=$?
runner=
[ "$status" -eq 0 ] || fail "serve exited with status $status after SIGTERM: $(tail -n 3 "$work/serve.log")"
grep -q '"message":"stopped"' "$work/serve.log" || fail "serve did not log that it stopped"
echo "ok: stopped on SIGTERM, exit status 0"
echo "image/smoke.sh: $image passed"
