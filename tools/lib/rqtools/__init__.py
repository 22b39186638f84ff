"""reliableq's Python tooling: what tools/chaos, tools/bench and the Python
tests share (resp: the RESP client; processes: children stopped by PID;
servers: redis-server, Sentinel and Redis Cluster launchers; slots: queue
group keys and Redis Cluster routing), and the chaos run and the benchmark
themselves (chaos/, bench/). Debian's python3 standard library only."""

import os

# The repository: tools/lib/rqtools/ is three folders below it.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__)))))
