"""The Redis servers reliableq's tools and tests start, each on loopback or a
unix socket in a directory of its own and stopped by PID: one redis-server
(RedisServer: plain, durable, TLS, a replica, a cluster node), a
replication group under Sentinel (ReplicationGroup), and a Redis Cluster
(Cluster). Every start waits, bounded, until the server answers PING.

TCP ports come from free_port(): free loopback ports below the kernel's
ephemeral range, never 6379 or 26379: a killed server must find its port
free again when it restarts, and an ephemeral port may meanwhile be the
local end of someone's connection.
"""

import os
import random
import signal
import socket
import subprocess
import time

from .processes import spawn, stop_process, wait_until
from .resp import Redis, RedisReplyError, info_fields, pairs

HOST = '127.0.0.1'
MASTER_NAME = 'mymaster'
SLOTS = 16384

_ports = random.Random()
_taken = set()


class ServerError(RuntimeError):
    """A server that did not start or did not come together in time."""


def free_port(rng=None, taken=None):
    """A TCP port on 127.0.0.1 that nobody listens on now (tried by binding
    it), from 20000-32767, not in `taken` (nor handed out before by this
    process when `taken` is not given)."""
    rng = rng or _ports
    taken = _taken if taken is None else taken
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
    raise ServerError('no free loopback port found in 20000-32767')


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 signed by it, made with
    openssl in `directory`; returns (ca, cert, key) paths."""
    ca_key, ca = os.path.join(directory, 'ca.key'), os.path.join(directory, 'ca.crt')
    key, csr = os.path.join(directory, 'server.key'), os.path.join(directory, 'server.csr')
    cert, ext = os.path.join(directory, 'server.crt'), os.path.join(directory, 'server.ext')
    with open(ext, 'w') as f:
        f.write('subjectAltName=IP:127.0.0.1,DNS:localhost\n')
    for command in (
            ['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', ca_key,
             '-out', ca, '-days', '2', '-subj', '/CN=reliableq test CA'],
            ['openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr,
             '-subj', '/CN=localhost'],
            ['openssl', 'x509', '-req', '-in', csr, '-CA', ca, '-CAkey', ca_key,
             '-CAcreateserial', '-out', cert, '-days', '2', '-extfile', ext]):
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=120)
        if done.returncode != 0:
            raise ServerError('%s failed: %s' % (' '.join(command[:2]), done.stderr.strip()))
    return ca, cert, key


class RedisServer:
    """One redis-server in `directory` (created when it starts), logging to redis.log there.
    It listens on the unix socket redis.sock there when `unix`, and on
    127.0.0.1:`port` when a port is given (plus a TLS port when `tls_port`:
    made a CA and certificate for it in the directory). `durable`: every
    write in the AOF before the reply (appendonly yes, appendfsync always).
    `options`: further redis-server options. `timeout`: of the commands
    client() and call() send, unless they say otherwise."""

    def __init__(self, directory, port=None, unix=True, durable=False, options=(),
                 tls_port=None, name='redis-server', timeout=1.0):
        self.dir = directory
        self.timeout = timeout
        self.name = name
        self.port = port
        self.sock = os.path.join(directory, 'redis.sock') if unix else None
        self.durable = durable
        self.options = list(options)
        self.tls_port = tls_port
        self.ca = None
        self.proc = None
        self.outages = []  # (killed at, ready at) in wall-clock seconds

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    @property
    def address(self):
        """Where the client of this program reaches it: the unix socket if it
        has one, else its TCP port."""
        return self.sock if self.sock else (HOST, self.port)

    @property
    def url(self):
        return 'unix://' + self.sock if self.sock else 'redis://%s:%d' % (HOST, self.port)

    @property
    def tcp_url(self):
        return 'redis://%s:%d' % (HOST, self.port) if self.port else None

    @property
    def tls_url(self):
        return 'rediss://%s:%d' % (HOST, self.tls_port) if self.tls_port else None

    def client(self, timeout=None):
        return Redis(self.address, timeout=timeout or self.timeout)

    def call(self, *args, timeout=None):
        """One command on a connection of its own."""
        with self.client(timeout) as r:
            return r.call(*args)

    def info(self, section, timeout=None):
        """INFO `section` as a dict of its fields."""
        return info_fields(self.call('INFO', section, timeout=timeout))

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def argv(self, replica_of=None):
        os.makedirs(self.dir, exist_ok=True)
        argv = ['redis-server', '--port', str(self.port or 0)]
        if self.port:
            argv += ['--bind', HOST]
        if self.sock:
            argv += ['--unixsocket', self.sock, '--unixsocketperm', '700']
        if self.tls_port:
            if self.ca is None:
                self.ca, self.cert, self.key = make_certificates(self.dir)
            argv += ['--tls-port', str(self.tls_port), '--tls-cert-file', self.cert,
                     '--tls-key-file', self.key, '--tls-ca-cert-file', self.ca,
                     '--tls-auth-clients', 'no']
        argv += ['--dir', self.dir, '--save', '']
        argv += (['--appendonly', 'yes', '--appendfsync', 'always'] if self.durable
                 else ['--appendonly', 'no'])
        argv += ['--maxmemory-policy', 'noeviction'] + self.options
        if replica_of is not None:
            argv += ['--replicaof', HOST, str(replica_of)]
        return argv + ['--logfile', os.path.join(self.dir, 'redis.log')]

    def start(self, replica_of=None, limit=30.0):
        """Starts it (as a replica of the loopback port `replica_of`, when
        given) and waits until it answers PING (after reading its AOF back)."""
        self.proc = spawn(self.argv(replica_of), os.path.join(self.dir, 'redis.stdout'))
        where = self.sock or 'port %d' % self.port
        with self.client(1.0) as probe:
            def answers():
                if self.proc.poll() is not None:
                    raise ServerError('redis-server on %s exited with status %s; see %s' % (
                        where, self.proc.returncode, os.path.join(self.dir, 'redis.log')))
                return probe.call('PING') == 'PONG'
            try:
                wait_until('redis-server on %s answers' % where, answers, limit, step=0.02)
            except RuntimeError as e:
                self.stop()
                raise ServerError(str(e)) from None
        return self

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def kill_and_restart(self, down_seconds):
        killed_at = time.time()
        self.kill()
        time.sleep(down_seconds)
        self.start()
        self.outages.append((killed_at, time.time()))

    def stop(self):
        stop_process(self.proc, grace=5.0)

    def replication(self, timeout=None):
        return self.info('replication', timeout)

    def version(self):
        out = subprocess.run(['redis-server', '--version'], stdout=subprocess.PIPE, text=True,
                             timeout=30)
        return out.stdout.split()[2].replace('v=', '') if out.returncode == 0 else '?'


# What reliableq-schema(7) recommends under Sentinel on every data server.
REPLICATION_OPTIONS = ['--min-replicas-to-write', '1', '--min-replicas-max-lag', '10']


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
        return Redis((HOST, self.port), timeout=timeout)

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
        self.proc = spawn(['redis-sentinel', self.conf],
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
        stop_process(self.proc, grace=5.0)


class ReplicationGroup:
    """A replication group on loopback (tools/chaos --mode failover): one
    master and two replicas (durable, with REPLICATION_OPTIONS) and three
    redis-sentinel processes that monitor them under one master name (quorum
    2). The group is the topology only: it starts, asks the sentinels where
    the master is, kills the master (pausing both replicas first when
    asked), waits for the sentinels to promote a replica, and brings the
    killed server back as a replica of the new master. Everything it starts
    is stopped by PID (stop())."""

    def __init__(self, directory, rng, down_after_ms=1000, failover_timeout_ms=3000):
        self.dir = directory
        self.rng = rng
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        taken = set()
        self.nodes = [RedisServer(os.path.join(directory, 'redis-%d' % i),
                                  port=free_port(rng, taken), unix=False, durable=True,
                                  options=REPLICATION_OPTIONS, name='redis-%d' % i)
                      for i in range(3)]
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
        master.start(limit=60.0)
        for node in self.nodes[1:]:
            node.start(replica_of=master.port, limit=60.0)
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
            except (OSError, RedisReplyError, ValueError, IndexError):
                continue
            finally:
                r.close()
        return None

    def _sentinel_view(self, s):
        """One sentinel's view: (master port, master flags, replicas
        [(port, flags, link status)], number of other sentinels)."""
        r = s.client(0.5)
        try:
            master = pairs(r.call('SENTINEL', 'master', MASTER_NAME))
            replicas = [pairs(x) for x in r.call('SENTINEL', 'replicas', MASTER_NAME) or []]
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
        except (OSError, RedisReplyError):
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


class Cluster:
    """A Redis Cluster on loopback: `primaries` primaries with `replicas`
    replicas each (redis-server --cluster-enabled yes, each in its own
    directory, on two free loopback ports: clients', cluster bus's), joined
    by `redis-cli --cluster create`, or, for one primary and no replica, one
    node that is given every slot. The cluster is the topology only: it
    names the primary that owns a slot, SIGKILLs a primary and waits until
    the cluster promotes its replica, brings the killed node back (it
    rejoins as a replica of its promoted one: its nodes.conf names the
    cluster, and the newer epoch wins), and moves a slot with `redis-cli
    --cluster reshard`. Everything it starts is stopped by PID (stop()).

    Nodes keep no data on disk (no AOF, no RDB): a killed node comes back
    empty and takes a full copy from its new primary. `node_timeout_ms`
    None keeps Redis's default cluster-node-timeout."""

    def __init__(self, directory, rng=None, primaries=3, replicas=1, node_timeout_ms=2000):
        self.dir = directory
        self.primaries = primaries
        self.replicas = replicas
        taken = set()
        self.nodes = []
        for _ in range(primaries * (1 + replicas)):
            port, bus_port = free_port(rng, taken), free_port(rng, taken)
            options = ['--cluster-enabled', 'yes', '--cluster-port', str(bus_port),
                       '--cluster-config-file', 'nodes.conf',
                       # A replica's full sync starts at once, not after 5 s.
                       '--repl-diskless-sync-delay', '0']
            if node_timeout_ms is not None:
                options += ['--cluster-node-timeout', str(node_timeout_ms)]
            self.nodes.append(RedisServer(os.path.join(directory, str(port)), port=port,
                                          unix=False, options=options))

    def seeds(self):
        return ['%s:%d' % (HOST, n.port) for n in self.nodes]

    def url(self, group):
        return 'redis+cluster://%s/%s' % (','.join(self.seeds()), group)

    def start(self, limit=90.0):
        try:
            for n in self.nodes:
                n.start()
            if len(self.nodes) == 1:
                self.nodes[0].call('CLUSTER', 'ADDSLOTSRANGE', '0', str(SLOTS - 1))
            else:
                argv = ['redis-cli', '--cluster', 'create'] + self.seeds() + [
                    '--cluster-replicas', str(self.replicas), '--cluster-yes']
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, timeout=limit)
                if done.returncode != 0:
                    raise ServerError('redis-cli --cluster create failed: %s'
                                      % done.stdout[-2000:])
            self.wait_whole(limit=limit)
        except BaseException:
            self.stop()
            raise
        return self

    def node_at(self, port):
        return next(n for n in self.nodes if n.port == port)

    def view(self, node=None):
        """{port: (role, master port or None, [slot ranges], failed)} as one
        node (or the first that answers) sees the cluster."""
        for n in [node] if node is not None else [n for n in self.nodes if n.running()]:
            try:
                text = n.call('CLUSTER', 'NODES')
            except (OSError, RedisReplyError):
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
            except (OSError, RedisReplyError, ValueError, TypeError):
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
            fields = n.replication()
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
                if self.node_at(p).replication(timeout=0.5).get('role') == 'master':
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
