#!/usr/bin/python3
"""The Debian package of tools/package: built, looked into, installed with
dpkg into a scratch root, and run.

1. `tools/package --build-dir <build>`: the build `meson test` just brought
   up to date, copied and reconfigured with --prefix=/usr (nothing is
   compiled for it; see tools/package).
2. `dpkg-deb -c`: the program, the static library, every public header,
   both man pages, the systemd unit, the pkg-config file and the CMake
   package, all below /usr. `dpkg-deb -f`: the package, meson's version,
   and Depends naming, for each shared library the program needs (its
   NEEDED entries), a package that holds it.
3. `dpkg --root` into a scratch root whose status file is a copy of the
   host's: its dependencies are checked against what is installed here.
   The same into a root with an empty status file must fail on them.
4. `<root>/usr/bin/reliableq --version`: its first line is
   "reliableq <version>".
5. `systemd-analyze verify` on the installed unit, its ExecStart pointed at
   the installed program, MANPATH at the installed man pages (it checks
   Documentation=man:reliableq(1) too): no output at all on stderr, since it
   exits 0 after many errors. A copy with an unknown key must make it speak.

Environment: RELIABLEQ_BUILD_ROOT (the meson build directory),
RELIABLEQ_SOURCE_ROOT (the source tree). Exits 0 when every check passed.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

BUILD_ROOT = os.path.realpath(os.environ.get("RELIABLEQ_BUILD_ROOT", "build"))
SOURCE_ROOT = os.path.realpath(os.environ.get("RELIABLEQ_SOURCE_ROOT", "."))
STEP_SECONDS = 240
UNIT = "reliableq@.service"


class Failure(Exception):
    pass


def run(command, expect_ok=True, env=None, seconds=STEP_SECONDS):
    """Runs a command; returns (status, stdout, stderr). Fails with its
    output when it does not exit 0 and expect_ok is set."""
    start = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=seconds)
    except subprocess.TimeoutExpired as error:
        raise Failure("%s: no end after %d s" % (command[0], seconds)) from error
    print("+ %s (%.1f s)" % (" ".join(command), time.monotonic() - start), flush=True)
    if expect_ok and done.returncode != 0:
        raise Failure("%s exited with %d:\n%s%s" % (" ".join(command), done.returncode,
                                                    done.stdout, done.stderr))
    return done.returncode, done.stdout, done.stderr


def meson_version():
    _, out, _ = run(["meson", "introspect", "--projectinfo", BUILD_ROOT])
    return json.loads(out)["version"]


def check_contents(deb):
    _, out, _ = run(["dpkg-deb", "-c", deb])
    # "drwxr-xr-x root/root 0 2026-01-01 00:00 ./usr/bin/reliableq": the path
    # is the sixth field (none of ours has a space).
    paths = {line.split()[5] for line in out.splitlines() if line.strip()}
    outside = sorted(p for p in paths if not (p == "./" or p.startswith("./usr/")))
    if outside:
        raise Failure("files outside /usr: %s" % outside)
    headers = sorted(os.path.basename(h) for h in
                     glob.glob(os.path.join(SOURCE_ROOT, "include", "reliableq", "*.h")))
    wanted = [r"\./usr/bin/reliableq", r"\./usr/lib/([^/]+/)?libreliableq\.a",
              r"\./usr/share/man/man1/reliableq\.1\.gz",
              r"\./usr/share/man/man7/reliableq-schema\.7\.gz",
              r"\./usr/lib/systemd/system/reliableq@\.service",
              r"\./usr/lib/([^/]+/)?pkgconfig/reliableq\.pc",
              r"\./usr/lib/([^/]+/)?cmake/reliableq/reliableqConfig\.cmake",
              r"\./usr/lib/([^/]+/)?cmake/reliableq/reliableqConfigVersion\.cmake",
              r"\./usr/share/doc/reliableq/copyright"]
    wanted += [r"\./usr/include/reliableq/" + re.escape(h) for h in headers]
    missing = [w for w in wanted if not any(re.fullmatch(w, p) for p in paths)]
    if missing:
        raise Failure("the package lacks %s; it holds:\n%s" % (missing, "\n".join(sorted(paths))))
    print("contents: OK (%d paths, %d headers)" % (len(paths), len(headers)))


def field(deb, name):
    _, out, _ = run(["dpkg-deb", "-f", deb, name])
    return out.strip()


def check_fields(deb, version):
    if field(deb, "Package") != "reliableq" or field(deb, "Version") != version:
        raise Failure("package %r version %r, expected reliableq %s"
                      % (field(deb, "Package"), field(deb, "Version"), version))
    depends = field(deb, "Depends")
    if not depends:
        raise Failure("no Depends field")
    return {re.split(r"[\s(:]", alternative.strip())[0]
            for clause in depends.split(",") for alternative in clause.split("|")}


def check_needed_libraries_depended_on(program, depended):
    """Every shared library the program needs is held by a package in Depends."""
    _, out, _ = run(["readelf", "-d", program])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    if not needed:
        raise Failure("readelf found no NEEDED entry in %s" % program)
    for soname in needed:
        _, owners_out, _ = run(["dpkg", "-S", "*/" + soname], expect_ok=False)
        owners = {line.split(":")[0] for line in owners_out.splitlines() if ": " in line}
        if not owners & depended:
            raise Failure("the program needs %s (from %s), which no package in Depends (%s) "
                          "holds" % (soname, sorted(owners), sorted(depended)))
    print("depends: OK (%d libraries, packages %s)" % (len(needed), ", ".join(sorted(depended))))


def scratch_root(path, status_from):
    admin = os.path.join(path, "var", "lib", "dpkg")
    for sub in ("info", "updates"):
        os.makedirs(os.path.join(admin, sub))
    if status_from:
        shutil.copy(status_from, os.path.join(admin, "status"))
    else:
        open(os.path.join(admin, "status"), "w").close()
    open(os.path.join(admin, "available"), "w").close()
    return path


def dpkg_install(root, deb, log, expect_ok):
    # Not as root (tools/setup allows sudo): fakeroot takes dpkg's chown
    # calls, --force-not-root its check; dpkg also wants ldconfig and
    # start-stop-daemon on PATH, which a user's PATH may lack.
    command = ["dpkg", "--root=" + root, "--log=" + log, "--force-not-root", "--install", deb]
    if os.geteuid() != 0:
        command.insert(0, "fakeroot")
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    return run(command, expect_ok=expect_ok, env=env)


def check_install(tmp, deb, version):
    # Dependencies unmet: an empty status file.
    bare = scratch_root(os.path.join(tmp, "bare"), None)
    status, out, err = dpkg_install(bare, deb, os.path.join(tmp, "dpkg-bare.log"), False)
    if status == 0 or "dependency problems" not in out + err:
        raise Failure("dpkg installed the package where none of its dependencies is "
                      "(status %d):\n%s%s" % (status, out, err))
    # Dependencies as on this machine.
    root = scratch_root(os.path.join(tmp, "root"), "/var/lib/dpkg/status")
    dpkg_install(root, deb, os.path.join(tmp, "dpkg.log"), True)
    _, out, _ = run(["dpkg-query", "--admindir=" + os.path.join(root, "var", "lib", "dpkg"),
                     "-W", "-f=${db:Status-Status} ${Version}", "reliableq"])
    if out.strip() != "installed " + version:
        raise Failure("dpkg-query in the scratch root: %r" % out)
    program = os.path.join(root, "usr", "bin", "reliableq")
    _, out, _ = run([program, "--version"], seconds=30)
    first = out.splitlines()[0] if out else ""
    if first != "reliableq " + version:
        raise Failure("%s --version printed %r, expected 'reliableq %s'" % (program, first, version))
    print("install: OK (%s --version: %s)" % (program, first))
    return root, program


def verify_unit(unit_file, root):
    """systemd-analyze verify's stderr for unit_file (empty when it is right)."""
    env = dict(os.environ, MANPATH=os.path.join(root, "usr", "share", "man"))
    _, _, err = run(["systemd-analyze", "verify", unit_file], expect_ok=False, env=env)
    return err.strip()


def check_unit(tmp, root, program):
    with open(os.path.join(root, "usr", "lib", "systemd", "system", UNIT), encoding="utf-8") as f:
        unit = f.read()
    if "ExecStart=/usr/bin/reliableq " not in unit:
        raise Failure("the installed unit does not start /usr/bin/reliableq:\n" + unit)
    # An instance of the template; its ExecStart must exist, so it points at
    # the program in the scratch root.
    units = os.path.join(tmp, "units")
    os.mkdir(units)
    good = os.path.join(units, "reliableq@check.service")
    with open(good, "w", encoding="utf-8") as f:
        f.write(unit.replace("ExecStart=/usr/bin/reliableq ", "ExecStart=%s " % program))
    complaints = verify_unit(good, root)
    if complaints:
        raise Failure("systemd-analyze verify of the installed unit:\n" + complaints)
    broken = os.path.join(units, "reliableq@broken.service")
    with open(good, encoding="utf-8") as f, open(broken, "w", encoding="utf-8") as out:
        out.write(f.read().replace("[Service]\n", "[Service]\nNoSuchKey=yes\n", 1))
    complaints = verify_unit(broken, root)
    if "NoSuchKey" not in complaints:
        raise Failure("systemd-analyze verify said nothing about an unknown key: %r" % complaints)
    print("unit: OK (verified clean; the broken copy: %s)" % complaints.splitlines()[0])


def main():
    version = meson_version()
    with tempfile.TemporaryDirectory(prefix="reliableq-deb-") as tmp:
        _, out, _ = run([os.path.join(SOURCE_ROOT, "tools", "package"),
                         "--build-dir", BUILD_ROOT, "--output-dir", tmp])
        deb = out.strip().splitlines()[-1]
        check_contents(deb)
        depended = check_fields(deb, version)
        root, program = check_install(tmp, deb, version)
        check_needed_libraries_depended_on(program, depended)
        check_unit(tmp, root, program)
    print("deb: OK")


if __name__ == "__main__":
    try:
        main()
    except Failure as failure:
        print("deb: FAILED:", failure, file=sys.stderr)
        sys.exit(1)
