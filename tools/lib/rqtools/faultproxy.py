"""A TCP proxy between clients and a Redis that makes network faults on
command: it adds delay and jitter, stalls a direction (stops forwarding and
keeps the sockets open), cuts connections in the middle of a reply (closes
them after N more bytes) and limits bandwidth, each per direction:
'requests' (client to Redis) and 'replies' (Redis to client).

FaultProxy is the in-process API (tools/chaos --mode network drives one per
proxied worker from its plan); tools/faultproxy is a launcher whose control
socket takes the same faults as text commands (FaultProxy.command). The
proxy runs an asyncio loop on a thread of its own; every setter may be
called from any thread and applies to the connections open now and to those
accepted later. Standard library only.
"""

import asyncio
import random
import threading

DIRECTIONS = ('requests', 'replies')
CHUNK = 1 << 16
# A paced direction writes at most this fraction of a second's bytes at
# once, so that a bandwidth limit shows as a steady rate, not as bursts.
PACE_SLICE = 0.02


class Direction:
    """The faults of one direction, shared by every connection of a proxy."""

    def __init__(self):
        self.delay = 0.0      # seconds added to every chunk
        self.jitter = 0.0     # +- seconds, uniform, order kept
        self.rate = None      # bytes per second, None: unlimited
        self.cut_after = None  # close each connection after this many more bytes
        self.cut_round = 0    # a new cut() restarts every connection's count
        self.flowing = None   # asyncio.Event, cleared while stalled

    def clear(self):
        self.delay = self.jitter = 0.0
        self.rate = self.cut_after = None
        self.flowing.set()


class Pipe:
    """One direction of one connection: a reader that takes chunks from the
    source with the time each is due, a writer that forwards them in order
    once due, paced, and cuts the connection when told."""

    def __init__(self, proxy, direction, reader, writer):
        self.proxy = proxy
        self.name = direction
        self.faults = proxy.directions[direction]
        self.reader = reader
        self.writer = writer
        self.queue = asyncio.Queue(maxsize=64)  # bounded: a slow writer stops the reader
        self.last_due = 0.0
        self.paced_until = 0.0
        self.cut_round = 0
        self.cut_left = None

    async def read(self):
        loop = asyncio.get_running_loop()
        faults = self.faults
        while True:
            await faults.flowing.wait()
            data = await self.reader.read(CHUNK)
            if not data:
                await self.queue.put(None)
                return
            due = loop.time() + max(0.0, faults.delay + self.proxy.rng.uniform(
                -faults.jitter, faults.jitter)) if faults.delay or faults.jitter else 0.0
            self.last_due = due = max(due, self.last_due)
            await self.queue.put((due, data))

    async def write(self):
        """Forwards until the source ends (True) or the connection is cut
        (False)."""
        loop = asyncio.get_running_loop()
        faults = self.faults
        while True:
            item = await self.queue.get()
            if item is None:
                return True
            due, data = item
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            while data:
                await faults.flowing.wait()
                if faults.cut_after is not None and self.cut_round != faults.cut_round:
                    self.cut_round, self.cut_left = faults.cut_round, faults.cut_after
                elif faults.cut_after is None:
                    self.cut_left = None
                size = len(data)
                if faults.rate:
                    size = min(size, max(1, int(faults.rate * PACE_SLICE)))
                    wait = self.paced_until - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    self.paced_until = max(loop.time(), self.paced_until) + size / faults.rate
                if self.cut_left is not None:
                    size = min(size, self.cut_left)
                    self.cut_left -= size
                piece, data = data[:size], data[size:]
                if piece:
                    self.writer.write(piece)
                    await self.writer.drain()
                    self.proxy.bytes[self.name] += len(piece)
                if self.cut_left == 0:
                    self.proxy.cuts += 1
                    return False


class FaultProxy:
    """Listens on `listen` ((host, port); port 0 picks one, see .address) and
    forwards each connection to `upstream` (a unix socket path or a (host,
    port) pair). start() runs it on a thread of its own; stop() closes every
    connection."""

    def __init__(self, listen, upstream, seed=None):
        self.listen = listen
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.directions = {d: Direction() for d in DIRECTIONS}
        self.address = None
        self.accepted = 0
        self.cuts = 0
        self.bytes = {d: 0 for d in DIRECTIONS}
        self.loop = None
        self.thread = None
        self.server = None
        self.tasks = set()
        self.control_server = None

    # -- running ---------------------------------------------------------------

    def start(self, control_path=None, limit=10.0):
        """Starts the loop thread and listens (also on the unix socket
        `control_path` for text commands, when given); returns self once it
        accepts connections."""
        ready = threading.Event()
        failure = []

        def main():
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(self._listen(control_path))
            except Exception as e:  # reported to start()'s caller
                failure.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self.loop.close()

        self.thread = threading.Thread(target=main, name='faultproxy', daemon=True)
        self.thread.start()
        if not ready.wait(limit):
            raise RuntimeError('faultproxy: not listening within %.0f s' % limit)
        if failure:
            raise failure[0]
        return self

    async def _listen(self, control_path):
        for d in self.directions.values():
            d.flowing = asyncio.Event()
            d.flowing.set()
        self.server = await asyncio.start_server(self._serve, self.listen[0], self.listen[1],
                                                 reuse_address=True)
        self.address = self.server.sockets[0].getsockname()[:2]
        if control_path:
            self.control_server = await asyncio.start_unix_server(self._control, control_path)

    def stop(self, limit=10.0):
        if self.loop is None or not self.thread.is_alive():
            return

        async def close():
            for server in (self.server, self.control_server):
                if server is not None:
                    server.close()
            tasks = list(self.tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.loop.stop()
        asyncio.run_coroutine_threadsafe(close(), self.loop)
        self.thread.join(limit)

    def _run(self, function, limit=5.0):
        """Runs `function` on the proxy's loop; returns its result."""
        async def call():
            return function()
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(limit)

    # -- connections -----------------------------------------------------------

    async def _serve(self, client_reader, client_writer):
        task = asyncio.current_task()
        self.tasks.add(task)
        self.accepted += 1
        server_writer = None
        parts = []
        try:
            if isinstance(self.upstream, str):
                server_reader, server_writer = await asyncio.open_unix_connection(self.upstream)
            else:
                server_reader, server_writer = await asyncio.open_connection(*self.upstream)
            pipes = [Pipe(self, 'requests', client_reader, server_writer),
                     Pipe(self, 'replies', server_reader, client_writer)]
            writers = [asyncio.ensure_future(p.write()) for p in pipes]
            parts = writers + [asyncio.ensure_future(p.read()) for p in pipes]
            # Either side's end, or a cut, ends the whole connection.
            await asyncio.wait(writers, return_when=asyncio.FIRST_COMPLETED)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for part in parts:
                part.cancel()
            await asyncio.gather(*parts, return_exceptions=True)
            for writer in (client_writer, server_writer):
                if writer is not None:
                    writer.close()
            self.tasks.discard(task)

    async def _control(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                writer.write((self._command(line.decode('utf-8', 'replace')) + '\n').encode())
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    # -- the faults (any thread) -------------------------------------------------

    def _each(self, direction):
        if direction == 'both':
            return list(self.directions.values())
        if direction not in self.directions:
            raise ValueError("direction must be 'requests', 'replies' or 'both', not %r"
                             % direction)
        return [self.directions[direction]]

    def set_delay(self, direction, seconds, jitter=0.0):
        """Every chunk forwarded `seconds` +- `jitter` (uniform) late, in
        order."""
        self._run(lambda: self._set_delay(direction, seconds, jitter))

    def stall(self, direction):
        """Nothing more is read or forwarded in `direction` until release()."""
        self._run(lambda: self._set_flowing(direction, False))

    def release(self, direction):
        self._run(lambda: self._set_flowing(direction, True))

    def cut(self, direction, after_bytes):
        """Every connection, open now or accepted before clear(), is closed
        once it has forwarded `after_bytes` more bytes in `direction`."""
        self._run(lambda: self._cut(direction, after_bytes))

    def limit_bandwidth(self, direction, bytes_per_second):
        """At most `bytes_per_second` per connection in `direction` (None:
        no limit)."""
        self._run(lambda: self._limit_bandwidth(direction, bytes_per_second))

    def clear(self, direction='both'):
        """No fault any more in `direction`; stalled data flows again."""
        self._run(lambda: [d.clear() for d in self._each(direction)])

    def stats(self):
        return self._run(lambda: {'accepted': self.accepted, 'open': len(self.tasks),
                                  'cuts': self.cuts, 'bytes': dict(self.bytes)})

    # On the loop's thread:

    def _set_delay(self, direction, seconds, jitter):
        if seconds < 0 or jitter < 0:
            raise ValueError('delay and jitter must be at least 0')
        for d in self._each(direction):
            d.delay, d.jitter = seconds, jitter

    def _set_flowing(self, direction, flowing):
        for d in self._each(direction):
            (d.flowing.set if flowing else d.flowing.clear)()

    def _cut(self, direction, after_bytes):
        if after_bytes < 0:
            raise ValueError('a cut needs a number of bytes of at least 0')
        for d in self._each(direction):
            d.cut_after = int(after_bytes)
            d.cut_round += 1

    def _limit_bandwidth(self, direction, bytes_per_second):
        if bytes_per_second is not None and bytes_per_second <= 0:
            raise ValueError('a bandwidth must be positive')
        for d in self._each(direction):
            d.rate = bytes_per_second

    # -- the control socket's text commands --------------------------------------

    COMMANDS = ('delay DIRECTION MS [JITTER_MS] | stall DIRECTION | release DIRECTION | '
                'cut DIRECTION BYTES | bandwidth DIRECTION BYTES_PER_S | clear [DIRECTION] | '
                'stats; DIRECTION: requests, replies or both')

    def command(self, text):
        """Carries out one text command (COMMANDS) from another thread;
        returns 'ok ...' or 'error ...'."""
        return self._run(lambda: self._command(text))

    def _command(self, text):
        words = text.split()
        name, rest = (words[0], words[1:]) if words else ('', [])
        try:
            numbers = [float(w) for w in rest[1:]]
            if name == 'delay' and len(rest) in (2, 3):
                ms = numbers + [0.0]
                self._set_delay(rest[0], ms[0] / 1000.0, ms[1] / 1000.0)
            elif name in ('stall', 'release') and len(rest) == 1:
                self._set_flowing(rest[0], name == 'release')
            elif name == 'cut' and len(rest) == 2:
                self._cut(rest[0], numbers[0])
            elif name == 'bandwidth' and len(rest) == 2:
                self._limit_bandwidth(rest[0], numbers[0])
            elif name == 'clear' and len(rest) <= 1:
                for d in self._each(rest[0] if rest else 'both'):
                    d.clear()
            elif name == 'stats' and not rest:
                return 'ok accepted %d open %d cuts %d requests %d replies %d' % (
                    self.accepted, len(self.tasks), self.cuts, self.bytes['requests'],
                    self.bytes['replies'])
            else:
                raise ValueError('unknown command or wrong arguments; commands: ' + self.COMMANDS)
        except ValueError as e:
            return 'error %s' % ' '.join(str(e).split())
        return 'ok'
