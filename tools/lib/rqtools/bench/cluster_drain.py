"""tools/bench's cluster_drain scenario: the drain of queue groups on a
3-primary Redis Cluster against the same groups on one Redis, in one run.

The topologies are started for the scenario, on loopback TCP: a cluster of
three primaries (redis-server --cluster-enabled yes, `redis-cli --cluster
create`, no replicas: a replica's copy of every write would cost CPU that
the one Redis does not spend, on the same two cores, and the comparison is of
the topology alone), one plain redis-server, and between them a cluster of
one node that owns every slot (cluster_drain_one_node_cluster): what cluster
mode costs on one server (the slot of every key, the workers' cluster
connections), apart from what spreading the groups over three costs. The jobs go into three queue
groups (layout 2), one in a slot of each primary, on both: only where the
groups live differs. Each run pushes N NoopJob spread over the groups
(`reliableq-bench push` with the group's URL), then starts one `reliableq
worker` per group (the same -c in both), and polls every group's queue and
working lists until they are empty. The runs alternate (three primaries,
one node, one Redis, then back), --repeat times; the median run of each is
reported.

Figures: jobs/s; Redis CPU per job (INFO cpu, user + sys, summed over the
primaries), from the first poll that sees a queue shorter than before to
the one that sees everything empty; worker CPU per job (the three workers'
/proc/<pid>/stat over the same interval); and each as a ratio cluster / one
Redis. On a 2-core machine the cluster's rate is not the point (three
primaries and three workers share the cores); the Redis CPU per job is, and
it should not grow: every command of a job still goes to one node, in one
slot.
"""

import os
import time

from ..processes import spawn
from ..resp import Redis
from ..servers import HOST, Cluster, RedisServer, ServerError, free_port
from ..slots import key, key_slot
from .common import BenchError, log

GROUPS = 3
QUEUE = "default"
POLL_SECONDS = 0.002


def cpu_seconds(conn):
    """The CPU time (user + sys) of the Redis `conn` reaches."""
    fields = conn.info("cpu")
    return float(fields["used_cpu_user"]) + float(fields["used_cpu_sys"])


class Topology:
    """The servers of one side and, for each group, its URL and the port of
    the server that holds it."""

    def __init__(self, workdir, primaries):
        """`primaries`: 3 (a cluster of three), 1 (a cluster of one node
        that owns every slot) or 0 (a plain redis-server)."""
        self.cluster = None
        self.name = {3: "cluster", 1: "one_node_cluster", 0: "one_redis"}[primaries]
        directory = os.path.join(workdir, self.name.replace("_", "-"))
        try:
            if primaries:
                self.cluster = Cluster(directory, primaries=primaries, replicas=0,
                                       node_timeout_ms=None).start()
                self.servers = self.cluster.nodes
            else:
                self.servers = [RedisServer(directory, port=free_port(), unix=False).start()]
        except ServerError as e:
            raise BenchError("%s (see %s)" % (e, directory))
        self.groups = self._groups()

    def _groups(self):
        """{group: port}: one group in the first slot of each primary (the
        one Redis takes the same names)."""
        firsts = [0, 5461, 10923]  # redis-cli's split of 16384 slots over 3
        groups = {}
        for i, slot in enumerate(firsts):
            n = 0
            while key_slot("bench%d-%d" % (i, n)) != slot:
                n += 1
            groups["bench%d-%d" % (i, n)] = None
        if self.cluster:
            for g in groups:
                slot = self.servers[0].call("CLUSTER", "KEYSLOT", "{%s}" % g)
                if slot != key_slot(g):
                    raise BenchError("CRC16 of %s: %d here, %d in Redis" % (g, key_slot(g), slot))
                groups[g] = self.cluster.owner(slot)
            if len(set(groups.values())) != len(self.servers):
                raise BenchError("the groups %s are not on %d primaries" % (
                    groups, len(self.servers)))
        else:
            for g in groups:
                groups[g] = self.servers[0].port
        return groups

    def url(self, group):
        if self.cluster:
            return self.cluster.url(group)
        return "redis://%s:%d/0?group=%s" % (HOST, self.servers[0].port, group)

    def stop(self):
        for s in self.servers:
            s.stop()


def process_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain_once(bench, topo, jobs_per_group, concurrency):
    """Pushes, drains, and returns the figures of one run."""
    runner = bench.runner
    conns = {s.port: Redis((HOST, s.port), timeout=60) for s in topo.servers}
    workers = []
    try:
        for conn in conns.values():
            conn.call("FLUSHALL")
        for g in topo.groups:
            runner.bench("push", ["--jobs", str(jobs_per_group), "--queues", QUEUE],
                         redis_url=topo.url(g))
        total = jobs_per_group * len(topo.groups)
        by_port = {}
        for g, port in topo.groups.items():
            by_port.setdefault(port, []).append(g)
        for g in topo.groups:
            runner.logs += 1
            path = os.path.join(runner.workdir, "worker-%d-%s-%s.log" % (
                runner.logs, topo.name, g))
            command = runner.reliableq_worker(concurrency, ((QUEUE, 0),),
                                              ["--redis", topo.url(g)])
            workers.append((spawn(command, path), path))
        working = {g: [] for g in topo.groups}
        start = end = None
        cpu_start = {}
        deadline = time.monotonic() + 600
        while end is None:
            if time.monotonic() > deadline:
                raise BenchError("cluster_drain: not drained within 600 s")
            for proc, path in workers:
                if proc.poll() is not None:
                    raise BenchError("cluster_drain: a worker exited (%d); see %s" % (
                        proc.returncode, path))
            left, empty = 0, True
            for port, groups in by_port.items():
                commands = []
                for g in groups:
                    commands.append(("LLEN", key(g, "queue:" + QUEUE)))
                    commands.append(("HKEYS", key(g, "registry")))
                    commands += [("LLEN", w) for w in working[g]]
                replies = conns[port].pipeline(commands)
                i = 0
                for g in groups:
                    queued, registered = replies[i], replies[i + 1]
                    held = sum(replies[i + 2:i + 2 + len(working[g])])
                    i += 2 + len(working[g])
                    left += queued
                    # Known working lists empty, and none appeared since.
                    names = [key(g, "working:%s:%s" % (r, QUEUE)) for r in registered]
                    if queued or held or not registered or names != working[g]:
                        empty = False
                    working[g] = names
            now = time.monotonic()
            if start is None and left < total:
                start = now
                cpu_start = {"redis": sum(cpu_seconds(c) for c in conns.values()),
                             "worker": sum(process_cpu_seconds(p.pid) for p, _ in workers)}
            elif start is not None and empty:
                end = now
                redis_cpu = sum(cpu_seconds(c) for c in conns.values()) - cpu_start["redis"]
                worker_cpu = sum(process_cpu_seconds(p.pid)
                                 for p, _ in workers) - cpu_start["worker"]
                break
            time.sleep(POLL_SECONDS)
        for proc, _ in workers:
            proc.terminate()
        for proc, path in workers:
            if proc.wait(timeout=60) != 0:
                log("bench: WARNING: a worker exited with status %d when stopped; see %s" % (
                    proc.returncode, path))
        processed = 0
        for g, port in topo.groups.items():
            processed += int(conns[port].call("GET", key(g, "stat:processed")) or 0)
        if processed != total:
            raise BenchError("cluster_drain: %d jobs queued but stat:processed is %d" % (
                total, processed))
        seconds = end - start
        return {"jobs": total, "seconds": round(seconds, 4),
                "jobs_per_sec": round(total / seconds, 1),
                "redis_cpu_us_per_job": round(redis_cpu * 1e6 / total, 2),
                "worker_cpu_us_per_job": round(worker_cpu * 1e6 / total, 2)}
    finally:
        for proc, _ in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for conn in conns.values():
            conn.close()


def median_run(runs):
    runs = sorted(runs, key=lambda r: r["jobs_per_sec"])
    out = dict(runs[(len(runs) - 1) // 2])
    if len(runs) > 1:
        out["runs_jobs_per_sec"] = [round(r["jobs_per_sec"]) for r in runs]
        out["runs_redis_cpu_us_per_job"] = [r["redis_cpu_us_per_job"] for r in runs]
    return out


def run(bench):
    if bench.system != "reliableq":
        log("bench: cluster_drain measures the tree's build only; skipped for %s" % bench.system)
        return
    # A NoopJob drains at 100,000s per second: --quick's 2,000 jobs would
    # last a few milliseconds, shorter than the CPU clock's tick.
    jobs_per_group = max(1, max(bench.jobs, 30000) // GROUPS)
    concurrency = 8
    sides = {}
    try:
        bench.step("cluster_drain: starting a 3-primary cluster, a one-node cluster and one "
                   "Redis on loopback TCP")
        for primaries in (3, 1, 0):
            topo = Topology(bench.runner.workdir, primaries)
            sides[topo.name] = topo
        log("bench: groups %s" % ", ".join("%s (slot %d, port %d)" % (g, key_slot(g), p)
                                          for g, p in sides["cluster"].groups.items()))
        runs = {name: [] for name in sides}
        for i in range(bench.args.repeat):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for side in order:
                bench.step("cluster_drain (%s, run %d of %d): %d NoopJob in each of %d groups, "
                           "a `reliableq worker -c %d` per group" % (
                               side.replace("_", " "), i + 1, bench.args.repeat,
                               jobs_per_group, GROUPS, concurrency))
                runs[side].append(drain_once(bench, sides[side], jobs_per_group, concurrency))
    finally:
        for topo in sides.values():
            topo.stop()
    one = median_run(runs["one_redis"])
    common = {"groups": GROUPS, "workers": GROUPS, "concurrency": concurrency}
    bench.emit(dict(scenario="cluster_drain_one_redis", system=bench.system,
                    topology="one Redis, layout 2", **common, **one))
    for name, topology in (("one_node_cluster", "a one-node cluster (every slot)"),
                           ("cluster", "3 primaries, no replicas")):
        run = median_run(runs[name])
        ratios = {}
        for field, ratio in (("jobs_per_sec", "ratio_vs_one_redis"),
                             ("redis_cpu_us_per_job", "redis_cpu_ratio_vs_one_redis"),
                             ("worker_cpu_us_per_job", "worker_cpu_ratio_vs_one_redis")):
            # None when the reference measured no CPU at all (a run too short).
            ratios[ratio] = round(run[field] / one[field], 3) if one[field] else None
        scenario = "cluster_drain" if name == "cluster" else "cluster_drain_" + name
        bench.emit(dict(scenario=scenario, system=bench.system, topology=topology, **common,
                        **run, **ratios))
