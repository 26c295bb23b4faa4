# syntax=docker/dockerfile:1
#
# The webhook's container image: one static binary FROM scratch, with the
# CA certificates and a non-root user, 65532 (docs/install.md, "The
# container image").
#
# The image's files are laid out by image/rootfs.sh, which builds the
# binary. They reach the final stage by one of two ways:
#
# - in the build stage below, from BUILDER_IMAGE (a Rust image):
#     docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD) \
#       -t pipelinerollout-webhook:0.1.0 .
# - from ROOTFS, an image that holds what image/rootfs.sh laid out on this
#   machine: image/build.sh does that with buildah (what CI runs), and the
#   build stage is then skipped.
#
# Either way the final stage is the one at the end of this file.

# A Rust image with the toolchain of rust-toolchain.toml (image/rootfs.sh
# checks that the two agree). BUILDER_IMAGE and GIT_COMMIT are used only by
# the build stage.
ARG BUILDER_IMAGE=docker.io/library/rust:1.95.0-slim-bookworm
# The stage or image whose /rootfs becomes the image.
ARG ROOTFS=build

FROM ${BUILDER_IMAGE} AS build
# Use the image's toolchain as it is: rust-toolchain.toml also lists rustfmt
# and clippy, which building does not need and rustup would download.
ENV RUSTUP_TOOLCHAIN=1.95.0
# Embeds the dependency list in the binary; the version CI installs.
RUN cargo install cargo-auditable --locked --version 0.7.7
WORKDIR /src
COPY . .
# .dockerignore leaves .git out of the build, so the commit that --version
# prints comes from this argument; image/rootfs.sh refuses to build without
# one.
ARG GIT_COMMIT
# The cache mounts (BuildKit) keep downloaded crates and build artifacts
# between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    PIPELINEROLLOUT_WEBHOOK_COMMIT="${GIT_COMMIT}" image/rootfs.sh /rootfs

FROM ${ROOTFS} AS rootfs

FROM scratch
COPY --from=rootfs /rootfs/ /
ARG GIT_COMMIT
LABEL org.opencontainers.image.title="pipelinerollout-webhook" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
# nonroot in the image's /etc/passwd and /etc/group.
USER 65532:65532
# 8443: HTTPS, /validate and /mutate (--listen). 8080: plain HTTP, /healthz,
# /readyz and /metrics (--admin-listen).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/pipelinerollout-webhook"]
CMD ["serve"]
