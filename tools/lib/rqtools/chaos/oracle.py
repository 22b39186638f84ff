"""The check of a chaos run: every push Redis acknowledged must have run at
least once or sit in the dead set, and every second run of a job must have
a cause (a retry, or the kill, crash, zombie, TERM or Redis restart of the
process of its earlier run). Oracle is a part of every mode's Chaos: it
reads the producers' lists of ids, the job records in the ledger, the
leftovers in Redis and the worker logs, and writes the report; print_report
and print_findings print it."""

import calendar
import json
import os
import re
import signal
import time

from ..resp import pairs
from . import FENCED, HEARTBEAT_GONE, PREFIX, RECORD_PREFIX, TICK_QUEUE
from .sequences import SequenceCheck, print_sequences, waiting_lists


def pending_job_ids(left):
    """{job id: where} of the payloads in `left` ({payload: key}); -1 for
    the unreadable ones."""
    out = {}
    for payload, where in left.items():
        try:
            out[int(json.loads(payload)['args'][0])] = where
        except (ValueError, KeyError, IndexError, TypeError):
            out.setdefault(-1, where)
    return out


def log_stamp(line):
    """The time a log line was written (its leading ISO 8601 UTC stamp), in
    epoch seconds of the writer's clock; None for a line without one."""
    stamp = line.split(' ', 1)[0]
    try:
        t = calendar.timegm(time.strptime(stamp[:19], '%Y-%m-%dT%H:%M:%S'))
    except ValueError:
        return None
    return t + (float('0' + stamp[19:-1]) if len(stamp) > 20 else 0.0)


def limit_waiting_lists(r):
    """The lists where concurrency limits hold jobs back
    (<prefix>limit:<name>:waiting, reliableq-schema(7))."""
    found, cursor = [], '0'
    while True:
        cursor, keys = r.call('SCAN', cursor, 'MATCH', PREFIX + 'limit:*:waiting', 'COUNT', '1000')
        found.extend(keys)
        if cursor == '0':
            return found


class Oracle(SequenceCheck):
    """The check's half of a Chaos run (worker_faults.Chaos): it reads what
    the run recorded (self.events, self.workers, self.producers, self.redis's
    outages, self.sampler's watches) and appends to self.problems."""

    def stall_report(self, runs, unexplained):
        """What became of the pushes made while Redis was stopped: how many
        were spooled, accepted or not stored; of the stored, how many ran,
        how many ran more than once, and how many of those a fault of a
        worker does not explain (a replay stored them twice)."""
        stored = {i for i, o in self.stall_outcomes.items() if o != 'not stored'}
        twice = {item['id'] for item in unexplained}
        outcomes = list(self.stall_outcomes.values())
        return {
            'pushes': len(self.stall_outcomes),
            'spooled': outcomes.count('spooled'),
            'accepted': outcomes.count('accepted'),
            'not_stored': outcomes.count('not stored'),
            'ran': sum(1 for i in stored if runs.get(i, 0) > 0),
            'ran_more_than_once': sum(1 for i in stored if runs.get(i, 0) > 1),
            'stored_twice': len(stored & twice),
        }


    def read_ids(self, suffix):
        ids = {}
        for base in [base for _, base in self.producers] + self.id_bases:
            try:
                with open(base + suffix) as f:
                    for line in f:
                        fields = line.rstrip('\n').split('\t', 1)
                        if fields[0]:
                            ids[int(fields[0])] = fields[1] if len(fields) > 1 else ''
            except OSError:
                pass
        return ids

    def count_in_logs(self, text, pids):
        n = 0
        for w in self.workers:
            if w.pid not in pids:
                continue
            try:
                with open(w.log_path, errors='replace') as f:
                    n += sum(1 for line in f if text in line)
            except OSError:
                pass
        return n

    def log_times(self, marker=None):
        """From every worker log: {pid: [wall-clock times]} at which that
        worker's process was declared dead, either by a janitor ("janitor:
        process <identity> is dead", in any worker's log) or by itself
        ("heartbeat key was gone", when it beat again); with `marker`, the
        times at which a worker's own log has a line holding it."""
        if marker is not None:
            return self._marked_times(marker)
        if self._log_times is not None:
            return self._log_times
        janitor = re.compile(r'janitor: process (\S+) is dead')
        times = {}
        for w in self.workers:
            try:
                with open(w.log_path, errors='replace') as f:
                    lines = f.readlines()
            except OSError:
                continue
            for line in lines:
                found = janitor.search(line)
                if found:
                    try:
                        pid = int(found.group(1).split(':')[-2])
                    except (ValueError, IndexError):
                        continue
                elif HEARTBEAT_GONE in line:
                    pid = w.pid
                else:
                    continue
                t = log_stamp(line)
                if t is None:
                    continue
                # Stamped by the clock of the worker that wrote the log.
                times.setdefault(pid, []).append(self.real_time(w.pid, t))
        self._log_times = times
        return times

    def _marked_times(self, marker):
        cache = self.__dict__.setdefault('_marked_cache', {})
        if marker in cache:
            return cache[marker]
        times = {}
        for w in self.workers:
            try:
                with open(w.log_path, errors='replace') as f:
                    lines = [line for line in f if marker in line]
            except OSError:
                continue
            for line in lines:
                t = log_stamp(line)
                if t is None:
                    continue
                times.setdefault(w.pid, []).append(self.real_time(w.pid, t))
        cache[marker] = times
        return times

    def real_time(self, pid, t):
        """`t`, read from the wall clock of worker `pid`, on the real clock
        (they differ with --clock-skew only)."""
        clocks = getattr(self, 'clocks', None)
        return t if clocks is None else clocks.real_time(pid, t)

    @staticmethod
    def explain_duplicates(runs, by_job, explain):
        """Every job that ran more than once: its successful runs in the order
        they were fetched, each run after the first explained by
        explain(job_id, runs, lower, higher), a cause or None. Returns the
        number of such jobs, the extra runs by cause, and the jobs with a run
        no cause explains ({'id', 'runs'})."""
        causes, unexplained, duplicated = {}, [], 0
        for job_id, count in runs.items():
            if count < 2:
                continue
            duplicated += 1
            ok = sorted((at for at in by_job.get(job_id, []) if at['outcome'] == 'ok'),
                        key=lambda at: (at['rc'], at['ic'], at['start']))
            for lower, higher in zip(ok, ok[1:]):
                cause = explain(job_id, ok, lower, higher)
                if cause is None:
                    unexplained.append({'id': job_id, 'runs': ok})
                    break
                causes[cause] = causes.get(cause, 0) + 1
        return duplicated, causes, unexplained

    def report_unasked_exits(self):
        """A worker exit nobody asked for is a problem of the run; the modes
        whose jobs never abort on purpose call this."""
        for e in self.events:
            if e['kind'] == 'exit':
                log = next((w.log_path for w in self.workers if w.pid == e['pid']), '?')
                self.problems.append('worker %d exited by itself with status %s (see %s)'
                                     % (e['pid'], e['detail'], log))

    def explain(self, lower, higher):
        """Why job runs `lower` and `higher` (two 'ok' runs of one job, ordered
        by retry_count, then interrupted_count) both happened; None when
        nothing explains it."""
        if higher['rc'] > lower['rc']:
            return 'retry'
        # A worker that fenced itself (a Redis outage or a partition near its
        # ttl) stopped the jobs it was running, dropped their outcomes and
        # put them back without counting an interruption: a run that was
        # still on (its handler waiting for its own record, say) when the
        # fence came runs again.
        fenced = self.log_times(FENCED).get(lower['pid'], [])
        if any(lower['start'] <= t <= higher['start'] for t in fenced):
            return 'fenced'
        if higher['ic'] <= lower['ic']:
            return None
        # The payload of `higher` was handed back with one more interruption
        # after `lower`'s process fetched it: that process must have been
        # killed, crashed, stopped as a zombie, stopped past its timeout, or
        # declared dead, before `higher` began.
        pid = lower['pid']
        since = min(lower['start'], higher['start']) - 30
        for e in sorted(self.events, key=lambda e: e['at']):
            if e['pid'] != pid or not since <= e['at'] <= higher['start']:
                continue
            cause = {'kill': 'kill', 'zombie': 'zombie', 'term': 'term',
                     'exit': 'crash'}.get(e['kind'])
            if cause is not None:
                return cause
        for t in sorted(self.log_times().get(pid, [])):
            if since <= t <= higher['start'] + 30:
                near_outage = any(since <= ready and killed <= t
                                  for killed, ready in self.redis.outages)
                return 'redis restart' if near_outage else 'declared dead'
        return None

    def snoozed_at_once(self, snoozed, by_job):
        """The attempts of snoozed jobs that overlapped another attempt of
        the same job with no kill, crash, zombie or fence to explain it: a
        snooze is one move to the scheduled set, after the attempt's record,
        so its next attempt can only begin after it. (job id, one, other)."""
        found = []
        for job_id in sorted(snoozed):
            ats = sorted(by_job[job_id], key=lambda at: at['start'])
            for i, lower in enumerate(ats):
                for higher in ats[i + 1:]:
                    if higher['start'] >= lower['end']:
                        break
                    if self.explain(lower, higher) is not None:
                        continue
                    found.append((job_id, lower, higher))
        return found

    def startup_lost_redis(self, pid, started, exited):
        """True when the worker `pid` (alive from `started` to `exited`, wall
        clock) met a Redis outage and its log ends with an error naming
        Redis that it met while starting."""
        if not any(killed <= exited + 1 and ready + 1 >= started
                   for killed, ready in self.redis.outages):
            return False
        log = next((w.log_path for w in self.workers if w.pid == pid), None)
        if log is None:
            return False
        try:
            with open(log, errors='replace') as f:
                lines = f.read().splitlines()
        except OSError:
            return False
        return (bool(lines) and '(Redis at ' in lines[-1] and
                not any('INFO: started ' in line for line in lines))

    def limit_overlaps(self, attempts):
        """With --limit N: (the most attempts seen running at once, moments
        above N inside the crash window, moments above N outside it). A
        moment is inside the crash window when one of the attempts running
        then belongs to a process that was SIGKILLed, crashed, stopped as a
        zombie, sent TERM (a hard stop abandons a C++ handler's job) or
        declared dead within 30 s of the attempt, or when a Redis restart
        (which loses the writes its AOF had not synced, slots included) lies
        within 30 s (reliableq(1), LIMITS). Only recorded attempts count:
        one cut short by a SIGKILL wrote no record."""
        causes = {}
        for e in self.events:
            if e['kind'] in ('kill', 'zombie', 'term', 'exit'):
                causes.setdefault(e['pid'], []).append(e['at'])
        for pid, times in self.log_times().items():
            causes.setdefault(pid, []).extend(times)

        def in_window(at):
            near = lambda t: at['start'] - 30 <= t <= at['end'] + 30
            return (any(near(t) for t in causes.get(at['pid'], [])) or
                    any(near(killed) or near(ready) for killed, ready in self.redis.outages))

        steps = []
        for i, at in enumerate(attempts):
            steps.append((at['start'], 1, i))
            steps.append((at['end'], -1, i))
        # Ends before starts at the same instant: back to back is no overlap.
        steps.sort(key=lambda s: (s[0], s[1]))
        running, most, inside, outside = set(), 0, 0, 0
        for _, step, i in steps:
            if step < 0:
                running.discard(i)
                continue
            running.add(i)
            most = max(most, len(running))
            if len(running) > self.args.limit:
                if any(in_window(attempts[j]) for j in running):
                    inside += 1
                else:
                    outside += 1
        return most, inside, outside

    def check_ticks(self, r):
        """With --periodic: every second of the chaos, from 3 s after it
        began (the workers have declared) to 2 s before it ended, was pushed
        as a tick exactly once; a worker whose scheduler stops after a fault
        leaves a hole. A tick due while Redis was down is owed only by the
        workers running then, which push it late once Redis is back, or
        never when they are killed first (reliableq(1), PERIODIC JOBS): those
        are counted, not failed."""
        seen = {}
        for payload in r.call('LRANGE', 'queue:' + TICK_QUEUE, '0', '-1') or []:
            try:
                tick = int(json.loads(payload)['periodic_tick'])
            except (ValueError, KeyError, TypeError):
                self.problems.append('unreadable tick in queue:%s: %r' % (TICK_QUEUE, payload[:80]))
                continue
            seen[tick] = seen.get(tick, 0) + 1
        begin, end = int(self.chaos_wall[0]) + 3, int(self.chaos_wall[1]) - 2
        missing = [t for t in range(begin, end + 1) if t not in seen]
        twice = sorted(t for t, n in seen.items() if n > 1)

        def in_outage(tick):
            return any(killed - 1 <= tick <= ready + 2 for killed, ready in self.redis.outages)
        excused = [t for t in missing if in_outage(t)]
        missing = [t for t in missing if not in_outage(t)]
        with self.sampler.lock:
            early = sorted(self.sampler.early_ticks)
        if early:
            self.problems.append('%d periodic ticks pushed before their second: %s' % (
                len(early), early[:20]))
        if missing:
            self.problems.append('%d periodic ticks never pushed between %d and %d, none of '
                                 'them while Redis was down: %s' % (len(missing), begin, end,
                                                                    missing[:20]))
        if twice:
            self.problems.append('%d periodic ticks pushed more than once: %s' % (
                len(twice), twice[:20]))
        return {'periodic_ticks': len(seen), 'periodic_ticks_missing': len(missing),
                'periodic_ticks_missing_in_outages': len(excused),
                'periodic_ticks_twice': len(twice), 'periodic_ticks_early': len(early)}

    @staticmethod
    def read_records(ledger):
        """From the Redis that holds the job records: (runs {id: completed
        runs}, every attempt's record, {id: [its attempts]})."""
        runs = {int(k): int(v)
                for k, v in pairs(ledger.call('HGETALL', RECORD_PREFIX + 'runs')).items()}
        attempts = [json.loads(v)
                    for v in pairs(ledger.call('HGETALL', RECORD_PREFIX + 'log')).values()]
        by_job = {}
        for at in attempts:
            by_job.setdefault(at['id'], []).append(at)
        return runs, attempts, by_job

    @staticmethod
    def read_leftovers(r):
        """From the jobs' Redis: (dead {id: reason}, {error class: [ids]},
        pending {id: key} for every job still in a queue, working list,
        schedule or retry, stranded {working list: length} for the working
        lists no registered process owns)."""
        dead = {}
        dead_reasons = {}
        for payload in r.call('ZRANGE', 'dead', '0', '-1') or []:
            try:
                job = json.loads(payload)
                job_id = int(job['args'][0])
            except (ValueError, KeyError, IndexError, TypeError):
                dead_reasons.setdefault('unreadable payload', []).append(payload[:80])
                continue
            reason = '%s: %s' % (job.get('error_class'), job.get('error_message'))
            dead[job_id] = reason
            dead_reasons.setdefault(job.get('error_class'), []).append(job_id)

        # Jobs still somewhere (only after a drain that did not finish), and
        # working lists that no registered process owns: nobody would ever
        # give those back.
        left = {}
        for q in r.call('SMEMBERS', 'queues') or []:
            if q == TICK_QUEUE:
                continue
            for payload in r.call('LRANGE', 'queue:' + q, '0', '-1') or []:
                left[payload] = 'queue:' + q
        for key in ('schedule', 'retry'):
            for payload in r.call('ZRANGE', key, '0', '-1') or []:
                left[payload] = key
        # Jobs a concurrency limit holds back (--limit) wait in its list,
        # and jobs of a sequence whose key another job holds in the key's.
        for key in limit_waiting_lists(r) + waiting_lists(r):
            for payload in r.call('LRANGE', key, '0', '-1') or []:
                left[payload] = key
        registered = set(pairs(r.call('HGETALL', PREFIX + 'registry')))
        stranded_keys = {}
        cursor = '0'
        while True:
            cursor, keys = r.call('SCAN', cursor, 'MATCH', PREFIX + 'working:*', 'COUNT', '1000')
            for key in keys:
                for payload in r.call('LRANGE', key, '0', '-1') or []:
                    left[payload] = key
                owner = key[len(PREFIX + 'working:'):].rsplit(':', 1)[0]
                if owner not in registered:
                    stranded_keys[key] = r.call('LLEN', key)
            if cursor == '0':
                break
        return dead, dead_reasons, pending_job_ids(left), stranded_keys

    def check(self, r):
        a = self.args
        accepted = set(self.read_ids('.accepted'))
        unknown = self.read_ids('.unknown')
        runs, attempts, by_job = self.read_records(r)
        # On the real clock: from the monotonic times where the record has
        # them (a wall clock stepped back makes some of its times occur
        # twice), else through the worker's clock offsets.
        mono_to_real = time.time() - time.monotonic()
        for at in attempts:  # by_job holds the same records
            if 'ms' in at and 'me' in at:
                at['start'], at['end'] = at['ms'] + mono_to_real, at['me'] + mono_to_real
            else:
                at['start'] = self.real_time(at['pid'], at['start'])
                at['end'] = self.real_time(at['pid'], at['end'])
        dead, dead_reasons, pending_ids, stranded_keys = self.read_leftovers(r)

        executed = {i for i, n in runs.items() if n > 0}
        # A job whose attempt discarded it (--discard-fraction) ends there:
        # accounted for, as long as it is nowhere else and never ran.
        discarded = {i for i, ats in by_job.items()
                     if any(at['outcome'] == 'discard' for at in ats)} - executed
        lost = sorted(accepted - executed - discarded - set(dead) - set(pending_ids))
        still_pending = sorted((accepted - executed - set(dead)) & set(pending_ids))
        snoozed = {i for i, ats in by_job.items() if any(at['outcome'] == 'snooze' for at in ats)}
        snoozed_at_once = self.snoozed_at_once(snoozed, by_job)
        for job_id, lower, higher in snoozed_at_once:
            self.problems.append('job %d ran twice at once after a snooze: %s and %s'
                                 % (job_id, json.dumps(lower), json.dumps(higher)))
        phantom = sorted(i for i in executed | set(dead) if i not in accepted and i not in unknown)
        unknown_stored = sorted(i for i in unknown if i in executed or i in dead)

        late_zombie_runs = []

        def explain(job_id, ok, lower, higher):
            cause = self.explain(lower, higher)
            if cause == 'zombie' and lower['start'] > higher['start']:
                # The zombie began the job after a janitor had handed it
                # back (a job it had fetched but not started before it was
                # stopped).
                late_zombie_runs.append({'id': job_id, 'runs': ok})
            return cause
        duplicated, causes, unexplained = self.explain_duplicates(runs, by_job, explain)

        # Worker exits nobody asked for: each must be a planned abort (the
        # job recorded it just before) or it is a crash of the worker itself.
        # A worker that loses Redis while it starts (before it fetches
        # anything) exits 1 with the error naming Redis, as documented; that
        # is explained when a Redis outage overlaps its life.
        aborted_pids = {at['pid'] for at in attempts if at['outcome'] == 'abort'}
        started_at = {e['pid']: e['at'] for e in self.events if e['kind'] == 'start'}
        crashes = 0
        startups_refused = 0
        for e in self.events:
            if e['kind'] == 'term_exit' and e['detail'] == -signal.SIGABRT and a.abort_fraction:
                if e['pid'] in aborted_pids:
                    crashes += 1
                else:
                    log = next((w.log_path for w in self.workers if w.pid == e['pid']), '?')
                    self.problems.append('worker %d ended by SIGABRT after TERM, no planned abort '
                                         '(see %s)' % (e['pid'], log))
            if e['kind'] != 'exit':
                continue
            if e['detail'] == -signal.SIGABRT and e['pid'] in aborted_pids:
                crashes += 1
            elif e['detail'] == 1 and self.startup_lost_redis(
                    e['pid'], started_at.get(e['pid'], e['at']), e['at']):
                startups_refused += 1
            else:
                log = next((w.log_path for w in self.workers if w.pid == e['pid']), '?')
                self.problems.append('worker %d exited by itself with status %s and no planned '
                                     'abort (see %s)' % (e['pid'], e['detail'], log))

        with self.sampler.lock:
            watches = list(self.sampler.watches)
        orphaned = [w for w in watches if w.initial]
        recovered = [w for w in orphaned if w.recovered_at is not None]
        waits = [w.recovered_at - w.at for w in recovered]
        beat_waits = [w.recovered_at - self.real_time(w.pid, w.last_beat)
                      for w in recovered if w.last_beat]

        def overlaps_outage(w):
            end = w.recovered_at if w.recovered_at is not None else time.time()
            return any(killed <= end and ready >= w.at - a.heartbeat_ttl
                       for killed, ready in self.redis.outages)

        calm_waits = [w.recovered_at - w.at for w in recovered if not overlaps_outage(w)]
        stall = self.stall_report(runs, unexplained)
        if a.stall_pushes and not stall['spooled']:
            self.problems.append('no push made while Redis was stopped was spooled: the stall '
                                 'did not happen as planned')
        not_recovered = [w for w in orphaned if w.recovered_at is None and not w.ended]
        bound = a.heartbeat_ttl + a.janitor_interval
        kinds = [e['kind'] for e in self.events]
        outcome_counts = {}
        for at in attempts:
            outcome_counts[at['outcome']] = outcome_counts.get(at['outcome'], 0) + 1

        report = {
            'accepted': len(accepted),
            'unknown_pushes': len(unknown),
            'unknown_pushes_stored': len(unknown_stored),
            'executed_at_least_once': len(accepted & executed),
            'lost': len(lost),
            'still_pending': len(still_pending),
            'executed_more_than_once': duplicated,
            'duplicate_runs_by_cause': causes,
            'unexplained_duplicates': len(unexplained),
            'zombie_started_handed_back_job': len(late_zombie_runs),
            'phantom_executions': len(phantom),
            'dead': len(set(dead) & accepted),
            'dead_by_reason': {k: len(v) for k, v in dead_reasons.items()},
            'dead_and_also_executed': len(set(dead) & executed),
            'discarded': len(discarded & accepted),
            'snoozed_jobs': len(snoozed & accepted),
            'snoozed_lost': len(snoozed & set(lost)),
            'snoozed_run_at_once': len(snoozed_at_once),
            'attempts': outcome_counts,
            'worker_kills': kinds.count('kill'),
            'worker_crashes': crashes,
            'worker_startups_without_redis': startups_refused,
            'zombies': kinds.count('zombie'),
            'worker_terms': kinds.count('term'),
            'worker_terms_past_timeout': self.count_in_logs(
                'shutdown timeout:', {e['pid'] for e in self.events if e['kind'] == 'term'}),
            'workers_taken_for_dead': self.count_in_logs(
                HEARTBEAT_GONE, {w.pid for w in self.workers}),
            'redis_restarts': kinds.count('redis_kill'),
            'workers_started': kinds.count('start'),
            'orphan_events': len(orphaned),
            'orphans_not_recovered': len(not_recovered),
            'spool_stall': stall,
            'max_orphan_wait_s': round(max(waits), 3) if waits else None,
            'max_orphan_wait_without_redis_outage_s':
                round(max(calm_waits), 3) if calm_waits else None,
            'max_orphan_wait_since_last_beat_s': round(max(beat_waits), 3) if beat_waits else None,
            'recovery_bound_s': bound,
            'stranded_working_lists': stranded_keys,
            'retries_exist': self.retries_found,
            'throw_fraction': self.throw_fraction,
            'abort_fraction': a.abort_fraction,
            'long_fraction': a.long_fraction,
            'workers': a.workers,
            'concurrency': a.concurrency,
            'duration_s': a.duration,
            'profile': a.profile,
            'backlog': a.backlog,
            'seed': a.seed,
            'limit': a.limit,
            'problems': self.problems,
        }
        if a.limit:
            (report['limit_most_running'], report['limit_overlaps_in_crash_window'],
             report['limit_overlaps_outside']) = self.limit_overlaps(attempts)
        if a.periodic:
            report.update(self.check_ticks(r))
        if getattr(a, 'sequences', 0):
            report.update(self.check_sequences(r, mono_to_real))
        report['connection_kills'] = kinds.count('conn_kill')
        if getattr(self, 'clocks', None) is not None:
            offsets = [o for history in self.clocks.offsets.values() for _, o in history]
            report['clock_skewed_workers'] = len(self.clocks.offsets)
            report['clock_steps'] = kinds.count('clock_step')
            report['clock_offsets_s'] = [min(offsets), max(offsets)] if offsets else None
        report['ok'] = (not lost and not unexplained and not phantom and not still_pending
                        and not stranded_keys and not not_recovered and not self.problems
                        and not report.get('limit_overlaps_outside'))
        with open(os.path.join(self.work, 'events.json'), 'w') as f:
            json.dump({'events': self.events, 'redis_outages': self.redis.outages,
                       'watches': [vars(w) for w in watches], 'report': report}, f, indent=1)
        self.details = dict(self.details, **{'lost': lost, 'unexplained': unexplained, 'phantom': phantom,
                        'late_zombie_runs': late_zombie_runs, 'watches': watches,
                        'still_pending': still_pending, 'dead': dead,
                        'not_recovered': not_recovered, 'pending_ids': pending_ids})
        return report


def print_report(report, details, work):
    r = report
    print()
    print('== chaos report')
    print('accepted pushes:          %d (plus %d unknown: reply lost, %d of them stored)'
          % (r['accepted'], r['unknown_pushes'], r['unknown_pushes_stored']))
    print('executed at least once:   %d' % r['executed_at_least_once'])
    print('in the dead set:          %d %s' % (r['dead'], r['dead_by_reason']))
    if r.get('snoozed_jobs') or r.get('discarded'):
        print('snoozed, discarded:       %d snoozed (%d lost, %d run twice at once); %d '
              'discarded' % (r['snoozed_jobs'], r['snoozed_lost'], r['snoozed_run_at_once'],
                             r['discarded']))
    print('lost:                     %d' % r['lost'])
    if r['still_pending']:
        print('still pending:            %d' % r['still_pending'])
    print('executed more than once:  %d; extra runs by cause: %s; unexplained: %d'
          % (r['executed_more_than_once'], r['duplicate_runs_by_cause'] or '{}',
             r['unexplained_duplicates']))
    print('attempts recorded:        %s' % r['attempts'])
    if r.get('limit'):
        print('limit (concurrency %d):    most running at once %d; moments above it: %d in the '
              'crash window, %d outside it (must be 0)'
              % (r['limit'], r['limit_most_running'], r['limit_overlaps_in_crash_window'],
                 r['limit_overlaps_outside']))
    print('worker kills (SIGKILL):   %d; planned crashes (abort): %d; zombies (SIGSTOP > ttl): '
          '%d; TERMs: %d (%d past the shutdown timeout); workers started: %d'
          % (r['worker_kills'], r['worker_crashes'], r['zombies'], r['worker_terms'],
             r['worker_terms_past_timeout'], r['workers_started']))
    print('workers taken for dead:   %d times a live worker found its heartbeat key gone'
          % r['workers_taken_for_dead'])
    if r['worker_startups_without_redis']:
        print('startups without Redis:   %d workers lost Redis while starting and exited 1'
              % r['worker_startups_without_redis'])
    if r['zombie_started_handed_back_job']:
        print('zombie late runs:         %d jobs a zombie started after a janitor had handed '
              'them back' % r['zombie_started_handed_back_job'])
    print('redis-server SIGKILLs:    %d (each restarted on its AOF)' % r['redis_restarts'])
    print('connection drops:         %d (CLIENT KILL of every worker connection)'
          % r['connection_kills'])
    if 'clock_steps' in r:
        print('clock skew:               %d workers with wall clocks off by %s s; %d clocks '
              'stepped while running' % (r['clock_skewed_workers'], r['clock_offsets_s'],
                                         r['clock_steps']))
    if 'periodic_ticks' in r:
        print('periodic ticks:           %d pushed; %d seconds of the chaos without one (%d '
              'more while Redis was down, whose workers were killed before it came back), %d '
              'pushed twice, %d early (must be 0, 0 and 0)'
              % (r['periodic_ticks'], r['periodic_ticks_missing'],
                 r['periodic_ticks_missing_in_outages'], r['periodic_ticks_twice'],
                 r['periodic_ticks_early']))
    print_stall(r)
    print_sequences(r, details)
    print('orphaned working lists:   %d; longest wait until recovered: %s s (%s s without a '
          'Redis outage; %s s since the last heartbeat); bound ttl + janitor interval = %g s'
          % (r['orphan_events'], r['max_orphan_wait_s'],
             r['max_orphan_wait_without_redis_outage_s'],
             r['max_orphan_wait_since_last_beat_s'], r['recovery_bound_s']))
    for w in details['watches']:
        if not w.initial:
            continue
        wait = '%.3f s' % (w.recovered_at - w.at) if w.recovered_at is not None else (
            'resumed first' if w.ended else 'never')
        print('  %-6s pid %-7d %3d jobs in its working lists, emptied after %s'
              % (w.kind, w.pid, w.initial, wait))
    print_findings(report, details, work)


def print_stall(report):
    """The line on the pushes made while Redis was stopped (StallPushes)."""
    st = report.get('spool_stall')
    if st and st['pushes']:
        print('pushes while stopped:     %d (%d spooled, %d accepted, %d not stored); of the '
              'stored, %d ran, %d more than once, %d stored twice by a replay (must be 0)'
              % (st['pushes'], st['spooled'], st['accepted'], st['not_stored'], st['ran'],
                 st['ran_more_than_once'], st['stored_twice']))


def print_findings(report, details, work):
    """The end of every mode's report: each job lost, run twice unexplained
    or run unpushed, what was left behind, the problems, the verdict, and
    the report as one JSON line."""
    for job_id in details.get('lost', [])[:20]:
        print('LOST job %d' % job_id)
    for item in details['unexplained'][:20]:
        print('UNEXPLAINED duplicate of job %d: runs %s' % (item['id'], item['runs']))
    for job_id in details['phantom'][:20]:
        print('PHANTOM: job %d ran but was never pushed' % job_id)
    for key, n in report['stranded_working_lists'].items():
        print('STRANDED: %s holds %d jobs and no registered process owns it' % (key, n))
    for w in details.get('not_recovered', []):
        print('NOT RECOVERED: %s (%s at %.3f) still had jobs at the end' % (
            w.identity, w.kind, w.at))
    for problem in report['problems']:
        print('PROBLEM: %s' % problem)
    print('result: %s' % ('OK' if report['ok'] else 'FAILED (evidence kept in %s)' % work))
    print(json.dumps(report, sort_keys=True, separators=(',', ':')))
