"""tools/chaos --sequences K: the check of sequences (reliableq(1),
SEQUENCES) under the faults of the run.

The producers push jobs of K sequence keys (chaos_producer --sequence-keys,
each producer its own share of the keys, each key's jobs in the order of
their index), and every attempt of such a job records its start before
anything else and its end as every attempt does (tests/chaos/chaos_jobs.cc,
<prefix>starts and <prefix>log, joined by the attempt's token). The check,
beside the usual one (no job lost, every duplicate explained):

- order: per key, the first start of each job comes after the first start
  of every job of a lower index (a job whose run was interrupted may run
  again before the next starts: only first starts are compared);
- overlaps: two attempts of different jobs of one key running at once, an
  attempt lasting from its start to its record, or, without a record, to
  the end of its process (SIGKILL, crash, exit). Each must lie in the stated
  window of reliableq(1), SEQUENCES: one of the two processes was stopped
  (a zombie), fenced, partitioned, stopped past its shutdown timeout or
  declared dead (its job given back while its handler still ran) within the
  slack before the later start. An overlap no such fault explains fails
  the run;
- no key is held at the end (the holder hash is empty once every job ran),
  and no job waits in a key's list: a key stuck forever keeps its jobs
  there.
Reruns (attempts after a job's first) are counted, not failed: the default
check explains each duplicate run.
"""

import json
import os

from ..resp import pairs
from . import FENCED, PREFIX, RECORD_PREFIX

# A fault explains an overlap when it began at most this long before the
# earlier of the two starts, and before the later one.
SLACK = 30.0
# Events of a process that end every attempt it was running.
ENDS = ('kill', 'exit', 'term_exit')
# Events of a process under which a run may go on while its job is given
# back (the window), by the name the report gives them.
WINDOW_EVENTS = {'zombie': 'zombie', 'term': 'stopped past its timeout',
                 'partition': 'partition', 'long_partition': 'partition past the ttl',
                 'latency': 'proxy latency', 'stall': 'proxy stall',
                 'cut': 'proxy cut mid-reply', 'bandwidth': 'proxy bandwidth limit'}


def waiting_lists(r):
    """The lists of jobs that wait for a sequence key (<prefix>sequence:<key>)."""
    found, cursor = [], '0'
    while True:
        cursor, keys = r.call('SCAN', cursor, 'MATCH', PREFIX + 'sequence:*', 'COUNT', '1000')
        found.extend(keys)
        if cursor == '0':
            return found


class SequenceCheck:
    """The sequences' half of the Oracle (a mixin of worker_faults.Chaos)."""

    def read_starts(self, ledger, mono_to_real):
        """{token: start record} from <prefix>starts, on the real clock."""
        starts = {}
        for token, text in pairs(ledger.call('HGETALL', RECORD_PREFIX + 'starts')).items():
            at = json.loads(text)
            at['start'] = at['ms'] + mono_to_real
            starts[token] = at
        return starts

    def read_ends(self, ledger, mono_to_real):
        """{token: end record} from <prefix>log (the records of every attempt)."""
        ends = {}
        for token, text in pairs(ledger.call('HGETALL', RECORD_PREFIX + 'log')).items():
            at = json.loads(text)
            ends[token] = at['me'] + mono_to_real if 'me' in at else at['end']
        return ends

    def process_ends(self):
        """{pid: [times its process ended]} from the events."""
        out = {}
        for e in self.events:
            if e['kind'] in ENDS:
                out.setdefault(e['pid'], []).append(e['at'])
        return out

    def window_causes(self):
        """{pid: [(time, cause, rank)]}: the events and log lines after which
        a process's run may go on while its job is given back; rank 0 for a
        fault the run made, 1 for what a worker's log says followed (a
        fence, a janitor that took it for dead)."""
        out = {}
        for e in self.events:
            cause = WINDOW_EVENTS.get(e['kind'])
            if cause is not None and e['pid'] is not None:
                out.setdefault(e['pid'], []).append((e['at'], cause, 0))
        for f in getattr(self, 'faults', []):
            cause = WINDOW_EVENTS.get(f['kind'])
            if cause is not None and f['role'] == 'worker':
                out.setdefault(f['pid'], []).append((f['start'], cause, 0))
        for pid, times in self.log_times(FENCED).items():
            out.setdefault(pid, []).extend((t, 'fenced', 1) for t in times)
        for pid, times in self.log_times().items():
            out.setdefault(pid, []).extend((t, 'declared dead', 1) for t in times)
        return out

    def check_sequences(self, r, mono_to_real):
        """The report's sequence fields; appends to self.problems."""
        starts = self.read_starts(r, mono_to_real)
        ends = self.read_ends(r, mono_to_real)
        process_ends = self.process_ends()
        causes = self.window_causes()

        runs_by_key = {}
        unrecorded = 0
        for token, at in starts.items():
            end = ends.get(token)
            if end is None:
                unrecorded += 1
                later = [t for t in process_ends.get(at['pid'], []) if t >= at['start']]
                end = min(later) if later else None
            runs_by_key.setdefault(at['key'], []).append(dict(at, token=token, until=end))

        attempts_of = {}
        for runs in runs_by_key.values():
            for run in runs:
                attempts_of.setdefault(run['id'], []).append(run)
        order_violations, overlaps, unexplained, by_cause, explained = [], 0, [], {}, []
        late, late_explained = [], 0
        reruns = open_runs = jobs = 0
        for key, runs in runs_by_key.items():
            runs.sort(key=lambda run: run['start'])
            first = {}
            for run in runs:
                if run['id'] in first:
                    reruns += 1
                else:
                    first[run['id']] = run
                if run['until'] is None:
                    open_runs += 1
            jobs += len(first)
            by_index = sorted(first.values(), key=lambda run: run['ix'])
            for lower, higher in zip(by_index, by_index[1:]):
                if higher['start'] <= lower['start']:
                    order_violations.append({'key': key, 'earlier': lower, 'later': higher})
                # A job holds its key through its retries, snoozes and the
                # reruns of an interrupted run: none of its attempts starts
                # after the next job's first, but a stale one (a zombie's
                # prefetch started once the job had run elsewhere).
                for at in attempts_of.get(lower['id'], []):
                    if at['start'] > higher['start']:
                        cause = self.stale_cause(at, causes, higher['start'])
                        if cause is None:
                            late.append({'key': key, 'attempt': at, 'next': higher})
                        else:
                            late_explained += 1
            for i, one in enumerate(runs):
                for other in runs[i + 1:]:
                    # By start: every later one starts later still.
                    if one['until'] is not None and other['start'] >= one['until']:
                        break
                    if other['id'] == one['id']:
                        continue
                    overlaps += 1
                    cause = self.overlap_cause(one, other, causes, attempts_of)
                    if cause is None:
                        unexplained.append({'key': key, 'runs': [one, other]})
                    else:
                        by_cause[cause] = by_cause.get(cause, 0) + 1
                        explained.append({'key': key, 'cause': cause, 'runs': [one, other]})

        held = pairs(r.call('HGETALL', PREFIX + 'sequences'))
        waiting = {key: r.call('LLEN', key) for key in waiting_lists(r)}
        if order_violations:
            self.problems.append('%d jobs of a sequence first started before a job of a lower '
                                 'index of their key' % len(order_violations))
        if late:
            self.problems.append('%d attempts of a sequence job started after the next job of '
                                 'its key had started, outside the stated window' % len(late))
        if unexplained:
            self.problems.append('%d times two jobs of one sequence key ran at once outside the '
                                 'stated window' % len(unexplained))
        if held:
            self.problems.append('%d sequence keys still held once every job ran: %s' % (
                len(held), sorted(held.items())[:10]))
        if waiting:
            self.problems.append('%d sequence keys still have jobs waiting: %s' % (
                len(waiting), sorted(waiting.items())[:10]))
        with open(os.path.join(self.work, 'sequences.json'), 'w') as f:
            json.dump({'overlaps_explained': explained, 'overlaps_unexplained': unexplained,
                       'order_violations': order_violations, 'late_attempts': late},
                      f, indent=1)
        self.details['sequence_order_violations'] = order_violations
        self.details['sequence_late_attempts'] = late
        self.details['sequence_unexplained_overlaps'] = unexplained
        return {
            'sequence_keys': len(runs_by_key),
            'sequence_jobs_started': jobs,
            'sequence_attempts': len(starts),
            'sequence_reruns': reruns,
            'sequence_attempts_without_record': unrecorded,
            'sequence_attempts_without_end': open_runs,
            'sequence_order_violations': len(order_violations),
            'sequence_attempts_after_next': late_explained + len(late),
            'sequence_attempts_after_next_unexplained': len(late),
            'sequence_overlaps': overlaps,
            'sequence_overlaps_explained': overlaps - len(unexplained),
            'sequence_overlaps_by_cause': by_cause,
            'sequence_overlaps_unexplained': len(unexplained),
            'sequence_keys_held_at_end': len(held),
            'sequence_keys_with_waiting_jobs_at_end': len(waiting),
        }

    @staticmethod
    def stale_cause(attempt, causes, since):
        """Why `attempt` of a job started after the next job of its key had
        started (at `since`): a window event of its process from SLACK
        before that until it started; None when there is none."""
        found = [(-rank, at, cause) for at, cause, rank in causes.get(attempt['pid'], [])
                 if since - SLACK <= at <= attempt['start']]
        return max(found)[2] if found else None

    @staticmethod
    def overlap_cause(one, other, causes, attempts_of):
        """Why attempts `one` and `other` (of two jobs of one key, `one`
        started first) ran at once, when it is the stated window: one of
        them is a stale run, whose job was given back while it ran and ran
        again (`one`, and another attempt of its job began after it and
        before `other`: that attempt's end handed the key on), or whose
        process started it after the job had run elsewhere (`other`, a
        prefetch a zombie kept; another attempt of its job began before
        it), and the stale run's process had a window event from SLACK
        before `one` began until `other` began. None when there is none. A
        fault of the run (a zombie, a partition) names the cause before what
        the logs say followed it (a fence, taken for dead)."""
        def again(stale, after, before):
            return any(at['token'] != stale['token'] and after < at['start'] < before
                       for at in attempts_of.get(stale['id'], []))
        stale = []
        if again(one, one['start'], other['start']):
            stale.append(one)
        if again(other, float('-inf'), other['start']):
            stale.append(other)
        found = []
        for run in stale:
            for at, cause, rank in causes.get(run['pid'], []):
                if one['start'] - SLACK <= at <= other['start']:
                    found.append((-rank, at, cause))
        if not found:
            return None
        # The latest fault before the later start: the one that opened the
        # window.
        return max(found)[2]


def print_sequences(report, details):
    """The report's lines on sequences, when the run had them."""
    r = report
    if 'sequence_keys' not in r:
        return
    print('sequences:                %d keys, %d jobs started, %d attempts (%d reruns; %d '
          'without a record, cut short with their process; %d without a record or an end of '
          'their process)' % (r['sequence_keys'], r['sequence_jobs_started'],
                              r['sequence_attempts'], r['sequence_reruns'],
                              r['sequence_attempts_without_record'],
                              r['sequence_attempts_without_end']))
    print('sequence order:           %d first starts out of push order (must be 0); %d '
          'attempts started after the next job of their key had (a zombie\'s stale start), '
          '%d of them unexplained (must be 0)'
          % (r['sequence_order_violations'], r['sequence_attempts_after_next'],
             r['sequence_attempts_after_next_unexplained']))
    print('sequence overlaps:        %d (two jobs of one key at once); explained %d %s; '
          'unexplained %d (must be 0)' % (r['sequence_overlaps'], r['sequence_overlaps_explained'],
                                          r['sequence_overlaps_by_cause'] or '{}',
                                          r['sequence_overlaps_unexplained']))
    print('sequence keys at the end: %d held, %d with waiting jobs (must be 0 and 0)'
          % (r['sequence_keys_held_at_end'], r['sequence_keys_with_waiting_jobs_at_end']))
    for v in details.get('sequence_order_violations', [])[:10]:
        print('OUT OF ORDER: key %s: job %d (index %d) first started at %.6f, before job %d '
              '(index %d) at %.6f' % (v['key'], v['later']['id'], v['later']['ix'],
                                      v['later']['start'], v['earlier']['id'],
                                      v['earlier']['ix'], v['earlier']['start']))
    for v in details.get('sequence_late_attempts', [])[:10]:
        print('LATE: key %s: an attempt of job %d (index %d, pid %d) started at %.6f, after job '
              '%d (index %d) first started at %.6f' % (
                  v['key'], v['attempt']['id'], v['attempt']['ix'], v['attempt']['pid'],
                  v['attempt']['start'], v['next']['id'], v['next']['ix'], v['next']['start']))
    for o in details.get('sequence_unexplained_overlaps', [])[:10]:
        a, b = o['runs']
        print('AT ONCE: key %s: job %d (pid %d, %.6f..%s) and job %d (pid %d, %.6f..%s)' % (
            o['key'], a['id'], a['pid'], a['start'], a['until'], b['id'], b['pid'],
            b['start'], b['until']))
