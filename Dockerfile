# Multi-stage build: compile with the committed .sqlx/ metadata (no database needed), then
# copy the one binary into a slim runtime image that runs as an unprivileged user.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
ENV SQLX_OFFLINE=true CARGO_TERM_COLOR=never
COPY Cargo.toml Cargo.lock ./
COPY .cargo .cargo
COPY .sqlx .sqlx
COPY migrations migrations
COPY src src
RUN cargo build --release --locked --bin wallet-ledger

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home ledger
COPY --from=build /src/target/release/wallet-ledger /usr/local/bin/wallet-ledger
USER ledger
ENV LISTEN_ADDR=0.0.0.0:8080 LOG_FORMAT=json
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["wallet-ledger"]
CMD ["serve"]
