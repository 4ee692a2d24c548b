#!/usr/bin/env python3
"""RSS of `serve` under many connections: at rest, with 5,000 connections open (each has made
one request and stays kept alive), after they close, and after 1,000 idle keep-alive
connections are closed by the server's idle timeout. Prints one JSON object.

Usage: python3 scripts/connections_rss.py [BINARY] [DATABASE_URL]
(defaults: target/release/wallet-ledger, postgres://postgres@127.0.0.1:5432/wallet_ledger_rss).
docs/performance.md reports its figures.
"""

import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time

BINARY = sys.argv[1] if len(sys.argv) > 1 else "target/release/wallet-ledger"
DATABASE_URL = (
    sys.argv[2] if len(sys.argv) > 2 else "postgres://postgres@127.0.0.1:5432/wallet_ledger_rss"
)
OPEN = 5_000
IDLE = 1_000
IDLE_TIMEOUT_MS = 2_000
REQUEST = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def one_request(addr, port):
    """A connection that made one request and is kept alive."""
    reader, writer = await asyncio.open_connection(addr, port)
    writer.write(REQUEST)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    length = int(
        next(l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")).split(b":")[1]
    )
    await reader.readexactly(length)
    return reader, writer


async def open_many(port, n):
    connections = []
    for start in range(0, n, 500):
        connections += await asyncio.gather(
            *(one_request("127.0.0.1", port) for _ in range(min(500, n - start)))
        )
    return connections


async def closed_by_server(reader):
    return await reader.read() == b""


async def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * OPEN + 1024), hard))
    port = free_port()
    help_text = subprocess.run([BINARY, "serve", "--help"], capture_output=True, text=True).stdout
    # A binary from before the idle timeout existed is measured too (its idle connections
    # are then never closed).
    idle_flag = ["--idle-timeout-ms", str(IDLE_TIMEOUT_MS)] if "--idle-timeout-ms" in help_text else []
    server = subprocess.Popen(
        [
            BINARY,
            "serve",
            "--database-url",
            DATABASE_URL,
            "--listen-addr",
            f"127.0.0.1:{port}",
            "--no-outbox",
            *idle_flag,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                c = await open_many(port, 1)
                c[0][1].close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        warm = await open_many(port, 200)
        for _, w in warm:
            w.close()
        await asyncio.sleep(1)
        figures = {"at_rest_mib": rss_mib(server.pid)}

        held = await open_many(port, OPEN)
        figures[f"{OPEN}_open_mib"] = rss_mib(server.pid)
        for _, w in held:
            w.close()
        await asyncio.sleep(3)
        figures[f"after_{OPEN}_closed_mib"] = rss_mib(server.pid)

        idle = await open_many(port, IDLE)
        figures[f"{IDLE}_idle_open_mib"] = rss_mib(server.pid)
        started = time.monotonic()
        waits = [asyncio.ensure_future(closed_by_server(r)) for r, _ in idle]
        done, pending = await asyncio.wait(waits, timeout=5 * IDLE_TIMEOUT_MS / 1000)
        for p in pending:
            p.cancel()
        figures[f"{IDLE}_idle_closed_by_server"] = sum(1 for d in done if d.result())
        figures["idle_closed_after_s"] = round(time.monotonic() - started, 2)
        for _, w in idle:
            w.close()
        # The server hands memory back within a 2 s tick of a burst's end.
        await asyncio.sleep(3)
        figures[f"after_{IDLE}_idle_timed_out_mib"] = rss_mib(server.pid)
        figures = {k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()}
        print(json.dumps(figures))
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    asyncio.run(main())
