#!/usr/bin/env bash
# Builds the container image with buildah, as CI does: image/rootfs.sh
# builds the static binary on this machine and lays out the root
# filesystem, which becomes the ROOTFS of the Dockerfile, whose final stage
# makes the image. Nothing is pulled from a registry.
#
#   image/build.sh            # -> localhost/pipelinerollout-webhook:VERSION
#
# IMAGE_NAME sets the name (default pipelinerollout-webhook); the tag is
# the version the binary prints. The last line of the output is the image's
# full name, for image/smoke.sh. Needs buildah, git (or GIT_COMMIT set to
# the commit), and what image/rootfs.sh needs. Run as root: buildah's
# chroot isolation, with no daemon.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "image/build.sh: $*" >&2
    exit 1
}

command -v buildah >/dev/null || die "buildah is missing (Debian: apt-get install buildah)"
name=${IMAGE_NAME:-pipelinerollout-webhook}
# The commit: GIT_COMMIT when set, which the binary is then told as well;
# otherwise build.rs asks git, as a plain `cargo build` does, so that the
# build reuses what an earlier one of the same commit compiled.
if [ -n "${GIT_COMMIT:-}" ]; then
    commit=$GIT_COMMIT
    export PIPELINEROLLOUT_WEBHOOK_COMMIT=$commit
else
    commit=$(git rev-parse --verify HEAD 2>/dev/null) \
        || die "no git checkout here: set GIT_COMMIT to the commit these sources are"
    if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
        echo "image/build.sh: warning: the work tree has uncommitted changes; the image will name $commit all the same" >&2
    fi
fi

rootfs=${CARGO_TARGET_DIR:-target}/image/rootfs
image/rootfs.sh "$rootfs"
version=$("$rootfs/usr/local/bin/pipelinerollout-webhook" --version | sed -n 's/^pipelinerollout-webhook \([^ ]*\) .*/\1/p')
[ -n "$version" ] || die "the binary's --version does not name a version"

# The root filesystem as an image of its own, FROM scratch: the Dockerfile's
# ROOTFS. Removed once the image is built; the image keeps its own copy.
rootfs_image=localhost/$name-rootfs:$version
container=$(buildah from scratch)
trap 'buildah rm "$container" >/dev/null 2>&1 || true' EXIT
buildah copy --quiet "$container" "$rootfs" /rootfs >/dev/null
buildah commit --quiet --rm "$container" "$rootfs_image" >/dev/null
trap - EXIT

image=localhost/$name:$version
buildah build --isolation chroot \
    --build-arg ROOTFS="$rootfs_image" \
    --build-arg GIT_COMMIT="$commit" \
    --file Dockerfile --tag "$image" .
# --force: buildah 1.28 keeps a working container of the rootfs stage.
buildah rmi --force "$rootfs_image" >/dev/null
buildah images --format '{{.Name}}:{{.Tag}} {{.ID}} {{.Size}}' "$image"
echo "$image"
