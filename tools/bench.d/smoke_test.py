#!/usr/bin/env python3
"""The `bench` meson suite: runs `tools/bench --quick --json-only --no-build`
and checks that it exits 0 and prints one valid JSON object per scenario with
the fields tools/bench promises. It never looks at how fast anything was:
timing belongs to tools/bench, not to tests.

The binaries come from the environment (RELIABLEQ_BIN, RELIABLEQ_DEMO_PLUGIN,
RELIABLEQ_BENCH_BIN), as tests/bench/meson.build sets them.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "bench")

# scenario -> the numeric fields its line must carry.
EXPECTED = {
    "enqueue_bulk": ["jobs", "seconds", "jobs_per_sec", "payload_bytes", "vs_redis_benchmark"],
    "enqueue_single": ["jobs", "seconds", "jobs_per_sec", "threads", "vs_redis_benchmark"],
    "enqueue_single_8": ["jobs", "seconds", "jobs_per_sec", "threads", "vs_redis_benchmark"],
    "enqueue_redis_benchmark": ["jobs", "jobs_per_sec", "payload_bytes"],
    "drain_c25": ["jobs", "seconds", "jobs_per_sec", "rss_kb", "processed", "concurrency"],
    "drain_keyed": ["jobs", "seconds", "jobs_per_sec", "processed", "sequence_keys",
                    "vs_plain"],
    "drain_c10": ["jobs", "seconds", "jobs_per_sec", "rss_kb", "processed", "concurrency"],
    "drain_c100": ["jobs", "seconds", "jobs_per_sec", "rss_kb", "processed", "concurrency"],
    "latency": ["jobs", "p50_ms", "p99_ms", "max_ms", "idle_rss_kb", "rss_kb", "plain_p50_ms",
                "plain_p99_ms", "plain_max_ms", "plain_p99_vs_client_p99"],
    "drain_10_queues": ["jobs", "seconds", "jobs_per_sec", "rss_kb", "queues"],
    "drain_1m": ["jobs", "seconds", "jobs_per_sec", "ratio_vs_baseline"],
    "rss": ["idle_rss_kb", "load_rss_kb"],
    "queues_500": ["queues", "connections", "idle_rss_kb", "idle_seconds", "client_p50_ms",
                   "client_p99_ms", "notify_p50_ms", "notify_p99_ms", "plain_p50_ms",
                   "plain_p99_ms", "plain_p99_vs_client_p99", "traffic_idle_seconds",
                   "traffic_idle_traffic_per_sec", "traffic_idle_traffic_pushed_with_worker",
                   "traffic_idle_traffic_pushed_without"],
    "recovery": ["jobs", "cap_seconds", "back"],
    "recovery_young_redis": ["jobs", "cap_seconds", "back", "redis_uptime_at_kill_seconds"],
    "sequence_release": ["rounds", "a_back_seconds", "b_start_seconds", "b_after_a_seconds"],
    "schedule_lateness": ["jobs", "p50_ms", "p99_ms", "max_ms", "ruby_p50_ms", "ruby_p99_ms"],
    "handlers": ["jobs", "cpp_jobs_per_sec", "command_jobs_per_sec", "http_jobs_per_sec",
                 "command_vs_cpp", "http_vs_cpp"],
    "metrics": ["jobs", "seconds", "jobs_per_sec", "idle_rss_kb", "idle_rss_kb_without_http",
                "scrapes"],
    "web_pages": ["dead", "requests_each", "page_p99_ms", "dead_json_first_p99_ms",
                  "dead_json_middle_p99_ms", "retries_json_p99_ms", "busy_json_p99_ms",
                  "overview_json_p99_ms", "worst_p99_ms"],
    "cluster_drain_one_redis": ["jobs", "seconds", "jobs_per_sec", "redis_cpu_us_per_job",
                                "worker_cpu_us_per_job", "groups"],
    "cluster_drain_one_node_cluster": ["jobs", "seconds", "jobs_per_sec",
                                       "redis_cpu_us_per_job", "worker_cpu_us_per_job",
                                       "ratio_vs_one_redis", "redis_cpu_ratio_vs_one_redis"],
    "cluster_drain": ["jobs", "seconds", "jobs_per_sec", "redis_cpu_us_per_job",
                      "worker_cpu_us_per_job", "ratio_vs_one_redis",
                      "redis_cpu_ratio_vs_one_redis"],
    "push_wait": ["jobs", "bulk_no_replica_jobs_per_sec", "bulk_wait0_jobs_per_sec",
                  "bulk_wait1_jobs_per_sec", "bulk_ratio", "single8_wait0_jobs_per_sec",
                  "single8_wait1_jobs_per_sec", "single8_ratio", "shared8_wait0_jobs_per_sec",
                  "shared8_wait1_jobs_per_sec", "shared8_ratio"],
}

# Numeric fields that may be negative: a difference of two noisy figures.
SIGNED = {
    "queues_500": ["idle_redis_cpu_ms", "traffic_idle_redis_cpu_ms"],
    "push_wait": ["single8_wait_us_per_round_trip"],
}


def main():
    for name in ("RELIABLEQ_BIN", "RELIABLEQ_DEMO_PLUGIN", "RELIABLEQ_BENCH_BIN"):
        if not os.environ.get(name):
            print("smoke_test: %s is not set" % name, file=sys.stderr)
            return 1
    result = subprocess.run([sys.executable, BENCH, "--quick", "--json-only", "--no-build"],
                            stdout=subprocess.PIPE, text=True, timeout=600)
    print(result.stdout)
    if result.returncode != 0:
        print("smoke_test: tools/bench exited %d" % result.returncode, file=sys.stderr)
        return 1
    seen = {}
    stray = []  # lines that are not a scenario's JSON object
    for line in result.stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError as e:
            stray.append("not JSON (%s): %r" % (e, line))
            continue
        if not isinstance(obj, dict) or "scenario" not in obj:
            stray.append("no scenario: %r" % line)
            continue
        seen[obj["scenario"]] = obj
    failed = {}
    for scenario, fields in EXPECTED.items():
        problems = []
        obj = seen.get(scenario)
        if obj is None:
            problems.append("no line printed")
        else:
            for field in fields:
                value = obj.get(field)
                if not isinstance(value, (int, float)) or value < 0:
                    problems.append("%s is %r, not a number >= 0" % (field, value))
            for field in SIGNED.get(scenario, []):
                if not isinstance(obj.get(field), (int, float)):
                    problems.append("%s is %r, not a number" % (field, obj.get(field)))
            if obj.get("system") is None:
                problems.append("no system")
            if scenario in ("recovery", "recovery_young_redis"):
                # Jobs that were not back within the cap have no seconds.
                if not isinstance(obj.get("recovered"), bool):
                    problems.append("recovered is %r, not true or false" % obj.get("recovered"))
                elif obj["recovered"] and not isinstance(obj.get("seconds"), (int, float)):
                    problems.append("recovered, but seconds is %r" % obj.get("seconds"))
                elif obj["recovered"] and obj.get("back") != obj.get("jobs"):
                    problems.append("recovered, but %s jobs back of %s" % (
                        obj.get("back"), obj.get("jobs")))
            if "processed" in obj and obj["processed"] != obj["jobs"]:
                problems.append("%s jobs queued, %s processed" % (obj["jobs"], obj["processed"]))
        if problems:
            failed[scenario] = problems
    for problem in stray:
        print("smoke_test: " + problem, file=sys.stderr)
    for scenario, problems in failed.items():
        for problem in problems:
            print("smoke_test: %s: %s" % (scenario, problem), file=sys.stderr)
    print("smoke: %d passed, %d failed" % (len(EXPECTED) - len(failed), len(failed) + len(stray)))
    return 1 if failed or stray else 0


if __name__ == "__main__":
    sys.exit(main())
