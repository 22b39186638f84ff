"""tools/chaos --mode outage: Redis unreachable for --outage-seconds while
producers keep pushing through a client spool, and every job is counted.

One redis-server (appendonly yes, appendfsync always, on a unix socket)
holds the jobs; the job records go to a second one, the ledger, which stays
up. Producers push at a steady rate with ClientOptions::spool_dir, all into
one spool directory (each process writes its own journal there). Workers run
the jobs. Outages, in the order --outages gives:

  stop  SIGSTOP redis-server for --outage-seconds, then SIGCONT. Connections
        still open and pushes time out: a push whose reply did not come is
        spooled, and when Redis resumes it runs the command it had queued,
        so the drain pushes a job that is already there (same jid), which
        Redis stores only once (push_once.lua). Meanwhile --stall-pushes
        `reliableq push --spool` processes push in two waves into a spool of
        their own (chaos StallPushes: the second wave sends the first wave's
        jobs again), drained with `reliableq spool drain` once Redis is back.
  kill  SIGKILL redis-server, and start it again on its AOF after
        --outage-seconds. Connections are refused meanwhile.

After each outage it measures how long after Redis answered again the spool
held no job (`reliableq spool status DIR --json`, every 100 ms), and waits
for that before the next outage. The run fails on any job lost among the
pushes reported accepted or spooled, on a duplicate that no worker taken for
dead during an outage explains (a spooled push run twice, from a replay of
its jid, fails it), on a producer whose spool did not empty, and on anything
the default mode fails on.
"""

import json
import os
import signal
import subprocess
import time

from ..processes import spawn
from ..resp import Redis
from ..servers import RedisServer
from . import HEARTBEAT_GONE, QUEUES
from .oracle import print_findings, print_stall
from .worker_faults import Chaos, StallPushes


class OutageChaos(Chaos):
    def __init__(self, args, work):
        super().__init__(args, work)
        # self.redis holds the jobs; the ledger the job records.
        self.ledger = RedisServer(os.path.join(work, 'ledger'), durable=True)
        self.spool = os.path.join(work, 'spool')
        self.outage_log = []  # per outage: kind, down_at, back_at, drained_at, peak

    def worker_env(self, throw_fraction, abort_fraction=None, long_fraction=None):
        env = super().worker_env(throw_fraction, abort_fraction, long_fraction)
        env['RELIABLEQ_CHAOS_REDIS'] = self.ledger.sock
        return env

    def watch_orphans(self, kind, pid):
        # No worker is killed on purpose here: a worker that exits is a
        # problem of the run (check), not an orphan to time.
        self.event('unwatched', pid, kind)

    def start_producers(self):
        a = self.args
        window = max(1.0, a.duration * a.push_window)
        share, extra = divmod(a.jobs, a.producers)
        for p in range(a.producers):
            count = share + (1 if p < extra else 0)
            path = os.path.join(self.work, 'producers', 'producer-%d' % p)
            argv = [a.producer, '--redis', self.redis_url(),
                    '--first-id', str((p + 1) * 10_000_000), '--count', str(count),
                    '--rate', '%.3f' % (count / window), '--queues', ','.join(QUEUES),
                    '--accepted', path + '.accepted', '--unknown', path + '.unknown',
                    '--deadline', str(a.duration + a.drain_timeout), '--spool', self.spool]
            self.producers.append((spawn(argv, path + '.log'), path))

    def spooled_now(self):
        """Jobs the spool holds now, or None when it cannot be read."""
        try:
            out = subprocess.run([self.args.bin, 'spool', 'status', self.spool, '--json'],
                                 capture_output=True, text=True, timeout=10)
            return int(json.loads(out.stdout)['pending_jobs'])
        except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired):
            return None

    def outage(self, kind):
        a = self.args
        record = {'kind': kind, 'peak_spooled': 0}
        self.outage_log.append(record)
        pid = self.redis.proc.pid
        record['down_at'] = time.time()
        if kind == 'stop':
            self.redis.proc.send_signal(signal.SIGSTOP)
            self.event('redis_stop', pid)
        else:
            self.redis.proc.kill()
            self.redis.proc.wait(timeout=10)
            self.event('redis_kill', pid)
        self.log('%s redis-server (pid %d) for %.0f s' % (
            'SIGSTOP' if kind == 'stop' else 'SIGKILL', pid, a.outage_seconds))
        stalled = StallPushes(self, a.stall_pushes) if kind == 'stop' and a.stall_pushes \
            else None
        end = time.monotonic() + a.outage_seconds
        while time.monotonic() < end:
            self.tend_workers()
            if stalled is not None:
                stalled.tick()
            n = self.spooled_now()
            if n is not None:
                record['peak_spooled'] = max(record['peak_spooled'], n)
            time.sleep(0.2)
        if kind == 'stop':
            self.redis.proc.send_signal(signal.SIGCONT)
        else:
            self.redis.start()
        record['back_at'] = time.time()
        self.redis.outages.append((record['down_at'], record['back_at']))
        self.event('redis_ready', self.redis.proc.pid)
        if stalled is not None:
            stalled.finish()
        # How long until the spool holds nothing (bounded).
        deadline = time.monotonic() + a.drain_timeout
        left = None
        while time.monotonic() < deadline:
            self.tend_workers()
            left = self.spooled_now()
            if left == 0:
                record['drained_at'] = time.time()
                break
            if left is not None:
                record['peak_spooled'] = max(record['peak_spooled'], left)
            time.sleep(0.1)
        if 'drained_at' not in record:
            self.problems.append('the spool still held %s jobs %.0f s after the %s outage'
                                 % (left, a.drain_timeout, kind))
            self.log('spool not empty after %.0f s: %s jobs' % (a.drain_timeout, left))
        else:
            self.log('Redis back; %d jobs were spooled at most; the spool was empty %.2f s '
                     'after Redis answered again' % (
                         record['peak_spooled'], record['drained_at'] - record['back_at']))

    def run(self):
        a = self.args
        self.t0 = time.monotonic()
        for sub in ('redis', 'ledger', 'workers', 'producers'):
            os.makedirs(os.path.join(self.work, sub))
        self.ledger.start()
        self.redis.start()
        self.log('redis-server pid %d on %s; ledger pid %d' % (
            self.redis.proc.pid, self.redis.sock, self.ledger.proc.pid))
        self.throw_fraction = 0.0 if a.throw_fraction == 'auto' else float(a.throw_fraction)
        for _ in range(a.workers):
            self.start_worker()
        self.start_producers()
        self.log('%d workers, %d producers pushing %d jobs over %.0f s, spool %s' % (
            a.workers, a.producers, a.jobs, a.duration * a.push_window, self.spool))

        ledger = Redis(self.ledger.sock)
        start = time.monotonic()
        plan = list(a.outages)
        next_at = start + 5.0
        next_progress = start + 10
        while True:
            self.tend_workers()
            now = time.monotonic()
            if plan and now >= next_at:
                self.outage(plan.pop(0))
                next_at = time.monotonic() + 5.0
                continue
            if not plan and now - start >= a.duration and now >= next_at:
                break
            if now >= next_progress:
                next_progress = now + 10
                self.progress(ledger)
            time.sleep(0.05)

        r = Redis(self.redis.sock)
        self.wind_down(lambda: self.pending(r), what='outages')
        self.stop_workers()
        report = self.check(ledger, r)
        ledger.close()
        r.close()
        return report

    def progress(self, ledger, pending=None):
        executed = self.runs_so_far(ledger)
        self.log('stored %d, executed %s, spooled now %s' % (
            len(self.read_ids('.accepted')), executed, self.spooled_now()))

    def cleanup(self):
        super().cleanup()
        self.ledger.stop()

    def check(self, ledger, r):
        a = self.args
        runs, attempts, by_job = self.read_records(ledger)
        dead, dead_reasons, pending_ids, stranded_keys = self.read_leftovers(r)
        stored = self.read_ids('.accepted')   # id -> "time<TAB>outcome"
        unknown = self.read_ids('.unknown')
        outcome = {i: text.split('\t')[-1] for i, text in stored.items()}
        executed = {i for i, n in runs.items() if n > 0}
        done = executed | set(dead)
        lost = sorted(set(stored) - done - set(pending_ids))
        still_pending = sorted((set(stored) - done) & set(pending_ids))
        phantom = sorted(i for i in done if i not in stored and i not in unknown)
        by_outcome = {}
        for name in outcome.values():
            by_outcome[name] = by_outcome.get(name, 0) + 1

        duplicated, causes, unexplained = self.explain_duplicates(
            runs, by_job, lambda _job_id, _ok, lower, higher: self.explain_outage(lower, higher))
        self.report_unasked_exits()
        stall = self.stall_report(runs, unexplained)
        if a.stall_pushes and 'stop' in a.outages and not stall['spooled']:
            self.problems.append('no push made while Redis was stopped was spooled: the stall '
                                 'did not happen as planned')

        report = {
            'mode': 'outage',
            'outages': [{'kind': o['kind'], 'seconds': round(o['back_at'] - o['down_at'], 1),
                         'peak_spooled': o['peak_spooled'],
                         'spool_empty_after_s': round(o['drained_at'] - o['back_at'], 2)
                         if 'drained_at' in o else None}
                        for o in self.outage_log if 'back_at' in o],
            'stored': len(stored),
            'stored_by_outcome': by_outcome,
            'not_confirmed': len(unknown),
            'not_confirmed_ran': len(set(unknown) & done),
            'lost': len(lost),
            'executed': len(executed),
            'dead': len(dead),
            'dead_by_reason': {k: len(v) for k, v in dead_reasons.items()},
            'still_pending': len(still_pending),
            'phantom_executions': len(phantom),
            'executed_more_than_once': duplicated,
            'most_runs_of_one_job': max(runs.values(), default=0),
            'duplicate_runs_by_cause': causes,
            'unexplained_duplicates': len(unexplained),
            'spool_stall': stall,
            'workers_taken_for_dead': self.count_in_logs(
                HEARTBEAT_GONE, {w.pid for w in self.workers}),
            'stranded_working_lists': stranded_keys,
            'workers': a.workers,
            'producers': a.producers,
            'jobs': a.jobs,
            'duration_s': a.duration,
            'seed': a.seed,
            'problems': self.problems,
        }
        report['ok'] = (not lost and not unexplained and not phantom and not still_pending
                        and not stranded_keys and not self.problems
                        and len(report['outages']) == len(a.outages))
        with open(os.path.join(self.work, 'events.json'), 'w') as f:
            json.dump({'events': self.events, 'outages': self.outage_log, 'report': report},
                      f, indent=1)
        self.details = {'lost': lost, 'unexplained': unexplained, 'phantom': phantom}
        return report

    def explain_outage(self, lower, higher):
        # A spooled job pushed again under its jid (by the drain, after a
        # first push that timed out had landed after all) is stored once:
        # two runs of the same attempt are no longer explained.
        if higher['rc'] > lower['rc']:
            return 'retry'
        if higher['ic'] > lower['ic']:
            for down, back in self.redis.outages:
                if lower['end'] >= down - 1.0 and lower['start'] <= back + 10.0:
                    # A janitor took the process for dead once Redis was back
                    # (its heartbeat expired during the outage).
                    return 'outage: recovered from a working list'
        return self.explain(lower, higher)


def print_report(report, details, work):
    r = report
    print()
    print('== chaos report (outage)')
    for o in r['outages']:
        print('outage (%s, %.1f s):      up to %d jobs spooled; the spool was empty %s s after '
              'Redis answered again' % (o['kind'], o['seconds'], o['peak_spooled'],
                                        o['spool_empty_after_s']))
    print('stored pushes:            %d %s' % (r['stored'], r['stored_by_outcome']))
    print('not confirmed:            %d, of which ran: %d' % (r['not_confirmed'],
                                                               r['not_confirmed_ran']))
    print('lost:                     %d' % r['lost'])
    print('executed:                 %d; dead: %d %s' % (r['executed'], r['dead'],
                                                          r['dead_by_reason']))
    if r['still_pending']:
        print('still pending:            %d' % r['still_pending'])
    print('executed more than once:  %d (one job at most %d times); extra runs by cause: %s; '
          'unexplained: %d' % (r['executed_more_than_once'], r['most_runs_of_one_job'],
                               r['duplicate_runs_by_cause'] or '{}', r['unexplained_duplicates']))
    print_stall(r)
    print('workers taken for dead:   %d' % r['workers_taken_for_dead'])
    print_findings(r, details, work)
