#!/usr/bin/env python3
"""An HTTP handler for tests: each path answers one way, to check what each
answer does to a job (reliableq(1), OUTCOMES).

    outcome_http_server.py --log FILE

Listens on 127.0.0.1, on a port the system picks, and prints that port on
stdout, then serves until killed. Every request is appended to FILE as
"<path> <Idempotency-Key>" once it has arrived (before it is answered).

    /status/CODE            answers CODE with the body "status CODE"
    /status/429             answers 429 with Retry-After: 2
    /status/503             answers 503 without Retry-After
    /status/503-date        answers 503 with Retry-After as an HTTP date 3 s ahead
    /status/503-bad         answers 503 with Retry-After: soon (neither form)
    /once/429               429 with Retry-After: 1 the first time a jid comes, then 200
    /hang                   answers nothing for 60 s (longer than any job timeout)
    /reset                  closes the connection without an answer (a TCP reset)
"""
import argparse
import email.utils
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
options = parser.parse_args()

lock = threading.Lock()
seen = set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):  # requests go to --log, not stderr
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        key = self.headers.get("Idempotency-Key", "-")
        with lock:
            with open(options.log, "a") as log:
                log.write("%s %s\n" % (self.path, key))
            first = (self.path, key) not in seen
            seen.add((self.path, key))
        if self.path == "/hang":
            time.sleep(60)
            return self.answer(200)
        if self.path == "/reset":
            # SO_LINGER with a zero timeout: close() sends RST, not FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return None
        if self.path == "/once/429":
            return self.answer(429, {"Retry-After": "1"}) if first else self.answer(200)
        if self.path == "/status/429":
            return self.answer(429, {"Retry-After": "2"})
        if self.path == "/status/503-date":
            date = email.utils.formatdate(time.time() + 3, usegmt=True)
            return self.answer(503, {"Retry-After": date})
        if self.path == "/status/503-bad":
            return self.answer(503, {"Retry-After": "soon"})
        if self.path.startswith("/status/"):
            return self.answer(int(self.path.split("/")[2].split("-")[0]))
        return self.answer(500)

    def answer(self, status, headers=None):
        body = ("status %d" % status).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a hanging answer never holds the process


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
sys.exit(0)
