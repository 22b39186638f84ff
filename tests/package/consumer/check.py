#!/usr/bin/env python3
"""Builds a program against an installed reliableq, both ways a C++ team
would, and runs it against a private Redis.

1. `meson install --destdir` of the build directory into a temporary
   directory, and the installed prefix moved elsewhere in it: the
   pkg-config file and the CMake package must find their prefix from where
   they are (relocatable), not from where meson meant to put them.
2. tests/package/consumer/ (copied out of the source tree) built with CMake,
   find_package(reliableq REQUIRED) found through CMAKE_PREFIX_PATH, and
   with `g++ $(pkg-config --cflags --libs --static reliableq)`. Neither
   build may name the source or the build tree: what they use comes from
   the installed tree alone.
3. A redis-server on a unix socket in the temporary directory (stopped by
   its PID at the end), and both programs run against it: each pushes a job,
   runs a Server until its handler saw the job, and exits 0 only then.

The install is a DESTDIR copy of the build that `meson test` just brought
up to date, so nothing is compiled for it; only the two consumers are.

Environment: RELIABLEQ_BUILD_ROOT (the meson build directory),
RELIABLEQ_SOURCE_ROOT (the source tree). Exits 0 when every step passed.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

# The shared Python tooling in tools/lib, found in the nearest folder above
# this one that holds it.
LIB = os.path.dirname(os.path.realpath(__file__))
while not os.path.isdir(os.path.join(LIB, "tools", "lib")) and LIB != os.path.dirname(LIB):
    LIB = os.path.dirname(LIB)
sys.path.insert(0, os.path.join(LIB, "tools", "lib"))
from rqtools.servers import RedisServer, ServerError  # noqa: E402

BUILD_ROOT = os.path.realpath(os.environ.get("RELIABLEQ_BUILD_ROOT", "build"))
SOURCE_ROOT = os.path.realpath(os.environ.get("RELIABLEQ_SOURCE_ROOT", "."))
CONSUMER_DIR = os.path.join(SOURCE_ROOT, "tests", "package", "consumer")
STEP_SECONDS = 240  # one install, configure, compile or run
REDIS_START_SECONDS = 20


class Failure(Exception):
    pass


def run(command, cwd=None, env=None, seconds=STEP_SECONDS):
    """Runs a command; returns its combined output, fails with it otherwise."""
    print("+", " ".join(command), flush=True)
    try:
        done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=seconds)
    except subprocess.TimeoutExpired as error:
        raise Failure("%s: no end after %d s" % (command[0], seconds)) from error
    if done.returncode != 0:
        raise Failure("%s exited with %d:\n%s" % (" ".join(command), done.returncode,
                                                  done.stdout))
    return done.stdout


def build_option(name):
    options = json.loads(run(["meson", "introspect", "--buildoptions", BUILD_ROOT]))
    return next(option["value"] for option in options if option["name"] == name)


def install_and_move(tmp):
    """Installs the build into tmp with DESTDIR, then moves the installed
    prefix to tmp/moved; returns the new prefix directory."""
    stage = os.path.join(tmp, "stage")
    run(["meson", "install", "-C", BUILD_ROOT, "--no-rebuild", "--destdir", stage])
    prefix = build_option("prefix")
    moved = os.path.join(tmp, "moved")
    os.rename(stage + prefix, moved)
    return moved


def check_tree_not_named(what, text):
    for tree in (SOURCE_ROOT, BUILD_ROOT):
        if tree in text:
            raise Failure("the %s names %s; it may use only the installed tree:\n%s"
                          % (what, tree, text))


def build_with_cmake(tmp, root, sources):
    build = os.path.join(tmp, "cmake-build")
    run(["cmake", "-S", sources, "-B", build, "-G", "Ninja", "-DCMAKE_PREFIX_PATH=" + root])
    config_dir = os.path.join(root, build_option("libdir"), "cmake", "reliableq")
    with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as cache:
        found = [line.split("=", 1)[1].strip() for line in cache
                 if line.startswith("reliableq_DIR:")]
    if found != [config_dir]:
        raise Failure("find_package(reliableq) used %s, not the installed %s"
                      % (found, config_dir))
    output = run(["cmake", "--build", build, "--verbose"])
    check_tree_not_named("CMake build", output)
    return os.path.join(build, "consumer")


def build_with_pkg_config(tmp, root, sources):
    pc_dir = os.path.join(root, build_option("libdir"), "pkgconfig")
    env = dict(os.environ, PKG_CONFIG_PATH=pc_dir)
    found = run(["pkg-config", "--path", "reliableq"], env=env).strip()
    if os.path.realpath(found) != os.path.realpath(os.path.join(pc_dir, "reliableq.pc")):
        raise Failure("pkg-config found %s, not the installed one in %s" % (found, pc_dir))
    flags = run(["pkg-config", "--cflags", "--libs", "--static", "reliableq"], env=env).split()
    check_tree_not_named("pkg-config output", " ".join(flags))
    if not any(flag.startswith("-L" + root) for flag in flags):
        raise Failure("pkg-config's flags do not point into the moved tree %s: %s (a build "
                      "directory set up before pkgconfig.relocatable became a default option "
                      "keeps its old value: meson configure <build> -Dpkgconfig.relocatable=true)"
                      % (root, flags))
    program = os.path.join(tmp, "consumer-pkg-config")
    run(["g++", "-std=c++20", os.path.join(sources, "main.cc"), "-o", program] + flags)
    return program


def main():
    with tempfile.TemporaryDirectory(prefix="reliableq-consumer-") as tmp:
        # The consumer's own files out of the source tree, so that nothing
        # next to them can stand in for an installed header.
        sources = os.path.join(tmp, "consumer-src")
        os.mkdir(sources)
        for name in ("CMakeLists.txt", "main.cc"):
            shutil.copy(os.path.join(CONSUMER_DIR, name), sources)
        root = install_and_move(tmp)
        programs = {"cmake": build_with_cmake(tmp, root, sources),
                    "pkg-config": build_with_pkg_config(tmp, root, sources)}
        try:
            redis = RedisServer(os.path.join(tmp, "redis")).start(limit=REDIS_START_SECONDS)
        except ServerError as error:
            raise Failure(str(error)) from error
        try:
            for way, program in programs.items():
                print(run([program, redis.url], seconds=60).strip(), "(built with %s)" % way)
        finally:
            redis.stop()
    print("consumer: OK (CMake and pkg-config, from a moved install)")


if __name__ == "__main__":
    try:
        main()
    except Failure as failure:
        print("consumer: FAILED:", failure, file=sys.stderr)
        sys.exit(1)
