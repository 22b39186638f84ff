"""The default chaos mode: one durable redis-server; workers SIGKILLed,
stopped past their heartbeat ttl (zombies), sent TERM mid-job; every worker
connection dropped (CLIENT KILL); redis-server SIGKILLed and restarted on
its AOF; with --clock-skew, workers whose wall clocks are off and stepped
(WorkerClocks); then pushes made while Redis is stopped (StallPushes).
Chaos is also the base of the other modes, which replace its topology and
faults."""

import json
import os
import random
import signal
import subprocess
import threading
import time

from ..processes import spawn, stop_process
from ..resp import Redis, RedisReplyError, pairs
from ..servers import RedisServer
from . import PREFIX, QUEUES, RECORD_PREFIX, TICK_DECLARATION, TICK_QUEUE, TICK_RECORD
from .oracle import Oracle, limit_waiting_lists
from .sequences import waiting_lists


# Watching Redis while the run goes on: who is registered, and how long the
# jobs of a dead process wait in its working lists.

class Watch:
    def __init__(self, kind, pid, identity, queues, at):
        self.kind = kind          # kill, crash, zombie
        self.pid = pid
        self.identity = identity
        self.queues = queues
        self.at = at              # wall clock of the event
        self.initial = None       # jobs in its working lists just after it
        self.last_beat = None     # its last heartbeat (Sidekiq's beat field)
        self.recovered_at = None  # when those lists were first seen empty
        self.ended = False        # zombie resumed: no longer watched


class Sampler(threading.Thread):
    def __init__(self, sock):
        super().__init__(daemon=True)
        self.redis = Redis(sock, timeout=0.5)
        self.lock = threading.Lock()
        self.identities = {}      # pid -> (identity, queues)
        self.watches = []
        self.early_ticks = set()  # periodic ticks seen recorded before their second
        self.stopping = threading.Event()

    def identity_of(self, pid):
        with self.lock:
            return self.identities.get(pid)

    def watch(self, watch):
        with self.lock:
            self.watches.append(watch)

    def end_watch(self, pid):
        with self.lock:
            for w in self.watches:
                if w.pid == pid and w.kind == 'zombie' and w.recovered_at is None:
                    w.ended = True

    def run(self):
        next_registry = 0.0
        while not self.stopping.is_set():
            try:
                if time.monotonic() >= next_registry:
                    self._read_registry()
                    self._read_latest_tick()
                    next_registry = time.monotonic() + 0.2
                self._sample()
            except (OSError, RedisReplyError):
                time.sleep(0.05)  # Redis is restarting
            time.sleep(0.02)

    def _read_registry(self):
        entries = pairs(self.redis.call('HGETALL', PREFIX + 'registry'))
        found = {}
        for identity, text in entries.items():
            try:
                entry = json.loads(text)
                found[int(entry['pid'])] = (identity, list(entry['queues']))
            except (ValueError, KeyError, TypeError):
                continue
        with self.lock:
            self.identities.update(found)

    def _read_latest_tick(self):
        """A tick recorded while its second is still to come was pushed
        early (by a worker whose clock runs ahead). This clock is Redis's:
        the same machine's."""
        latest = self.redis.call('ZRANGE', TICK_RECORD, '-1', '-1')
        now = time.time()
        if latest and int(latest[0]) > now:
            with self.lock:
                self.early_ticks.add(int(latest[0]))

    def _sample(self):
        with self.lock:
            open_watches = [w for w in self.watches if w.recovered_at is None and not w.ended]
        for w in open_watches:
            total = 0
            for q in w.queues:
                total += self.redis.call('LLEN', '%sworking:%s:%s' % (PREFIX, w.identity, q))
            now = time.time()
            if w.initial is None:
                beat = self.redis.call('HGET', w.identity, 'beat')
                with self.lock:
                    w.initial = total
                    w.last_beat = float(beat) if beat else None
            if total == 0:
                with self.lock:
                    w.recovered_at = now


# ---------------------------------------------------------------------------
# Workers

class Worker:
    def __init__(self, number, proc, log_path):
        self.number = number
        self.proc = proc
        self.pid = proc.pid
        self.log_path = log_path
        self.started = time.monotonic()
        self.state = 'running'   # running, stopped, terming, killed, exited
        self.term_deadline = None
        self.resume_at = None
        self.returncode = None


class WorkerClocks:
    """--clock-skew: every worker runs under Debian's libfaketime with its
    wall clock off by up to MAX_OFFSET seconds either way, read from a file
    of its own on every call (FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE=1),
    so that writing the file steps the clock of the running process. Its
    monotonic clock, which libuv's timers and every deadline run on, stays
    the real one (FAKETIME_DONT_FAKE_MONOTONIC=1). What the workers write
    with their wall clock (the job records, their logs' time stamps) is
    taken back to the real clock by real_time(), from the offsets each had
    and when."""

    MAX_OFFSET = 60

    def __init__(self, work, rng):
        self.dir = os.path.join(work, 'clocks')
        self.rng = rng
        self.library = faketime_library()
        self.offsets = {}  # pid -> [(real time from, offset in seconds)]
        self.files = {}    # pid -> its timestamp file

    def env(self, number):
        """The environment of worker `number`, and its timestamp file with
        a first offset in it."""
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, 'worker-%03d' % number)
        offset = self.rng.randint(-self.MAX_OFFSET, self.MAX_OFFSET)
        self._write(path, offset)
        return {'LD_PRELOAD': self.library, 'FAKETIME_TIMESTAMP_FILE': path,
                'FAKETIME_NO_CACHE': '1', 'FAKETIME_DONT_FAKE_MONOTONIC': '1'}, path, offset

    def started(self, pid, path, offset, at):
        self.files[pid] = path
        self.offsets[pid] = [(at, offset)]

    def step(self, pid):
        """Sets the clock of worker `pid` to another offset, at least 10 s
        away from its present one; (old, new)."""
        old = self.offsets[pid][-1][1]
        new = old
        while abs(new - old) < 10:
            new = self.rng.randint(-self.MAX_OFFSET, self.MAX_OFFSET)
        self._write(self.files[pid], new)
        self.offsets[pid].append((time.time(), new))
        return old, new

    def real_time(self, pid, t):
        """`t`, a time worker `pid` read from its wall clock, on the real
        one: less the offset it had then (with a second of slack around a
        step, where either may apply)."""
        history = self.offsets.get(pid)
        if not history or t is None:
            return t
        for i, (since, offset) in enumerate(history):
            until = history[i + 1][0] if i + 1 < len(history) else float('inf')
            if since - 1 <= t - offset < until + 1:
                return t - offset
        return t - history[-1][1]

    @staticmethod
    def _write(path, offset):
        # Renamed into place: the worker reads the file at any moment.
        with open(path + '.new', 'w') as f:
            f.write('%+ds\n' % offset)
        os.replace(path + '.new', path)


def faketime_library():
    """The path of libfaketime.so.1 (in /usr/lib/<multiarch>/faketime/), or
    None when it is not installed."""
    for entry in sorted(os.listdir('/usr/lib')):
        path = os.path.join('/usr/lib', entry, 'faketime', 'libfaketime.so.1')
        if os.path.isfile(path):
            return path
    return None


# Ids of the jobs pushed while Redis is stopped (StallPushes): far above any
# producer's.
STALL_FIRST_ID = 900_000_000


class StallPushes:
    """`reliableq push ChaosJob --spool DIR` processes while redis-server is
    stopped (SIGSTOP: it takes connections and commands and answers none), as
    a probe found them: each push waits out its command timeout (5 s) and
    spools its job, and each process of the second wave also takes over the
    journals the first left (their writers are gone) and sends their jobs
    again, into the same stalled socket buffers; all of those sends run when
    Redis resumes. Two waves of `count` / 2 concurrent processes, the second
    started once the first ended. A process that reported its job spooled
    (on disk by then) is SIGKILLed: its drainer would otherwise wait out a
    second timeout before it exits, and its journal is left as a crash
    leaves it. Their ids go to spool-stall.accepted ("spooled" or
    "accepted", exit 0) or .unknown (anything else) beside the producers'
    lists, in the producers' format, so that the check counts them as it
    counts every push: each stored push must run, and a second run of one is
    a duplicate that a replay does not explain."""

    def __init__(self, chaos, count):
        self.chaos = chaos
        self.spool = os.path.join(chaos.work, 'stall-spool')
        self.base = os.path.join(chaos.work, 'producers', 'spool-stall')
        chaos.id_bases.append(self.base)
        half = count // 2
        ids = list(range(STALL_FIRST_ID + chaos.stall_count, STALL_FIRST_ID + chaos.stall_count +
                         count))
        chaos.stall_count += count
        self.waves = [ids[:half], ids[half:]]
        self.running = []  # (process, id, log path)

    def tick(self):
        """Reaps the pushes that ended and starts the next wave once the
        last one ended; True when every push ended."""
        still = []
        for proc, job_id, log in self.running:
            try:
                with open(log, errors='replace') as f:
                    text = f.read()
            except OSError:
                text = ''
            spooled = 'reliableq: spooled' in text
            if proc.poll() is None and spooled:
                proc.kill()
                proc.wait(timeout=10)
            elif proc.poll() is None:
                still.append((proc, job_id, log))
                continue
            stored = proc.returncode == 0 or spooled
            outcome = ('spooled' if spooled else 'accepted') if stored else (
                'exit %d: %s' % (proc.returncode, ' '.join(text.split())[:200]))
            self.chaos.stall_outcomes[job_id] = outcome if stored else 'not stored'
            with open(self.base + ('.accepted' if stored else '.unknown'), 'a') as f:
                f.write('%d\t%.6f\t%s\n' % (job_id, time.time(), outcome))
        self.running = still
        if not self.running and self.waves:
            a = self.chaos.args
            for job_id in self.waves.pop(0):
                log = '%s-%d.log' % (self.base, job_id)
                argv = [a.bin, 'push', 'ChaosJob', '[%d]' % job_id, '-q', QUEUES[-1],
                        '--spool', self.spool, '--redis', self.chaos.redis_url()]
                self.running.append((spawn(argv, log), job_id, log))
        return not self.running and not self.waves

    def finish(self, limit=60.0):
        """Once Redis answers again: waits (bounded) for the pushes still
        running, then drains what they spooled with `reliableq spool drain`
        until it succeeds (bounded)."""
        deadline = time.monotonic() + limit
        while not self.tick() and time.monotonic() < deadline:
            self.chaos.tend_workers()
            time.sleep(0.05)
        for proc, job_id, _ in self.running:
            proc.kill()
            proc.wait(timeout=10)
            self.chaos.problems.append('spooled push of job %d did not end within %.0f s'
                                       % (job_id, limit))
        self.running = []
        last = None
        while time.monotonic() < deadline:
            self.chaos.tend_workers()
            last = subprocess.run([self.chaos.args.bin, 'spool', 'drain', self.spool, '--redis',
                                   self.chaos.redis_url()], capture_output=True, text=True,
                                  timeout=30)
            if last.returncode == 0:
                self.chaos.log('stall spool drained: %s' % '; '.join(last.stdout.splitlines()))
                return
            time.sleep(0.5)
        self.chaos.problems.append('reliableq spool drain %s did not succeed: %s' % (
            self.spool, last.stderr.strip() if last else 'never ran'))


class Chaos(Oracle):
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.rng = random.Random(args.seed)
        self.redis = RedisServer(os.path.join(work, 'redis'), durable=True)
        self.sampler = None
        self.workers = []
        self.producers = []
        self.events = []         # dicts: at (wall clock), kind, pid, detail
        self.worker_count = 0
        self.throw_fraction = 0.0
        self.retries_found = False
        self.problems = []       # reasons the run failed, besides the counts
        self.details = {}
        self.t0 = time.monotonic()
        self._log_times = None
        # Besides the producers': the id lists of the pushes made while Redis
        # was stopped (StallPushes), and their outcomes by id.
        self.id_bases = []
        self.stall_outcomes = {}
        self.stall_count = 0
        self.clocks = WorkerClocks(work, self.rng) if getattr(args, 'clock_skew', False) else None

    # -- helpers -----------------------------------------------------------

    def cleanup(self):
        """Stops everything the run started, by PID; called at the end, also
        after an error or a signal."""
        if self.sampler is not None:
            self.sampler.stopping.set()
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGCONT)
                w.proc.kill()
                w.proc.wait(timeout=10)
        for p, _ in self.producers:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        self.redis.stop()

    def log(self, text):
        print('[chaos %6.1fs] %s' % (time.monotonic() - self.t0, text), flush=True)

    def event(self, kind, pid=None, detail=None):
        self.events.append({'at': time.time(), 'kind': kind, 'pid': pid, 'detail': detail})

    def redis_url(self):
        return 'unix://' + self.redis.sock

    def worker_env(self, throw_fraction, abort_fraction=None, long_fraction=None):
        if abort_fraction is None:
            abort_fraction = self.args.abort_fraction
        if long_fraction is None:
            long_fraction = self.args.long_fraction
        env = dict(os.environ)
        env.update({
            'RELIABLEQ_CHAOS_REDIS': self.redis.sock,
            'RELIABLEQ_CHAOS_PREFIX': RECORD_PREFIX,
            'RELIABLEQ_CHAOS_SLEEP_MS': str(self.args.sleep_ms),
            'RELIABLEQ_CHAOS_LONG_MS': str(self.args.long_ms),
            'RELIABLEQ_CHAOS_THROW_FRACTION': repr(throw_fraction),
            'RELIABLEQ_CHAOS_ABORT_FRACTION': repr(abort_fraction),
            'RELIABLEQ_CHAOS_LONG_FRACTION': repr(long_fraction),
            'RELIABLEQ_CHAOS_SNOOZE_FRACTION': repr(self.args.snooze_fraction),
            'RELIABLEQ_CHAOS_DISCARD_FRACTION': repr(self.args.discard_fraction),
        })
        return env

    def start_worker(self, queues=None, env=None, skew=True):
        self.worker_count += 1
        a = self.args
        argv = [a.bin, 'worker', '--redis', self.redis_url(), '-r', a.plugin,
                '-c', str(a.concurrency), '-t', str(a.timeout),
                '--heartbeat-ttl', str(a.heartbeat_ttl),
                '--heartbeat-interval', str(a.heartbeat_interval),
                '--janitor-interval', str(a.janitor_interval)]
        for q in queues or QUEUES:
            argv += ['-q', q]
        if a.limit:
            argv += ['--limit', 'chaos=concurrency=%d,classes=ChaosJob' % a.limit]
        if a.periodic:
            argv += ['--periodic', TICK_DECLARATION]
        log_path = os.path.join(self.work, 'workers', 'worker-%03d.log' % self.worker_count)
        env = env or self.worker_env(self.throw_fraction)
        clock = None
        if self.clocks is not None and skew:
            faked, path, offset = self.clocks.env(self.worker_count)
            env = dict(env, **faked)
            clock = (path, offset)
        proc = spawn(self.in_place('worker', argv), log_path, env)
        worker = Worker(self.worker_count, proc, log_path)
        self.workers.append(worker)
        if clock is not None:
            self.clocks.started(worker.pid, clock[0], clock[1], time.time())
        self.event('start', worker.pid, None if clock is None else 'clock %+d s' % clock[1])
        return worker

    def running_workers(self, min_age=0.0):
        now = time.monotonic()
        return [w for w in self.workers
                if w.state == 'running' and now - w.started >= min_age]

    def pick_target(self, busy=False):
        """A running worker that registered a while ago (with `busy`, one
        that runs jobs now, if there is one), or None."""
        self.tend_workers()  # so that a worker that just crashed is not picked
        seasoned = [w for w in self.running_workers(min_age=1.5)
                    if self.sampler.identity_of(w.pid) is not None]
        if busy and seasoned:
            working = []
            try:
                r = Redis(self.redis.sock, timeout=0.5)
                for w in seasoned:
                    if int(r.call('HGET', self.sampler.identity_of(w.pid)[0], 'busy') or 0):
                        working.append(w)
                r.close()
            except (OSError, RedisReplyError, ValueError):
                pass
            seasoned = working or seasoned
        # Never a process younger than a few tenths of a second: a signal
        # that arrives before its main() has installed the handlers ends it
        # by the default action, a fault of the test's timing, not of the
        # worker (a TERM 0.7 ms after the start did, once).
        pool = seasoned or self.running_workers(min_age=0.3)
        return self.rng.choice(pool) if pool else None

    def watch_orphans(self, kind, pid):
        known = self.sampler.identity_of(pid)
        if known is None:
            self.event('unwatched', pid, kind)
            return
        self.sampler.watch(Watch(kind, pid, known[0], known[1], time.time()))

    # -- the chaos actions -------------------------------------------------

    def kill_worker(self):
        w = self.pick_target()
        if w is None:
            return
        w.proc.kill()
        w.proc.wait(timeout=10)
        w.state = 'killed'
        w.returncode = w.proc.returncode
        self.event('kill', w.pid)
        self.watch_orphans('kill', w.pid)
        self.start_worker()

    def stop_worker_as_zombie(self):
        w = self.pick_target()
        if w is None:
            return
        w.proc.send_signal(signal.SIGSTOP)
        w.state = 'stopped'
        w.resume_at = time.monotonic() + self.args.zombie_seconds
        self.event('zombie', w.pid)
        self.watch_orphans('zombie', w.pid)

    def term_worker(self):
        w = self.pick_target(busy=True)
        if w is None:
            return
        w.proc.send_signal(signal.SIGTERM)
        w.state = 'terming'
        w.term_deadline = time.monotonic() + self.args.timeout + 20
        self.event('term', w.pid)
        self.start_worker()

    def stop_workers(self):
        """A clean stop of every worker (TERM, bounded): they hand back
        nothing (nothing is left) and unregister."""
        a = self.args
        for w in self.workers:
            if w.state in ('running', 'stopped'):
                w.proc.send_signal(signal.SIGCONT)
                w.proc.send_signal(signal.SIGTERM)
                w.state = 'terming'
                w.term_deadline = time.monotonic() + a.timeout + 20
        end = time.monotonic() + a.timeout + 25
        while time.monotonic() < end and any(w.state == 'terming' for w in self.workers):
            self.tend_workers(replace=False)
            time.sleep(0.05)
        self.tend_workers(replace=False)

    def step_clock(self):
        """--clock-skew: steps the wall clock of a running worker to another
        offset (WorkerClocks.step), a fault recorded as clock_step."""
        w = self.pick_target()
        if w is None or w.pid not in self.clocks.files:
            return
        old, new = self.clocks.step(w.pid)
        self.log('clock of worker %d stepped from %+d s to %+d s' % (w.pid, old, new))
        self.event('clock_step', w.pid, '%+d s to %+d s' % (old, new))

    def worker_fault(self, kind):
        """Carries out a worker fault of the plan (timeline()): 'kill',
        'zombie', 'term' or 'clock'; False for any other kind."""
        action = {'kill': self.kill_worker, 'zombie': self.stop_worker_as_zombie,
                  'term': self.term_worker, 'clock': self.step_clock}.get(kind)
        if action is not None:
            action()
        return action is not None

    def kill_connections(self):
        """CLIENT KILL of every connection the workers hold (their CLIENT
        SETNAME begins with the key prefix), as a proxy or a network blip
        would drop them: the workers must reconnect and go on."""
        try:
            r = Redis(self.redis.sock, timeout=2.0)
            ids = []
            for line in (r.call('CLIENT', 'LIST') or '').splitlines():
                fields = dict(f.split('=', 1) for f in line.split(' ') if '=' in f)
                if fields.get('name', '').startswith(PREFIX):
                    ids.append(fields['id'])
            for client_id in ids:
                r.call('CLIENT', 'KILL', 'ID', client_id)
            r.close()
        except (OSError, RedisReplyError) as e:
            self.log('CLIENT KILL of the workers\' connections failed: %s' % e)
            return
        self.log('CLIENT KILL of %d worker connections' % len(ids))
        self.event('conn_kill', None, len(ids))

    def spool_stall(self, r):
        """After the chaos, with every queue empty: redis-server stopped
        while --stall-pushes spooled pushes are made (StallPushes), then
        resumed, and the stall spool drained; waits (bounded) until every job
        ran."""
        pushes = StallPushes(self, self.args.stall_pushes)
        pid = self.redis.proc.pid
        stopped_at = time.time()
        self.redis.proc.send_signal(signal.SIGSTOP)
        self.event('redis_stop', pid)
        self.log('SIGSTOP redis-server (pid %d) for %d spooled pushes in two waves'
                 % (pid, self.args.stall_pushes))
        deadline = time.monotonic() + 40
        while not pushes.tick() and time.monotonic() < deadline:
            self.tend_workers()
            time.sleep(0.05)
        self.redis.proc.send_signal(signal.SIGCONT)
        self.redis.outages.append((stopped_at, time.time()))
        self.event('redis_ready', pid)
        self.log('SIGCONT redis-server after %.1f s' % (time.time() - stopped_at))
        pushes.finish()
        deadline = time.monotonic() + self.args.drain_timeout
        quiet = 0
        while time.monotonic() < deadline and quiet < 3:
            self.tend_workers()
            time.sleep(0.25)
            try:
                quiet = quiet + 1 if not self.pending(r) else 0
            except (OSError, RedisReplyError):
                quiet = 0
        if quiet < 3:
            self.problems.append('the jobs of the spooled pushes did not drain within %.0f s'
                                 % self.args.drain_timeout)
        self.log('the stall and its drain took %.1f s' % (time.time() - stopped_at))

    def restart_redis(self):
        down = self.rng.uniform(0.1, self.args.redis_down)
        self.log('SIGKILL redis-server (pid %d), down for %.1f s' % (self.redis.proc.pid, down))
        self.event('redis_kill', self.redis.proc.pid)
        self.redis.kill_and_restart(down)
        self.event('redis_ready', self.redis.proc.pid)

    def wind_down(self, pending, progress=None, what='chaos'):
        """After the faults: resumes every zombie, ends a standing backlog
        (its producers stop between two pushes), and waits for the
        producers and then for every job to be done (drain())."""
        for w in self.workers:
            if w.state == 'stopped':
                w.resume_at = 0
        if self.args.backlog:
            for p, _ in self.producers:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        self.log('%s over; waiting for the producers and the queues to drain' % what)
        self.drain(pending, progress)

    def drain(self, pending, progress=None):
        """After the faults: keeps replacing crashed workers while the
        producers finish and the jobs run out. `pending()` says what is left
        (falsy: nothing; it may raise while Redis is away), `progress(left)`
        reports every 10 s. Three quiet checks in a row end it; a drain past
        --drain-timeout is a problem. Then stops the producers still running
        and records those that failed."""
        deadline = time.monotonic() + self.args.drain_timeout
        next_progress = time.monotonic() + 10
        drained, quiet, last = False, 0, None
        while time.monotonic() < deadline:
            self.tend_workers()
            time.sleep(0.25)
            producing = any(p.poll() is None for p, _ in self.producers)
            try:
                last = pending()
            except (OSError, RedisReplyError):
                continue
            quiet = quiet + 1 if not last and not producing else 0
            if quiet >= 3:
                drained = True
                break
            if progress is not None and time.monotonic() >= next_progress:
                next_progress = time.monotonic() + 10
                progress(last)
        if not drained:
            running = [p.pid for p, _ in self.producers if p.poll() is None]
            self.problems.append('did not drain within %.0f s: producers running %s, '
                                 'pending %s' % (self.args.drain_timeout, running, last))
        for p, path in self.producers:
            if p.poll() is None:
                stop_process(p)
            elif p.returncode != 0:
                self.problems.append('producer %s exited with status %d (see %s.log)'
                                     % (os.path.basename(path), p.returncode, path))

    def tend_workers(self, replace=True):
        """Reaps workers that ended, resumes zombies that are due."""
        now = time.monotonic()
        for w in self.workers:
            if w.state in ('killed', 'exited'):
                continue
            if w.state == 'stopped' and now >= w.resume_at:
                w.proc.send_signal(signal.SIGCONT)
                w.state = 'running'
                self.sampler.end_watch(w.pid)
                self.event('resume', w.pid)
            rc = w.proc.poll()
            if rc is None:
                if w.state == 'terming' and now >= w.term_deadline:
                    self.problems.append('worker %d did not stop within %.0f s of TERM (see %s)'
                                         % (w.pid, self.args.timeout + 20, w.log_path))
                    w.proc.kill()
                    w.proc.wait(timeout=10)
                    w.state = 'exited'
                    w.returncode = w.proc.returncode
                continue
            was = w.state
            w.state = 'exited'
            w.returncode = rc
            if was == 'terming':
                self.event('term_exit', w.pid, rc)
                # A SIGABRT with planned aborts on is judged at the end
                # (check): a job's abort() may land after the TERM, late
                # when Redis was away while the job wrote its record.
                planned = rc == -signal.SIGABRT and self.args.abort_fraction > 0
                if rc != 0 and not planned:
                    self.problems.append('worker %d exited with status %d after TERM (see %s)'
                                         % (w.pid, rc, w.log_path))
            else:
                # Not asked to end: a planned abort() of a ChaosJob, or a
                # crash of the worker itself (decided at the end, from the
                # job records).
                self.event('exit', w.pid, rc)
                self.watch_orphans('crash', w.pid)
                if replace:
                    self.start_worker()

    # -- phases --------------------------------------------------------------

    def probe_retries(self):
        """Whether the worker puts a failed job in `retry` (retries exist) or
        straight into `dead` (they do not yet)."""
        r = Redis(self.redis.sock)
        probe_queue = 'chaos_probe'
        # On the real clock: a retry that a worker behind schedules is due
        # at once (its time is the worker's clock plus the backoff), and
        # might come and go between two looks.
        worker = self.start_worker(queues=[probe_queue], env=self.worker_env(1.0, 0.0, 0.0),
                                   skew=False)
        now = time.time()
        payload = json.dumps({
            'class': 'ChaosJob', 'args': [-1], 'queue': probe_queue, 'retry': True,
            'jid': '%024x' % self.rng.getrandbits(96), 'created_at': now, 'enqueued_at': now,
        }, separators=(',', ':'))
        r.call('SADD', 'queues', probe_queue)
        r.call('LPUSH', 'queue:' + probe_queue, payload)
        found = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and found is None:
            if r.call('ZCARD', 'retry') > 0:
                found = 'retry'
            elif r.call('ZCARD', 'dead') > 0:
                found = 'dead'
            time.sleep(0.05)
        stop_process(worker.proc, grace=self.args.timeout + 10)
        worker.state = 'exited'
        worker.returncode = worker.proc.returncode
        self.workers.remove(worker)
        self.events = [e for e in self.events if e['pid'] != worker.pid]
        r.call('FLUSHALL')
        r.close()
        if found is None:
            raise RuntimeError('probe: a failing job reached neither retry nor dead in 30 s; '
                               'see ' + worker.log_path)
        return found == 'retry'

    def start_producers(self):
        a = self.args
        window = max(1.0, a.duration * a.push_window)
        share, extra = divmod(a.jobs, a.producers)
        key_share, key_extra = divmod(getattr(a, 'sequences', 0), a.producers)
        for p in range(a.producers):
            count = share + (1 if p < extra else 0)
            if count == 0:
                continue
            base = os.path.join(self.work, 'producers', 'producer-%d' % p)
            argv = [a.producer, '--redis', self.redis_url(),
                    '--first-id', str((p + 1) * 10_000_000), '--count', str(count),
                    '--rate', '%.3f' % (count / window), '--queues', ','.join(QUEUES),
                    '--accepted', base + '.accepted', '--unknown', base + '.unknown',
                    '--deadline', str(a.duration + a.drain_timeout)]
            if a.backlog:
                argv += ['--backlog', str(max(1, a.backlog // a.producers))]
            if getattr(a, 'sequences', 0):
                # Each producer its own keys, so that each key's push order
                # is one producer's.
                argv += ['--sequence-keys', str(max(1, key_share + (1 if p < key_extra else 0))),
                         '--sequence-window', str(a.sequence_window)]
            self.producers.append((spawn(self.in_place('producer', argv), base + '.log'), base))

    def in_place(self, role, argv):
        """The command that starts `argv` (a 'worker' or a 'producer'): the
        network mode runs each in a network namespace of its own."""
        return argv

    def timeline(self):
        a = self.args
        steps = a.clock_steps if getattr(a, 'clock_skew', False) else 0
        return self.spread(1.5, max(2.0, a.duration - 1.0), (
            ('kill', a.kills), ('zombie', a.zombies), ('term', a.terms),
            ('redis', a.redis_restarts), ('conn', a.conn_kills), ('clock', steps)))

    def spread(self, lo, hi, counts):
        """The plan [(seconds from the start, kind)], sorted: `count` faults
        of each (kind, count), evenly over [lo, hi], each moved at random by
        up to 0.3 of its share."""
        plan = []
        for kind, count in counts:
            if count <= 0:
                continue
            step = (hi - lo) / count
            for i in range(count):
                at = lo + step * (i + 0.5) + self.rng.uniform(-0.3, 0.3) * step
                plan.append((at, kind))
        plan.sort()
        return plan

    def pending(self, r):
        """Jobs still to run: {key: count} for every non-empty queue, working
        list of a registered process, schedule, retry and list of jobs a
        concurrency limit holds back."""
        out = {}
        for q in r.call('SMEMBERS', 'queues') or []:
            if q == TICK_QUEUE:
                continue
            n = r.call('LLEN', 'queue:' + q)
            if n:
                out['queue:' + q] = n
        for identity, text in pairs(r.call('HGETALL', PREFIX + 'registry')).items():
            try:
                queues = json.loads(text)['queues']
            except (ValueError, KeyError, TypeError):
                out['unreadable registry entry ' + identity] = 1
                continue
            for q in queues:
                key = '%sworking:%s:%s' % (PREFIX, identity, q)
                n = r.call('LLEN', key)
                if n:
                    out[key] = n
        for key in ('schedule', 'retry'):
            n = r.call('ZCARD', key)
            if n:
                out[key] = n
        for key in limit_waiting_lists(r) + waiting_lists(r):
            n = r.call('LLEN', key)
            if n:
                out[key] = n
        return out

    def start_redis(self):
        """Starts the jobs' Redis, and finds the throw fraction (a probe:
        whether a failed job is retried)."""
        a = self.args
        self.redis.start()
        self.log('redis-server pid %d on %s (appendonly yes, appendfsync always, '
                 'noeviction)' % (self.redis.proc.pid, self.redis.sock))
        self.retries_found = self.probe_retries()
        if a.throw_fraction == 'auto':
            self.throw_fraction = a.auto_throw_fraction if self.retries_found else 0.0
        else:
            self.throw_fraction = float(a.throw_fraction)
        self.log('a failing job goes to %s: throw fraction %g' % (
            'retry' if self.retries_found else 'dead', self.throw_fraction))

    def fault(self, kind):
        """Carries out the fault `kind` of the plan (timeline()); False when
        it cannot be now (carry_out() tries again a second later)."""
        if not self.worker_fault(kind):
            if kind == 'conn':
                self.kill_connections()
            else:
                self.restart_redis()
        return True

    def faults_active(self):
        """True while a fault that lasts is not over (the chaos waits for
        it past D)."""
        return False

    def carry_out(self, plan, progress):
        """Runs the plan [(seconds from now, kind)] for D seconds and until
        no fault is active, tending the workers, with `progress()` every
        10 s. A fault no process can take is tried a second later, and is a
        problem once D is over."""
        a = self.args
        start = time.monotonic()
        next_progress = start + 10
        while True:
            now = time.monotonic()
            self.tend_workers()
            if plan and now - start >= plan[0][0]:
                at, kind = plan.pop(0)
                if not self.fault(kind):
                    if at + 1.0 < a.duration:
                        plan.append((at + 1.0, kind))
                        plan.sort()
                    else:
                        self.problems.append('no process could take the %s planned at %.1f s'
                                             % (kind, at))
                continue
            if now - start >= a.duration and not self.faults_active():
                break
            if now >= next_progress:
                next_progress += 10
                progress()
            time.sleep(0.02)

    def run(self):
        a = self.args
        self.t0 = time.monotonic()
        for sub in ('redis', 'workers', 'producers'):
            os.makedirs(os.path.join(self.work, sub))
        self.start_redis()
        self.sampler = Sampler(self.redis.sock)
        self.sampler.start()
        for _ in range(a.workers):
            self.start_worker()
        self.start_producers()
        if a.backlog:
            self.log('%d workers, %d producers keeping %d jobs queued for %.0f s (profile %s)' % (
                a.workers, len(self.producers), a.backlog, a.duration, a.profile))
        else:
            self.log('%d workers, %d producers pushing %d jobs over %.0f s (profile %s)' % (
                a.workers, len(self.producers), a.jobs, a.duration * a.push_window, a.profile))

        r = Redis(self.redis.sock)
        self.chaos_wall = [time.time(), None]
        self.carry_out(self.timeline(), lambda: self.progress(r))
        self.chaos_wall[1] = time.time()

        self.wind_down(lambda: self.pending(r), lambda left: self.progress(r, left))
        if a.stall_pushes:
            self.spool_stall(r)

        self.stop_workers()
        self.sampler.stopping.set()
        self.sampler.join(timeout=5)
        r.close()
        # The records of a long run (a million jobs and more) take longer
        # than a command's usual timeout to send.
        with Redis(self.redis.sock, timeout=120) as reader:
            return self.check(reader)

    @staticmethod
    def runs_so_far(ledger):
        """The jobs run to the end so far, by the ledger's count; '?' while
        it cannot be read."""
        try:
            return ledger.call('HLEN', RECORD_PREFIX + 'runs')
        except (OSError, RedisReplyError):
            return '?'

    def progress(self, r, pending=None):
        executed = self.runs_so_far(r)
        accepted = 0
        for _, base in self.producers:
            try:
                with open(base + '.accepted') as f:
                    accepted += sum(1 for _ in f)
            except OSError:
                pass
        kinds = [e['kind'] for e in self.events]
        text = ('accepted %d, executed %s, workers %d, kills %d, crashes %d, zombies %d, '
                'terms %d, redis restarts %d' % (
                    accepted, executed, len(self.running_workers()), kinds.count('kill'),
                    kinds.count('exit'), kinds.count('zombie'), kinds.count('term'),
                    kinds.count('redis_kill')))
        if pending:
            text += ', pending %s' % pending
        self.log(text)
