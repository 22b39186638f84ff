#!/usr/bin/env python3
"""A tiny reliableq HTTP handler: receives jobs POSTed by a worker.

    python3 webhook_server.py --port 8080 --ledger /var/lib/webhooks/ledger
    reliableq worker --http-handler "WebhookJob=http://127.0.0.1:8080/jobs"

The worker POSTs each job's JSON, with its jid in the Idempotency-Key header.
A 2xx answer is success; 408, 425, 429 and 5xx (or no answer within the
job's timeout) are failures, retried as Sidekiq retries, or after the
Retry-After the answer gives; any other 4xx sends the job to the dead set at
once (reliableq(1), OUTCOMES). This one records each job once in the ledger
file (a jid seen before is answered 200 without recording it again: the
idempotency key at work), and answers 422 to a job whose args are not
[event, payload]: it will never succeed.

--port 0 asks the system for a free port; the port is printed on stdout.
"""
import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=8080)
parser.add_argument("--ledger", required=True)
options = parser.parse_args()

lock = threading.Lock()
seen = set()
if os.path.exists(options.ledger):
    with open(options.ledger) as f:
        seen.update(line.split(" ", 1)[0] for line in f if line.strip())


class JobHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the worker reuses its connection
    # Headers and body go in two writes: without this, Nagle's algorithm holds
    # the body until the worker's delayed ACK, 40 ms per job.
    disable_nagle_algorithm = True

    def do_POST(self):
        if self.path != "/jobs":
            return self.answer(404, "no such path")
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            job = json.loads(body)
            event, payload = job["args"]
        except (ValueError, KeyError, TypeError):
            return self.answer(422, "expected a job with args [event, payload]")
        # The worker sends the jid as the idempotency key, the same on every
        # delivery of the job; X-Reliableq-Retry-Count and
        # X-Reliableq-Interrupted-Count say whether it may have come before.
        key = self.headers.get("Idempotency-Key")
        if key != job.get("jid"):
            return self.answer(400, "expected the job's jid in Idempotency-Key")
        with lock:
            if key not in seen:
                seen.add(key)
                with open(options.ledger, "a") as ledger:
                    ledger.write("%s %s %s\n" % (key, event, json.dumps(payload)))
        self.answer(200, "ok")

    def answer(self, status, text):
        data = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", options.port), JobHandler)
print(server.server_address[1], flush=True)
server.serve_forever()
