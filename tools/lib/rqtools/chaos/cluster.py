"""tools/chaos --mode cluster: queue groups on a Redis Cluster whose primaries
are SIGKILLed and whose slots move while producers push and workers run.

The jobs live on a Cluster (servers.Cluster: --primaries primaries with a
replica each, a short cluster-node-timeout) in --groups queue groups, each
in the lowest slot of its own primary (layout 2: every key of group G is
"reliableq:{G}:" + its layout-1 name, so a group is one slot on one
primary). Each group has --workers workers and --producers producers of its
own, all reaching the cluster through a redis+cluster:// URL naming the
group. The job records (every attempt of a ChaosJob) go to a separate
ledger redis-server on a unix socket, outside the cluster: records kept in
a failing cluster would be lost with the jobs, and the count would lie.

Faults, spread over --duration: the default mode's worker faults (SIGKILL
and a replacement in the same group, SIGSTOP past the heartbeat ttl and
SIGCONT, TERM mid-job), --cluster-failovers SIGKILLs of the primary that
owns a group's slot (the cluster promotes its replica; the killed node is
started again once it has, and rejoins as a replica), and --reshards live
reshardings: `redis-cli --cluster reshard` moves the lowest slot of a
primary, the slot of a group, keys and all, to another primary, under load.
Before each cluster fault the cluster must be whole again.

With --backlog B each group's producers keep B jobs queued in it (the
saturated profile's load: full fetch batches at every fault) and stop at the
end of --duration. Producers push with replica acknowledgement (ClientOptions::wait_replicas
--ack-replicas, WAIT within --wait-timeout): a push is confirmed when a
replica has it. The run fails on any confirmed push that never ran and is
not in the dead set (a loss), any run of a job nobody pushed, any duplicate
run that nothing explains, a working list nobody owns, a worker that exited
by itself, a drain that did not finish, or a cluster fault that did not
happen. A duplicate is explained by the default mode's causes (kill, crash,
zombie, TERM, a process declared dead, a retry), or by a failover whose
window (from a second before the kill until --failover-slack seconds after
the promotion) the earlier run overlaps: its fetch or its ack, written to
the old primary, was not yet on the replica that took over. Every worker
of a group that lived through a failover or reshard of its slot must run a
job after it (it followed the slot by itself), or the run fails. A reshard
explains nothing by itself (a command that meets a moving slot is refused
or redirected, and did not run); a process declared dead during one is
reported as such.
"""

import json
import os
import threading
import time

from ..processes import spawn
from ..resp import Redis, pairs
from ..servers import Cluster
from ..slots import GroupClient, group_in_slot, key, key_slot
from . import QUEUES
from .oracle import pending_job_ids, print_findings
from .worker_faults import Chaos


class NoSampler:
    """The cluster mode does not time orphaned jobs (the default mode does):
    the base class's calls land here."""

    def __init__(self):
        self.stopping = threading.Event()

    def identity_of(self, pid):
        return None

    def end_watch(self, pid):
        pass

    def join(self, timeout=None):
        pass


class ClusterChaos(Chaos):
    def __init__(self, args, work):
        super().__init__(args, work)
        # self.redis (a unix-socket redis-server) is the ledger of records.
        self.cluster = Cluster(os.path.join(work, 'cluster'), self.rng, args.primaries, 1,
                               args.node_timeout_ms)
        self.sampler = NoSampler()
        self.groups = []
        self.clients = {}
        self.worker_group = {}    # pid -> group
        self.producer_group = {}  # producer base path -> group
        self.faults = []          # failovers and reshards, as dicts
        self.known_masters = None
        self.starting_group = None

    def redis_url(self, group=None):
        return self.cluster.url(group or self.starting_group)

    def client(self, group):
        if group not in self.clients:
            self.clients[group] = GroupClient(self.cluster, group)
        return self.clients[group]

    # -- workers and producers ----------------------------------------------

    def start_worker(self, queues=None, env=None, group=None):
        if group is None:
            # A replacement joins the group that has the fewest running.
            counts = {g: 0 for g in self.groups}
            for w in self.running_workers():
                counts[self.worker_group[w.pid]] += 1
            group = min(self.groups, key=lambda g: counts[g])
        # The base class builds the command line from redis_url().
        self.starting_group = group
        try:
            worker = super().start_worker(queues, env)
        finally:
            self.starting_group = None
        self.worker_group[worker.pid] = group
        return worker

    def pick_target(self, busy=False):
        self.tend_workers()
        pool = self.running_workers(min_age=1.5) or self.running_workers(min_age=0.3)
        return self.rng.choice(pool) if pool else None

    def watch_orphans(self, kind, pid):
        self.event('unwatched', pid, kind)

    def start_producers(self):
        a = self.args
        window = max(1.0, a.duration * a.push_window)
        total = a.producers * len(self.groups)
        share, extra = divmod(a.jobs, total)
        number = 0
        for group in self.groups:
            for p in range(a.producers):
                count = share + (1 if number < extra else 0)
                number += 1
                path = os.path.join(self.work, 'producers', '%s-%d' % (group, p))
                argv = [a.producer, '--redis', self.redis_url(group),
                        '--first-id', str(number * 10_000_000), '--count', str(count),
                        '--rate', '%.3f' % (count / window), '--queues', ','.join(QUEUES),
                        '--accepted', path + '.accepted', '--unknown', path + '.unknown',
                        '--deadline', str(a.duration + a.drain_timeout)]
                if a.ack_replicas > 0:
                    argv += ['--wait-replicas', str(a.ack_replicas),
                             '--wait-timeout', str(a.wait_timeout)]
                if a.backlog:
                    # The producer reads its own group's queues.
                    argv += ['--backlog', str(max(1, a.backlog // a.producers))]
                self.producers.append((spawn(argv, path + '.log'), path))
                self.producer_group[path] = group

    # -- cluster faults -------------------------------------------------------

    def tick(self):
        self.tend_workers()

    def follow_cluster(self):
        """Records a failover the cluster made by itself (a primary slow to
        answer on a loaded machine): its window explains duplicates too."""
        try:
            masters = set(self.cluster.masters())
        except OSError:
            return
        if self.known_masters is not None and masters != self.known_masters:
            planned = any(f.get('kind') == 'failover' and 'rejoined_at' not in f
                          for f in self.faults)
            gone = self.known_masters - masters
            if gone and not planned:
                now = time.time()
                self.faults.append({'kind': 'failover', 'unplanned': True, 'group': None,
                                    'old_port': sorted(gone)[0], 'kill_at': now - 10.0,
                                    'promoted_at': now, 'rejoined_at': now})
                self.log('the cluster replaced primary %s by itself' % sorted(gone))
        self.known_masters = masters

    def fail_primary(self, group):
        a = self.args
        self.cluster.wait_whole(tick=self.tick, limit=a.group_timeout)
        self.follow_cluster()
        slot = key_slot('{%s}' % group)
        port = self.cluster.owner(slot)
        record = {'kind': 'failover', 'unplanned': False, 'group': group, 'slot': slot,
                  'old_port': port, 'old_pid': self.cluster.node_at(port).pid,
                  'kill_at': time.time()}
        self.faults.append(record)
        self.event('primary_kill', record['old_pid'], port)
        new, record['promoted_at'] = self.cluster.kill_primary(port, tick=self.tick,
                                                               limit=a.group_timeout)
        record['new_port'] = new
        self.event('promoted', self.cluster.node_at(new).pid, new)
        self.cluster.restart(port, tick=self.tick, limit=a.group_timeout)
        record['rejoined_at'] = time.time()
        self.known_masters = set(self.cluster.masters())
        self.log('failover: SIGKILL primary %d (group %s); replica %d promoted after %.2f s; '
                 '%d back as a replica' % (port, group, new,
                                           record['promoted_at'] - record['kill_at'], port))

    def reshard(self):
        """Moves a group's slot (the lowest of its primary's, so that
        redis-cli's reshard of one slot takes it) to another primary."""
        a = self.args
        self.cluster.wait_whole(tick=self.tick, limit=a.group_timeout)
        self.follow_cluster()
        masters = self.cluster.masters()
        movable = []
        for g in self.groups:
            slot = key_slot('{%s}' % g)
            owner = self.cluster.owner(slot)
            if owner is not None and self.cluster.lowest_slot(owner) == slot:
                movable.append((g, slot, owner))
        if not movable or len(masters) < 2:
            self.problems.append('reshard: no group slot is the lowest of its primary')
            return
        group, slot, owner = self.rng.choice(movable)
        to = self.rng.choice([m for m in masters if m != owner])
        record = {'kind': 'reshard', 'group': group, 'slot': slot, 'from_port': owner,
                  'to_port': to, 'start_at': time.time(),
                  'keys': self.cluster.node_at(owner).call('CLUSTER', 'COUNTKEYSINSLOT', slot)}
        self.faults.append(record)
        self.event('reshard', None, [group, slot, owner, to])
        self.cluster.reshard(owner, to, slots=1, limit=a.group_timeout)
        record['end_at'] = time.time()
        # The other nodes learn the slot's new owner by gossip, a moment
        # after redis-cli set it on the primaries: the owner is read once
        # they agree.
        self.cluster.wait_whole(tick=self.tick, limit=a.group_timeout)
        moved = self.cluster.owner(slot)
        if moved != to:
            self.problems.append('reshard of slot %d to %d: %s owns it after' % (slot, to, moved))
        self.log('reshard: slot %d (group %s, %d keys) from %d to %d in %.2f s' % (
            slot, group, record['keys'], owner, to, record['end_at'] - record['start_at']))

    def timeline(self):
        a = self.args
        plan = []
        for kind, count in (('kill', a.kills), ('zombie', a.zombies), ('term', a.terms)):
            lo, hi = 1.5, max(2.0, a.duration - 1.0)
            for i in range(count):
                step = (hi - lo) / count
                plan.append((lo + step * (i + 0.5) + self.rng.uniform(-0.3, 0.3) * step, kind))
        # Cluster faults alternate, failover first, evenly from 3 s to
        # --failover-slack before the end.
        cluster = []
        for i in range(max(a.cluster_failovers, a.reshards)):
            if i < a.cluster_failovers:
                cluster.append('failover')
            if i < a.reshards:
                cluster.append('reshard')
        lo, hi = 3.0, max(4.0, a.duration - a.failover_slack)
        for i, kind in enumerate(cluster):
            plan.append((lo + (hi - lo) * i / max(1, len(cluster)), kind))
        plan.sort()
        return plan

    # -- the run -------------------------------------------------------------

    def pending(self, _r=None):
        out = {}
        for g in self.groups:
            r = self.client(g)
            for q in r.call('SMEMBERS', key(g, 'queues')) or []:
                n = r.call('LLEN', key(g, 'queue:' + q))
                if n:
                    out[key(g, 'queue:' + q)] = n
            for identity, text in pairs(r.call('HGETALL', key(g, 'registry'))).items():
                try:
                    queues = json.loads(text)['queues']
                except (ValueError, KeyError, TypeError):
                    out['unreadable registry entry ' + identity] = 1
                    continue
                for q in queues:
                    k = key(g, 'working:%s:%s' % (identity, q))
                    n = r.call('LLEN', k)
                    if n:
                        out[k] = n
            for name in ('schedule', 'retry'):
                n = r.call('ZCARD', key(g, name))
                if n:
                    out[key(g, name)] = n
        return out

    def run(self):
        a = self.args
        self.t0 = time.monotonic()
        for sub in ('redis', 'workers', 'producers'):
            os.makedirs(os.path.join(self.work, sub))
        self.redis.start()
        self.log('ledger redis-server pid %d on %s (outside the cluster)' % (
            self.redis.proc.pid, self.redis.sock))
        self.cluster.start(limit=a.group_timeout)
        masters = self.cluster.masters()
        for i in range(a.groups):
            primary = masters[i % len(masters)]
            slot = self.cluster.lowest_slot(primary) + i // len(masters)
            group = group_in_slot(slot, 'chaos%d' % i)
            theirs = self.cluster.node_at(primary).call('CLUSTER', 'KEYSLOT', '{%s}' % group)
            if theirs != slot:
                raise RuntimeError('CRC16 of {%s}: slot %d here, %s in Redis' % (group, slot,
                                                                                 theirs))
            self.groups.append(group)
        self.known_masters = set(masters)
        self.log('cluster: primaries %s with a replica each (node timeout %d ms); groups %s' % (
            masters, a.node_timeout_ms,
            ', '.join('%s (slot %d)' % (g, key_slot('{%s}' % g)) for g in self.groups)))
        self.throw_fraction = (a.auto_throw_fraction if a.throw_fraction == 'auto'
                               else float(a.throw_fraction))
        for g in self.groups:
            for _ in range(a.workers):
                self.start_worker(group=g)
        self.start_producers()
        self.log('%d workers and %d producers per group (wait_replicas %d), %d jobs over '
                 '%.0f s' % (a.workers, a.producers, a.ack_replicas, a.jobs,
                             a.duration * a.push_window))

        ledger = Redis(self.redis.sock)
        plan = self.timeline()
        start = time.monotonic()
        next_progress = start + 10
        next_follow = start
        turn = 0
        while True:
            now = time.monotonic()
            self.tend_workers()
            if plan and now - start >= plan[0][0]:
                _, kind = plan.pop(0)
                if self.worker_fault(kind):
                    pass
                elif kind == 'failover':
                    self.fail_primary(self.groups[turn % len(self.groups)])
                    turn += 1
                else:
                    self.reshard()
                continue
            if not plan and now - start >= a.duration:
                break
            if now >= next_follow:
                next_follow = now + 1.0
                self.follow_cluster()
            if now >= next_progress:
                next_progress = now + 10
                self.progress(ledger)
            time.sleep(0.02)

        self.wind_down(self.pending, lambda left: self.progress(ledger, left))
        self.stop_workers()
        report = self.check(ledger)
        ledger.close()
        return report

    def progress(self, ledger, pending=None):
        executed = self.runs_so_far(ledger)
        kinds = [e['kind'] for e in self.events]
        text = 'executed %s, workers %d, kills %d, zombies %d, terms %d, failovers %d, ' \
               'reshards %d' % (executed, len(self.running_workers()), kinds.count('kill'),
                                kinds.count('zombie'), kinds.count('term'),
                                kinds.count('primary_kill'), kinds.count('reshard'))
        if pending:
            text += ', pending %s' % pending
        self.log(text)

    def cleanup(self):
        super().cleanup()
        for c in self.clients.values():
            c.close()
        self.cluster.stop()

    # -- the check -----------------------------------------------------------

    def read_pushes(self, suffix):
        """{id: (time, detail, group)} from every producer's `suffix` file."""
        out = {}
        for _, path in self.producers:
            try:
                with open(path + suffix) as f:
                    for line in f:
                        fields = line.rstrip('\n').split('\t', 2)
                        if len(fields) == 3 and fields[0]:
                            out[int(fields[0])] = (float(fields[1]), fields[2],
                                                   self.producer_group[path])
            except OSError:
                pass
        return out

    def read_group_leftovers(self):
        dead, dead_reasons, left, stranded = {}, {}, {}, {}
        for g in self.groups:
            leftovers(self.client(g), g, dead, dead_reasons, left, stranded)
        return dead, dead_reasons, pending_job_ids(left), stranded

    def windows(self, kind):
        out = []
        for f in self.faults:
            if f['kind'] != kind:
                continue
            if kind == 'failover' and 'promoted_at' in f:
                out.append((f, f['kill_at'] - 1.0, f['promoted_at'] + self.args.failover_slack))
            elif kind == 'reshard':
                out.append((f, f['start_at'] - 1.0, f.get('end_at', f['start_at']) +
                            self.args.failover_slack))
        return out

    def explain_cluster(self, lower, higher):
        cause = self.explain(lower, higher)
        if cause in ('declared dead',):
            for f, since, until in self.windows('failover') + self.windows('reshard'):
                if since <= higher['start'] and lower['start'] <= until:
                    return 'declared dead (during a %s)' % f['kind']
        if cause is not None:
            return cause
        for f, since, until in self.windows('failover'):
            if lower['end'] < since or lower['start'] > until:
                continue
            if lower['end'] < f['kill_at']:
                return 'failover: ack lost with the old primary'
            return 'failover: fetch lost with the old primary'
        return None

    def check(self, ledger):
        a = self.args
        runs, attempts, by_job = self.read_records(ledger)
        dead, dead_reasons, pending_ids, stranded = self.read_group_leftovers()
        executed = {i for i, n in runs.items() if n > 0}
        done = executed | set(dead)
        stored = self.read_pushes('.accepted')
        unknown = self.read_pushes('.unknown')
        confirmed_as = 'replicated' if a.ack_replicas > 0 else 'accepted'
        confirmed = {i for i, (_, outcome, _) in stored.items() if outcome == confirmed_as}
        other = set(stored) - confirmed
        lost = sorted(confirmed - done - set(pending_ids))
        every_push = set(stored) | set(unknown)
        phantom = sorted(i for i in done if i not in every_push)
        still_pending = sorted(every_push & set(pending_ids) - done)
        if other:
            self.problems.append('%d pushes were stored as something other than %s' % (
                len(other), confirmed_as))

        duplicated, causes, unexplained = self.explain_duplicates(
            runs, by_job, lambda job_id, _ok, lower, higher: self.explain_cluster(lower, higher))
        self.report_unasked_exits()
        self.check_following(attempts)
        kinds = [e['kind'] for e in self.events]
        failovers = [f for f in self.faults if f['kind'] == 'failover']
        reshards = [f for f in self.faults if f['kind'] == 'reshard']
        planned = [f for f in failovers if not f['unplanned'] and 'rejoined_at' in f]
        if len(planned) < a.cluster_failovers:
            self.problems.append('%d of %d failovers happened' % (len(planned),
                                                                   a.cluster_failovers))
        if len([f for f in reshards if 'end_at' in f]) < a.reshards:
            self.problems.append('%d of %d reshards happened' % (len(reshards), a.reshards))
        reasons = {}
        for _, reason, _ in unknown.values():
            reasons[reason.split(':')[0]] = reasons.get(reason.split(':')[0], 0) + 1
        report = {
            'mode': 'cluster',
            'groups': {g: key_slot('{%s}' % g) for g in self.groups},
            'primaries': a.primaries,
            'failovers': [{'group': f['group'], 'unplanned': f['unplanned'],
                           'promotion_s': round(f['promoted_at'] - f['kill_at'], 2)
                           if 'promoted_at' in f else None,
                           'workers_back_s': f.get('workers_back_s')} for f in failovers],
            'reshards': [{'group': f['group'], 'slot': f['slot'], 'keys': f['keys'],
                          'seconds': round(f['end_at'] - f['start_at'], 2)
                          if 'end_at' in f else None,
                          'workers_back_s': f.get('workers_back_s')} for f in reshards],
            'confirmed': len(confirmed),
            'confirmed_as': confirmed_as,
            'lost': len(lost),
            'lost_ids': lost[:50],
            'not_confirmed': len(unknown),
            'not_confirmed_ran': len(set(unknown) & done),
            'not_confirmed_reasons': reasons,
            'executed': len(executed),
            'dead': len(dead),
            'dead_by_reason': {k: len(v) for k, v in dead_reasons.items()},
            'still_pending': len(still_pending),
            'phantom_executions': len(phantom),
            'executed_more_than_once': duplicated,
            'most_runs_of_one_job': max(runs.values(), default=0),
            'duplicate_runs_by_cause': causes,
            'unexplained_duplicates': len(unexplained),
            'worker_kills': kinds.count('kill'),
            'worker_crashes': kinds.count('exit'),
            'zombies': kinds.count('zombie'),
            'terms': kinds.count('term'),
            'stranded_working_lists': stranded,
            'workers_per_group': a.workers,
            'producers_per_group': a.producers,
            'concurrency': a.concurrency,
            'jobs': a.jobs,
            'duration_s': a.duration,
            'ack_replicas': a.ack_replicas,
            'node_timeout_ms': a.node_timeout_ms,
            'seed': a.seed,
            'problems': self.problems,
        }
        report['ok'] = (not lost and not unexplained and not phantom and not still_pending
                        and not stranded and not self.problems)
        with open(os.path.join(self.work, 'events.json'), 'w') as f:
            json.dump({'events': self.events, 'faults': self.faults, 'report': report}, f,
                      indent=1)
        self.details = {'unexplained': unexplained, 'phantom': phantom,
                        'still_pending': still_pending}
        return report


    def check_following(self, attempts):
        """Every worker of a group that lived through a planned failover or a
        reshard of its slot must run a job after it (it found the slot's new
        primary by itself); sets workers_back_s, the slowest one's first
        start after the fault began."""
        started = {e['pid']: e['at'] for e in self.events if e['kind'] == 'start'}
        ended = {e['pid']: e['at'] for e in self.events
                 if e['kind'] in ('kill', 'exit', 'term_exit', 'term')}
        starts = {}
        for at in attempts:
            starts.setdefault(at['pid'], []).append(at['start'])
        for f in self.faults:
            if f['group'] is None or f.get('unplanned'):
                continue
            began = f['kill_at'] if f['kind'] == 'failover' else f['start_at']
            over = f.get('promoted_at', f.get('end_at'))
            if over is None:
                continue
            backs = []
            for w in self.workers:
                if self.worker_group.get(w.pid) != f['group'] or \
                        started.get(w.pid, float('inf')) > began or \
                        ended.get(w.pid, float('inf')) < over + self.args.failover_slack:
                    continue  # not in the group, or did not live through it
                after = [t for t in starts.get(w.pid, []) if t > over]
                if after:
                    backs.append(min(after) - began)
                else:
                    self.problems.append('worker %d of group %s ran no job after the %s of '
                                         'its slot (see %s)' % (w.pid, f['group'], f['kind'],
                                                                w.log_path))
            f['workers_back_s'] = round(max(backs), 2) if backs else None


def print_report(report, details, work):
    r = report
    print()
    print('== chaos report (cluster)')
    print('groups:                   %s' % ', '.join('%s (slot %d)' % kv
                                                     for kv in r['groups'].items()))
    for f in r['failovers']:
        print('failover:                 group %s, replica promoted after %s s%s; its workers '
              'ran jobs again %s s after the kill' % (
                  f['group'], f['promotion_s'],
                  ' (by the cluster itself)' if f['unplanned'] else '', f['workers_back_s']))
    for f in r['reshards']:
        print('reshard:                  group %s, slot %d, %d keys, %s s; its workers ran '
              'jobs again %s s after it began' % (f['group'], f['slot'], f['keys'],
                                                   f['seconds'], f['workers_back_s']))
    print('worker faults:            %d kills, %d crashes, %d zombies, %d terms' % (
        r['worker_kills'], r['worker_crashes'], r['zombies'], r['terms']))
    print('confirmed (%s):  %d; lost among them: %d %s' % (
        r['confirmed_as'], r['confirmed'], r['lost'], r['lost_ids'][:20] if r['lost'] else ''))
    print('not confirmed:            %d, of which ran: %d; why: %s' % (
        r['not_confirmed'], r['not_confirmed_ran'], r['not_confirmed_reasons']))
    print('executed:                 %d; dead: %d %s' % (r['executed'], r['dead'],
                                                          r['dead_by_reason']))
    if r['still_pending']:
        print('still pending:            %d' % r['still_pending'])
    print('executed more than once:  %d (one job at most %d times); extra runs by cause: %s; '
          'unexplained: %d' % (r['executed_more_than_once'], r['most_runs_of_one_job'],
                               r['duplicate_runs_by_cause'] or '{}', r['unexplained_duplicates']))
    print_findings(r, details, work)


def leftovers(r, g, dead, dead_reasons, left, stranded):
    """Adds what group `g` (reached through GroupClient `r`) still holds:
    dead {id: reason}, dead_reasons {error class: [ids]}, left {payload:
    key} for every job in a queue, working list, the schedule or retry, and
    stranded {working list: length} for the lists no registered process
    owns (nobody would ever give those back)."""
    for payload in r.call('ZRANGE', key(g, 'dead'), '0', '-1') or []:
        try:
            job = json.loads(payload)
            dead[int(job['args'][0])] = '%s: %s' % (job.get('error_class'),
                                                    job.get('error_message'))
            dead_reasons.setdefault(job.get('error_class'), []).append(job['args'][0])
        except (ValueError, KeyError, IndexError, TypeError):
            dead_reasons.setdefault('unreadable payload', []).append(payload[:80])
    for q in r.call('SMEMBERS', key(g, 'queues')) or []:
        for payload in r.call('LRANGE', key(g, 'queue:' + q), '0', '-1') or []:
            left[payload] = key(g, 'queue:' + q)
    for name in ('schedule', 'retry'):
        for payload in r.call('ZRANGE', key(g, name), '0', '-1') or []:
            left[payload] = key(g, name)
    registered = set(pairs(r.call('HGETALL', key(g, 'registry'))))
    # Every key of the group is in its slot, on the node r reaches.
    for k in r.call('CLUSTER', 'GETKEYSINSLOT', key_slot('{%s}' % g), '100000') or []:
        if not k.startswith(key(g, 'working:')):
            continue
        for payload in r.call('LRANGE', k, '0', '-1') or []:
            left[payload] = k
        if k[len(key(g, 'working:')):].rsplit(':', 1)[0] not in registered:
            stranded[k] = r.call('LLEN', k)
