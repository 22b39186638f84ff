"""tools/bench's scenarios of issue 17: the cost of the worker's metrics, and
how fast `reliableq web` answers with a large dead set.

metrics       drain_c25 with the worker's HTTP endpoint on (`--http`) and
              /metrics scraped every second during the drain, and the idle
              RSS of a worker with the endpoint on (scraped once) and off.
              A build without the endpoint (an older --baseline) runs the
              same drain and idle worker without it: the ratio of the two
              systems is the metrics' cost.
web_pages     100,000 entries in `dead`, 1,000 in `retry`, 20 processes with
              running jobs: `reliableq web`, then 200 GETs of each page and of
              each JSON call the dead, retries, busy and overview pages make,
              one keep-alive connection: p50/p99/max milliseconds of each
              (--quick: 5,000 dead entries and 20 GETs each). The tree's build
              only.
web_idle      5,000 entries in `dead`, 20 processes: `reliableq web` (its
              default 8 threads), then 100 GETs each of the page, the
              overview's JSON and /healthz, each on a new connection as a
              browser's or a scraper's come (--quick: 20), first alone,
              then while 16 clients hold connections that sent
              "GET / HTTP/1.1\r\n" and nothing more, each opening a new one
              as soon as the server closes it: p50/p99/max ms of each, and
              the GETs that got no answer within 10 s (counted as 10 s).
              Runs for --baseline builds too.
"""

import http.client
import json
import random
import socket
import subprocess
import threading
import time

from ..processes import stop_process
from ..resp import encode
from ..servers import free_port
from .common import BenchError, log

WEB_PAGE_REQUESTS = 200
DEAD_ENTRIES = 100000
QUICK_WEB_PAGE_REQUESTS = 20
QUICK_DEAD_ENTRIES = 5000
PER_PAGE = 25
RETRY_ENTRIES = 1000
FAKE_PROCESSES = 20
TARGET_WEB_P99_MS = 50.0


def has_http_endpoint(program):
    """Whether this build of reliableq has `worker --http` (older ones do not)."""
    with open(program, "rb") as f:
        return b"/healthz" in f.read()


class Scraper(threading.Thread):
    """GETs /metrics every `interval` seconds until stopped; counts the
    answers (a refused connection before the worker listens is skipped)."""

    def __init__(self, port, interval=1.0):
        super().__init__(daemon=True)
        self.port = port
        self.interval = interval
        self.done = threading.Event()
        self.scrapes = 0
        self.bytes = 0

    def run(self):
        while not self.done.wait(self.interval):
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                connection.request("GET", "/metrics")
                response = connection.getresponse()
                body = response.read()
                connection.close()
                if response.status == 200:
                    self.scrapes += 1
                    self.bytes = len(body)
            except OSError:
                pass

    def stop(self):
        self.done.set()
        self.join(timeout=5)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError("no VmRSS for pid %d" % pid)


def idle_rss(bench, http_port):
    """Starts an idle worker (-c 25), waits until it registered and settled,
    scrapes it once when it serves HTTP, and returns its resident set."""
    r = bench.runner
    r.flush()
    command = r.reliableq_worker(25)
    if http_port:
        command += ["--http", "127.0.0.1:%d" % http_port]
    worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while r.redis.call("SCARD", "processes") != 1:
            if worker.poll() is not None or time.monotonic() > deadline:
                raise BenchError("the idle worker did not register (exit %s)" % worker.poll())
            time.sleep(0.05)
        time.sleep(1.0)
        if http_port:
            connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=2)
            connection.request("GET", "/metrics")
            connection.getresponse().read()
            connection.close()
        time.sleep(1.0)
        return rss_kb(worker.pid)
    finally:
        stop_process(worker, grace=30)


def metrics(bench):
    r = bench.runner
    on = has_http_endpoint(r.paths["worker"])
    port = free_port() if on else None
    scraper = None
    redis = ["--redis", r.redis.url] + (["--http", "127.0.0.1:%d" % port] if on else [])
    if on:
        scraper = Scraper(port)
        scraper.start()
    try:
        out = bench.drain("metrics", 25, bench.jobs, redis=redis)
    finally:
        if scraper:
            scraper.stop()
    out["metrics_endpoint"] = on
    if scraper:
        out["scrapes"] = scraper.scrapes
        out["metrics_bytes"] = scraper.bytes
    bench.step("metrics: idle worker RSS, endpoint %s" % ("on" if on else "absent"))
    out["idle_rss_kb"] = idle_rss(bench, free_port() if on else None)
    if on:
        out["idle_rss_kb_without_http"] = idle_rss(bench, None)
    plain = bench.results.get("drain_c25")
    if plain:
        out["ratio_vs_drain_c25"] = round(out["jobs_per_sec"] / plain["jobs_per_sec"], 3)
    bench.emit(out)


# --- web_pages ---------------------------------------------------------------

def seed(redis, dead_entries):
    """Writes the dead and retry entries and the process records through
    redis-cli --pipe (one stream of commands, a few seconds)."""
    now = time.time()
    rng = random.Random(17)
    commands = []
    for i in range(dead_entries):
        job = {"class": "PaymentJob", "args": [i, "card-%d" % i], "queue": "default",
               "jid": "%024x" % i, "retry": True, "created_at": now - 3600,
               "enqueued_at": now - 3600, "failed_at": now - 3000, "retry_count": 25,
               "error_class": "RuntimeError", "error_message": "card declined %d" % i}
        commands.append(encode("ZADD", "dead", "%.6f" % (now - rng.random() * 86400),
                             json.dumps(job)))
    for i in range(RETRY_ENTRIES):
        job = {"class": "EmailJob", "args": [i], "queue": "mail", "jid": "r%023x" % i,
               "retry": True, "retry_count": 1, "error_class": "Timeout",
               "error_message": "smtp timed out"}
        commands.append(encode("ZADD", "retry", "%.6f" % (now + 60 + i), json.dumps(job)))
    for p in range(FAKE_PROCESSES):
        identity = "web-bench-%02d:%d:%012x" % (p, 1000 + p, p)
        info = {"hostname": "web-bench-%02d" % p, "pid": 1000 + p, "tag": "bench",
                "concurrency": 25, "queues": ["default"], "labels": [],
                "identity": identity, "started_at": now - 600}
        commands.append(encode("SADD", "processes", identity))
        commands.append(encode("HSET", identity, "info", json.dumps(info), "busy", "5",
                             "beat", "%.3f" % now, "quiet", "false", "rss", "9000"))
        for t in range(5):
            work = {"queue": "default", "run_at": int(now),
                    "payload": json.dumps({"class": "PaymentJob", "args": [t],
                                           "jid": "w%02d%021x" % (p, t), "queue": "default"})}
            commands.append(encode("HSET", identity + ":work", "tid%d" % t, json.dumps(work)))
        commands.append(encode("EXPIRE", identity, "600"))
    done = subprocess.run(["redis-cli", "-s", redis.sock, "--pipe"],
                          input=b"".join(commands), capture_output=True, timeout=300)
    if done.returncode != 0 or b"errors: 0" not in done.stdout:
        raise BenchError("seeding through redis-cli --pipe failed: %s" % (
            done.stdout + done.stderr).decode(errors="replace")[-300:])


def timed_gets(port, path, count):
    """`count` GETs of `path` on one keep-alive connection; milliseconds each."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            times.append((time.perf_counter() - start) * 1000)
            if response.status != 200:
                raise BenchError("GET %s: HTTP %d: %s" % (path, response.status, body[:200]))
    finally:
        connection.close()
    return times


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def put_times(out, key, times):
    """The p50, p99 and max of `times` (ms) as KEY_p50_ms, ..._p99_ms, ..._max_ms."""
    out[key + "_p50_ms"] = round(percentile(times, 0.5), 2)
    out[key + "_p99_ms"] = round(percentile(times, 0.99), 2)
    out[key + "_max_ms"] = round(max(times), 2)


def start_web(r, port):
    """`reliableq web` on 127.0.0.1:`port`, returned once /healthz answers."""
    web = subprocess.Popen([r.paths["worker"], "web", "--redis", r.redis.url,
                            "--http", "127.0.0.1:%d" % port],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while True:
        try:
            timed_gets(port, "/healthz", 1)
            return web
        except (OSError, BenchError):
            if web.poll() is not None or time.monotonic() > deadline:
                stop_web(web)
                raise BenchError("reliableq web did not start (exit %s)" % web.poll())
            time.sleep(0.05)


def stop_web(web):
    stop_process(web, grace=10)


def web_pages(bench):
    r = bench.runner
    if bench.system != "reliableq":
        log("bench: web_pages measures the tree's build only; skipped for %s" % bench.system)
        return
    r.flush()
    dead = QUICK_DEAD_ENTRIES if bench.quick else DEAD_ENTRIES
    requests = QUICK_WEB_PAGE_REQUESTS if bench.quick else WEB_PAGE_REQUESTS
    pages_in_dead = dead // PER_PAGE
    bench.step("web_pages: %d dead, %d retries, %d processes" % (
        dead, RETRY_ENTRIES, FAKE_PROCESSES))
    seed(r.redis, dead)
    port = free_port()
    web = start_web(r, port)
    try:
        # The dashboard's pages are one embedded document and script; what
        # they show comes from the JSON calls.
        dead_page = "/api/sets/dead?per_page=%d&page=" % PER_PAGE
        pages = [("page", "/"), ("app_js", "/assets/app.js"),
                 ("dead_json_first", dead_page + "1"),
                 ("dead_json_middle", dead_page + str(pages_in_dead // 2)),
                 ("dead_json_last", dead_page + str(pages_in_dead)),
                 ("retries_json", "/api/sets/retry?page=1&per_page=%d" % PER_PAGE),
                 ("busy_json", "/api/busy"),
                 ("overview_json", "/api/overview")]
        out = dict(scenario="web_pages", system=bench.system, dead=dead,
                   retries=RETRY_ENTRIES, processes=FAKE_PROCESSES, requests_each=requests)
        worst = 0.0
        for name, path in pages:
            # The first GET warms the connection and Redis' pages.
            timed_gets(port, path, 1)
            put_times(out, name, timed_gets(port, path, requests))
            worst = max(worst, out["%s_p99_ms" % name])
        out["worst_p99_ms"] = round(worst, 2)
        out["target_p99_ms"] = TARGET_WEB_P99_MS
        out["met"] = worst < TARGET_WEB_P99_MS
        bench.emit(out)
    finally:
        stop_web(web)


# --- web_idle ----------------------------------------------------------------

IDLE_CLIENTS = 16
IDLE_PROBE_TIMEOUT_S = 10.0
IDLE_REQUESTS = 100
QUICK_IDLE_REQUESTS = 20


class IdleClients:
    """`count` threads, each holding a connection that sent a request line
    and nothing more; when the server closes it, a new one. Stopped by
    stop(), within a second."""

    def __init__(self, port, count):
        self.port = port
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.hold, daemon=True) for _ in range(count)]
        self.connections = 0

    def hold(self):
        while not self.done.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"GET / HTTP/1.1\r\n")
                    self.connections += 1
                    while not self.done.is_set():
                        try:
                            if not s.recv(1):
                                break
                        except socket.timeout:
                            continue
            except OSError:
                self.done.wait(0.05)

    def start(self):
        for thread in self.threads:
            thread.start()
        time.sleep(0.5)

    def stop(self):
        self.done.set()
        for thread in self.threads:
            thread.join(timeout=5)


def fresh_gets(port, path, count):
    """`count` GETs of `path`, each on a new connection; milliseconds each,
    IDLE_PROBE_TIMEOUT_S for one that got no answer; and how many did not."""
    times, failed = [], 0
    for _ in range(count):
        start = time.perf_counter()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port,
                                                    timeout=IDLE_PROBE_TIMEOUT_S)
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            connection.close()
            ok = response.status == 200
        except OSError:
            ok = False
        elapsed = (time.perf_counter() - start) * 1000
        if not ok:
            failed += 1
            elapsed = max(elapsed, IDLE_PROBE_TIMEOUT_S * 1000)
        times.append(elapsed)
    return times, failed


def web_idle(bench):
    r = bench.runner
    r.flush()
    requests = QUICK_IDLE_REQUESTS if bench.quick else IDLE_REQUESTS
    bench.step("web_idle: %d idle clients" % IDLE_CLIENTS)
    seed(r.redis, QUICK_DEAD_ENTRIES)
    port = free_port()
    web = start_web(r, port)
    try:
        out = dict(scenario="web_idle", system=bench.system, idle_clients=IDLE_CLIENTS,
                   requests_each=requests)
        pages = [("page", "/"), ("overview_json", "/api/overview"), ("healthz", "/healthz")]
        for phase in ("alone", "idle16"):
            idle = IdleClients(port, IDLE_CLIENTS) if phase == "idle16" else None
            if idle:
                idle.start()
            try:
                for name, path in pages:
                    times, failed = fresh_gets(port, path, requests)
                    put_times(out, "%s_%s" % (name, phase), times)
                    out["%s_%s_unanswered" % (name, phase)] = failed
            finally:
                if idle:
                    idle.stop()
                    out["idle_connections_opened"] = idle.connections
        bench.emit(out)
    finally:
        stop_web(web)
