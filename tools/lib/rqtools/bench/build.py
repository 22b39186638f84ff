"""tools/bench's builds: the tree's (ninja in the build directory, tools/setup
when it is not configured), an older revision's (--baseline), and the Ruby
Sidekiq it compares with (apt-get)."""

import os
import shutil
import subprocess
import sys

from .. import ROOT
from .common import CURRENT, BenchError, log

GITLAB_FETCH = "/usr/lib/ruby/vendor_ruby/sidekiq-reliable-fetch.rb"


def apt_install(packages):
    """Installs Debian packages the way tools/setup does."""
    if shutil.which("apt-get") is None:
        raise BenchError("apt-get is not available; install by hand: " + " ".join(packages))
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    if sudo and shutil.which("sudo") is None:
        raise BenchError("not root and no sudo; install as root: " + " ".join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for step in (["update"], ["install", "--no-install-recommends"] + packages):
        log("bench: apt-get " + " ".join(step))
        result = subprocess.run(sudo + ["apt-get", "-q", "-y", "-o", "Dpkg::Use-Pty=0"] + step,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=1800)
        if result.returncode != 0:
            sys.stderr.write(result.stdout)
            raise BenchError("apt-get " + step[0] + " failed")


def build(args):
    """Returns the paths of the worker, the demo plugin and the load generator."""
    build_dir = args.build_dir
    if not os.path.isabs(build_dir):
        build_dir = os.path.join(ROOT, build_dir)
    paths = {
        "worker": os.environ.get("RELIABLEQ_BIN") or os.path.join(build_dir, "src/cli/reliableq"),
        "plugin": os.environ.get("RELIABLEQ_DEMO_PLUGIN")
        or os.path.join(build_dir, "examples/libdemo_jobs.so"),
        "bench": os.environ.get("RELIABLEQ_BENCH_BIN")
        or os.path.join(build_dir, "bench/reliableq-bench"),
    }
    if not args.no_build:
        configured = os.path.exists(os.path.join(build_dir, "build.ninja"))
        if not configured or shutil.which("redis-server") is None:
            # tools/setup installs what is missing, configures and builds.
            log("bench: tools/setup (BUILD_DIR=%s)" % build_dir)
            subprocess.run([os.path.join(ROOT, "tools", "setup")], check=True,
                           env=dict(os.environ, BUILD_DIR=build_dir), stdout=sys.stderr)
        jobs = os.environ.get("JOBS", "2")
        log("bench: building in %s" % build_dir)
        targets = ["src/cli/reliableq", "examples/libdemo_jobs.so", "bench/reliableq-bench"]
        result = subprocess.run(["ninja", "-C", build_dir, "-j", jobs] + targets,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stdout)
            raise BenchError("the build failed in " + build_dir)
    for name, path in paths.items():
        if not os.path.exists(path):
            raise BenchError("%s not found at %s (build first, or drop --no-build)" % (name, path))
    if shutil.which("redis-server") is None:
        raise BenchError("redis-server is not installed (tools/setup installs it)")
    return paths


def git(*words):
    """Runs a git command that only reads the repository; returns its output."""
    done = subprocess.run(["git", "-C", ROOT] + list(words), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise BenchError("git %s: %s" % (" ".join(words), done.stderr.strip()))
    return done.stdout.strip()


def resolve_revision(rev):
    """The full and the short commit id of `rev`."""
    try:
        commit = git("rev-parse", "--verify", "--quiet", rev + "^{commit}")
    except BenchError:
        raise BenchError("--baseline: %s is not a commit of this repository" % rev)
    return commit, git("rev-parse", "--short", commit)


# In a kept baseline directory (--baseline-dir): the commit extracted there.
BASELINE_STAMP = ".reliableq-bench-commit"
# The load generator and the demo plugin, and where revisions before the
# source folders kept them.
BENCH_DIR, OLD_BENCH_DIR = "bench", "src/bench"
EXAMPLES_DIR, OLD_EXAMPLES_DIR = "examples", "src/examples"
# The private headers the load generator includes, by their names now and
# before the folders (bench/meson.build).
MOVED_HEADERS = {"protocol/keys.h": "keys.h"}


def build_baseline(rev, commit, short, tree):
    """Extracts `commit` into `tree` (empty, or kept from an earlier run with
    the same commit: then only the load generator is built again), puts the
    tree's load generator and demo job classes in it, and builds them there
    against the revision's library. Returns (system label, paths); the
    caller removes `tree` unless it is kept."""
    stamp = os.path.join(tree, BASELINE_STAMP)
    kept = None
    if os.path.exists(stamp):
        with open(stamp) as f:
            kept = f.read().strip()
    if kept is not None and kept != commit:
        raise BenchError("%s holds %s, not %s: name another --baseline-dir" % (tree, kept, short))
    if kept is None and os.listdir(tree):
        raise BenchError("%s is not empty and holds no baseline: name an empty "
                         "--baseline-dir" % tree)
    if kept is None:
        log("bench: extracting %s (%s) into %s" % (rev, short, tree))
        # git archive writes nothing to the repository, unlike a worktree.
        archive = subprocess.Popen(["git", "-C", ROOT, "archive", "--format=tar", commit],
                                   stdout=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout)
        archive.stdout.close()
        if archive.wait() != 0 or untar.returncode != 0:
            raise BenchError("could not extract %s into %s" % (rev, tree))
        if not any(os.path.exists(os.path.join(tree, folder, "meson.build"))
                   for folder in (BENCH_DIR, OLD_BENCH_DIR)):
            raise BenchError("%s has no bench/: it predates the load generator" % rev)
        with open(stamp, "w") as f:
            f.write(commit + "\n")
    # Where REV keeps the load generator and the demo plugin: bench/ and
    # examples/, or, before the source folders were laid out, src/bench/ and
    # src/examples/, whose private headers sat directly in src/.
    old_layout = not os.path.exists(os.path.join(tree, BENCH_DIR, "meson.build"))
    bench_dir, examples_dir = (OLD_BENCH_DIR, OLD_EXAMPLES_DIR) if old_layout else (
        BENCH_DIR, EXAMPLES_DIR)
    shutil.rmtree(os.path.join(tree, bench_dir))
    shutil.copytree(os.path.join(ROOT, BENCH_DIR), os.path.join(tree, bench_dir))
    shutil.copy(os.path.join(ROOT, EXAMPLES_DIR, "demo_jobs.cc"),
                os.path.join(tree, examples_dir, "demo_jobs.cc"))
    if old_layout:
        for new_name, old_name in MOVED_HEADERS.items():
            forward = os.path.join(tree, "src", new_name)
            if not os.path.exists(forward):
                os.makedirs(os.path.dirname(forward), exist_ok=True)
                # Relative to the forwarding header, which a plain "keys.h"
                # would find first: itself.
                target = os.path.relpath(os.path.join(tree, "src", old_name),
                                         os.path.dirname(forward))
                with open(forward, "w") as f:
                    f.write('#include "%s"  // written by tools/bench\n' % target)
    build_dir = os.path.join(tree, "build")
    log("bench: building %s in %s%s" % (short, build_dir, "" if kept else " (a few minutes)"))
    configure = [] if kept and os.path.exists(os.path.join(build_dir, "build.ninja")) else [
        ["meson", "setup", build_dir, tree]]
    targets = ["src/cli/reliableq", examples_dir + "/libdemo_jobs.so",
               bench_dir + "/reliableq-bench"]
    for command in configure + [["ninja", "-C", build_dir, "-j", os.environ.get("JOBS", "2")]
                                + targets]:
        done = subprocess.run(command, cwd=tree, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-5000:])
            raise BenchError("building %s failed: %s" % (short, " ".join(command[:2])))
    paths = {"worker": os.path.join(build_dir, targets[0]),
             "plugin": os.path.join(build_dir, targets[1]),
             "bench": os.path.join(build_dir, targets[2])}
    return "%s@%s" % (CURRENT, short), paths


def ensure_sidekiq(args):
    packages = []
    if shutil.which("sidekiq") is None:
        packages.append("ruby-sidekiq")
    if args.compare_gitlab and not os.path.exists(GITLAB_FETCH):
        packages.append("ruby-gitlab-sidekiq-fetcher")
    if packages:
        apt_install(packages)
    if shutil.which("sidekiq") is None:
        raise BenchError("sidekiq is still not on PATH after installing ruby-sidekiq")
