"""tools/bench's command line (the usage is the package's docstring)."""

import argparse
import os
import shutil
import signal
import subprocess
import tempfile

from . import __doc__ as USAGE
from ..resp import RedisReplyError
from ..servers import ServerError
from .build import build, build_baseline, ensure_sidekiq, resolve_revision
from .common import CURRENT, BenchError, log
from .report import table
from .runner import Runner, start_redis
from .scenarios import NEEDS, NETWORK_SCENARIOS, SCENARIOS, TCP_SCENARIOS, Bench


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="tools/bench", description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="scenarios: " + ", ".join(SCENARIOS))
    parser.add_argument("--jobs", type=int, default=None,
                        help="jobs per drain and bulk enqueue (default 100000; 2000 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and short idle windows: a smoke run of under a "
                             "minute")
    parser.add_argument("--only", default=None,
                        help="comma-separated scenarios to run (and those they need)")
    parser.add_argument("--compare-sidekiq", action="store_true",
                        help="also run Ruby Sidekiq 6.4.1 (BasicFetch) on the same jobs")
    parser.add_argument("--compare-gitlab", action="store_true",
                        help="also run Sidekiq with gitlab's reliable fetch")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each drain this many times and report the median run "
                             "(the rates of all runs are listed beside it)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the selected scenarios this many times, the builds taking "
                             "turns going first, and summarize every compared figure per "
                             "round")
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="also build REV (with this tree's load generator and demo jobs) "
                             "and run every selected scenario on it, in the same run")
    parser.add_argument("--baseline-dir", metavar="DIR", default=None,
                        help="build REV in DIR and keep it there for later runs (default: a "
                             "temporary directory, removed at the end)")
    parser.add_argument("--json-only", action="store_true",
                        help="print only the JSON lines on stdout")
    parser.add_argument("--no-build", action="store_true",
                        help="do not build; use the binaries already there")
    parser.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build"),
                        help="meson build directory (default: $BUILD_DIR or build)")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.baseline_dir and not args.baseline:
        parser.error("--baseline-dir needs --baseline")
    selected = SCENARIOS
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [s for s in wanted if s not in SCENARIOS]
        if unknown:
            parser.error("unknown scenario %s (choose from %s)" % (
                ", ".join(unknown), ", ".join(SCENARIOS)))
        for s in list(wanted):
            wanted += NEEDS.get(s, [])
        selected = [s for s in SCENARIOS if s in wanted]
    return args, selected


def main(argv=None):
    args, selected = parse_args(argv)
    # TERM ends the run like Ctrl-C does: everything started is stopped.
    def on_term(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    workdir = tempfile.mkdtemp(prefix="reliableq-bench-")
    redis = runner = baseline_tree = None
    try:
        paths = build(args)
        builds = [(CURRENT, paths)]
        if args.baseline:
            commit, short = resolve_revision(args.baseline)
            if args.baseline_dir:
                tree = os.path.abspath(args.baseline_dir)
                os.makedirs(tree, exist_ok=True)
            else:
                tree = baseline_tree = tempfile.mkdtemp(prefix="rq-baseline-%s-" % short)
            builds.insert(0, build_baseline(args.baseline, commit, short, tree))
        if args.compare_sidekiq or args.compare_gitlab:
            ensure_sidekiq(args)
        redis = start_redis(workdir, network=any(s in NETWORK_SCENARIOS for s in selected),
                      tcp=any(s in TCP_SCENARIOS for s in selected))
        runner = Runner(args, paths, redis, workdir)
        bench = Bench(args, runner, builds)
        log("bench: %s; Redis %s on %s; load average %.2f; scenarios: %s%s" % (
            "quick run" if args.quick else "%d jobs per drain" % bench.jobs, redis.version(),
            redis.sock, os.getloadavg()[0], ", ".join(selected),
            "; %d rounds" % args.rounds if args.rounds > 1 else ""))
        bench.run(selected)
        if not args.json_only:
            table(bench, redis.version())
        return 0
    except (BenchError, ServerError) as e:
        log("bench: " + str(e))
        return 1
    except RedisReplyError as e:
        log("bench: Redis: " + str(e))
        return 1
    except KeyboardInterrupt:
        log("bench: interrupted")
        return 130
    except subprocess.TimeoutExpired as e:
        log("bench: %s took too long" % e.cmd[:2])
        return 1
    finally:
        if runner is not None:
            runner.stop()
        if redis is not None:
            redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        if baseline_tree is not None:
            shutil.rmtree(baseline_tree, ignore_errors=True)
