"""tools/chaos: fault injection that counts every job (see cli.py for the
whole story). The default mode's run is worker_faults.Chaos; the check
that counts every job is oracle.Oracle; the other modes (failover, cluster,
outage) are subclasses of Chaos in modules of their own."""

QUEUES = ['critical', 'default']
# With --periodic every worker declares a periodic job that ticks every
# second into this queue, which no worker serves: its ticks are counted, not
# run.
TICK_QUEUE = 'chaos_ticks'
TICK_DECLARATION = ('chaos_tick={"cron":"* * * * * *","class":"ChaosTick","queue":"%s"}'
                    % TICK_QUEUE)
# Where Redis records the ticks pushed (periodic.lua).
TICK_RECORD = 'reliableq:periodic:chaos_tick:ticks'
PREFIX = 'reliableq:'
RECORD_PREFIX = 'chaos:'
HEARTBEAT_GONE = 'heartbeat key was gone'
# What a worker logs when it fences itself (server/self_fence.h).
FENCED = 'no heartbeat confirmed for'
