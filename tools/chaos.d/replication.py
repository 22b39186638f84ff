"""A replication group on loopback for tools/chaos --mode failover.

One master and two replicas (redis-server, each in its own directory, with
appendonly yes and appendfsync always, and the setting reliableq-schema(7)
recommends under Sentinel on every data server: min-replicas-to-write 1,
min-replicas-max-lag 10) and three redis-sentinel processes
that monitor them under one master name (quorum 2). The group is the
topology only: it starts, asks the sentinels where the master is, kills the
master (pausing both replicas first when asked), waits for the sentinels to
promote a replica, and brings the killed server back as a replica of the new
master. Everything it starts is stopped by PID (stop()).

Ports are free loopback ports below the kernel's ephemeral range, never 6379
or 26379: a killed server must find its port free again when it restarts,
and an ephemeral port may meanwhile be the local end of someone's
connection.
"""

import os
import signal
import socket
import time

import chaos as base

MASTER_NAME = 'mymaster'
HOST = '127.0.0.1'


def free_port(rng, taken):
    """A TCP port on 127.0.0.1 that nobody listens on now (tried by binding
    it), from 20000-32767, not in `taken`."""
    for _ in range(1000):
        port = rng.randrange(20000, 32768)
        if port in taken or port in (6379, 26379):
            continue
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.bind((HOST, port))
        except OSError:
            continue
        finally:
            probe.close()
        taken.add(port)
        return port
    raise RuntimeError('no free loopback port found in 20000-32767')


def wait_until(what, predicate, limit, tick=None, step=0.05):
    """Calls `predicate` until it returns a true value (returned), for at most
    `limit` seconds; `tick` runs between tries. Raises RuntimeError naming
    `what` when the time is up. OSError and reply errors count as "not yet"."""
    deadline = time.monotonic() + limit
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except (OSError, base.RedisReplyError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            raise RuntimeError('%s: not within %.0f s%s' % (
                what, limit, ' (last error: %s)' % last_error if last_error else ''))
        if tick is not None:
            tick()
        time.sleep(step)


def info_fields(text):
    """INFO's reply as a dict of its "name:value" lines."""
    out = {}
    for line in (text or '').splitlines():
        if ':' in line and not line.startswith('#'):
            name, value = line.split(':', 1)
            out[name] = value.strip()
    return out


class Node:
    """One redis-server on 127.0.0.1:port, in its own directory."""

    def __init__(self, name, directory, port):
        self.name = name
        self.dir = directory
        self.port = port
        self.proc = None
        os.makedirs(directory, exist_ok=True)

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def client(self, timeout=1.0):
        return base.Redis((HOST, self.port), timeout=timeout)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, replica_of=None, limit=60.0):
        """Starts it (as a replica of the port `replica_of`, when given) and
        waits until it answers PING (after reading its AOF back)."""
        argv = ['redis-server', '--bind', HOST, '--port', str(self.port),
                '--dir', self.dir, '--save', '', '--appendonly', 'yes',
                '--appendfsync', 'always', '--maxmemory-policy', 'noeviction',
                '--min-replicas-to-write', '1', '--min-replicas-max-lag', '10',
                '--logfile', os.path.join(self.dir, 'redis.log')]
        if replica_of is not None:
            argv += ['--replicaof', HOST, str(replica_of)]
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
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        base.stop_process(self.proc, grace=5.0)

    def replication(self, timeout=1.0):
        r = self.client(timeout)
        try:
            return info_fields(r.call('INFO', 'replication'))
        finally:
            r.close()


class Sentinel:
    """One redis-sentinel on 127.0.0.1:port with its own config file (a
    sentinel rewrites it as the group changes)."""

    def __init__(self, name, directory, port):
        self.name = name
        self.dir = directory
        self.port = port
        self.proc = None
        self.conf = os.path.join(directory, 'sentinel.conf')
        os.makedirs(directory, exist_ok=True)

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def client(self, timeout=1.0):
        return base.Redis((HOST, self.port), timeout=timeout)

    def start(self, master_port, down_after_ms, failover_timeout_ms, limit=30.0):
        with open(self.conf, 'w') as f:
            f.write('\n'.join([
                'port %d' % self.port,
                'bind %s' % HOST,
                'daemonize no',
                'dir %s' % self.dir,
                'logfile %s' % os.path.join(self.dir, 'sentinel.log'),
                'sentinel monitor %s %s %d 2' % (MASTER_NAME, HOST, master_port),
                'sentinel down-after-milliseconds %s %d' % (MASTER_NAME, down_after_ms),
                'sentinel failover-timeout %s %d' % (MASTER_NAME, failover_timeout_ms),
                'sentinel parallel-syncs %s 1' % MASTER_NAME,
                '']))
        self.proc = base.spawn(['redis-sentinel', self.conf],
                               os.path.join(self.dir, 'sentinel.stdout'))
        probe = self.client()
        try:
            def answers():
                if self.proc.poll() is not None:
                    raise RuntimeError('redis-sentinel on port %d exited with status %s; see %s'
                                       % (self.port, self.proc.returncode,
                                          os.path.join(self.dir, 'sentinel.log')))
                return probe.call('PING') == 'PONG'
            wait_until('redis-sentinel on port %d answers' % self.port, answers, limit)
        finally:
            probe.close()

    def stop(self):
        base.stop_process(self.proc, grace=5.0)


class ReplicationGroup:
    """Three redis-servers and three sentinels; see the module's docstring."""

    def __init__(self, directory, rng, down_after_ms=1000, failover_timeout_ms=3000):
        self.dir = directory
        self.rng = rng
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        taken = set()
        self.nodes = [Node('redis-%d' % i, os.path.join(directory, 'redis-%d' % i),
                           free_port(rng, taken)) for i in range(3)]
        self.sentinels = [Sentinel('sentinel-%d' % i, os.path.join(directory, 'sentinel-%d' % i),
                                   free_port(rng, taken)) for i in range(3)]
        self.master = self.nodes[0]   # as last confirmed by the sentinels
        self.last_failover_at = None  # monotonic time of the last promotion

    def url(self, db=0):
        """The redis+sentinel:// URL of the group's master."""
        return 'redis+sentinel://%s/%s%s' % (
            ','.join('%s:%d' % (HOST, s.port) for s in self.sentinels), MASTER_NAME,
            '/%d' % db if db else '')

    def node_at(self, port):
        return next((n for n in self.nodes if n.port == port), None)

    def replicas(self):
        return [n for n in self.nodes if n is not self.master]

    def start(self, tick=None, limit=60.0):
        master = self.nodes[0]
        master.start()
        for node in self.nodes[1:]:
            node.start(replica_of=master.port)
        for s in self.sentinels:
            s.start(master.port, self.down_after_ms, self.failover_timeout_ms)
        self.wait_healthy(tick=tick, limit=limit)

    def ask_master(self, timeout=0.5):
        """(port, sentinel name) of the master as the first sentinel that
        answers names it, or None when none answers."""
        order = list(self.sentinels)
        self.rng.shuffle(order)
        for s in order:
            r = s.client(timeout)
            try:
                reply = r.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME)
                if reply:
                    return int(reply[1]), s.name
            except (OSError, base.RedisReplyError, ValueError, IndexError):
                continue
            finally:
                r.close()
        return None

    def _sentinel_view(self, s):
        """One sentinel's view: (master port, master flags, replicas
        [(port, flags, link status)], number of other sentinels)."""
        r = s.client(0.5)
        try:
            master = base.pairs(r.call('SENTINEL', 'master', MASTER_NAME))
            replicas = [base.pairs(x) for x in r.call('SENTINEL', 'replicas', MASTER_NAME) or []]
        finally:
            r.close()
        return (int(master['port']), master['flags'],
                [(int(x['port']), x['flags'], x.get('master-link-status')) for x in replicas],
                int(master.get('num-other-sentinels', 0)))

    def health(self):
        """None when the group is whole: every server runs, the one the
        sentinels name is a master that both others replicate from (link
        up), and every sentinel names it, sees both replicas up and knows
        the two other sentinels; otherwise what is missing."""
        for n in self.nodes:
            if not n.running():
                return '%s (port %d) is not running' % (n.name, n.port)
        info = self.master.replication()
        if info.get('role') != 'master':
            return '%s (port %d) is not a master: role %s' % (
                self.master.name, self.master.port, info.get('role'))
        for n in self.replicas():
            info = n.replication()
            if info.get('role') != 'slave' or info.get('master_port') != str(self.master.port) \
                    or info.get('master_link_status') != 'up':
                return '%s (port %d) does not replicate from port %d yet' % (
                    n.name, n.port, self.master.port)
            if info.get('master_sync_in_progress') == '1':
                return '%s (port %d) is still syncing' % (n.name, n.port)
        for s in self.sentinels:
            port, flags, replicas, others = self._sentinel_view(s)
            if port != self.master.port or flags != 'master':
                return '%s names port %d (%s)' % (s.name, port, flags)
            up = {p for p, f, link in replicas if f == 'slave' and link == 'ok'}
            if up != {n.port for n in self.replicas()}:
                return '%s sees replicas %s' % (s.name, sorted(replicas))
            if others != len(self.sentinels) - 1:
                return '%s knows %d other sentinels' % (s.name, others)
        return None

    def wait_healthy(self, tick=None, limit=60.0):
        problem = [None]

        def whole():
            problem[0] = self.health()
            return problem[0] is None
        try:
            wait_until('the replication group is whole', whole, limit, tick, step=0.1)
        except RuntimeError as e:
            raise RuntimeError('%s: %s' % (e, problem[0])) from None

    def _named_master(self, other_than):
        """The server a sentinel names as the master, when it is not
        `other_than`, runs and its ROLE says master; else None."""
        named = self.ask_master()
        if named is None or named[0] == other_than.port:
            return None
        node = self.node_at(named[0])
        if node is None or not node.running():
            return None
        r = node.client(0.5)
        try:
            role = r.call('ROLE')
        finally:
            r.close()
        return node if role and role[0] == 'master' else None

    def wait_promotion(self, old, tick=None, limit=60.0):
        """Waits until a sentinel names a master other than `old` and that
        server's ROLE says master; returns it."""
        node = wait_until('a sentinel names a new master',
                          lambda: self._named_master(old), limit, tick)
        self.master = node
        self.last_failover_at = time.monotonic()
        return node

    def wait_agreement(self, tick=None, limit=30.0):
        """Waits until every sentinel names the master; True when they did
        within `limit`."""
        def agreed():
            for s in self.sentinels:
                r = s.client(0.5)
                try:
                    reply = r.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME)
                finally:
                    r.close()
                if not reply or int(reply[1]) != self.master.port:
                    return False
            return True
        try:
            wait_until('every sentinel names port %d' % self.master.port, agreed, limit, tick)
            return True
        except RuntimeError:
            return False

    def follow(self):
        """When the sentinels name another master than the one the group
        last saw promoted (they failed it over by themselves, say after it
        did not answer them in time), adopts it and returns (old, new);
        otherwise None."""
        try:
            node = self._named_master(self.master)
        except (OSError, base.RedisReplyError):
            return None
        if node is None:
            return None
        old, self.master = self.master, node
        self.last_failover_at = time.monotonic()
        return old, node

    def stop(self):
        for s in self.sentinels:
            s.stop()
        for n in self.nodes:
            n.stop()
