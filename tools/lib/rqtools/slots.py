"""Queue groups (layout 2) and Redis Cluster's slots: the name of a group's
key (key()), the slot of a key (key_slot()), a group name in a given slot
(group_in_slot()), and GroupClient, which sends a group's commands to
whichever primary owns its slot now."""

import time

from .resp import Redis, RedisReplyError
from .servers import HOST, SLOTS

# reliableq's key prefix (reliableq-schema(7)).
PREFIX = 'reliableq:'


def key(group, name):
    """The layout-2 name of a layout-1 key `name` (Sidekiq's or reliableq's
    without its prefix) in queue group `group`."""
    return '%s{%s}:%s' % (PREFIX, group, name)


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
        self.conn = Redis((HOST, port), timeout=self.timeout)

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
            except RedisReplyError as e:
                text = str(e)
                if text.startswith('MOVED '):
                    self._connect(int(text.split()[2].rsplit(':', 1)[1]))
                elif text.startswith('ASK '):
                    other = Redis((HOST, int(text.split()[2].rsplit(':', 1)[1])),
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
