# syntax=docker/dockerfile:1
#
# The webhook's container image: the release binary on distroless, as a
# non-root user.
#
#   docker build -t ghcr.io/example/pipelinerollout-webhook:0.1.0 .
#
# Build stage: the toolchain pinned in rust-toolchain.toml.
FROM rust:1.95.0-slim-bookworm AS build
# Use the image's toolchain as it is: rust-toolchain.toml also lists rustfmt
# and clippy, which building does not need and rustup would download.
ENV RUSTUP_TOOLCHAIN=1.95.0
WORKDIR /src
COPY . .
RUN grep -qx 'channel = "1.95.0"' rust-toolchain.toml \
    || { echo "rust-toolchain.toml names another toolchain than this Dockerfile (1.95.0)" >&2; exit 1; }
# --locked: exactly the dependency versions of Cargo.lock. The cache mounts
# (BuildKit) keep downloaded crates and build artifacts between builds.
# The workspace's other members (envtest/, bench/) come along with
# `COPY . .` because Cargo reads every member's manifest; `cargo build` at
# the root builds only the root package, the webhook.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
    && install -m 0755 target/release/pipelinerollout-webhook /pipelinerollout-webhook

# Runtime stage: glibc and libgcc only (no shell, no package manager).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /pipelinerollout-webhook /usr/local/bin/pipelinerollout-webhook
USER 65532:65532
# 8443: HTTPS, /validate and /mutate (--listen). 8080: plain HTTP, /healthz,
# /readyz and /metrics (--admin-listen).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/pipelinerollout-webhook"]
CMD ["serve"]
