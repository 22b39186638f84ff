"""tools/bench's readable report: the table of every scenario, the --rounds
summaries, and the targets the figures are held to."""

import os
import subprocess

from .. import ROOT
from .common import CURRENT


# The targets of issue 5.
TARGET_RATE = 150000
TARGET_VS_SIDEKIQ = 10
TARGET_P50_MS = 0.6
TARGET_P99_MS = 1.5
TARGET_RSS_KB = 16 * 1024
TARGET_1M_RATIO = 0.9

# The targets of issue 15.
TARGET_CONNECTIONS = 5
TARGET_IDLE_RSS_KB = 10 * 1024
TARGET_WAKE_P99_MS = 2.0
POLL_BOUND_MS = 100.0  # documented, reported
TARGET_RECOVERY_SECONDS = 2.0
TARGET_SCHEDULE_P99_MS = 20.0
TARGET_SINGLE_FRACTION = 0.3
TARGET_BULK_FRACTION = 0.8
TARGET_DRAIN_VS_BEFORE = 0.97

# The targets of issue 34: a plain push's pickup p99 within 1.2x of
# reliableq's own push's, and no worse than Sidekiq's; recovery on a Redis
# up 5 s within 2 s.
TARGET_PLAIN_VS_CLIENT_P99 = 1.2


def tree_state():
    """Which code was measured: the commit, and whether src/ differs from it."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        # The load generator itself does not change what is measured.
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src", "lua",
                                ":(exclude)src/meson.build"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return "not a git checkout"
    if head.returncode != 0:
        return "not a git checkout"
    return "commit %s%s" % (head.stdout.strip(),
                            " with local changes in src/ or lua/" if dirty.stdout.strip() else "")


def fmt(value, digits=0, scale=1.0):
    if value is None:
        return "-"
    value = value / scale
    return "{:,.{}f}".format(value, digits)


# Scenarios whose figures do not fit the table's columns; the issue 15
# section shows them.
OFF_TABLE = ("rss", "queues_500", "recovery", "recovery_young_redis", "sequence_release",
             "schedule_lateness", "push_wait")


def table(bench, redis_version):
    rows = [("scenario", "system", "jobs", "seconds", "jobs/s", "p50/p99/max ms", "RSS MB",
             "CPU us/job w+r", "sw/job", "ratio")]
    for system, name in bench.order:
        r = bench.by_system[system][name]
        if name in OFF_TABLE:
            continue
        latency = "-"
        if "p50_ms" in r:
            latency = "%.3f/%.3f/%.3f" % (r["p50_ms"], r["p99_ms"], r["max_ms"])
        ratio = []
        before = r.get("vs_before", {})
        for field in ("jobs_per_sec", "p99_ms"):
            if field in before:
                ratio.append("%.3f of before%s" % (before[field],
                                                    " (p99)" if field == "p99_ms" else ""))
                break
        if "vs_redis_benchmark" in r:
            ratio.append("%.3f of redis-benchmark" % r["vs_redis_benchmark"])
        for peer in bench.peers:
            if "vs_%s" % peer in r:
                ratio.append("%sx %s" % (r["vs_%s" % peer], peer))
        for base in ("drain_c25", "drain_c25_tcp"):
            if "ratio_vs_%s" % base in r:
                ratio.append("%.3f of %s" % (r["ratio_vs_%s" % base], base))
        if "ratio_vs_one_redis" in r:
            ratio.append("%s of one Redis; CPU/job: Redis %s, worker %s of it" % tuple(
                "-" if r[f] is None else "%.3f" % r[f]
                for f in ("ratio_vs_one_redis", "redis_cpu_ratio_vs_one_redis",
                          "worker_cpu_ratio_vs_one_redis")))
        if name == "handlers":
            ratio.append("command %.0f/s (%.4f of C++ %.0f/s), HTTP %.0f/s (%.4f)" % (
                r["command_jobs_per_sec"], r["command_vs_cpp"], r["cpp_jobs_per_sec"],
                r["http_jobs_per_sec"], r["http_vs_cpp"]))
        if "ratio_vs_baseline" in r:
            ratio.append("%.3f of %s-job rate" % (r["ratio_vs_baseline"],
                                                   fmt(r["baseline_jobs"])))
        rss = r.get("rss_kb")
        if name.endswith("latency"):
            rss_text = "%s idle, %s peak" % (fmt(r.get("idle_rss_kb"), 1, 1024), fmt(rss, 1, 1024))
        else:
            rss_text = fmt(rss, 1, 1024)
        cpu = "-"
        if "worker_cpu_us_per_job" in r:
            cpu = "%.1f+%.1f" % (r["worker_cpu_us_per_job"], r["redis_cpu_us_per_job"])
        rows.append((name, r["system"], fmt(r.get("jobs")), fmt(r.get("seconds"), 3),
                     fmt(r.get("jobs_per_sec")), latency, rss_text, cpu,
                     fmt(r.get("worker_switches_per_job"), 2), ", ".join(ratio) or "-"))
    print()
    print("reliableq benchmark: %d cores, Redis %s, load average now %.2f; %s%s" % (
        os.cpu_count() or 0, redis_version, os.getloadavg()[0], tree_state(),
        "; before: %s" % bench.baseline if bench.baseline else ""))
    print_rows(rows)
    print("CPU us/job w+r: CPU time of the worker + of redis-server per job during the drain;")
    print("sw/job: context switches of the worker's threads per job; RSS: peak (VmHWM).")
    rounds_table(bench)
    targets(bench)


def rounds_table(bench):
    """The --rounds summaries: each figure per round, and the ratios."""
    summaries = getattr(bench, "summaries", None)
    if not summaries:
        return
    print()
    print("%d rounds, first in each: %s" % (summaries[0]["rounds"], ", ".join(
        summaries[0]["first"])))
    rows = [("scenario", "figure", "build", "per round", "median")]
    for summary in summaries:
        for field, figure in summary.items():
            if not isinstance(figure, dict):
                continue
            if field.startswith("pooled_"):
                for system, value in figure.items():
                    rows.append((summary["scenario"], field, system, "all rounds together",
                                 "%g" % value))
                continue
            for system, _ in bench.builds:
                if system in figure:
                    rows.append((summary["scenario"], field, system, ", ".join(
                        "-" if v is None else "%g" % v for v in figure[system]),
                        "%g" % figure["median_" + system]))
            if "ratio_median" in figure:
                rows.append((summary["scenario"], field, "now / before", ", ".join(
                    "-" if v is None else "%.3f" % v for v in figure["ratios"]),
                    "%.3f (%.3f-%.3f)" % (figure["ratio_median"], figure["ratio_min"],
                                          figure["ratio_max"])))
    print_rows(rows, left=(0, 1, 2, 3))


def print_rows(rows, left=(0, 1)):
    """The columns numbered in `left` left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[j]) if j in left else cell.rjust(widths[j])
                        for j, cell in enumerate(row)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def targets(bench):
    res = bench.by_system[CURRENT]
    lines = []

    def check(label, value, ok, text):
        if value is None:
            lines.append("  %-40s not measured in this run" % label)
        else:
            lines.append("  %-40s %-28s %s" % (label, text, "met" if ok else "MISSED"))

    d25 = res.get("drain_c25", {})
    rate = d25.get("jobs_per_sec")
    check("drain c=25 >= 150,000 jobs/s", rate, rate is not None and rate >= TARGET_RATE,
          "%s jobs/s" % fmt(rate) if rate is not None else "")
    vs = d25.get("vs_sidekiq")
    check("drain c=25 >= 10x Sidekiq BasicFetch", vs, vs is not None and vs >= TARGET_VS_SIDEKIQ,
          "%sx" % vs)
    lat = res.get("latency", {})
    p50, p99 = lat.get("p50_ms"), lat.get("p99_ms")
    check("idle pickup p50 <= 0.6 ms", p50, p50 is not None and p50 <= TARGET_P50_MS,
          "%s ms" % p50)
    check("idle pickup p99 <= 1.5 ms", p99, p99 is not None and p99 <= TARGET_P99_MS,
          "%s ms" % p99)
    rss = d25.get("rss_kb")
    check("worker RSS at c=25 <= 16 MB", rss, rss is not None and rss <= TARGET_RSS_KB,
          "%s MB peak" % fmt(rss, 1, 1024) if rss is not None else "")
    ratio = res.get("drain_1m", {}).get("ratio_vs_baseline")
    check("10x queue length within 10% of rate", ratio,
          ratio is not None and ratio >= TARGET_1M_RATIO, "%s of the rate" % ratio)
    print()
    print("targets (issue 5):")
    print("\n".join(lines))
    print_idle_and_pickup_targets(bench)
    print_plain_push_targets(bench)
    print_replica_ack_rates(bench)
    print_metrics_and_dashboard_targets(bench)


def print_plain_push_targets(bench):
    """Pickup of plain pushes with no server setting, and recovery on a young
    Redis: the tree's figures, and the baseline's beside them."""
    now = bench.by_system[CURRENT]
    lat, q500 = now.get("latency"), now.get("queues_500")
    young = now.get("recovery_young_redis")
    if not lat and not q500 and not young:
        return
    print()
    print("issue 34 (plain Sidekiq-format pushes, notify-keyspace-events off; young Redis):")
    lines = []

    def pickup(label, result, prefix):
        if result is None or "%sp99_ms" % prefix not in result:
            return
        lines.append("  %-58s %s" % (label, " / ".join(
            "%.3f" % result["%s%s" % (prefix, k)] for k in ("p50_ms", "p99_ms", "max_ms"))))

    for name, result, client in (("1 queue", lat, ""), ("last of 500 queues", q500, "client_")):
        if not result:
            continue
        pickup("%s: reliableq, own push, p50/p99/max ms" % name, result, client)
        pickup("%s: reliableq, plain push" % name, result, "plain_")
        for peer in bench.peers:
            pickup("%s: %s, plain push" % (name, peer), result, "%s_plain_" % peer)
        ratio = result["plain_p99_vs_client_p99"]
        lines.append("  %-58s %-10s %s" % ("%s: plain / own push p99" % name, ratio,
                                           "met" if ratio <= TARGET_PLAIN_VS_CLIENT_P99
                                           else "MISSED (<= %g)" % TARGET_PLAIN_VS_CLIENT_P99))
        for peer in bench.peers:
            key = "plain_p99_vs_%s_plain_p99" % peer
            if key in result:
                lines.append("  %-58s %-10s %s" % ("%s: plain push p99, reliableq / %s" % (
                    name, peer), result[key], "met" if result[key] <= 1 else "MISSED (<= 1)"))
    then = bench.by_system[bench.baseline] if bench.baseline else {}
    if q500 and "traffic_idle_redis_cpu_ms_per_60s" in q500:
        before = then.get("queues_500", {}).get("traffic_idle_redis_cpu_ms_per_60s")
        lines.append("  %-58s %.1f ms%s" % (
            "500 queues: idle Redis CPU per 60 s, traffic elsewhere",
            q500["traffic_idle_redis_cpu_ms_per_60s"],
            "" if before is None else " (before %.1f ms)" % before))
    if young:
        value, text = recovery_seconds(young)
        before = recovery_seconds(then["recovery_young_redis"])[1] if (
            "recovery_young_redis" in then) else None
        lines.append("  %-58s %-10s %s%s" % (
            "SIGKILL recovery s, Redis up %g s" % young["redis_uptime_at_kill_seconds"], text,
            "met" if value is not None and value <= TARGET_RECOVERY_SECONDS else "MISSED",
            "" if before is None else " (before %s)" % before))
    print("\n".join(lines))


def print_replica_ack_rates(bench):
    """The push rates with and without replica acknowledgement."""
    result = bench.by_system[CURRENT].get("push_wait")
    if not result:
        return
    print()
    print("issue 16 (replica acknowledgement, one replica on this machine):")
    rows = [("push rate, jobs/s", "no replica", "wait_replicas 0", "wait_replicas 1", "1 / 0")]
    for name, label in (("bulk", "PushBulk (one WAIT per 1,000 jobs)"),
                        ("single8", "Push from 8 threads (one WAIT per push)"),
                        ("shared8", "Push from 8 threads, one client (a WAIT per round trip)")):
        rows.append((label, fmt(result["%s_no_replica_jobs_per_sec" % name]),
                     fmt(result["%s_wait0_jobs_per_sec" % name]),
                     fmt(result["%s_wait1_jobs_per_sec" % name]),
                     "%.3f" % result["%s_ratio" % name]))
    print_rows(rows, left=(0,))
    print("  one WAIT adds %.1f us to a round trip (Push from 8 threads)" %
          result["single8_wait_us_per_round_trip"])


def print_metrics_and_dashboard_targets(bench):
    """The metrics' cost against the baseline, and the dashboard's p99."""
    metrics = bench.by_system[CURRENT].get("metrics")
    pages = bench.by_system[CURRENT].get("web_pages")
    if not metrics and not pages:
        return
    print()
    print("issue 17 (metrics and dashboard):")
    if metrics:
        before = bench.by_system[bench.baseline].get("metrics") if bench.baseline else None
        if before:
            ratio = metrics["jobs_per_sec"] / before["jobs_per_sec"]
            print("  drain c=25, scraped every second / %s without metrics: %.3f (%s)" % (
                bench.baseline, ratio, "met" if ratio >= TARGET_DRAIN_VS_BEFORE else "MISSED"))
            grown = metrics["idle_rss_kb"] - before["idle_rss_kb"]
            print("  idle RSS: %d kB with --http, %d kB on %s: %+d kB (%s)" % (
                metrics["idle_rss_kb"], before["idle_rss_kb"], bench.baseline, grown,
                "met" if grown < 2048 else "MISSED"))
        else:
            print("  drain c=25 with metrics scraped every second: %s jobs/s "
                  "(--baseline REV gives the ratio)" % fmt(metrics["jobs_per_sec"]))
        if "idle_rss_kb_without_http" in metrics:
            print("  idle RSS with --http %d kB, without %d kB (same build)" % (
                metrics["idle_rss_kb"], metrics["idle_rss_kb_without_http"]))
    if pages:
        print("  web pages with %d dead entries: worst p99 %.2f ms (%s; target < %d ms)" % (
            pages["dead"], pages["worst_p99_ms"], "met" if pages["met"] else "MISSED",
            pages["target_p99_ms"]))


def recovery_seconds(result):
    """Seconds to recover, or the cap when the jobs never came back."""
    if result.get("recovered"):
        return result["seconds"], "%.3f" % result["seconds"]
    if "cap_seconds" in result:
        return None, "> %d (not back)" % result["cap_seconds"]
    return None, "-"


def print_idle_and_pickup_targets(bench):
    """The figures of issue 15's "Done means", the tree's beside the
    baseline's when there is one."""
    now = bench.by_system[CURRENT]
    then = bench.by_system[bench.baseline] if bench.baseline else None

    def number(scenario, field, digits, scale=1.0):
        def get(results):
            result = results.get(scenario, {})
            value = result.get(field)
            if not isinstance(value, (int, float)):
                return None, "-"
            text = fmt(value, digits, scale)
            if result.get("queues_wanted"):
                # A build that took fewer queues than the scenario asks for.
                text += " (%d queues)" % result["queues"]
            return value, text
        return get

    def megabytes(scenario, field):
        return number(scenario, field, 1, 1024)

    def recovery(results):
        return recovery_seconds(results.get("recovery", {}))

    q = "queues_500"
    # (figure, how to read it, target text, test of the tree's value or None)
    rows_spec = [
        ("500 queues: connections", number(q, "connections", 0),
         "<= %d" % TARGET_CONNECTIONS, lambda v: v <= TARGET_CONNECTIONS),
        ("500 queues: connections named as the worker", number(q, "named_connections", 0),
         "", None),
        ("500 queues: idle RSS MB", megabytes(q, "idle_rss_kb"),
         "<= %d MB" % (TARGET_IDLE_RSS_KB // 1024), lambda v: v <= TARGET_IDLE_RSS_KB),
        ("500 queues: idle Redis CPU ms per 60 s", number(q, "idle_redis_cpu_ms_per_60s", 1),
         "", None),
        ("500 queues: pickup p50 ms, reliableq client", number(q, "client_p50_ms", 3), "", None),
        ("500 queues: pickup p99 ms, reliableq client", number(q, "client_p99_ms", 3),
         "<= %g ms" % TARGET_WAKE_P99_MS, lambda v: v <= TARGET_WAKE_P99_MS),
        ("500 queues: pickup p50 ms, Sidekiq push, notify Kl", number(q, "notify_p50_ms", 3),
         "", None),
        ("500 queues: pickup p99 ms, Sidekiq push, notify Kl", number(q, "notify_p99_ms", 3),
         "<= %g ms" % TARGET_WAKE_P99_MS, lambda v: v <= TARGET_WAKE_P99_MS),
        ("500 queues: pickup p50 ms, Sidekiq push, notify off", number(q, "plain_p50_ms", 3),
         "", None),
        ("500 queues: pickup p99 ms, Sidekiq push, notify off", number(q, "plain_p99_ms", 3),
         "report (bound ~%d ms)" % POLL_BOUND_MS, None),
        ("SIGKILL recovery s, default settings", recovery,
         "<= %g s" % TARGET_RECOVERY_SECONDS, lambda v: v <= TARGET_RECOVERY_SECONDS),
        ("scheduled lateness p50 ms, PushAt", number("schedule_lateness", "p50_ms", 3), "", None),
        ("scheduled lateness p99 ms, PushAt", number("schedule_lateness", "p99_ms", 3),
         "<= %g ms" % TARGET_SCHEDULE_P99_MS, lambda v: v <= TARGET_SCHEDULE_P99_MS),
        ("scheduled lateness p50 ms, Ruby ZADD", number("schedule_lateness", "ruby_p50_ms", 3),
         "", None),
        ("scheduled lateness p99 ms, Ruby ZADD", number("schedule_lateness", "ruby_p99_ms", 3),
         "report (the bound)", None),
        ("Push from 8 threads / redis-benchmark", number("enqueue_single_8",
                                                         "vs_redis_benchmark", 3),
         ">= %g" % TARGET_SINGLE_FRACTION, lambda v: v >= TARGET_SINGLE_FRACTION),
        ("PushBulk / redis-benchmark", number("enqueue_bulk", "vs_redis_benchmark", 3),
         ">= %g" % TARGET_BULK_FRACTION, lambda v: v >= TARGET_BULK_FRACTION),
        ("drain c=25 jobs/s", number("drain_c25", "jobs_per_sec", 0),
         "within 3% of before" if then is not None else "within 3% of before (--baseline)",
         None),
    ]
    header = ("figure", "now", "target", "")
    if then is not None:
        header = ("figure", "now", "before (%s)" % bench.baseline, "now/before", "target", "")
    rows = [header]
    for label, read, target, test in rows_spec:
        value, text = read(now)
        if value is None and text == "-" and (then is None or read(then)[1] == "-"):
            continue  # not measured in this run
        verdict = ""
        if test is not None and value is not None:
            verdict = "met" if test(value) else "MISSED"
        elif test is not None:
            verdict = "MISSED"
        if then is None:
            rows.append((label, text, target, verdict))
            continue
        before, before_text = read(then)
        ratio = "-"
        if value is not None and before:
            ratio = "%.3f" % (value / before)
        if label.startswith("drain c=25") and value is not None and before:
            verdict = "met" if value / before >= TARGET_DRAIN_VS_BEFORE else "MISSED"
        rows.append((label, text, before_text, ratio, target, verdict))
    print()
    print("issue 15%s:" % (" (now: the tree; before: %s, same run, same Redis)" % bench.baseline
                            if then is not None else ""))
    if len(rows) == 1:
        print("  not measured in this run (scenarios enqueue, drain_c25, queues_500, recovery, "
              "schedule_lateness)")
        return
    columns = len(header)
    print_rows(rows, left=(0, columns - 2, columns - 1))
