"""Child processes: each writes to a log file, dies with this program
(PR_SET_PDEATHSIG), and is stopped by its PID; every wait is bounded."""

import ctypes
import resource
import signal
import subprocess
import time

from .resp import RedisReplyError

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _child_setup():
    # The children are started from the main thread only, so "the parent
    # thread exits" means this program ends.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # A planned abort() should not leave a core file per crash.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def spawn(argv, log_path, env=None):
    """Starts `argv` with stdout and stderr appended to `log_path` (None:
    discarded) and no stdin."""
    log = open(log_path, 'ab') if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=env, preexec_fn=_child_setup, close_fds=True)
    finally:
        if log_path:
            log.close()


def stop_process(proc, grace=5.0):
    """TERM, then KILL after `grace` seconds; always reaps."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def wait_until(what, predicate, limit, tick=None, step=0.05,
               not_yet=(OSError, RedisReplyError)):
    """Calls `predicate` until it returns a true value (returned), for at most
    `limit` seconds; `tick` runs between tries. Raises RuntimeError naming
    `what` when the time is up. The exceptions in `not_yet` (by default an
    unreachable Redis and its error replies) count as "not yet"."""
    deadline = time.monotonic() + limit
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except not_yet as e:
            last_error = e
        if time.monotonic() >= deadline:
            raise RuntimeError('%s: not within %.0f s%s' % (
                what, limit, ' (last error: %s)' % last_error if last_error else ''))
        if tick is not None:
            tick()
        time.sleep(step)
