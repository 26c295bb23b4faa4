#!/usr/bin/env bash
# Builds the webhook as one static binary and lays out the container
# image's root filesystem in DIR (made anew): the binary, the CA
# certificates and the non-root user. The Dockerfile's build stage runs this
# in a Rust image; image/build.sh runs it on this machine (CI). The
# Dockerfile's final stage copies DIR to the image's root.
#
#   image/rootfs.sh DIR
#
# The binary: `cargo auditable build --release --locked` for the machine's
# own target, named explicitly so that proc-macros and build scripts stay
# dynamically linked for the host while the webhook links glibc statically
# (RUSTFLAGS -C target-feature=+crt-static). cargo auditable embeds the
# dependency list (Cargo.lock's, as built) in the binary's .dep-v0 section.
#
# The commit that --version prints: PIPELINEROLLOUT_WEBHOOK_COMMIT when set,
# otherwise `git rev-parse HEAD` (build.rs). A binary that cannot name its
# commit is refused.
#
# Needs Rust (the version of rust-toolchain.toml), cargo-auditable
# (`cargo install cargo-auditable --locked --version 0.7.7`), glibc's static
# libraries (Debian: libc6-dev), readelf (binutils) and the CA certificates
# at /etc/ssl/certs/ca-certificates.crt (Debian: ca-certificates).
set -euo pipefail

die() {
    echo "image/rootfs.sh: $*" >&2
    exit 1
}

[ $# -eq 1 ] || die "usage: image/rootfs.sh DIR"
out=$1
case $out in
/*) ;;
*) out=$PWD/$out ;;
esac
cd "$(dirname "$0")/.."

channel=$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)
rustc_version=$(rustc --version)
case $rustc_version in
"rustc $channel "*) ;;
*) die "rust-toolchain.toml names Rust $channel, but rustc is: $rustc_version" ;;
esac
cargo auditable --version >/dev/null 2>&1 \
    || die "cargo-auditable is missing: cargo install cargo-auditable --locked --version 0.7.7"
ca_bundle=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca_bundle" ] || die "$ca_bundle is missing: install the CA certificates (Debian: ca-certificates)"

target=$(rustc -vV | sed -n 's/^host: //p')
echo "building the static binary for $target ($rustc_version)"
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo auditable build --release --locked --target "$target" --bin pipelinerollout-webhook
binary=${CARGO_TARGET_DIR:-target}/$target/release/pipelinerollout-webhook

# Static: no program interpreter, no shared library needed. A scratch image
# has no loader and no libc to offer one. readelf's output is read whole
# before it is searched: `readelf | grep -q` under pipefail fails at random
# when grep stops reading before readelf has written its last line.
program_headers=$(readelf --program-headers --wide "$binary")
dynamic=$(readelf --dynamic --wide "$binary")
sections=$(readelf --sections --wide "$binary")
if [[ $program_headers == *INTERP* || $dynamic == *NEEDED* ]]; then
    die "$binary is dynamically linked:"$'\n'"$(grep NEEDED <<<"$dynamic")"
fi
[[ $sections == *" .dep-v0 "* ]] \
    || die "$binary has no .dep-v0 section: cargo auditable did not embed the dependency list"
version=$("$binary" --version)
case $version in
*"(commit unknown)") die "$binary cannot name the commit it was built from ($version): build from a git checkout, or set PIPELINEROLLOUT_WEBHOOK_COMMIT (docker build --build-arg GIT_COMMIT=\$(git rev-parse HEAD))" ;;
esac

rm -rf "$out"
mkdir -p "$out/usr/local/bin" "$out/etc/ssl/certs"
install -m 0755 "$binary" "$out/usr/local/bin/pipelinerollout-webhook"
install -m 0644 "$ca_bundle" "$out/etc/ssl/certs/ca-certificates.crt"
# The user the image runs as (USER 65532:65532), named so that tools show a
# name. No home, no login shell. The Deployment's fsGroup adds 65532 as a
# supplementary group, which can read the mounted key (mode 0440).
printf '%s\n' \
    'root:x:0:0:root:/root:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$out/etc/passwd"
printf '%s\n' \
    'root:x:0:' \
    'nonroot:x:65532:' >"$out/etc/group"
chmod 0644 "$out/etc/passwd" "$out/etc/group"
echo "$version: root filesystem in $out"
