# The mailbench image for agents on a cluster (deploy/kubernetes): the release binary
# built on Debian 12 with the project's own toolchain version, run on a slim Debian 12.
# The binary links only glibc (TLS is rustls on ring, no OpenSSL), so the runtime image
# needs nothing but the CA certificates for --tls against real servers.
#   docker build -t mailbench:latest .
# Both bases are build arguments so that a machine without Docker Hub can build it from
# images made locally (deploy/container/build.sh: debootstrap -> podman import, the host's
# Rust 1.95 toolchain copied in); the defaults stay the public images.
ARG BUILD_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY crates ./crates
COPY src ./src
COPY examples ./examples
COPY tests ./tests
# The build context has no .git: the commit `--version` names comes in as an argument
# (deploy/container/build.sh passes it; `unknown` otherwise).
ARG MAILBENCH_COMMIT=
RUN MAILBENCH_COMMIT="${MAILBENCH_COMMIT}" cargo build --release --locked --bin mailbench

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/mailbench /usr/local/bin/mailbench
# Agents raise their descriptor limit themselves; run unprivileged.
USER 65534:65534
ENTRYPOINT ["mailbench"]
