#!/usr/bin/env python3
"""Benchmarks reliableq on this machine: enqueue rate, drain rate, idle pickup
latency and worker memory, many queues, crash recovery and scheduled-job
lateness, optionally against Ruby Sidekiq on the same Redis, and optionally
against an older revision of reliableq in the same run.

Usage: tools/bench [--jobs N] [--quick] [--only SCENARIO[,SCENARIO...]]
                   [--compare-sidekiq] [--compare-gitlab] [--repeat N] [--rounds N]
                   [--baseline REV [--baseline-dir DIR]] [--json-only] [--no-build]
                   [--build-dir DIR]

It builds what it needs with meson and ninja into ${BUILD_DIR:-build} (running
tools/setup when that directory is not configured yet), starts its own
redis-server on a unix socket in a temporary directory (no persistence; a
TCP port on 127.0.0.1 only for the scenarios that need one: drain_c25_tcp,
drain_c25_tls, push_wait's replica) and stops it, and push_wait's replica,
by PID at the end, also after an error or Ctrl-C (recovery_young_redis
starts a Redis of its own for each run, and stops it the same way).
Every scenario starts on an empty database.

Output: progress on stderr; on stdout one JSON object per scenario, then a
readable table and the targets of issues 5 and 15 (only the JSON with
--json-only). Every object names the `system` it measured.

Scenarios (the names --only takes):
  enqueue          PushBulk of N jobs; single pushes (Push) from 4 and from 8
                   threads; and the reference `redis-benchmark -s <socket>
                   -P 16 -t lpush -n N -d <bytes>` with <bytes> the average
                   size of the jobs PushBulk stored, in the same run: each
                   reliableq rate also as a fraction of it
  drain_c25        N queued NoopJob, one `reliableq worker -c 25`
  drain_records    drain_c25 with a final record kept for every job (`--records
                   3600`), on the tree only: its rate against the tree's
                   drain_c25 of the same round (vs_records_off), and the Redis
                   memory of one record (MEMORY USAGE of 200 of them)
  drain_unique     drain_c25 with every job unique (its own key, held until it
                   succeeds: its ack is a script, not the plain LREM), pushed
                   one at a time from 8 threads
  drain_keyed      drain_c25 with every job naming a sequence key (reliableq(1),
                   SEQUENCES), 1,000 keys, job i the key i mod 1000 (a key's
                   jobs spread over the queue), on the tree only (builds before
                   8cdb7c6 have no sequences): its rate against the tree's
                   drain_c25 of the same round (vs_plain); the drain ends once
                   the queue, the working list and the holders' hash are empty
  drain_c10        the same with -c 10
  drain_c100       the same with -c 100
  latency          idle worker, 1,000 LatencyJob pushed 5 ms apart: the time
                   from each job's enqueued_at to the start of its handler;
                   pushed by reliableq's client (p50_ms...) and by a plain
                   Sidekiq-format push (MULTI, SADD queues, LPUSH, EXEC, as
                   Ruby's client sends it: no wake-up) with
                   notify-keyspace-events off (plain_p50_ms...), the order
                   alternating by round; plain_p99_vs_client_p99 is their
                   ratio. With --compare-sidekiq Sidekiq gets the same two
                   producers (sidekiq_*, sidekiq_plain_*), and
                   plain_p99_vs_sidekiq_plain_p99 compares the plain pushes
  drain_10_queues  N jobs spread over 10 queues with weights 1..10, -c 25
  drain_1m         10 x N queued jobs, -c 25, compared with drain_c25
  rss              (derived) worker RSS idle (latency) and under load (drain_c25)
  drain_c25_tcp    drain_c25 with the worker on TCP (127.0.0.1) instead of the
                   unix socket
  drain_c25_tls    the same over TLS (rediss://, a CA and server certificate
                   made with openssl for the run); both report their ratio to
                   drain_c25, and TLS its ratio to plain TCP
  queues_500       one `reliableq worker -c 10` serving 500 queues q001..q500
                   in strict order, idle: the Redis connections it holds
                   (Redis's connected_clients before and after it started;
                   also those carrying its client name), its RSS, and the CPU
                   Redis spends on it over 60 s (10 s with --quick): Redis's
                   CPU over that time with the idle worker minus the same
                   with no worker. Then the idle pickup on the last queue,
                   q500, of 1,000 jobs 5 ms apart, for three producers, each
                   with a worker started afresh, in an order that alternates
                   by round: reliableq's client (client_*), a plain
                   Sidekiq-format push (MULTI, SADD queues, LPUSH, EXEC, as
                   Ruby's client sends it) with notify-keyspace-events set to
                   Kl (notify_*), and the same with notifications off, ""
                   (plain_*; plain_p99_vs_client_p99). Before the plain
                   pickups, the idle Redis CPU again (traffic_idle_*), both
                   windows carrying 200 plain pushes a second to a queue the
                   worker does not serve (Ruby traffic elsewhere). With
                   --compare-sidekiq, `sidekiq -c 10` on the same 500 queues
                   (one BRPOP of all) takes the plain pushes too
                   (sidekiq_plain_*, plain_p99_vs_sidekiq_plain_p99)
  recovery         a worker with the default heartbeat and janitor settings
                   runs 10 long SleepJob; a second, idle worker (other queue,
                   default settings) keeps a janitor running; the first is
                   killed with SIGKILL once all 10 run: seconds until all 10
                   are back in their queue (polled every 10 ms; capped at
                   60 s, 10 s with --quick). A janitor may trust Redis's
                   client list only once Redis has been up longer than the
                   heartbeat TTL, so the kill waits until Redis has been up
                   31 s (the default TTL is 30 s)
  recovery_young_redis  the same on a Redis started for the run (on a unix
                   socket of its own, stopped by PID after it), the kill 5 s
                   after that Redis started: a fresh deployment, a Redis
                   restart. Builds that trust the client list only on a
                   Redis up longer than the TTL take about the TTL here
  sequence_release  how long a SIGKILLed holder keeps its sequence key, on the
                   tree only: per round (5, 2 with --quick), SleepJob A (1 s)
                   and B (0.2 s) of one key, a worker (--heartbeat-ttl 1
                   --janitor-interval 0.5) SIGKILLed while A runs, then another
                   started; from the SIGKILL, a_back_seconds until A is in the
                   new worker's working list (given back at the head, key kept)
                   and b_start_seconds until B is; b_after_a_seconds from A
                   leaving it to B's fetch (the hand-on). Medians over the
                   rounds, polled every 5 ms
  schedule_lateness  an idle worker; 1,000 DueJob scheduled with
                   Client::PushAt at times drawn uniformly over 5 s (2 s with
                   --quick) starting 1 s ahead, each pushed 50 ms to 1 s
                   before its time (so pushes arrive all through the run,
                   often due before the jobs already waiting): how late each
                   started after its due time. Then the same scheduled the
                   Ruby way, a plain ZADD schedule with no wake-up (ruby_*)
  handlers         handlers in any language, -c 25, in the same run: the
                   drain rate of NoopJob run by the C++ no-op handler, by a
                   command handler (--exec NoopJob=/bin/true: a process per
                   job) and by an HTTP handler POSTing to a local server
                   (reliableq-bench http-sink, libmicrohttpd); 2,000 jobs each
                   (300 with --quick), and each rate's ratio to the C++ one
  metrics          drain_c25 with the worker's HTTP endpoint on (--http) and
                   /metrics scraped every second during the drain; the idle
                   RSS of a worker with the endpoint on (scraped once) and
                   off. A --baseline build without the endpoint runs the same
                   without it, so after/before is the metrics' cost
                   (tools/lib/rqtools/bench/web.py)
  cluster_drain    queue groups (layout 2) on a 3-primary Redis Cluster against
                   the same groups on one Redis, both started for it on
                   loopback TCP (the cluster without replicas): N NoopJob
                   (at least 30,000: fewer drain within a tick of the CPU
                   clock) over 3 groups, one in a slot of each primary, a `reliableq
                   worker -c 8` per group; the runs alternate, --repeat times.
                   jobs/s, Redis CPU per job summed over the primaries and
                   worker CPU per job, each also as cluster / one Redis
                   (cluster_drain_one_redis is the reference), and the same
                   on a one-node cluster that owns every slot
                   (cluster_drain_one_node_cluster: cluster mode's own cost,
                   apart from the spreading's). On 2 cores the
                   point is that Redis CPU per job does not grow. Tree only
                   (tools/lib/rqtools/bench/cluster_drain.py)
  web_pages        100,000 entries in dead, 1,000 in retry, 20 processes
                   with running jobs; `reliableq web`; 200 GETs of the page,
                   its script and each JSON call of the dead, retries, busy
                   and overview pages on one keep-alive connection: p50, p99
                   and max ms of each, and the worst p99 against issue 17's
                   50 ms (5,000 entries, 20 GETs with --quick). Tree only
  web_idle         `reliableq web` over 5,000 dead entries: p50, p99 and max
                   ms of 100 GETs each of the page, the overview's JSON and
                   /healthz, each on a new connection, alone and while 16
                   clients hold connections that sent half a request (each
                   reopened when the server closes it); the GETs with no
                   answer within 10 s (counted as 10 s). 20 GETs with --quick
                   (tools/lib/rqtools/bench/web.py)
  push_wait        replica acknowledgement: a replica of the bench's Redis
                   (another redis-server on this machine, replicating over
                   loopback TCP) is started, then PushBulk of N jobs, single
                   pushes from 8 threads (a client each) and from 8 threads
                   sharing one client (round trips carry many threads'
                   pushes, and one WAIT) run with wait_replicas 0 and with
                   wait_replicas 1 (every round trip ends with WAIT 1; every
                   push must come back replicated): both rates and their
                   ratio (wait 1 / wait 0), beside the rates before the
                   replica was started (no_replica). Last in the run: the
                   master's replication backlog would otherwise tax the
                   scenarios after it. Only the tree's build is measured
                   (older builds cannot wait for replicas)

How a drain is timed (reliableq-bench drain): the load generator starts the
worker itself and polls Redis every millisecond in one round trip (LLEN of
every queue and of every working list of every registered reliableq process).
The drain starts at the first poll that sees a queue shorter than before and
ends at the first poll that sees every queue and working list empty; both
instants are late by at most one poll interval, so the duration is off by at
most about a millisecond. Sidekiq's basic fetch has no working lists and pops
jobs into its memory, so its drain ends when its queue is empty and its job
that completes the count has set a key (see tools/bench.d/sidekiq_jobs.rb);
its stat:processed, written when it exits, confirms that every job ran.
Memory is VmHWM (peak RSS) from /proc/<pid>/status; CPU times come from
/proc/<pid>/stat and Redis's INFO cpu.

An idle reliableq worker is one that has registered and whose Redis
connections have stopped changing for a second (whether it waits in
blocking commands, on pub/sub or by polling); Sidekiq is idle once it blocks
in BRPOP.

--compare-sidekiq runs Sidekiq 6.4.1 (Debian's ruby-sidekiq, installed with
apt-get when missing) with tools/bench.d/sidekiq_jobs.rb, the same job class
names and the same jobs pushed by the same client, `sidekiq -c 25`, for
drain_c25 and latency, and prints our/their ratio. --compare-gitlab does the
same with gitlab's reliable fetch (ruby-gitlab-sidekiq-fetcher).

--baseline REV measures an older revision beside the tree: it extracts REV
(`git archive`, nothing in the checkout or its .git changes) into a
temporary /tmp/rq-baseline-<rev>-* directory, copies the tree's
bench/ and examples/demo_jobs.cc over it (the same load generator and job
classes, built against REV's library; where REV predates the folders, into
its src/bench/ and src/examples/, with forwarding headers for the private
headers the load generator includes under their new names), builds it there and removes
it at the end. Every selected scenario then runs for the tree, system
"reliableq", and right after for REV, system "reliableq@<short rev>", on the
same Redis; the table and the targets show after/before ratios. For
example, the figures of issue 15 before and after a change:

  tools/bench --only enqueue,drain_c25,queues_500,recovery,schedule_lateness \
      --baseline HEAD --repeat 3

--baseline-dir DIR builds REV in DIR instead, and keeps it: a later run with
the same DIR and REV rebuilds only the load generator there. --baseline
HEAD measures the same code twice, two builds side by side: the noise band
of an after/before ratio (an A/A run).

--rounds N runs the selected scenarios N times; with --baseline the builds
take turns going first (REV first in odd rounds, the tree in even ones), so
that neither always runs on a warmer or a quieter machine. Every JSON object
then carries its round, and at the end one object per scenario (system
"rounds") lists each compared figure per round and build, their medians, the
tree/REV ratio of each round and the median, lowest and highest of those
ratios; for latency and queues_500 also the pickup percentiles of every
round's samples together (pooled_*), and the plain pushes' pooled p99
against reliableq's own push's and Sidekiq's. For example, a drain against the code before a change, and the
same build against itself for the noise band:

  tools/bench --only drain_c25 --jobs 1000000 --rounds 5 --baseline REV
  tools/bench --only drain_c25 --jobs 1000000 --rounds 5 --baseline HEAD

Environment: BUILD_DIR (default build); RELIABLEQ_BIN, RELIABLEQ_DEMO_PLUGIN
and RELIABLEQ_BENCH_BIN override where the worker, the demo plugin and the
load generator are (with --no-build nothing is built); JOBS, the parallel
compile jobs (default 2).
"""
