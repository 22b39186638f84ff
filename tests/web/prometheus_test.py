#!/usr/bin/env python3
"""A real Prometheus scrapes a worker (`reliableq worker --http`) and
`reliableq web`, and its HTTP API shows that the series exist and move.

It starts its own redis-server (a unix socket in a temporary directory), a
worker serving `default` with the demo jobs, `reliableq web`, and
`prometheus` scraping both every second, all on loopback ports of their own;
every process is stopped by its PID at the end, also on failure.

Checked through Prometheus' /api/v1/query, after jobs were pushed the way a
Ruby client pushes them:
- both targets are up;
- the worker's counters by class and queue equal what ran: processed,
  failed and retried for a failing class, the duration histogram's count,
  and a class the worker has not registered counted under class="other";
- the worker's gauges (concurrency, busy threads) and process metrics exist;
- the web's cluster gauges move: the size of a queue nobody serves, the
  retry set, the dead set.

Environment: RELIABLEQ_BIN (the reliableq program), RELIABLEQ_DEMO_PLUGIN
(the demo job classes). Exits 0 when every check passed, 1 otherwise.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

# The shared Python tooling in tools/lib, found in the nearest folder above
# this one that holds it.
LIB = os.path.dirname(os.path.realpath(__file__))
while not os.path.isdir(os.path.join(LIB, "tools", "lib")) and LIB != os.path.dirname(LIB):
    LIB = os.path.dirname(LIB)
sys.path.insert(0, os.path.join(LIB, "tools", "lib"))
from rqtools.servers import RedisServer, free_port  # noqa: E402

BIN = os.environ.get("RELIABLEQ_BIN", "build/src/cli/reliableq")
PLUGIN = os.environ.get("RELIABLEQ_DEMO_PLUGIN", "build/examples/libdemo_jobs.so")
DEADLINE_SECONDS = 30


class Failure(Exception):
    pass


def wait_until(what, check, seconds=DEADLINE_SECONDS):
    """Calls check() until it returns something truthy; fails naming `what`."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, ValueError, KeyError, IndexError, Failure) as error:
            last = error
        time.sleep(0.2)
    raise Failure("timed out after %d s waiting for %s (last: %r)" % (seconds, what, last))


def http_get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


class Processes:
    """Starts processes and stops every one of them by PID."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.running = []

    def start(self, name, command):
        log = open(os.path.join(self.workdir, name + ".log"), "w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.running.append((name, process))
        return process

    def log_tail(self, name):
        path = os.path.join(self.workdir, name + ".log")
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-15:])

    def stop_all(self):
        for _, process in reversed(self.running):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in reversed(self.running):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def sidekiq_job(job_class, queue, jid, args=None):
    """A job as Ruby Sidekiq's client writes it."""
    return json.dumps({"class": job_class, "args": args or [], "queue": queue, "jid": jid,
                       "retry": True, "created_at": time.time(), "enqueued_at": time.time()})


class Prometheus:
    def __init__(self, port):
        self.base = "http://127.0.0.1:%d" % port

    def query(self, expression):
        """The instant vector of `expression` as {labels-as-tuple: value}."""
        url = self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        body = json.loads(http_get(url))
        if body.get("status") != "success":
            raise Failure("query %s failed: %s" % (expression, body))
        return {tuple(sorted(sample["metric"].items())): float(sample["value"][1])
                for sample in body["data"]["result"]}

    def value(self, expression):
        """The one value of `expression`, or None while it has no sample."""
        samples = self.query(expression)
        if len(samples) > 1:
            raise Failure("%s has %d series, expected one: %s" % (
                expression, len(samples), samples))
        return next(iter(samples.values())) if samples else None

    def wait_value(self, expression, expected):
        def reached():
            return self.value(expression) == expected
        wait_until("%s == %s" % (expression, expected), reached)


def run(workdir):
    processes = Processes(workdir)
    try:
        redis = RedisServer(os.path.join(workdir, "redis"), timeout=30)
        processes.running.append(("redis", redis.start(limit=DEADLINE_SECONDS).proc))
        url = redis.url

        worker_port, web_port, prometheus_port = free_port(), free_port(), free_port()
        processes.start("worker", [BIN, "worker", "--redis", url, "-r", PLUGIN, "-c", "4",
                                   "-q", "default", "--http", "127.0.0.1:%d" % worker_port])
        processes.start("web", [BIN, "web", "--redis", url, "--http",
                                "127.0.0.1:%d" % web_port])
        for name, port in (("worker", worker_port), ("web", web_port)):
            wait_until("%s's /metrics" % name,
                       lambda port=port: "reliableq_" in http_get(
                           "http://127.0.0.1:%d/metrics" % port))

        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                    "scrape_configs:\n"
                    "  - job_name: worker\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n"
                    "  - job_name: web\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % (worker_port, web_port))
        processes.start("prometheus", [
            "prometheus", "--config.file=" + config,
            "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
            "--web.listen-address=127.0.0.1:%d" % prometheus_port,
            "--log.level=warn"])
        prometheus = Prometheus(prometheus_port)
        wait_until("prometheus to answer", lambda: prometheus.query("up") is not None)
        prometheus.wait_value('up{job="worker"}', 1.0)
        prometheus.wait_value('up{job="web"}', 1.0)

        # Before any job: the web's queue gauge of a queue nobody serves is
        # seen at 0 once there is such a queue, so that the move is visible.
        redis.call("SADD", "queues", "unserved")
        batch = []
        for i in range(20):
            batch.append(sidekiq_job("NoopJob", "default", "noop%02d" % i))
        batch.append(sidekiq_job("FailingJob", "default", "failing01"))
        batch.append(sidekiq_job("NoSuchJob", "default", "unknown01"))
        for payload in batch:
            redis.call("LPUSH", "queue:default", payload)
        redis.call("SADD", "queues", "default")
        for i in range(7):
            redis.call("LPUSH", "queue:unserved", sidekiq_job("NoopJob", "unserved", "u%02d" % i))
        redis.call("ZADD", "dead", str(time.time()),
                  sidekiq_job("NoopJob", "default", "dead01"))

        labels = 'class="NoopJob",queue="default"'
        prometheus.wait_value("reliableq_jobs_processed_total{%s}" % labels, 20.0)
        prometheus.wait_value('reliableq_jobs_failed_total{class="FailingJob",queue="default"}',
                              1.0)
        prometheus.wait_value('reliableq_jobs_retried_total{class="FailingJob",queue="default"}',
                              1.0)
        # An unregistered class is a label value nobody chose: "other".
        prometheus.wait_value('reliableq_jobs_failed_total{class="other",queue="default"}', 1.0)
        if prometheus.query('reliableq_jobs_failed_total{class="NoSuchJob"}'):
            raise Failure("an unregistered class made a series of its own")
        prometheus.wait_value('reliableq_job_duration_seconds_count{class="NoopJob"}', 20.0)
        prometheus.wait_value('reliableq_concurrency{job="worker"}', 4.0)
        for series in ("reliableq_busy_threads", "reliableq_job_pickup_latency_seconds_bucket",
                       "reliableq_fetch_round_trip_seconds_count",
                       "reliableq_ack_round_trip_seconds_count",
                       'process_resident_memory_bytes{job="worker"}'):
            wait_until(series, lambda series=series: prometheus.query(series))

        # The web's cluster-wide gauges.
        prometheus.wait_value('reliableq_queue_size{queue="unserved"}', 7.0)
        prometheus.wait_value("reliableq_retry_set_size", 2.0)  # FailingJob, NoSuchJob
        prometheus.wait_value("reliableq_dead_set_size", 1.0)
        prometheus.wait_value("reliableq_processes", 1.0)
        # ... and they move.
        redis.call("LPUSH", "queue:unserved", sidekiq_job("NoopJob", "unserved", "u99"))
        redis.call("ZADD", "dead", str(time.time()), sidekiq_job("NoopJob", "default", "dead02"))
        prometheus.wait_value('reliableq_queue_size{queue="unserved"}', 8.0)
        prometheus.wait_value("reliableq_dead_set_size", 2.0)
        wait_until("a queue latency above 0",
                   lambda: (prometheus.value(
                       'reliableq_queue_latency_seconds{queue="unserved"}') or 0) > 0)
        print("prometheus test: every series checked exists and moved")
        return 0
    except Failure as failure:
        print("prometheus test FAILED: %s" % failure, file=sys.stderr)
        for name in ("worker", "web", "prometheus"):
            tail = processes.log_tail(name)
            if tail:
                print("--- end of %s's log:\n%s" % (name, tail), file=sys.stderr)
        return 1
    finally:
        processes.stop_all()


def main():
    for program in ("redis-server", "redis-cli", "prometheus"):
        if shutil.which(program) is None:
            print("prometheus test FAILED: %s is not installed (tools/setup installs it)" %
                  program, file=sys.stderr)
            return 1
    workdir = tempfile.mkdtemp(prefix="rq-prometheus-")
    try:
        return run(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
