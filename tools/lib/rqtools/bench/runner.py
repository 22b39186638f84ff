"""tools/bench's Redis (started for the run, stopped by PID) and its runner
of the load generator, reliableq-bench."""

import json
import os
import shutil
import subprocess
import time

from ..processes import wait_until
from ..servers import RedisServer, ServerError, free_port
from .common import RUBY_JOBS, BenchError, log


def start_redis(workdir, network=False, tcp=False):
    """The bench's private redis-server on a unix socket in `workdir` (and,
    for the network scenarios, on TCP and TLS ports of 127.0.0.1; for
    `tcp`, on a TCP port: a replica connects there), no persistence."""
    redis = RedisServer(workdir, port=free_port() if network or tcp else None,
                        tls_port=free_port() if network else None, timeout=60)
    try:
        return redis.start()
    except ServerError as e:
        raise BenchError(str(e))


REPLICA_PROBE_KEY = "reliableq-bench:replica-probe"


def start_replica(workdir, master):
    """A redis-server replicating the bench's Redis over loopback TCP, on a
    unix socket of its own (in workdir/replica); returned once it is in
    sync and a WAIT 1 is answered at once."""
    if master.port is None:
        raise BenchError("the bench's Redis has no TCP port for a replica")
    # The first sync starts at once instead of after Redis's default 5 s
    # wait for more replicas.
    master.call("CONFIG", "SET", "repl-diskless-sync-delay", "0")
    replica = RedisServer(os.path.join(workdir, "replica"), timeout=60)
    try:
        replica.start(replica_of=master.port)
    except ServerError as e:
        raise BenchError(str(e))
    log_path = os.path.join(replica.dir, "redis.log")
    try:
        def in_sync():
            seen = master.info("replication").get("slave0", "")
            return (replica.info("replication").get("master_link_status") == "up"
                    and "state=online" in seen)
        wait_until("the replica syncs", in_sync, 30)
        # After a diskless full sync (Redis's default) the master streams
        # nothing to the replica before the replica's first periodic
        # acknowledgement, up to a second later: a WAIT meanwhile waits for
        # it. The measured runs start once a WAIT is answered at once.
        fast = [0]

        def wait_is_fast():
            fast[0] = fast[0] + 1 if wait_probe(master) < 0.05 else 0
            return fast[0] >= 3
        wait_until("WAIT 1 answers at once", wait_is_fast, 30, step=0)
        master.call("DEL", REPLICA_PROBE_KEY)
    except RuntimeError as e:
        replica.stop()
        raise BenchError("%s (see %s)" % (e, log_path))
    return replica


def wait_probe(master):
    """Seconds that a write and a `WAIT 1 5000` after it take, on one
    connection (WAIT counts that connection's writes)."""
    with master.client(10) as r:
        start = time.monotonic()
        r.pipeline([("SET", REPLICA_PROBE_KEY, "1"), ("WAIT", "1", "5000")])
        return time.monotonic() - start


class Runner:
    def __init__(self, args, paths, redis, workdir):
        self.args = args
        self.paths = paths
        self.redis = redis
        self.workdir = workdir
        self.current = None  # the reliableq-bench process running now
        self.logs = 0

    def bench(self, verb, options, worker=None, env=None, label="", redis_url=None):
        """Runs reliableq-bench (on `redis_url`, else the bench's Redis) and
        returns its JSON result."""
        command = [self.paths["bench"], verb, "--redis", redis_url or self.redis.url] + options
        worker_log = None
        if worker:
            self.logs += 1
            worker_log = os.path.join(self.workdir, "worker-%d-%s.log" % (self.logs, label))
            command += ["--log", worker_log, "--"] + worker
        self.current = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                        env=dict(os.environ, **(env or {})))
        # On an exception (Ctrl-C, a time-out) self.current stays set, and
        # stop() ends it.
        out, _ = self.current.communicate(timeout=1800)
        code = self.current.returncode
        self.current = None
        if code != 0:
            detail = ""
            if worker_log and os.path.exists(worker_log):
                with open(worker_log, errors="replace") as f:
                    detail = "".join(f.readlines()[-20:])
            raise BenchError("reliableq-bench %s failed (exit %d)%s" % (
                verb, code, "; worker log:\n" + detail if detail else ""))
        result = json.loads(out.strip().splitlines()[-1])
        if worker and result.get("worker_exit", 0) != 0:
            # The figures stand (the jobs were drained and counted), but a
            # worker that does not stop cleanly is a bug worth seeing.
            with open(worker_log, errors="replace") as f:
                tail = "".join(f.readlines()[-5:])
            log("bench: WARNING: %s exited with status %d when stopped; end of its log:\n%s" % (
                os.path.basename(worker[0]), result["worker_exit"], tail))
        return result

    def stop(self):
        if self.current is not None and self.current.poll() is None:
            # It stops its worker on TERM (and the worker also gets TERM if
            # it dies: PR_SET_PDEATHSIG).
            self.current.terminate()
            try:
                self.current.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.current.kill()
                self.current.wait()

    def flush(self):
        self.redis.call("FLUSHALL")

    def push(self, jobs, queues=("default",), single_threads=0, wait_replicas=0,
             shared_client=False, unique=False, sequence_keys=0):
        options = ["--jobs", str(jobs), "--queues", ",".join(queues)]
        if sequence_keys:
            options += ["--sequence-keys", str(sequence_keys)]
        if single_threads:
            options += ["--single", "--threads", str(single_threads)]
            if shared_client:
                options += ["--shared-client"]
            if unique:
                options += ["--unique"]
        if wait_replicas:
            options += ["--wait-replicas", str(wait_replicas)]
        return self.bench("push", options)

    def reliableq_worker(self, concurrency, queues=(("default", 0),), redis=None):
        """The worker's command line; `redis` replaces the unix socket URL
        (and its further options, such as a CA file)."""
        command = [self.paths["worker"], "worker", "-r", self.paths["plugin"],
                   "-c", str(concurrency)] + (redis or ["--redis", self.redis.url])
        for name, weight in queues:
            command += ["-q", "%s,%d" % (name, weight) if weight else name]
        return command

    def redis_benchmark(self, requests, size):
        """Runs redis-benchmark's pipelined LPUSH on our Redis (its key is
        `mylist`) and returns its requests per second."""
        if shutil.which("redis-benchmark") is None:
            raise BenchError("redis-benchmark is not installed (it comes with redis-server)")
        command = ["redis-benchmark", "-s", self.redis.sock, "-P", "16", "-t", "lpush",
                   "-n", str(requests), "-d", str(size), "--csv"]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=600)
        for line in done.stdout.splitlines():
            cells = [cell.strip('"') for cell in line.strip().split(",")]
            if len(cells) > 1 and cells[0] == "LPUSH":
                return float(cells[1])
        raise BenchError("redis-benchmark printed no LPUSH rate (exit %d): %s" % (
            done.returncode, (done.stdout + done.stderr).strip()[-500:]))

    def sidekiq_worker(self, concurrency, queues=("default",)):
        command = ["sidekiq", "-r", RUBY_JOBS, "-c", str(concurrency), "-t", "5"]
        for queue in queues:
            command += ["-q", queue]
        return command

    def sidekiq_env(self, fetch):
        env = {"RELIABLEQ_BENCH_REDIS_SOCKET": self.redis.sock}
        if fetch == "gitlab":
            env["RELIABLEQ_BENCH_FETCH"] = "gitlab"
        return env
