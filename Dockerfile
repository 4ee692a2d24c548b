# One image for every process of wallet-ledger: `serve` (the default command), `consume`,
# `outbox`, and the one-shot `migrate`, `verify`, `reconcile`, `purge`, `dlq`, `deliveries`,
# `api-key`. docs/operations.md says how to run them; compose.yaml is a lab that does.
#
#   docker build -t wallet-ledger --build-arg REVISION=$(git rev-parse HEAD) .
#
# Two stages:
# - build: compiles with the committed query metadata in .sqlx/ (SQLX_OFFLINE=true, so no
#   database at build time) and the committed Cargo.lock (--locked). The dependencies are
#   compiled in a layer of their own that depends on Cargo.toml and Cargo.lock only, so a
#   change under src/ or migrations/ recompiles this crate alone.
# - runtime: Debian slim of the same release as the build image (the binary links the same
#   glibc), CA certificates (webhooks over https), curl for the HEALTHCHECK, the binary, and an
#   unprivileged user with a numeric id (so `runAsNonRoot` can check it).
#
# The build context needs Cargo.toml, Cargo.lock, build.rs, .cargo/, vendor/, .sqlx/, migrations/
# and src/ only.
# Without a .dockerignore the whole directory, target/ included, is sent to the builder: add
# one with `target` in it.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
WORKDIR /src
ENV SQLX_OFFLINE=true CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0

# Dependencies first, against empty stand-ins for the crate's own sources. Registry crates are
# fingerprinted by version and features, so this layer stays valid until the manifest or the
# lock file changes. `cargo clean --package` then drops the stand-in crate's artifacts, so the
# real build below cannot take them for fresh, whatever the sources' timestamps (without it, a
# source file older than the stand-in would leave the stand-in in the image).
# .cargo/ comes first so the dependencies see the same configuration as the crate; vendor/
# holds the patched sqlx-core that Cargo.toml's [patch.crates-io] points to.
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
COPY vendor vendor
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked --bin wallet-ledger \
    && cargo clean --release --package wallet-ledger \
    && rm -r src

# The crate. `sqlx::migrate!()` embeds migrations/ in the binary, so the image carries the
# schema it expects and `wallet-ledger migrate` needs no files at run time (build.rs tells
# cargo that migrations/ is an input).
COPY build.rs build.rs
COPY .sqlx .sqlx
COPY migrations migrations
COPY src src
RUN cargo build --release --locked --offline --bin wallet-ledger \
    && install -D -m 0755 target/release/wallet-ledger /out/wallet-ledger

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="wallet-ledger" \
      org.opencontainers.image.description="A double-entry wallet ledger built on natural idempotency" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 ledger \
    && useradd --system --uid 10001 --gid ledger --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin ledger \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/wallet-ledger
COPY --from=build /out/wallet-ledger /usr/local/bin/wallet-ledger
# Fails the build if the binary cannot start in this image (a missing shared library).
RUN ["wallet-ledger", "--version"]

USER 10001:10001
# The working directory is the one place the process may write: `reconcile` writes its
# reports to `--out`, by default the working directory. Mount a volume here to keep them.
WORKDIR /var/lib/wallet-ledger
# Listen on every interface inside the container (the binary's default is 127.0.0.1:8080);
# logs as one JSON object a line on stderr (`RUST_LOG` filters, default `info,sqlx=warn`).
ENV LISTEN_ADDR=0.0.0.0:8080 LOG_FORMAT=json
# 8080: the API (`serve`). 9091: the consumer's /metrics and /readyz, when it is started with
# `--metrics-addr 0.0.0.0:9091`.
EXPOSE 8080 9091
# Every long-running subcommand stops cleanly on SIGTERM: `serve` finishes its requests, the
# consumer finishes and acknowledges its batch, the dispatcher records its sends. That can take
# longer than Docker's default 10 s before SIGKILL: up to REQUEST_TIMEOUT_MS for `serve`, up to
# CONSUMER_MAX_BATCH_MS plus CONSUMER_BLOCK_MS for the consumer (`docker stop -t`,
# `stop_grace_period`, `terminationGracePeriodSeconds`).
STOPSIGNAL SIGTERM
# Readiness of `serve` (the database answers within 2 s), on the port of LISTEN_ADDR. Other
# subcommands override it: the consumer's is on its --metrics-addr; one-shot jobs disable it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:${LISTEN_ADDR##*:}/readyz" || exit 1
ENTRYPOINT ["wallet-ledger"]
CMD ["serve"]
