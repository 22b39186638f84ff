"""tools/chaos --mode network: workers and producers cut off from Redis,
slowed and throttled, under the saturated load, and every job counted.

Every worker and every producer runs in a network namespace of its own
(rqtools.netns), joined to the root namespace by a veth pair; the jobs'
redis-server (appendonly yes, appendfsync always) listens on 127.0.0.1 and
on the run's anchor address, which the namespaces reach through their veth.
--proxied-workers of the workers reach it through a fault proxy of their own
(rqtools.faultproxy, in this process, listening on the anchor, forwarding
to the server's unix socket). The job records (tests/chaos/chaos_jobs.cc)
go to the same redis-server through its unix socket, a path no namespace
takes down, so a worker keeps recording the runs of its jobs while its link
is down.

During D seconds the plan makes, spread over the run:
  --partitions        a worker's link down for 0.5 s to 2/3 of the ttl, then up;
  --long-partitions   a worker's link down for ttl + janitor interval + 2 s
                      (its heartbeat expires and a janitor hands its jobs to
                      the others while it still runs them);
  --latency-episodes  fault-proxy episodes on a proxied worker, in turn:
                      latency and jitter both ways, one direction stalled
                      (up to past the ttl), connections cut after a few bytes
                      of a reply, bandwidth limited both ways;
  --producer-partitions  a producer's link down for 0.5 to 2 s;
  --clock-skew, --clock-steps  as in the default mode: every worker's wall
                      clock off by up to 60 s, and stepped while it runs.
Each fault is recorded with its start and end (wall clock) and the process
it hit (faults in events.json, and the report).

The check is the default mode's (every push the producer saw confirmed ran
or sits in the dead set; no job ran that nobody pushed; periodic ticks),
and every job run more than once must be explained by a recorded fault that
hit the worker of its first run, by that worker's fence (its log's "no
heartbeat confirmed" while the run was on), or by a retry; the report lists
the explanation of each. Duplicates after a partition past the ttl are counted
on their own: they are the window a worker that fences itself closes (its
heartbeat unconfirmed for its ttl, it stops its handlers). Of those, the
ones whose first run finished (outcome ok, not stopped) later than the
partition's start + ttl ran past the fence: with --expect-fencing any such
run fails the run; without, they are counted.

Namespaces, veth pairs and the anchor carry the run's pid in their names
and are removed at the end, also after an error; a run started after one
that was SIGKILLed removes what that one left (rqtools.netns). Needs root.
"""

import json
import os
import time

from ..faultproxy import FaultProxy
from ..netns import Network
from ..servers import HOST, RedisServer, free_port
from .oracle import print_report as print_chaos_report
from .worker_faults import Chaos

PROXY_EPISODES = ('latency', 'stall', 'cut', 'bandwidth')
# Duplicates explained by a fault's kind: the label the report gives them.
CAUSES = {'long_partition': 'partition past the ttl', 'partition': 'partition',
          'latency': 'proxy latency', 'stall': 'proxy stall', 'cut': 'proxy cut mid-reply',
          'bandwidth': 'proxy bandwidth limit'}
# A fault explains the second run of a job when it began at most this long
# before the first run (a prefetched job waits) and before the second run.
EXPLAIN_SLACK = 30.0
# How long after a job ends its ack may still go out (the outcomes are
# sent in batches, on the loop's next turn).
ACK_SLACK = 1.0


class NetworkChaos(Chaos):
    def __init__(self, args, work):
        super().__init__(args, work)
        self.redis = RedisServer(os.path.join(work, 'redis'), port=free_port(), durable=True)
        self.network = None
        self.place_of = {}     # pid -> netns.Place
        self.proxy_of = {}     # worker pid -> FaultProxy
        self.starting = None   # (place, proxy) of the process being started
        self.roles = {'worker': 0, 'producer': 0}
        self.faults = []       # kind, role, pid, start, end (wall clock), detail
        self.active = []       # (monotonic end, fault): healed when due
        self.explained = []    # one per extra run: id, cause, pids, times
        self.proxy_episodes = 0

    # -- processes in namespaces ---------------------------------------------

    def in_place(self, role, argv):
        a = self.args
        self.roles[role] += 1
        place = self.network.place('%s%d' % (role[0], self.roles[role]))
        address = (self.network.anchor, self.redis.port)
        proxy = None
        # A worker killed on request (--kills) leaves its place behind a
        # proxy to the one started in its stead.
        proxied = sum(1 for w in self.workers if w.pid in self.proxy_of and
                      w.state not in ('killed', 'exited'))
        if role == 'worker' and proxied < a.proxied_workers:
            proxy = FaultProxy((self.network.anchor, 0), self.redis.sock,
                               seed=self.rng.getrandbits(32)).start()
            address = proxy.address
        argv = list(argv)
        argv[argv.index('--redis') + 1] = 'redis://%s:%d' % tuple(address)
        self.starting = (place, proxy)
        return place.command(argv)

    def start_worker(self, queues=None, env=None):
        worker = super().start_worker(queues, env)
        place, proxy = self.starting
        self.place_of[worker.pid] = place
        if proxy is not None:
            self.proxy_of[worker.pid] = proxy
        return worker

    def start_producers(self):
        first = self.roles['producer']
        super().start_producers()
        self.log('every worker and producer in a network namespace of its own; %d workers '
                 'through a fault proxy' % len(self.proxy_of))
        # in_place() made one place per producer, in order.
        places = [p for p in self.network.places if p.netns.rsplit('-', 1)[1].startswith('p')]
        for (proc, _), place in zip(self.producers, places[first:]):
            self.place_of[proc.pid] = place

    def redis_url(self):
        return 'redis://%s:%d' % (self.network.anchor, self.redis.port)

    def watch_orphans(self, kind, pid):
        # No worker is killed on purpose here: a worker that exits is a
        # problem of the run (check), not an orphan to time.
        self.event('unwatched', pid, kind)

    # -- the plan --------------------------------------------------------------

    def busy_pids(self):
        return {f['pid'] for _, f, _ in self.active}

    def target(self, role):
        """A process of `role` under no fault now (a worker registered a
        while ago; a proxied one for 'proxied'), or None."""
        busy = self.busy_pids()
        if role == 'producer':
            pool = [p.pid for p, _ in self.producers if p.poll() is None and p.pid not in busy]
        else:
            pool = [w.pid for w in self.running_workers(min_age=1.5)
                    if w.pid not in busy and self.sampler.identity_of(w.pid) is not None and
                    (role != 'proxied' or w.pid in self.proxy_of)]
        return self.rng.choice(pool) if pool else None

    def begin(self, kind, role, pid, seconds, heal, detail=None):
        fault = {'kind': kind, 'role': role, 'pid': pid, 'start': time.time(), 'end': None,
                 'seconds': round(seconds, 3), 'detail': detail}
        self.faults.append(fault)
        self.active.append((time.monotonic() + seconds, fault, heal))
        self.event(kind, pid, detail)
        self.log('%s of %s %d for %.1f s%s' % (kind.replace('_', ' '), role, pid, seconds,
                                              ' (%s)' % detail if detail else ''))

    def heal_due(self):
        now = time.monotonic()
        still = []
        for end, fault, heal in self.active:
            if now >= end:
                heal()
                fault['end'] = time.time()
                self.event('healed', fault['pid'], fault['kind'])
            else:
                still.append((end, fault, heal))
        self.active = still

    def fault(self, kind):
        """Starts the fault `kind` of the plan; False when no process may take
        it now (the plan tries again a second later)."""
        a = self.args
        rng = self.rng
        if kind in ('kill', 'zombie', 'term', 'redis'):
            # The default mode's faults, when asked for (--kills, --zombies,
            # --terms, --redis-restarts; 0 by default in this mode).
            return super().fault(kind)
        if kind == 'clock':
            # --clock-skew: a worker's wall clock stepped (an event of the
            # default mode's, not a network fault: it explains nothing).
            self.step_clock()
            return True
        if kind in ('partition', 'long_partition', 'producer_partition'):
            role = 'producer' if kind == 'producer_partition' else 'worker'
            pid = self.target(role)
            if pid is None:
                return False
            place = self.place_of[pid]
            if kind == 'long_partition':
                seconds = a.heartbeat_ttl + a.janitor_interval + 2.0
            elif kind == 'partition':
                seconds = rng.uniform(0.5, max(0.6, a.heartbeat_ttl * 2 / 3))
            else:
                seconds = rng.uniform(0.5, 2.0)
            place.partition()
            self.begin(kind, role, pid, seconds, place.heal, place.netns)
            return True
        pid = self.target('proxied')
        if pid is None:
            return False
        proxy = self.proxy_of[pid]
        episode = PROXY_EPISODES[self.proxy_episodes % len(PROXY_EPISODES)]
        self.proxy_episodes += 1
        if episode == 'latency':
            delay = rng.uniform(0.02, 0.15)
            proxy.set_delay('both', delay, delay / 2)
            detail, seconds = 'delay %.0f ms, jitter %.0f ms each way' % (
                delay * 1000, delay * 500), rng.uniform(2.0, 4.0)
        elif episode == 'stall':
            direction = rng.choice(('requests', 'replies'))
            proxy.stall(direction)
            detail = direction
            seconds = rng.uniform(0.5, a.heartbeat_ttl + a.janitor_interval + 1.0)
        elif episode == 'cut':
            after = rng.randint(1, 300)
            proxy.cut('replies', after)
            detail, seconds = 'replies after %d bytes' % after, rng.uniform(1.0, 2.5)
        else:
            rate = rng.randint(2_000, 50_000)
            proxy.limit_bandwidth('both', rate)
            detail, seconds = '%d bytes/s each way' % rate, rng.uniform(2.0, 4.0)
        self.begin(episode, 'worker', pid, seconds, proxy.clear, detail)
        return True

    def faults_active(self):
        return bool(self.active)

    def tend_workers(self, replace=True):
        self.heal_due()
        super().tend_workers(replace)

    # -- the run ---------------------------------------------------------------

    def start_redis(self):
        a = self.args
        self.network = Network()
        if self.network.removed_leftovers:
            self.log('removed %d namespaces and links left by runs that are gone'
                     % self.network.removed_leftovers)
        # Protected mode refuses every address but loopback to a server with
        # no password; the anchor is reached from the run's namespaces only.
        self.redis.options += ['--bind', HOST, self.network.anchor, '--protected-mode', 'no']
        self.redis.start()
        self.log('redis-server pid %d on %s and %s:%d (anchor of the namespaces)' % (
            self.redis.proc.pid, self.redis.sock, self.network.anchor, self.redis.port))
        self.throw_fraction = 0.0 if a.throw_fraction == 'auto' else float(a.throw_fraction)

    def timeline(self):
        a = self.args
        return self.spread(2.0, max(3.0, a.duration - 2.0), (
            ('partition', a.partitions), ('long_partition', a.long_partitions),
            ('proxy', a.latency_episodes if a.proxied_workers else 0),
            ('producer_partition', a.producer_partitions),
            ('clock', a.clock_steps if a.clock_skew else 0),
            ('kill', a.kills), ('zombie', a.zombies), ('term', a.terms),
            ('redis', a.redis_restarts)))

    def cleanup(self):
        for _, fault, heal in self.active:
            try:
                heal()
            except Exception:  # the namespace is removed below anyway
                pass
        super().cleanup()
        for proxy in self.proxy_of.values():
            proxy.stop()
        if self.network is not None:
            self.network.remove()
            left = self.network.names()
            if left:
                print('tools/chaos: namespaces and links still there: %s' % ' '.join(left))

    # -- the check ---------------------------------------------------------------

    def explain(self, lower, higher):
        """A retry; else, for a job put back with no interruption counted,
        the fence of its first run's worker; else the fault recorded against
        the first run's worker that began at most EXPLAIN_SLACK before that
        run and before the second (a long partition first); else a kill,
        crash or TERM of the default mode. A worker taken for dead with no fault recorded against
        it explains nothing. Each explanation is kept for the report."""
        if higher['rc'] > lower['rc']:
            cause, fault = 'retry', None
        elif higher['ic'] <= lower['ic']:
            # Put back with no interruption counted: only its worker's fence
            # explains it (the default mode's rule). A partition (or the TCP
            # backoff after one) may leave a beat unconfirmed past the lease
            # without the heartbeat key expiring: the worker stops its jobs,
            # and its reconcile, not a janitor, puts them back.
            cause, fault = super().explain(lower, higher), None
            if cause != 'fenced':
                return None
        elif self.args.redis_restarts and any(
                killed <= lower['end'] + ACK_SLACK and ready >= lower['start']
                for killed, ready in self.redis.outages):
            # Redis was SIGKILLed (--redis-restarts) while the first run
            # went on or its ack was on the way: that, not a fault of the
            # network that began earlier, sent the job back.
            cause, fault = 'redis restart', None
        else:
            since = min(lower['start'], higher['start']) - EXPLAIN_SLACK
            hits = [f for f in self.faults if f['role'] == 'worker' and
                    f['pid'] == lower['pid'] and since <= f['start'] <= higher['start']]
            # The fault that met the first run's ack: the last to begin
            # before the run ended (and its ack went out, ACK_SLACK later).
            # A process takes one fault at a time, so that one was on then.
            # Without one, a long partition first, then the latest.
            met = [f for f in hits if f['start'] <= lower['end'] + ACK_SLACK]
            if met:
                fault = max(met, key=lambda f: f['start'])
            else:
                hits.sort(key=lambda f: (f['kind'] != 'long_partition', -f['start']))
                fault = hits[0] if hits else None
            cause = CAUSES[fault['kind']] if fault else super().explain(lower, higher)
            # A Redis restart explains a run given back while Redis was
            # away only when the run asked for restarts (--redis-restarts).
            if cause == 'declared dead' or (cause == 'redis restart' and
                                            not self.args.redis_restarts):
                return None
        if cause is not None:
            fenced_at = fault['start'] + self.args.heartbeat_ttl if fault and \
                fault['kind'] == 'long_partition' else None
            self.explained.append({
                'id': lower['id'], 'cause': cause, 'first_pid': lower['pid'],
                'first_run': [lower['start'], lower['end']], 'second_pid': higher['pid'],
                'second_start': higher['start'],
                'fault': {k: fault[k] for k in ('kind', 'start', 'end', 'detail')}
                if fault else None,
                'past_the_fence': fenced_at is not None and lower['end'] > fenced_at})
        return cause

    def check(self, r):
        a = self.args
        report = super().check(r)
        by_kind = {}
        for f in self.faults:
            by_kind[f['kind']] = by_kind.get(f['kind'], 0) + 1
        after_long = [e for e in self.explained if e['cause'] == CAUSES['long_partition']]
        past_fence = [e for e in after_long if e['past_the_fence']]
        report.update({
            'mode': 'network',
            'faults': by_kind,
            'proxied_workers': len(self.proxy_of),
            'runs_again_after_partition_past_ttl': len(after_long),
            'finished_past_the_fence': len(past_fence),
            'expect_fencing': a.expect_fencing,
        })
        if a.expect_fencing and past_fence:
            self.problems.append('%d first runs on a worker partitioned past its ttl finished '
                                 "later than the partition's start + ttl, and their jobs ran "
                                 'again elsewhere (--expect-fencing)' % len(past_fence))
            report['ok'] = False
        happened = dict(by_kind, proxy=sum(by_kind.get(k, 0) for k in PROXY_EPISODES))
        planned = {'partition': a.partitions, 'long_partition': a.long_partitions,
                   'producer_partition': a.producer_partitions,
                   'proxy': a.latency_episodes if a.proxied_workers else 0}
        for kind, count in planned.items():
            if happened.get(kind, 0) < count:
                self.problems.append('only %d of the %d planned faults of kind %s happened' % (
                    happened.get(kind, 0), count, kind))
                report['ok'] = False
        with open(os.path.join(self.work, 'network.json'), 'w') as f:
            json.dump({'faults': self.faults, 'duplicates': self.explained}, f, indent=1)
        self.details['explained'] = self.explained
        self.details['faults'] = self.faults
        return report


def print_report(report, details, work):
    r = report
    print()
    print('== network faults')
    for f in details.get('faults', []):
        print('  %-18s %-8s pid %-7d %.3f .. %.3f (%.1f s)%s' % (
            f['kind'], f['role'], f['pid'], f['start'], f['end'] or 0,
            (f['end'] or f['start']) - f['start'], ' ' + f['detail'] if f['detail'] else ''))
    for e in details.get('explained', []):
        fault = e['fault']
        print('  duplicate job %d: first run pid %d %.3f..%.3f, again by pid %d at %.3f: %s%s%s'
              % (e['id'], e['first_pid'], e['first_run'][0], e['first_run'][1], e['second_pid'],
                 e['second_start'], e['cause'],
                 ' (%s from %.3f)' % (fault['kind'], fault['start']) if fault else '',
                 '; finished past the fence' if e['past_the_fence'] else ''))
    causes = {}
    for e in details.get('explained', []):
        causes[e['cause']] = causes.get(e['cause'], 0) + 1
    print('network: %d jobs executed; faults %s; %d jobs run more than once, extra runs by '
          'cause %s, unexplained %d; %d extra runs after a partition past the ttl, %d of whose '
          'first runs finished past the fence (%s)' % (
              r['executed_at_least_once'], json.dumps(r['faults'], sort_keys=True),
              r['executed_more_than_once'], json.dumps(causes, sort_keys=True),
              r['unexplained_duplicates'], r['runs_again_after_partition_past_ttl'],
              r['finished_past_the_fence'],
              'a failure with --expect-fencing' if not r['expect_fencing'] else
              'must be 0: --expect-fencing'))
    print_chaos_report(report, details, work)
