"""A Redis Cluster on loopback for tools/chaos --mode cluster.

N primaries and R replicas each (redis-server --cluster-enabled yes, each in
its own directory, on two free loopback ports (clients', cluster bus's),
joined by `redis-cli --cluster create`). The cluster is the topology only:
it names the primary that owns a slot, finds queue groups whose slots lie
where it is asked, SIGKILLs a primary and waits until the cluster promotes
its replica, brings the killed node back (it rejoins as a replica of its
promoted one: its nodes.conf names the cluster, and the newer epoch wins),
and moves a slot with `redis-cli --cluster reshard`. GroupClient reaches the
keys of one queue group wherever their slot is; key() names them (layout 2)
and leftovers() reads what a group still holds at the end of a run. Everything it starts is
stopped by PID (stop()).

Nodes keep no data on disk (no AOF, no RDB): a killed node comes back empty
and takes a full copy from its new primary, and what a reliableq client was
told a replica holds is what the test relies on, not a primary's disk.
"""

import json
import os
import subprocess
import time

import chaos as base
from replication import HOST, free_port, info_fields, wait_until

SLOTS = 16384


def key(group, name):
    """The layout-2 name of a layout-1 key `name` (Sidekiq's or reliableq's
    without its prefix) in queue group `group`."""
    return '%s{%s}:%s' % (base.PREFIX, group, name)


def _crc16_table():
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def key_slot(key):
    """Redis Cluster's hash slot of `key` (CRC16/XMODEM of its hash tag)."""
    start = key.find('{')
    if start >= 0:
        end = key.find('}', start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    crc = 0
    for byte in key.encode():
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ byte) & 0xFF]
    return crc % SLOTS


def group_in_slot(slot, stem):
    """The first name stem-0, stem-1, ... whose "{name}" is in `slot`."""
    n = 0
    while key_slot('%s-%d' % (stem, n)) != slot:
        n += 1
    return '%s-%d' % (stem, n)


class ClusterNode:
    def __init__(self, directory, port, bus_port, node_timeout_ms):
        self.dir = directory
        self.port = port
        self.bus_port = bus_port
        self.node_timeout_ms = node_timeout_ms
        self.proc = None
        os.makedirs(directory, exist_ok=True)

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def client(self, timeout=1.0):
        return base.Redis((HOST, self.port), timeout=timeout)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, limit=30.0):
        argv = ['redis-server', '--bind', HOST, '--port', str(self.port), '--dir', self.dir,
                '--cluster-enabled', 'yes', '--cluster-port', str(self.bus_port),
                '--cluster-config-file', 'nodes.conf',
                '--cluster-node-timeout', str(self.node_timeout_ms),
                '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction',
                # A replica's full sync starts at once, not after 5 s.
                '--repl-diskless-sync-delay', '0',
                '--logfile', os.path.join(self.dir, 'redis.log')]
        self.proc = base.spawn(argv, os.path.join(self.dir, 'redis.stdout'))
        probe = self.client()
        try:
            def answers():
                if self.proc.poll() is not None:
                    raise RuntimeError('redis-server on port %d exited with status %s; see %s'
                                       % (self.port, self.proc.returncode,
                                          os.path.join(self.dir, 'redis.log')))
                return probe.call('PING') == 'PONG'
            wait_until('redis-server on port %d answers' % self.port, answers, limit)
        finally:
            probe.close()

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self):
        base.stop_process(self.proc, grace=5.0)

    def call(self, *args, timeout=1.0):
        r = self.client(timeout)
        try:
            return r.call(*args)
        finally:
            r.close()


class Cluster:
    def __init__(self, directory, rng, primaries=3, replicas=1, node_timeout_ms=2000):
        self.dir = directory
        self.primaries = primaries
        self.replicas = replicas
        taken = set()
        self.nodes = []
        for _ in range(primaries * (1 + replicas)):
            port, bus_port = free_port(rng, taken), free_port(rng, taken)
            self.nodes.append(ClusterNode(os.path.join(directory, str(port)), port, bus_port,
                                          node_timeout_ms))

    def seeds(self):
        return ['%s:%d' % (HOST, n.port) for n in self.nodes]

    def url(self, group):
        return 'redis+cluster://%s/%s' % (','.join(self.seeds()), group)

    def start(self, limit=90.0):
        for n in self.nodes:
            n.start()
        argv = ['redis-cli', '--cluster', 'create'] + self.seeds() + [
            '--cluster-replicas', str(self.replicas), '--cluster-yes']
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=limit)
        if done.returncode != 0:
            raise RuntimeError('redis-cli --cluster create failed: %s' % done.stdout[-2000:])
        self.wait_whole(limit=limit)

    def node_at(self, port):
        return next(n for n in self.nodes if n.port == port)

    def view(self, node=None):
        """{port: (role, master port or None, [slot ranges], failed)} as one
        node (or the first that answers) sees the cluster."""
        for n in [node] if node is not None else [n for n in self.nodes if n.running()]:
            try:
                text = n.call('CLUSTER', 'NODES')
            except (OSError, base.RedisReplyError):
                continue
            ids, rows = {}, []
            for line in text.splitlines():
                f = line.split()
                if len(f) < 8:
                    continue
                port = int(f[1].split('@')[0].rsplit(':', 1)[1])
                ids[f[0]] = port
                rows.append((port, f[2], f[3], f[8:]))
            out = {}
            for port, flags, master, slots in rows:
                role = 'master' if 'master' in flags.split(',') else 'replica'
                out[port] = (role, ids.get(master), slots, 'fail' in flags)
            return out
        raise OSError('no cluster node answers')

    def owner(self, slot):
        """The port of the primary that owns `slot` now (as CLUSTER SLOTS of
        a live node says), or None."""
        for n in self.nodes:
            if not n.running():
                continue
            try:
                for start, end, master, *_ in n.call('CLUSTER', 'SLOTS'):
                    if start <= slot <= end:
                        return int(master[1])
            except (OSError, base.RedisReplyError, ValueError, TypeError):
                continue
            return None
        return None

    def lowest_slot(self, port):
        slots = []
        for r in self.view()[port][2]:
            if r.startswith('['):
                continue  # a slot being migrated: named on its own
            slots.append(int(r.split('-')[0]))
        return min(slots) if slots else None

    def masters(self):
        return sorted(p for p, (role, _, slots, failed) in self.view().items()
                      if role == 'master' and slots and not failed)

    def whole(self):
        """True when every node runs, every one says cluster_state:ok, every
        replica's link is up, and all agree on the primaries."""
        views = set()
        for n in self.nodes:
            if not n.running():
                return False
            if info_fields(n.call('CLUSTER', 'INFO')).get('cluster_state') != 'ok':
                return False
            fields = info_fields(n.call('INFO', 'replication'))
            if fields.get('role') == 'slave' and fields.get('master_link_status') != 'up':
                return False
            v = self.view(n)
            views.add(tuple(sorted((p, r[0], tuple(r[2])) for p, r in v.items())))
        return len(views) == 1

    def wait_whole(self, tick=None, limit=60.0):
        wait_until('the cluster is whole (state ok, replicas linked, nodes agree)', self.whole,
                   limit, tick, step=0.1)

    def kill_primary(self, port, tick=None, limit=60.0):
        """SIGKILLs the primary on `port`, waits until one of its replicas is a
        primary with its slots; returns (promoted port, when)."""
        view = self.view()
        replicas = [p for p, r in view.items() if r[0] == 'replica' and r[1] == port]
        self.node_at(port).kill()

        def promoted():
            for p in replicas:
                fields = info_fields(self.node_at(p).call('INFO', 'replication', timeout=0.5))
                if fields.get('role') == 'master':
                    return p
            return None
        new = wait_until('a replica of port %d promoted' % port, promoted, limit, tick)
        return new, time.time()

    def restart(self, port, tick=None, limit=60.0):
        """Starts the killed node again, waits until it is a replica whose
        link is up and the cluster is whole."""
        self.node_at(port).start()
        self.wait_whole(tick=tick, limit=limit)

    def reshard(self, from_port, to_port, slots=1, limit=120.0):
        """Moves the `slots` lowest slots of `from_port` to `to_port` with
        redis-cli, keys and all; returns redis-cli's output."""
        ids = {}
        for line in self.node_at(from_port).call('CLUSTER', 'NODES').splitlines():
            f = line.split()
            ids[int(f[1].split('@')[0].rsplit(':', 1)[1])] = f[0]
        argv = ['redis-cli', '--cluster', 'reshard', '%s:%d' % (HOST, from_port),
                '--cluster-from', ids[from_port], '--cluster-to', ids[to_port],
                '--cluster-slots', str(slots), '--cluster-yes']
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=limit)
        if done.returncode != 0:
            raise RuntimeError('redis-cli --cluster reshard failed: %s' % done.stdout[-2000:])
        return done.stdout

    def stop(self):
        for n in self.nodes:
            n.stop()


class GroupClient:
    """Commands on the keys of one queue group, sent to the primary that owns
    the group's slot: MOVED refreshes the owner and resends, ASK sends
    ASKING and the command to the named node, a broken connection asks the
    cluster again. Every key is in the one slot, so a command goes whole."""

    def __init__(self, cluster, group, timeout=2.0, limit=10.0):
        self.cluster = cluster
        self.slot = key_slot('{%s}' % group)
        self.timeout = timeout
        self.limit = limit
        self.conn = None
        self.port = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def _connect(self, port):
        self.close()
        self.port = port
        self.conn = base.Redis((HOST, port), timeout=self.timeout)

    def call(self, *args):
        deadline = time.monotonic() + self.limit
        while True:
            if self.conn is None:
                port = self.cluster.owner(self.slot)
                if port is None:
                    if time.monotonic() >= deadline:
                        raise OSError('no node owns slot %d' % self.slot)
                    time.sleep(0.1)
                    continue
                self._connect(port)
            try:
                return self.conn.call(*args)
            except base.RedisReplyError as e:
                text = str(e)
                if text.startswith('MOVED '):
                    self._connect(int(text.split()[2].rsplit(':', 1)[1]))
                elif text.startswith('ASK '):
                    other = base.Redis((HOST, int(text.split()[2].rsplit(':', 1)[1])),
                                       timeout=self.timeout)
                    try:
                        other.call('ASKING')
                        return other.call(*args)
                    finally:
                        other.close()
                elif text.startswith(('TRYAGAIN', 'CLUSTERDOWN', 'LOADING')):
                    time.sleep(0.05)
                else:
                    raise
            except OSError:
                self.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
            if time.monotonic() >= deadline:
                raise OSError('slot %d: no answer within %.0f s' % (self.slot, self.limit))


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
    registered = set(base.pairs(r.call('HGETALL', key(g, 'registry'))))
    # Every key of the group is in its slot, on the node r reaches.
    for k in r.call('CLUSTER', 'GETKEYSINSLOT', key_slot('{%s}' % g), '100000') or []:
        if not k.startswith(key(g, 'working:')):
            continue
        for payload in r.call('LRANGE', k, '0', '-1') or []:
            left[payload] = k
        if k[len(key(g, 'working:')):].rsplit(':', 1)[0] not in registered:
            stranded[k] = r.call('LLEN', k)
