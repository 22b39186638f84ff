#!/usr/bin/env python3
"""tools/chaos: fault injection that counts every job.

Starts a private redis-server (appendonly yes, appendfsync always,
maxmemory-policy noeviction, on a unix socket in a temporary directory), W
reliableq workers running the ChaosJob class (tests/chaos/chaos_jobs.cc) and P
producers (chaos_producer) that push N jobs while the workers run. During D
seconds it SIGKILLs workers and starts replacements, SIGSTOPs workers for
longer than the heartbeat ttl and then SIGCONTs them (zombies that come
back), sends TERM to workers in the middle of their jobs, drops every
connection the workers hold (CLIENT KILL, as a proxy or a network blip
would), and SIGKILLs redis-server and starts it again on the same directory
(the AOF is read back). Every worker also declares a periodic job ticking
every second (--periodic) into a queue nobody serves: each second of the
chaos must be pushed as a tick exactly once, so a worker whose scheduler
stops after a fault fails the run.
After the chaos, once every job ran, it stops redis-server (SIGSTOP) while
--stall-pushes `reliableq push --spool` processes push in two waves (each
times out and spools its job; the second wave's drainers send the first
wave's jobs again into the stalled socket buffers), resumes it and drains that
spool with `reliableq spool drain`: every push that reported spooled or
accepted must run, and none twice from a replay (about 15 s).

Profiles (--profile): the default keeps the workers mostly idle, so that each
kind of fault meets jobs at every stage. saturated keeps a standing backlog
of short jobs (the producers wait while --backlog jobs are queued, and stop
at the end of D): every fault then meets full fetch batches, prefetched jobs
and pipelined acks, where a defect in the batch paths loses jobs in every
run. tools/test runs it short; tests/chaos/mutants/check.py proves it catches
scripts broken on purpose.

Modes (--mode; each sets its own defaults, see --help):
  default   the run above.
  failover  the jobs' Redis is a replication group on loopback: a master and
            two replicas (appendonly yes, appendfsync always,
            min-replicas-to-write 1) and three redis-sentinel processes
            (quorum 2, down-after 2 s), reached only through a
            redis+sentinel:// URL; the job records go to a separate ledger
            redis-server that is never failed over. It SIGKILLs the master
            --failovers times (some just after pausing both replicas with
            SIGSTOP, which with a ballast write opens a real replication
            gap), waits for each promotion, and restarts the killed server
            only as a replica of the new master. Half the producers push
            with replica acknowledgement (WAIT 1), half without. Fails on
            any job lost among the replica-confirmed pushes; reports what
            the others lost. tools/lib/rqtools/chaos/failover.py.
  cluster   the jobs live on a Redis Cluster on loopback (3 primaries, a
            replica each, cluster-node-timeout 2 s) in --groups queue groups
            (layout 2, each group in the lowest slot of its own primary),
            with --workers workers and --producers producers per group, all
            on a redis+cluster:// URL naming their group; the records go to
            a ledger redis-server outside the cluster. Beside the worker
            faults above (SIGKILL, zombies, TERM), it SIGKILLs the primary
            owning a group's slot --cluster-failovers times (the replica is
            promoted, the killed node restarted as a replica) and moves a
            group's slot to another primary --reshards times with
            `redis-cli --cluster reshard`, under load. The producers push
            with replica acknowledgement (WAIT 1): fails on any loss among
            those pushes. tools/lib/rqtools/chaos/cluster.py.
  outage    Redis is unreachable for --outage-seconds (SIGSTOP, then SIGKILL
            with a restart on its AOF) while producers push through a client
            spool (ClientOptions::spool_dir); fails on any job lost among the
            pushes reported accepted or spooled, and reports how long after
            Redis came back the spool was empty. tools/lib/rqtools/chaos/outage.py.
  network   the saturated load with every worker and every producer in a
            network namespace of its own, joined to Redis by a veth pair
            (root only): workers' links taken down for under the ttl
            (--partitions) and past it (--long-partitions), producers'
            links briefly (--producer-partitions), and fault-proxy episodes
            (--latency-episodes: latency and jitter, one direction stalled,
            connections cut mid-reply, bandwidth limited) between
            --proxied-workers workers and Redis. Every fault is recorded with
            its times and the process it hit; fails on a confirmed push lost
            or a duplicate no recorded fault of its first worker explains,
            and lists each duplicate's explanation. Runs twice after a
            partition past the ttl are counted apart; --expect-fencing fails
            the run when such a first run finished later than the
            partition's start + ttl. tools/lib/rqtools/chaos/network.py.

The long forms, run before a release (figures in docs/reliability.md):
  tools/chaos --mode failover --failovers 10 --duration 120
  tools/chaos --mode outage --outage-seconds 30
  tools/chaos --mode cluster --duration 120 --cluster-failovers 5 --reshards 5
            --groups 3 --backlog 400 --sleep-ms 2 --concurrency 8 --jobs 10000000
  tools/chaos --mode network --duration 1200 --partitions 24 --long-partitions 8
            --latency-episodes 24 --producer-partitions 10 --drain-timeout 120
            --expect-fencing --clock-skew --clock-steps 8
  tools/chaos --clock-skew --clock-steps 10   (every worker's wall clock off
            by up to 60 s either way under libfaketime, and stepped while it
            runs; see below)
tools/test runs the failover mode short (5 failovers in 45 s), the
cluster mode short (1 failover and 1 reshard in 30 s, --backlog 400), and
the network mode short (its defaults: under 2 minutes in all).
  tools/chaos --limit 3 --jobs 3000 --duration 30   (a concurrency limit of 3
            on ChaosJob across the 4 workers: the most seen running at
            once, and the moments above 3 inside and outside the crash
            window of reliableq(1), LIMITS; any outside fails the run)

With --sequences K (the default and network modes), every job names one of K
sequence keys (reliableq(1), SEQUENCES): each producer pushes its own share
of the keys, interleaved, each key's jobs in index order, and every attempt
of such a job records its start as well as its end. Beside the usual
checks, per key the first starts must come in push order (a job whose run
was cut short may run again before the next starts), two jobs of one key may
run at once only inside the stated window (one of the two processes was
stopped as a zombie, fenced, partitioned, stopped past its timeout or taken
for dead while that run went on), and no key may be held, nor any job wait
for one, at the end; the report counts overlaps (explained by cause,
unexplained) and reruns (sequences.py). A flag rather than a mode: the check
rides on the faults of either mode. tools/test runs it short; the long form:
  tools/chaos --mode network --sequences 1000 --jobs 50000 --duration 120
            --kills 12 --zombies 3 --redis-restarts 2 --drain-timeout 240

With --clock-skew (the default mode and its profiles, and the network mode), every worker runs
under Debian's libfaketime with its wall clock off by a random whole number
of seconds in [-60, 60], read from a file of its own on every call
(FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE=1); --clock-steps times during
the chaos it writes another offset into a running worker's file, stepping
its clock by 10 s or more (each a clock_step event). The monotonic clock,
on which libuv's timers and every deadline run, stays the real one
(FAKETIME_DONT_FAKE_MONOTONIC=1). Times the workers write (job records, log
stamps) are taken back to the real clock by the offsets each had. Beside the
usual checks, no periodic tick may be pushed twice, skipped or early (a
sampler watches the latest recorded tick against Redis's clock), since cron
ticks and due jobs are judged by Redis's TIME (reliableq-schema(7), CLOCKS).

Then it waits (bounded) until every queue, working list, the schedule and the
retry set are empty, stops the workers, and checks every job: each push Redis
acknowledged must have run at least once or sit in the dead set. It prints a
report and one JSON line, and exits 1 on any lost job, any duplicate run that
no kill, crash, zombie, stop, retry or Redis restart explains, any execution
of a job nobody pushed, a worker that exited in a way nobody caused, or a
drain that did not finish; 2 on bad arguments; 0 otherwise.

How it knows: every attempt of a ChaosJob writes a record (pid,
interrupted_count, retry_count, start, end, outcome) into Redis inside the job,
before it returns, throws or aborts, and counts completed runs per job id in
a hash. Producers write down each id whose push Redis acknowledged; a push
whose reply was lost (Redis killed under it) is "unknown", never "accepted".
A second run of a job is explained when its payload shows why it ran again:
a higher retry_count (a retry), or a higher interrupted_count, and then the
process of the earlier run must have been killed, crashed, stopped as a
zombie or sent TERM, or a worker log must show that it was declared dead (a
janitor found its heartbeat key gone, for example while Redis was down).

The longest wait of an orphaned job: when a worker is SIGKILLed, crashes or
is stopped, a sampler reads the length of its working lists (found through
its registry entry) every 20 ms until they are empty, and reports the longest
time from the event to that moment, with and without a Redis outage in
between, and from the process's last heartbeat (the "beat" of its Sidekiq
process hash).

Everything it starts (redis-servers, sentinels, workers, producers) is
stopped by PID at the end, also on errors and Ctrl-C, and dies with it if it
is killed (PR_SET_PDEATHSIG). The temporary directory is removed, unless the
run failed or --keep is given; then its path is printed (worker logs, Redis
logs and AOFs, the producers' lists of ids, and events.json: every signal
sent, with times, and in failover mode every failover's times and offsets).

Binaries: --bin, --plugin and --producer, else $RELIABLEQ_BIN,
$RELIABLEQ_CHAOS_PLUGIN and $RELIABLEQ_CHAOS_PRODUCER, else the files in
${BUILD_DIR:-build}.
"""

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile

from .. import ROOT
from .cluster import ClusterChaos, print_report as print_cluster_report
from .failover import FailoverChaos, print_report as print_failover_report
from .network import NetworkChaos, print_report as print_network_report
from .oracle import print_report
from .outage import OutageChaos, print_report as print_outage_report
from .worker_faults import Chaos, faketime_library


# Defaults by --profile. default: the workers are mostly idle at this load,
# and each kind of fault meets jobs at every stage. saturated: a standing
# backlog of short jobs, so that at every fault each worker holds full fetch
# batches, a prefetch and a pipeline of acks: a defect in those batch paths
# (a fetch.lua that leaves one job of each batch out of the working list)
# loses jobs in every run, not by luck.
PROFILES = {
    'default': {},
    'saturated': {'backlog': 2000, 'jobs': 10_000_000, 'sleep_ms': 2, 'concurrency': 8,
                  'kill_every': 1.5, 'long_fraction': 0.001},
}
PROFILE_HELP = {
    'saturated': '--backlog 2000 --jobs 10000000 --sleep-ms 2 --concurrency 8 '
                 '--kill-every 1.5 --long-fraction 0.001',
}

# Defaults by --mode (an option given explicitly wins). The failover and
# outage modes fault Redis only: no worker is killed, stopped or aborted on
# purpose and no job throws, so that every duplicate and every exit is the
# fault's doing or a defect.
MODES = {
    'default': {},
    'failover': {'workers': 3, 'producers': 2, 'backlog': 600, 'jobs': 1_000_000,
                 'sleep_ms': 100, 'duration': 60, 'push_window': 1.0, 'throw_fraction': '0',
                 'abort_fraction': 0.0, 'long_fraction': 0.002, 'drain_timeout': 120,
                 'periodic': False, 'conn_kills': 0, 'stall_pushes': 0},
    'cluster': {'workers': 2, 'producers': 1, 'jobs': 8000, 'duration': 60, 'zombies': 1,
                'terms': 2, 'kill_every': 10, 'push_window': 0.8, 'abort_fraction': 0.0,
                'drain_timeout': 120, 'periodic': False, 'conn_kills': 0, 'stall_pushes': 0},
    'outage': {'workers': 2, 'producers': 2, 'jobs': 12000, 'duration': 100,
               'push_window': 1.0, 'throw_fraction': '0', 'abort_fraction': 0.0,
               'long_fraction': 0.0, 'drain_timeout': 120, 'periodic': False, 'conn_kills': 0},
    # The saturated load; the network faults only (no kill, stop, TERM,
    # abort or throw), so that every duplicate is theirs or a defect.
    'network': dict(PROFILES['saturated'], workers=4, producers=2, duration=50, kills=0,
                    zombies=0, terms=0, redis_restarts=0, conn_kills=0, stall_pushes=0,
                    throw_fraction='0', abort_fraction=0.0, heartbeat_ttl=3, long_ms=5000,
                    drain_timeout=40),
}
MODE_HELP = {
    'failover': '--workers 3 --producers 2 (per group) --backlog 600 --jobs 1000000 '
                '--sleep-ms 100 --duration 60 --push-window 1 --throw-fraction 0 '
                '--abort-fraction 0 --long-fraction 0.002 --drain-timeout 120 --no-periodic '
                '--conn-kills 0 --stall-pushes 0',
    'cluster': '--workers 2 --producers 1 (per group) --jobs 8000 --duration 60 --zombies 1 '
               '--terms 2 --kill-every 10 --push-window 0.8 --abort-fraction 0 '
               '--drain-timeout 120 --no-periodic --conn-kills 0 --stall-pushes 0',
    'outage': '--workers 2 --producers 2 --jobs 12000 --duration 100 --push-window 1 '
              '--throw-fraction 0 --abort-fraction 0 --long-fraction 0 --drain-timeout 120 '
              '--no-periodic --conn-kills 0',
    'network': 'the saturated profile, --workers 4 --producers 2 --duration 50 --kills 0 '
               '--zombies 0 --terms 0 --redis-restarts 0 --conn-kills 0 --stall-pushes 0 '
               '--throw-fraction 0 --abort-fraction 0 --heartbeat-ttl 3 --long-ms 5000 '
               '--drain-timeout 40',
}


def parse_args(argv):
    build = os.environ.get('BUILD_DIR', 'build')

    def default(var, rel):
        value = os.environ.get(var)
        if value:
            return value
        return os.path.join(build if os.path.isabs(build) else os.path.join(ROOT, build), rel)

    p = argparse.ArgumentParser(
        prog='tools/chaos', description=__doc__.split('\n\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--mode', choices=sorted(MODES), default='default',
                   help='default: one redis-server, workers killed, stopped and sent TERM, '
                        'redis-server SIGKILLed; failover: a replication group under '
                        'Sentinel whose master is SIGKILLed (--failovers); outage: Redis '
                        'unreachable for --outage-seconds while producers push through a '
                        'spool; cluster: queue groups on a Redis Cluster whose primaries are '
                        'SIGKILLed and whose slots move, beside the worker faults; network: '
                        'workers and producers in network namespaces whose links go down, '
                        'some workers behind a fault proxy (root only). Each mode '
                        'sets defaults (an option given explicitly wins): failover: %s; '
                        'outage: %s; cluster: %s; network: %s' % (
                            MODE_HELP['failover'], MODE_HELP['outage'], MODE_HELP['cluster'],
                            MODE_HELP['network']))
    p.add_argument('--profile', choices=sorted(PROFILES), default='default',
                   help='a set of defaults for the options below; an option given '
                        'explicitly wins (default mode only). saturated: %s'
                        % PROFILE_HELP['saturated'])
    p.add_argument('--backlog', type=int, default=0,
                   help='keep this many jobs queued during D (the producers wait while '
                        'the queues hold as many, and stop at the end of D; --jobs is '
                        'then only a cap); 0 pushes --jobs over --push-window')
    p.add_argument('--workers', type=int, default=4, help='worker processes (W)')
    p.add_argument('--jobs', type=int, default=20000, help='accepted pushes to make (N)')
    p.add_argument('--duration', type=float, default=60, help='seconds of chaos (D)')
    p.add_argument('--producers', type=int, default=3, help='producer processes')
    p.add_argument('--push-window', type=float, default=0.75,
                   help='fraction of D over which the jobs are pushed')
    p.add_argument('--kills', type=int, default=None,
                   help='worker SIGKILLs during D (default: one every --kill-every s)')
    p.add_argument('--kill-every', type=float, default=2.5,
                   help='seconds between SIGKILLs when --kills is not given')
    p.add_argument('--zombies', type=int, default=2,
                   help='workers SIGSTOPped for --zombie-seconds, then SIGCONTed')
    p.add_argument('--terms', type=int, default=3, help='workers sent TERM mid-job')
    p.add_argument('--redis-restarts', type=int, default=4,
                   help='times redis-server is SIGKILLed and restarted')
    p.add_argument('--redis-down', type=float, default=1.5,
                   help='longest time redis-server stays down (random from 0.1 s)')
    p.add_argument('--conn-kills', type=int, default=3,
                   help="times every worker connection is dropped with CLIENT KILL (matched by "
                        "the workers' client names)")
    p.add_argument('--periodic', action=argparse.BooleanOptionalAction, default=True,
                   help='every worker declares a periodic job that ticks every second into a '
                        'queue no worker serves; fails on a tick of the chaos never pushed or '
                        'pushed twice')
    p.add_argument('--clock-skew', action='store_true',
                   help='run every worker with its wall clock off by up to 60 s either way '
                        '(libfaketime), and step some of them (default and network modes)')
    p.add_argument('--clock-steps', type=int, default=4,
                   help='with --clock-skew: clock steps of running workers during the chaos')
    p.add_argument('--concurrency', type=int, default=5, help='threads per worker')
    p.add_argument('--sequences', type=int, default=0, metavar='K',
                   help='every job names one of K sequence keys (each producer its own '
                        'keys, pushed in order) and records its start; fails on a first '
                        'start out of push order within a key, two jobs of one key running '
                        'at once outside the stated window of reliableq(1), SEQUENCES, or a '
                        'key held or waited for at the end (default and network modes; 0: '
                        'plain jobs)')
    p.add_argument('--sequence-window', type=int, default=0, metavar='W',
                   help='with --sequences: each producer pushes its keys W at a time (all '
                        'the jobs of W keys, interleaved, then the next W), so that jobs of '
                        'one key meet at the fetch and wait for each other (0: all its keys '
                        'interleaved)')
    p.add_argument('--limit', type=int, default=0,
                   help='a concurrency limit across the workers on ChaosJob (--limit '
                        'chaos=concurrency=N); the report counts the moments above it inside '
                        'and outside the crash window, and fails on any outside (0: none)')
    p.add_argument('--timeout', type=float, default=2, help='worker shutdown timeout (-t)')
    p.add_argument('--heartbeat-ttl', type=float, default=2)
    p.add_argument('--heartbeat-interval', type=float, default=0.5)
    p.add_argument('--janitor-interval', type=float, default=1)
    p.add_argument('--zombie-seconds', type=float, default=None,
                   help='how long a zombie stays stopped (default: ttl + janitor + 2)')
    p.add_argument('--sleep-ms', type=int, default=20, help='longest random sleep of a job')
    p.add_argument('--long-ms', type=int, default=3000, help='sleep of a long job')
    p.add_argument('--long-fraction', type=float, default=0.005,
                   help='jobs that sleep --long-ms (longer than --timeout)')
    p.add_argument('--abort-fraction', type=float, default=0.0005,
                   help='jobs that abort() their worker on their first attempt')
    p.add_argument('--snooze-fraction', type=float, default=0.0,
                   help='jobs that snooze twice (0.1 to 0.6 s each, no retry spent) before '
                        'they run')
    p.add_argument('--discard-fraction', type=float, default=0.0,
                   help='jobs whose first attempt discards them: they must not run again')
    p.add_argument('--throw-fraction', default='auto',
                   help="jobs that throw on their first attempt; 'auto' means "
                        "--auto-throw-fraction when the worker retries failed jobs "
                        "(a probe at start-up finds out) and 0 while a failed job goes "
                        "straight to the dead set")
    p.add_argument('--auto-throw-fraction', type=float, default=0.01)
    p.add_argument('--drain-timeout', type=float, default=240,
                   help='longest wait after D for the producers and the queues')
    p.add_argument('--seed', type=int, default=None, help='seed of the chaos schedule')
    p.add_argument('--bin', default=default('RELIABLEQ_BIN', 'src/cli/reliableq'))
    p.add_argument('--plugin',
                   default=default('RELIABLEQ_CHAOS_PLUGIN', 'tests/chaos/libchaos_jobs.so'))
    p.add_argument('--producer',
                   default=default('RELIABLEQ_CHAOS_PRODUCER', 'tests/chaos/chaos_producer'))
    p.add_argument('--keep', action='store_true', help='keep the temporary directory')
    f = p.add_argument_group('failover mode')
    f.add_argument('--failovers', type=int, default=5,
                   help='times the master is SIGKILLed (each waits for the promotion)')
    f.add_argument('--paused-failovers', type=int, default=None,
                   help='of them, how many first SIGSTOP both replicas for --pause-seconds '
                        '(default: half, rounded up)')
    f.add_argument('--pause-seconds', type=float, default=1.0)
    f.add_argument('--ballast-mb', type=int, default=16,
                   help='megabytes written to the master at the start of each pause, more '
                        'than the socket buffers between it and a replica hold, so that '
                        'the writes after them are lost with the master (0: none)')
    f.add_argument('--ack-replicas', type=int, default=1,
                   help='replicas the acknowledged producers wait for (WAIT N). 0 turns '
                        'them into plain producers whose losses still fail the run: a check '
                        'that the run catches confirmed pushes lost in a failover')
    f.add_argument('--wait-timeout', type=int, default=1000,
                   help='WAIT timeout of the acknowledged producers, in milliseconds')
    f.add_argument('--down-after-ms', type=int, default=2000,
                   help="the sentinels' down-after-milliseconds. With 1000 on a loaded "
                        "2-core machine, the sentinels at times failed over a master they "
                        "had just promoted, which was slow to answer one of them")
    f.add_argument('--failover-timeout-ms', type=int, default=3000,
                   help="the sentinels' failover-timeout (failovers are at least twice "
                        "as far apart)")
    f.add_argument('--failover-slack', type=float, default=5.0,
                   help='seconds after a promotion in which a run that began before it '
                        'may run again (failover window)')
    f.add_argument('--group-timeout', type=float, default=60.0,
                   help='longest wait for a promotion or for the group to be whole again')
    c = p.add_argument_group('cluster mode (--workers and --producers are per group; '
                             '--ack-replicas, --wait-timeout, --failover-slack and '
                             '--group-timeout apply too)')
    c.add_argument('--primaries', type=int, default=3,
                   help='primaries of the cluster, each with one replica')
    c.add_argument('--groups', type=int, default=2,
                   help='queue groups, each in the lowest slot of its own primary')
    c.add_argument('--cluster-failovers', type=int, default=2,
                   help="times the primary owning a group's slot is SIGKILLed")
    c.add_argument('--reshards', type=int, default=2,
                   help="times redis-cli --cluster reshard moves a group's slot to another "
                        "primary under load")
    c.add_argument('--node-timeout-ms', type=int, default=2000,
                   help='cluster-node-timeout of every node (a failover takes about twice it)')
    p.add_argument('--stall-pushes', type=int, default=6,
                   help="spooled pushes (reliableq push --spool, in two waves) made while "
                        "redis-server is stopped: after the chaos in the default mode, during "
                        "each 'stop' outage in the outage mode. Each stored push must run, and "
                        "none twice from a replay; 0: none")
    o = p.add_argument_group('outage mode')
    o.add_argument('--outage-seconds', type=float, default=30.0,
                   help='how long Redis is unreachable, each time')
    o.add_argument('--outages', default='stop,kill',
                   help="comma-separated, in order: 'stop' (SIGSTOP, pushes time out) and "
                        "'kill' (SIGKILL, restarted on its AOF after --outage-seconds)")
    n = p.add_argument_group('network mode')
    n.add_argument('--partitions', type=int, default=4,
                   help="times a worker's link goes down for 0.5 s to 2/3 of the ttl")
    n.add_argument('--long-partitions', type=int, default=2,
                   help="times a worker's link goes down for ttl + janitor interval + 2 s")
    n.add_argument('--latency-episodes', type=int, default=4,
                   help='fault-proxy episodes on a proxied worker, in turn: latency and '
                        'jitter, one direction stalled, connections cut mid-reply, '
                        'bandwidth limited')
    n.add_argument('--producer-partitions', type=int, default=2,
                   help="times a producer's link goes down for 0.5 to 2 s")
    n.add_argument('--proxied-workers', type=int, default=2,
                   help='workers that reach Redis through a fault proxy of their own')
    n.add_argument('--expect-fencing', action='store_true',
                   help='fail on a job whose first run finished on a worker partitioned past '
                        "its ttl later than the partition's start + ttl, and ran again "
                        'elsewhere (a worker that fences itself stops it before)')
    first, _ = p.parse_known_args(argv)
    if first.mode != 'default' and first.profile != 'default':
        p.error('--profile applies to the default mode only')
    p.set_defaults(**MODES[first.mode])
    p.set_defaults(**PROFILES[first.profile])
    a = p.parse_args(argv)
    if a.backlog < 0:
        p.error('--backlog must be at least 0')
    if a.clock_skew and a.mode not in ('default', 'network'):
        p.error('--clock-skew applies to the default and network modes only')
    if a.sequences < 0 or (a.sequences and a.mode not in ('default', 'network')):
        p.error('--sequences takes a number of keys >= 0, in the default and network modes')
    if a.sequence_window < 0:
        p.error('--sequence-window must be at least 0')
    if a.clock_steps < 0:
        p.error('--clock-steps must be at least 0')
    if a.clock_skew and faketime_library() is None:
        p.error('libfaketime is not installed (tools/setup installs faketime)')
    if a.stall_pushes < 0 or a.stall_pushes == 1:
        p.error('--stall-pushes must be 0, or 2 or more (two waves)')
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    if a.kills is None:
        a.kills = int(round(a.duration / a.kill_every))
    if a.zombie_seconds is None:
        a.zombie_seconds = a.heartbeat_ttl + a.janitor_interval + 2
    if a.throw_fraction != 'auto':
        try:
            if not 0 <= float(a.throw_fraction) <= 1:
                raise ValueError
        except ValueError:
            p.error("--throw-fraction must be 'auto' or a number in [0, 1]")
    for name in ('snooze_fraction', 'discard_fraction'):
        if not 0 <= getattr(a, name) <= 1:
            p.error('--%s must be a number in [0, 1]' % name.replace('_', '-'))
    for name in ('workers', 'jobs', 'producers', 'concurrency'):
        if getattr(a, name) < 1:
            p.error('--%s must be at least 1' % name)
    if a.duration <= 0 or a.drain_timeout <= 0:
        p.error('--duration and --drain-timeout must be positive')
    if a.mode == 'failover':
        if a.paused_failovers is None:
            a.paused_failovers = (a.failovers + 1) // 2
        if a.failovers < 1 or not 0 <= a.paused_failovers <= a.failovers:
            p.error('--failovers must be at least 1 and --paused-failovers at most that')
        if not 0 <= a.ack_replicas <= 2:
            p.error('--ack-replicas must be 0, 1 or 2 (the group has two replicas)')
        if shutil.which('redis-sentinel') is None:
            p.error('redis-sentinel is not installed (tools/setup installs it)')
    if a.mode == 'cluster':
        if a.primaries < 2 or a.groups < 1 or a.cluster_failovers < 0 or a.reshards < 0:
            p.error('--primaries must be at least 2, --groups at least 1, --cluster-failovers '
                    'and --reshards at least 0')
        if a.groups > a.primaries and a.reshards:
            p.error('--reshards needs at most one group per primary (--groups <= --primaries)')
        if not 0 <= a.ack_replicas <= 1:
            p.error('--ack-replicas must be 0 or 1 in cluster mode (one replica per primary)')
        if shutil.which('redis-cli') is None:
            p.error('redis-cli is not installed (tools/setup installs it)')
    if a.mode == 'outage':
        a.outages = [x for x in a.outages.split(',') if x]
        if not a.outages or any(x not in ('stop', 'kill') for x in a.outages):
            p.error("--outages takes 'stop' and 'kill', comma-separated")
        if a.outage_seconds <= 0:
            p.error('--outage-seconds must be positive')
    if a.mode == 'network':
        if min(a.partitions, a.long_partitions, a.latency_episodes, a.producer_partitions,
               a.proxied_workers) < 0:
            p.error('--partitions, --long-partitions, --latency-episodes, '
                    '--producer-partitions and --proxied-workers must be at least 0')
        if a.proxied_workers > a.workers:
            p.error('--proxied-workers must be at most --workers')
        if os.geteuid() != 0:
            p.error('--mode network makes network namespaces: it needs root')
        if shutil.which('ip') is None:
            p.error("iproute2's ip is not installed (tools/setup installs it)")
    for path in (a.bin, a.plugin, a.producer):
        if not os.path.isfile(path):
            p.error('%s does not exist (build first, or see --help)' % path)
    for path_name in ('bin', 'plugin', 'producer'):
        setattr(a, path_name, os.path.abspath(getattr(a, path_name)))
    if shutil.which('redis-server') is None:
        p.error('redis-server is not installed (tools/setup installs it)')
    return a


# The run and the report of each --mode.
RUNS = {
    'default': (Chaos, print_report),
    'failover': (FailoverChaos, print_failover_report),
    'cluster': (ClusterChaos, print_cluster_report),
    'outage': (OutageChaos, print_outage_report),
    'network': (NetworkChaos, print_network_report),
}


class Interrupted(Exception):
    pass


def main(argv):
    args = parse_args(argv)

    def interrupt(signum, _frame):
        raise Interrupted('signal %d' % signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)

    work = tempfile.mkdtemp(prefix='reliableq-chaos-')
    run_class, report_function = RUNS[args.mode]
    chaos = run_class(args, work)
    ok = False
    print('tools/chaos: mode %s, seed %d, work directory %s' % (args.mode, args.seed, work),
          flush=True)
    try:
        report = chaos.run()
        report_function(report, chaos.details, work)
        ok = report['ok']
    except Interrupted as e:
        print('tools/chaos: interrupted (%s); stopping everything' % e, file=sys.stderr)
    except Exception as e:  # report, clean up, fail
        import traceback
        traceback.print_exc()
        print('tools/chaos: error: %s' % e, file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        chaos.cleanup()
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print('tools/chaos: kept %s' % work, file=sys.stderr)
    return 0 if ok else 1
