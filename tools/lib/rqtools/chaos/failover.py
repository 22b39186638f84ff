"""tools/chaos --mode failover: SIGKILLs the master of a replication group
under Sentinel while producers push and workers run, and counts every job.

The jobs' Redis is a ReplicationGroup (servers.py): a master, two
replicas and three sentinels on loopback. Workers and producers reach it only
through the sentinels (a redis+sentinel:// URL). The job records (every
attempt of a ChaosJob, tests/chaos/chaos_jobs.cc) go to a separate ledger
redis-server on a unix socket that is never failed over: records kept on
the failing group would be lost with the jobs, and the count would lie.

Each failover: wait until the group is whole (both replicas linked, every
sentinel sees them) and the sentinels may start another failover (twice
their failover-timeout since the last); for some failovers SIGSTOP both
replicas for --pause-seconds, writing --ballast-mb to the master at once
(see write_ballast), then SIGCONT them; SIGKILL the master at once (the
writes the replicas had not read are then gone: a real replication gap on
loopback, measured from the offsets); wait (bounded) until a sentinel names
a new master whose ROLE says so; restart the killed server only as a replica
of the new master, so that it never comes back as an empty master.

The producers keep a standing backlog (--backlog) of jobs that sleep up to
--sleep-ms: the jobs pushed in a gap are then still queued when the master
dies. With idle workers they would run at once, on the old master, and
nothing lost would show.

Producers run in two groups: "ack" pushes with ClientOptions::wait_replicas
= 1 (a push is confirmed when WAIT reports a replica has it: kReplicated),
"plain" without (confirmed: kAccepted). The run fails on any job lost among
the ack group's confirmed pushes; the plain group's losses are expected (its
pushes in a replication gap) and reported, so the option's value shows; a
plain loss pushed outside every replication gap fails the run (replication
did not lose it, reliableq did). A duplicate run is explained by a failover
when the earlier run overlaps a failover window (from a second before the
gap opened until --failover-slack seconds after the promotion): its ack was
lost with the old master (the run ended before the kill) or its fetch was
(it ran on across the kill, and the job was back in its queue). Duplicates
outside every window still need a cause of the default mode, or fail the run.

--ack-replicas 0 turns the ack group into plain producers whose losses still
fail the run: a run that shows the check catches confirmed pushes lost in a
failover (it fails, with the losses of both groups alike).

Workers and producers must follow the master by themselves: after each
failover every worker that lived through it must run a job pushed after the
promotion, and every producer must store pushes again (both reported in
seconds after the kill); otherwise the run fails.
"""

import json
import os
import time

from ..processes import spawn
from ..resp import Redis, RedisReplyError
from ..servers import HOST, ReplicationGroup
from . import HEARTBEAT_GONE, QUEUES, RECORD_PREFIX
from .oracle import print_findings
from .worker_faults import Chaos

GROUPS = ('ack', 'plain')


class FailoverChaos(Chaos):
    def __init__(self, args, work):
        super().__init__(args, work)
        # self.redis (a unix-socket redis-server) is the ledger of job
        # records; the jobs live in the group.
        self.group = ReplicationGroup(os.path.join(work, 'group'), self.rng,
                                      args.down_after_ms, args.failover_timeout_ms)
        self.failovers = []
        self.producer_group = {}  # producer base path -> 'ack' or 'plain'
        self._data = None

    # -- connections ---------------------------------------------------------

    def redis_url(self):
        return self.group.url()

    def data(self):
        """A connection to the master the sentinels name now."""
        named = self.group.ask_master()
        if named is None:
            raise OSError('no sentinel answers')
        if self._data is None or self._data.address[1] != named[0]:
            if self._data is not None:
                self._data.close()
            self._data = Redis((HOST, named[0]), timeout=2.0)
        return self._data

    def watch_orphans(self, kind, pid):
        # No worker is killed on purpose here: a worker that exits is a
        # problem of the run (check), not an orphan to time.
        self.event('unwatched', pid, kind)

    # -- producers -----------------------------------------------------------

    def start_producers(self):
        a = self.args
        window = max(1.0, a.duration * a.push_window)
        # A failover the plan's drift (each failover waits for its promotion
        # and rejoin) puts after this is followed by no pushes: check reads it.
        self.push_window_end = time.time() + window
        total = a.producers * len(GROUPS)
        share, extra = divmod(a.jobs, total)
        number = 0
        for group in GROUPS:
            for p in range(a.producers):
                count = share + (1 if number < extra else 0)
                number += 1
                base_path = os.path.join(self.work, 'producers', '%s-%d' % (group, p))
                argv = [a.producer, '--redis', self.redis_url(),
                        '--first-id', str(number * 10_000_000), '--count', str(count),
                        '--rate', '%.3f' % (count / window), '--queues', ','.join(QUEUES),
                        '--accepted', base_path + '.accepted',
                        '--unknown', base_path + '.unknown',
                        '--deadline', str(a.duration + a.drain_timeout)]
                if group == 'ack' and a.ack_replicas > 0:
                    argv += ['--wait-replicas', str(a.ack_replicas),
                             '--wait-timeout', str(a.wait_timeout)]
                if a.backlog:
                    argv += ['--backlog', str(a.backlog)]
                self.producers.append((spawn(argv, base_path + '.log'), base_path))
                self.producer_group[base_path] = group

    def read_pushes(self, group, suffix):
        """{id: (time, detail)} from the `suffix` files of one group's
        producers (lines "id<TAB>time<TAB>detail")."""
        out = {}
        for _, path in self.producers:
            if self.producer_group[path] != group:
                continue
            try:
                with open(path + suffix) as f:
                    for line in f:
                        fields = line.rstrip('\n').split('\t', 2)
                        if len(fields) == 3 and fields[0]:
                            out[int(fields[0])] = (float(fields[1]), fields[2])
            except OSError:
                pass
        return out

    # -- one failover --------------------------------------------------------

    def follow_sentinels(self):
        """Notices a failover the sentinels made by themselves (a master that
        did not answer them within down-after, on a loaded machine) and
        records it: its windows explain duplicates like a planned one, and a
        loss among the confirmed pushes around it still fails the run."""
        moved = self.group.follow()
        if moved is None:
            return
        old, new = moved
        now = time.time()
        # The sentinels decided at least down-after before it was seen, and
        # clients may write to the old master, alive, until they follow.
        record = {'index': len(self.failovers) + 1, 'paused': False, 'unplanned': True,
                  'old_port': old.port, 'old_pid': old.pid, 'new_port': new.port,
                  'gap_from': now - self.args.down_after_ms / 1000.0 - 5.0,
                  'kill_at': now, 'promoted_at': now}
        self.failovers.append(record)
        self.event('sentinels_failover', new.pid, [old.port, new.port])
        self.log('failover %d: the sentinels moved the master from port %d to port %d by '
                 'themselves' % (record['index'], old.port, new.port))

    def tick(self):
        self.tend_workers()
        self.follow_sentinels()

    def failover(self, paused):
        a = self.args
        g = self.group
        tick = self.tend_workers
        # A sentinel starts no second failover of one master within twice
        # its failover-timeout of the last; and the group must be whole,
        # its master the one every sentinel asked names.
        spacing = 2 * a.failover_timeout_ms / 1000.0 + 0.5
        deadline = time.monotonic() + a.group_timeout
        while True:
            while g.last_failover_at is not None and \
                    time.monotonic() - g.last_failover_at < spacing:
                self.tick()
                time.sleep(0.05)
            g.wait_healthy(tick=self.tick, limit=a.group_timeout)
            self.follow_sentinels()
            if g.wait_agreement(tick=tick, limit=1.0):
                break
            if time.monotonic() >= deadline:
                raise RuntimeError('the sentinels do not agree on the master (port %d) within '
                                   '%.0f s' % (g.master.port, a.group_timeout))
        old = g.master
        record = {'index': len(self.failovers) + 1, 'paused': paused, 'unplanned': False,
                  'old_port': old.port, 'old_pid': old.pid}
        self.failovers.append(record)
        if paused:
            replicas = g.replicas()
            record['pause_at'] = time.time()
            for n in replicas:
                n.pause()
            self.event('replicas_pause', None, [n.pid for n in replicas])
            record['ballast_bytes'] = self.write_ballast(old)
            time.sleep(max(0.0, record['pause_at'] + a.pause_seconds - time.time()))
        try:
            offset = int(old.replication(timeout=0.5).get('master_repl_offset', 0))
        except (OSError, RedisReplyError, ValueError):
            offset = None
        if paused:
            for n in replicas:
                n.resume()
            record['resume_at'] = time.time()
            self.event('replicas_resume', None, [n.pid for n in replicas])
        old.kill()
        record['kill_at'] = time.time()
        record['gap_from'] = record.get('pause_at', record['kill_at'])
        self.event('master_kill', old.pid, old.port)
        self.log('failover %d: SIGKILL master port %d (pid %d)%s' % (
            record['index'], old.port, old.pid,
            ', replicas paused %.1f s before' % a.pause_seconds if paused else ''))
        new = g.wait_promotion(old, tick=tick, limit=a.group_timeout)
        record['promoted_at'] = time.time()
        record['new_port'] = new.port
        self.event('promoted', new.pid, new.port)
        try:
            promoted = int(new.replication(timeout=1.0).get('second_repl_offset', 0)) - 1
            record['promoted_offset'] = promoted
            if offset is not None and promoted >= 0:
                # A lower bound: the master wrote on after its offset was read.
                record['gap_bytes'] = max(0, offset - promoted)
        except (OSError, RedisReplyError, ValueError):
            pass
        record['old_offset'] = offset
        # The killed server comes back once every sentinel names the new
        # master: its full resynchronization then does not load the new
        # master while the sentinels still reconfigure the group.
        if not g.wait_agreement(tick=tick, limit=a.group_timeout / 2):
            self.log('failover %d: the sentinels did not all name port %d within %.0f s'
                     % (record['index'], new.port, a.group_timeout / 2))
        old.start(replica_of=new.port)
        record['rejoined_at'] = time.time()
        self.event('rejoined', old.pid, new.port)
        self.log('failover %d: port %d promoted after %.2f s (replication gap >= %s bytes); '
                 'port %d back as its replica' % (
                     record['index'], new.port, record['promoted_at'] - record['kill_at'],
                     record.get('gap_bytes', '?'), old.port))

    def write_ballast(self, master):
        """Writes --ballast-mb megabytes to the master, one value written over
        and over, while the replicas are stopped. Without it the pause opens
        no gap on loopback: the kernel's socket buffers (megabytes) hold a
        second of the run's writes, and the replicas read all of it after
        SIGCONT, even from a master that is dead by then. With it, what the
        master writes after the ballast waits in its own output buffer for
        the replicas and dies with it. Returns the bytes written."""
        value = 'b' * (1 << 20)
        r = master.client(timeout=5.0)
        written = 0
        try:
            for _ in range(self.args.ballast_mb):
                r.call('SET', RECORD_PREFIX + 'ballast', value)
                written += len(value)
        except (OSError, RedisReplyError) as e:
            self.problems.append('ballast: %s' % e)
        finally:
            r.close()
        return written

    def plan(self):
        """[(seconds from the start, paused)] for the failovers."""
        a = self.args
        lo, hi = 3.0, max(4.0, a.duration - a.failover_slack)
        step = (hi - lo) / a.failovers
        paused = set(self.rng.sample(range(a.failovers), a.paused_failovers))
        return [(lo + step * i + self.rng.uniform(0, 0.3) * step, i in paused)
                for i in range(a.failovers)]

    # -- the run -------------------------------------------------------------

    def run(self):
        a = self.args
        self.t0 = time.monotonic()
        for sub in ('redis', 'workers', 'producers'):
            os.makedirs(os.path.join(self.work, sub))
        self.redis.start()
        self.log('ledger redis-server pid %d on %s (never failed over)' % (
            self.redis.proc.pid, self.redis.sock))
        self.group.start(limit=a.group_timeout)
        self.log('replication group: master port %d, replicas %s, sentinels %s (quorum 2, '
                 'down-after %d ms, failover-timeout %d ms)' % (
                     self.group.master.port, [n.port for n in self.group.replicas()],
                     [s.port for s in self.group.sentinels], a.down_after_ms,
                     a.failover_timeout_ms))
        self.throw_fraction = 0.0 if a.throw_fraction == 'auto' else float(a.throw_fraction)
        for _ in range(a.workers):
            self.start_worker()
        self.start_producers()
        self.log('%d workers, %d producers with replica acknowledgement and %d without, '
                 'pushing %d jobs over %.0f s through %s' % (
                     a.workers, a.producers, a.producers, a.jobs, a.duration * a.push_window,
                     self.redis_url()))

        ledger = Redis(self.redis.sock)
        plan = self.plan()
        start = time.monotonic()
        next_progress = start + 10
        next_follow = start
        while True:
            self.tend_workers()
            now = time.monotonic()
            # The chaos lasts --duration, and at least --failover-slack
            # after the last promotion: the producers and workers must be
            # seen to follow the last new master too.
            last = self.group.last_failover_at
            if not plan and now - start >= a.duration and (
                    last is None or now - last >= a.failover_slack):
                break
            if now >= next_follow:
                next_follow = now + 0.5
                self.follow_sentinels()
            if plan and now - start >= plan[0][0]:
                _, paused = plan.pop(0)
                self.failover(paused)
                continue
            if now >= next_progress:
                next_progress = now + 10
                self.progress(ledger)
            time.sleep(0.02)

        self.wind_down(lambda: self.pending(self.data()), lambda left: self.progress(ledger, left),
                       'failovers')
        self.stop_workers()
        report = self.check(ledger, self.data())
        ledger.close()
        return report

    def progress(self, ledger, pending=None):
        executed = self.runs_so_far(ledger)
        stored = {g: len(self.read_pushes(g, '.accepted')) for g in GROUPS}
        text = 'stored %s, executed %s, failovers %d, workers %d' % (
            stored, executed, len(self.failovers), len(self.running_workers()))
        if pending:
            text += ', pending %s' % pending
        self.log(text)

    def cleanup(self):
        super().cleanup()
        if self._data is not None:
            self._data.close()
        self.group.stop()

    # -- the check -----------------------------------------------------------

    def windows(self):
        """(failover, from, to): when a run may meet that failover."""
        out = []
        for f in self.failovers:
            if 'promoted_at' not in f:
                continue
            slack = self.args.failover_slack + (10.0 if f['unplanned'] else 0.0)
            out.append((f, f['gap_from'] - 1.0, f['promoted_at'] + slack))
        return out

    def explain_failover(self, lower, higher):
        """Why two 'ok' runs of one job both happened (see explain()), with
        the failover's own causes; None when nothing explains it."""
        if higher['rc'] > lower['rc']:
            return 'retry'
        for f, since, until in self.windows():
            if lower['end'] < since or lower['start'] > until:
                continue
            if higher['ic'] > lower['ic']:
                # Handed back from a working list: a janitor took the process
                # for dead (the failover outlasted the heartbeat ttl), or the
                # process found its heartbeat key gone and gave back what it
                # had not started.
                return 'failover: recovered from a working list'
            if lower['end'] < f['kill_at']:
                # It ran and was acked before the kill; the ack was not yet
                # replicated, so the new master still had it to run.
                return 'failover: ack lost with the old master'
            # Fetched from the old master, and that move was not replicated:
            # the new master had it in its queue.
            return 'failover: fetch lost with the old master'
        return self.explain(lower, higher)

    def in_gap(self, pushed_at):
        """The failover whose replication gap a push that returned at
        `pushed_at` fell in, or None."""
        for f in self.failovers:
            if 'gap_from' not in f:
                continue
            # After an unplanned failover the old master lives on, and takes
            # writes until its clients follow the new one.
            until = f['kill_at'] + (10.0 if f['unplanned'] else 0.0)
            if f['gap_from'] - 1.0 <= pushed_at <= until:
                return f
        return None

    def check(self, ledger, r):
        a = self.args
        runs, attempts, by_job = self.read_records(ledger)
        dead, dead_reasons, pending_ids, stranded_keys = self.read_leftovers(r)
        executed = {i for i, n in runs.items() if n > 0}
        done = executed | set(dead)

        groups = {}
        every_push = set()
        for g in GROUPS:
            stored = self.read_pushes(g, '.accepted')
            unknown = self.read_pushes(g, '.unknown')
            every_push |= set(stored) | set(unknown)
            confirmed_as = 'replicated' if g == 'ack' and a.ack_replicas > 0 else 'accepted'
            confirmed = {i for i, (_, outcome) in stored.items() if outcome == confirmed_as}
            other = set(stored) - confirmed
            lost = sorted(confirmed - done - set(pending_ids))
            lost_in_gap = [i for i in lost if self.in_gap(stored[i][0]) is not None]
            for i in lost_in_gap:
                f = self.in_gap(stored[i][0])
                f.setdefault('lost', {}).setdefault(g, 0)
                f['lost'][g] += 1
            confirmed_in_gap = [i for i in confirmed if self.in_gap(stored[i][0]) is not None]
            lost_elsewhere = sorted(set(lost) - set(lost_in_gap))
            reasons = {}
            for _, reason in unknown.values():
                key = reason.split(':')[0] if 'replicas confirmed' not in reason else \
                    'fewer replicas confirmed it in time'
                reasons[key] = reasons.get(key, 0) + 1
            groups[g] = {
                'confirmed': len(confirmed),
                'confirmed_as': confirmed_as,
                'lost': len(lost),
                'confirmed_in_a_gap': len(confirmed_in_gap),
                'lost_in_replication_gap': len(lost_in_gap),
                'lost_outside_any_gap': len(lost_elsewhere),
                'stored_otherwise': len(other),
                'stored_otherwise_lost': len(other - done - set(pending_ids)),
                'not_confirmed': len(unknown),
                'not_confirmed_ran': len(set(unknown) & done),
                'not_confirmed_reasons': reasons,
                'lost_ids': lost[:50],
            }
            if lost_elsewhere:
                self.problems.append('%d jobs of the %s group lost outside every replication '
                                     'gap (e.g. %s)' % (len(lost_elsewhere), g, lost_elsewhere[:5]))
            if other:
                self.problems.append('%d pushes of the %s group were stored as something other '
                                     'than %s' % (len(other), g, confirmed_as))
        phantom = sorted(i for i in done if i not in every_push)
        still_pending = sorted((every_push - done) & set(pending_ids))

        duplicated, causes, unexplained = self.explain_duplicates(
            runs, by_job, lambda job_id, _ok, lower, higher: self.explain_failover(lower, higher))
        self.report_unasked_exits()
        self.check_following(attempts)

        report = {
            'mode': 'failover',
            'failovers': len([f for f in self.failovers
                              if 'promoted_at' in f and not f['unplanned']]),
            'unplanned_failovers': len([f for f in self.failovers if f['unplanned']]),
            'failovers_with_replicas_paused': len([f for f in self.failovers if f['paused']]),
            'each_failover': [{
                'paused': f['paused'],
                'unplanned': f['unplanned'],
                'promotion_s': round(f['promoted_at'] - f['kill_at'], 2)
                if 'promoted_at' in f else None,
                'gap_bytes': f.get('gap_bytes'),
                'lost': {g: f.get('lost', {}).get(g, 0) for g in GROUPS},
                'producers_stored_again_s': f.get('producers_back_s'),
                'workers_ran_new_jobs_s': f.get('workers_back_s'),
            } for f in self.failovers],
            'groups': groups,
            'executed': len(executed),
            'dead': len(dead),
            'dead_by_reason': {k: len(v) for k, v in dead_reasons.items()},
            'still_pending': len(still_pending),
            'phantom_executions': len(phantom),
            'executed_more_than_once': duplicated,
            'most_runs_of_one_job': max(runs.values(), default=0),
            'duplicate_runs_by_cause': causes,
            'unexplained_duplicates': len(unexplained),
            'workers_taken_for_dead': self.count_in_logs(
                HEARTBEAT_GONE, {w.pid for w in self.workers}),
            'heartbeat_ttl_s': a.heartbeat_ttl,
            'stranded_working_lists': stranded_keys,
            'workers': a.workers,
            'concurrency': a.concurrency,
            'producers_per_group': a.producers,
            'jobs': a.jobs,
            'duration_s': a.duration,
            'pause_seconds': a.pause_seconds,
            'wait_timeout_ms': a.wait_timeout,
            'ack_replicas': a.ack_replicas,
            'failover_slack_s': a.failover_slack,
            'seed': a.seed,
            'problems': self.problems,
        }
        report['ok'] = (groups['ack']['lost'] == 0 and not unexplained and not phantom
                        and not still_pending and not stranded_keys and not self.problems
                        and report['failovers'] >= a.failovers)
        with open(os.path.join(self.work, 'events.json'), 'w') as f:
            json.dump({'events': self.events, 'failovers': self.failovers, 'report': report},
                      f, indent=1)
        self.details = {'unexplained': unexplained, 'phantom': phantom,
                        'still_pending': still_pending, 'pending_ids': pending_ids}
        return report

    def check_following(self, attempts):
        """Whether the workers and producers followed each new master: the
        first push stored after each kill, per producer, and the first run
        of a job pushed after each promotion, per worker that lived through
        it. Sets producers_back_s and workers_back_s on each failover."""
        pushes = {}  # producer path -> sorted times of stored pushes
        pushed_at = {}
        for _, path in self.producers:
            times = []
            try:
                with open(path + '.accepted') as f:
                    for line in f:
                        fields = line.rstrip('\n').split('\t', 2)
                        if len(fields) == 3:
                            times.append(float(fields[1]))
                            pushed_at[int(fields[0])] = float(fields[1])
            except OSError:
                pass
            pushes[path] = sorted(times)
        runs_by_pid = {}
        for at in attempts:
            if at['id'] in pushed_at:
                runs_by_pid.setdefault(at['pid'], []).append((at['start'], pushed_at[at['id']]))
        started = {e['pid']: e['at'] for e in self.events if e['kind'] == 'start'}
        ended = {e['pid']: e['at'] for e in self.events if e['kind'] in ('exit', 'term_exit')}
        done = [f for f in self.failovers if 'promoted_at' in f]
        for n, f in enumerate(done):
            until = done[n + 1]['kill_at'] if n + 1 < len(done) else float('inf')
            # Within the producers' window there are pushes to follow the
            # new master with; after it, none are due.
            pushes_due = f['kill_at'] < self.push_window_end - 1.0
            backs = []
            for path, times in pushes.items():
                later = [t for t in times if f['kill_at'] < t < until]
                if later:
                    backs.append(later[0] - f['kill_at'])
                elif pushes_due and times and times[-1] > f['kill_at'] - 5:
                    # It was still pushing when the master died.
                    self.problems.append('producer %s stored no push after failover %d'
                                         % (os.path.basename(path), f['index']))
            f['producers_back_s'] = round(max(backs), 2) if backs else None
            backs = []
            for w in self.workers:
                if started.get(w.pid, float('inf')) > f['kill_at'] or \
                        ended.get(w.pid, float('inf')) < f['promoted_at'] + self.args.failover_slack:
                    continue  # it did not live through this failover
                if not any(f['promoted_at'] < t < until for times in pushes.values()
                           for t in times):
                    continue  # no job was pushed after it to run
                runs = [s for s, p in runs_by_pid.get(w.pid, [])
                        if p > f['promoted_at'] and s < until]
                if runs:
                    backs.append(min(runs) - f['kill_at'])
                else:
                    self.problems.append('worker %d ran no job pushed after failover %d (did '
                                         'it follow the new master? see %s)'
                                         % (w.pid, f['index'], w.log_path))
            f['workers_back_s'] = round(max(backs), 2) if backs else None


def print_report(report, details, work):
    r = report
    print()
    print('== chaos report (failover)')
    print('failovers:                %d (%d with both replicas paused %.1f s before the kill)%s'
          % (r['failovers'], r['failovers_with_replicas_paused'], r['pause_seconds'],
             '; and %d the sentinels made by themselves' % r['unplanned_failovers']
             if r['unplanned_failovers'] else ''))
    print('  #  paused  promoted after  gap (bytes, at least)  lost: ack plain  '
          'producers back  workers back')
    for n, f in enumerate(r['each_failover'], 1):
        print('%3d  %-6s  %12s s  %21s  %9d %5d  %12s s  %10s s' % (
            n, 'yes' if f['paused'] else 'auto' if f['unplanned'] else 'no',
            f['promotion_s'], f['gap_bytes'],
            f['lost']['ack'], f['lost']['plain'], f['producers_stored_again_s'],
            f['workers_ran_new_jobs_s']))
    print('  (auto: a failover the sentinels made by themselves; gap: the old master\'s replication offset beyond the promoted replica\'s; '
          'producers back: the slowest producer\'s first stored push after the kill, later '
          'when it waited for room in the backlog; workers back: the slowest worker\'s first '
          'run of a job pushed after the promotion, after the kill)')
    for g in GROUPS:
        x = r['groups'][g]
        if g == 'plain':
            label = 'without acknowledgement'
        elif r['ack_replicas'] > 0:
            label = 'with replica acknowledgement (wait_replicas %d, wait_timeout %d ms)' % (
                r['ack_replicas'], r['wait_timeout_ms'])
        else:
            label = 'acknowledgement turned off (--ack-replicas 0), its losses still fail'
        print('%s group, %s:' % (g, label))
        print('  confirmed (%s):  %d (%d in a replication gap); lost among them: %d (%d in '
              'a replication gap, %d outside)' % (
                  x['confirmed_as'], x['confirmed'], x['confirmed_in_a_gap'], x['lost'],
                  x['lost_in_replication_gap'], x['lost_outside_any_gap']))
        print('  not confirmed:          %d, of which ran: %d; why: %s'
              % (x['not_confirmed'], x['not_confirmed_ran'], x['not_confirmed_reasons']))
        if x['lost_ids']:
            print('  lost ids:               %s' % x['lost_ids'][:20])
    print('executed:                 %d; dead: %d %s' % (r['executed'], r['dead'],
                                                          r['dead_by_reason']))
    if r['still_pending']:
        print('still pending:            %d' % r['still_pending'])
    print('executed more than once:  %d (one job at most %d times); extra runs by cause: %s; '
          'unexplained: %d' % (r['executed_more_than_once'], r['most_runs_of_one_job'],
                               r['duplicate_runs_by_cause'] or '{}', r['unexplained_duplicates']))
    print('workers taken for dead:   %d times a live worker found its heartbeat key gone '
          '(heartbeat ttl %g s)' % (r['workers_taken_for_dead'], r['heartbeat_ttl_s']))
    print_findings(r, details, work)
