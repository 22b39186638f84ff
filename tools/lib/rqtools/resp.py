"""The RESP client of reliableq's Python tools and tests: RESP2 over a unix
socket or TCP, one command at a time or pipelined, with no dependency beyond
Python itself. An error reply raises RedisReplyError; an unreachable Redis
or a lost reply raises OSError."""

import socket


class RedisReplyError(Exception):
    pass


def encode(*args):
    """One command in RESP (also what `redis-cli --pipe` reads)."""
    out = [b'*%d\r\n' % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b'$%d\r\n%s\r\n' % (len(data), data))
    return b''.join(out)


def pairs(flat):
    """A flat [field, value, ...] reply (HGETALL, SENTINEL master) as a dict."""
    return dict(zip(flat[0::2], flat[1::2])) if flat else {}


def info_fields(text):
    """INFO's reply as a dict of its "name:value" lines."""
    out = {}
    for line in (text or '').splitlines():
        if ':' in line and not line.startswith('#'):
            name, value = line.split(':', 1)
            out[name] = value.strip()
    return out


class Redis:
    """One connection; reconnects on the next call after any failure.
    `address` is a unix socket path or a (host, port) pair."""

    def __init__(self, address, timeout=2.0):
        self.address = address
        self.timeout = timeout
        self.sock = None
        self.buf = b''

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.buf = b''

    def call(self, *args):
        """The reply of one command."""
        return self.pipeline([args])[0]

    def pipeline(self, commands):
        """The replies of `commands` (each a sequence of words), sent in one
        write; raises the first error reply once every reply is read."""
        if self.sock is None:
            family = socket.AF_UNIX if isinstance(self.address, str) else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.address)
            except OSError:
                sock.close()
                raise
            self.sock = sock
        try:
            self.sock.sendall(b''.join(encode(*words) for words in commands))
            replies = [self._reply() for _ in commands]
        except (OSError, ValueError) as e:
            self.close()
            raise OSError('redis: %s' % e) from e
        for reply in replies:
            if isinstance(reply, RedisReplyError):
                raise reply
        return replies

    def info(self, section):
        """INFO `section` as a dict of its fields."""
        return info_fields(self.call('INFO', section))

    def _line(self):
        while True:
            end = self.buf.find(b'\r\n')
            if end >= 0:
                line, self.buf = self.buf[:end], self.buf[end + 2:]
                return line
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise OSError('connection closed')
            self.buf += chunk

    def _exactly(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(max(1 << 16, n + 2 - len(self.buf)))
            if not chunk:
                raise OSError('connection closed')
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b'+':
            return rest.decode('utf-8', 'surrogateescape')
        if kind == b'-':
            return RedisReplyError(rest.decode('utf-8', 'surrogateescape'))
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self._exactly(n).decode('utf-8', 'surrogateescape')
        if kind == b'*':
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError('bad reply line %r' % line[:40])


def call_once(address, *args, timeout=2.0):
    """One command on a connection of its own, closed after it."""
    with Redis(address, timeout) as r:
        return r.call(*args)
