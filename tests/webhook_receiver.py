"""A webhook receiver for the integration tests, independent of the Rust code: it checks every
request's signature with the `standardwebhooks` package (the convention's reference library)
and records what it got, one JSON object per line, in LOG.

    python3 tests/webhook_receiver.py PORT LOG MODE SECRET[,SECRET...]

MODE: `ok` (204), `fail:N` (500 for the first N requests, then 204), `status:CODE` (always
CODE), `slow:SECONDS` (sleeps, then 204). With several secrets a request verifies if any does
(the receiver's side of a rotation). Prints `ready` once listening.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

port, log_path, mode, secrets = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(",")
webhooks = [Webhook(s) for s in secrets]
lock = threading.Lock()
seen = 0


def verified(body, headers):
    for wh in webhooks:
        try:
            wh.verify(body, headers)
            return True
        except Exception:
            pass
    return False


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global seen
        received_at = time.time()
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with lock:
            seen += 1
            n = seen
        status = 204
        if mode.startswith("fail:") and n <= int(mode.split(":")[1]):
            status = 500
        elif mode.startswith("status:"):
            status = int(mode.split(":")[1])
        elif mode.startswith("slow:"):
            time.sleep(float(mode.split(":")[1]))
        record = {
            "n": n,
            "received_at": received_at,
            "answered": status,
            "verified": verified(body, headers),
            "webhook_id": headers.get("webhook-id"),
            "idempotency_key": headers.get("idempotency-key"),
            "signatures": headers.get("webhook-signature", "").count("v1,"),
            "body": json.loads(body or b"null"),
        }
        with lock, open(log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("ready", flush=True)
server.serve_forever()
