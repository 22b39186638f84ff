#!/usr/bin/env python3
"""The fault proxy of tools/chaos (tools/lib/rqtools/faultproxy.py, and its
launcher tools/faultproxy) against a real redis-server: each fault shows in
what a client measures through it.

- a delay shows in the round-trip time, and jitter spreads it;
- a stalled direction gets no reply until released (a stalled reply still
  lets the command run; a stalled request does not reach Redis);
- a cut connection gives the client a connection error in the middle of a
  reply, after exactly the bytes it was cut after;
- a bandwidth limit bounds the transfer time of a large value, each way;
- the launcher takes the same faults on its control socket, and rejects bad
  arguments with one line and status 2.

It starts its own redis-server (a unix socket in a temporary directory) with
rqtools.servers; the proxy listens on a free loopback port. unittest, standard
library only; exits 0 when every test passed.
"""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import unittest

# The shared Python tooling in tools/lib, found in the nearest folder above
# this one that holds it.
ROOT = os.path.dirname(os.path.realpath(__file__))
while not os.path.isdir(os.path.join(ROOT, 'tools', 'lib')) and ROOT != os.path.dirname(ROOT):
    ROOT = os.path.dirname(ROOT)
sys.path.insert(0, os.path.join(ROOT, 'tools', 'lib'))
sys.dont_write_bytecode = True
from rqtools.faultproxy import FaultProxy  # noqa: E402
from rqtools.processes import stop_process  # noqa: E402
from rqtools.resp import Redis  # noqa: E402
from rqtools.servers import HOST, RedisServer, free_port  # noqa: E402

BIG = 200_000  # bytes of the large value


def round_trips(client, count=10):
    times = []
    for _ in range(count):
        began = time.monotonic()
        client.call('PING')
        times.append(time.monotonic() - began)
    return times


def timed(function):
    began = time.monotonic()
    value = function()
    return value, time.monotonic() - began


class FaultProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix='reliableq-faultproxy-')
        cls.redis = RedisServer(os.path.join(cls.dir, 'redis')).start()
        cls.direct = cls.redis.client(timeout=5)
        cls.direct.call('SET', 'big', 'x' * BIG)

    @classmethod
    def tearDownClass(cls):
        cls.direct.close()
        cls.redis.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        self.proxy = FaultProxy((HOST, 0), self.redis.sock, seed=1).start()
        self.client = Redis(tuple(self.proxy.address), timeout=5)

    def tearDown(self):
        self.client.close()
        self.proxy.stop()

    def test_delay_shows_in_the_round_trip_time(self):
        calm = statistics.median(round_trips(self.client))
        self.proxy.set_delay('replies', 0.2)
        delayed = round_trips(self.client)
        self.assertGreaterEqual(min(delayed), 0.2)
        self.assertLess(calm, 0.1)
        self.proxy.set_delay('requests', 0.1)
        self.assertGreaterEqual(min(round_trips(self.client, 3)), 0.3)
        self.proxy.clear()
        self.assertLess(statistics.median(round_trips(self.client)), 0.1)

    def test_jitter_spreads_the_round_trip_time(self):
        self.proxy.set_delay('replies', 0.1, jitter=0.08)
        times = round_trips(self.client, 20)
        self.assertGreaterEqual(min(times), 0.02)
        self.assertLess(max(times), 0.3)
        self.assertGreater(max(times) - min(times), 0.05)

    def stalled_call(self, *command):
        """Sends `command` raw; returns (bytes received within 0.7 s, the
        socket)."""
        raw = socket.create_connection(self.proxy.address, timeout=5)
        raw.sendall(b'*%d\r\n' % len(command) + b''.join(
            b'$%d\r\n%s\r\n' % (len(w), w) for w in (c.encode() for c in command)))
        raw.settimeout(0.7)
        try:
            early = raw.recv(100)
        except socket.timeout:
            early = b''
        raw.settimeout(5)
        return early, raw

    def test_a_stalled_reply_comes_only_once_released(self):
        self.proxy.stall('replies')
        early, raw = self.stalled_call('SET', 'stall_replies', 'ran')
        self.assertEqual(early, b'')
        # The request went through: the command ran, only its reply waits.
        self.assertEqual(self.direct.call('GET', 'stall_replies'), 'ran')
        self.proxy.release('replies')
        self.assertEqual(raw.recv(100), b'+OK\r\n')
        raw.close()

    def test_a_stalled_request_reaches_redis_only_once_released(self):
        self.proxy.stall('requests')
        early, raw = self.stalled_call('SET', 'stall_requests', 'ran')
        self.assertEqual(early, b'')
        self.assertIsNone(self.direct.call('GET', 'stall_requests'))
        self.proxy.release('requests')
        self.assertEqual(raw.recv(100), b'+OK\r\n')
        self.assertEqual(self.direct.call('GET', 'stall_requests'), 'ran')
        raw.close()

    def test_a_cut_connection_ends_mid_reply(self):
        self.proxy.cut('replies', 1000)
        raw = socket.create_connection(self.proxy.address, timeout=5)
        raw.sendall(b'*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n')
        received = b''
        while True:
            chunk = raw.recv(1 << 16)
            if not chunk:
                break
            received += chunk
        raw.close()
        self.assertEqual(len(received), 1000)
        self.assertTrue(received.startswith(b'$%d\r\nxxx' % BIG))
        with self.assertRaisesRegex(OSError, 'connection closed'):
            self.client.call('GET', 'big')
        self.assertEqual(self.proxy.stats()['cuts'], 2)
        self.proxy.clear()
        self.assertEqual(len(self.client.call('GET', 'big')), BIG)

    def test_bandwidth_bounds_the_transfer_time_of_a_large_value(self):
        value, calm = timed(lambda: self.client.call('GET', 'big'))
        self.assertEqual(len(value), BIG)
        self.assertLess(calm, 0.5)
        self.proxy.limit_bandwidth('replies', 100_000)
        value, slow = timed(lambda: self.client.call('GET', 'big'))
        self.assertEqual(len(value), BIG)
        self.assertGreaterEqual(slow, 1.8)
        self.assertLess(slow, 4.0)
        self.proxy.limit_bandwidth('requests', 200_000)
        _, slow = timed(lambda: self.client.call('SET', 'big2', 'y' * BIG))
        self.assertGreaterEqual(slow, 0.9)


class LauncherTest(unittest.TestCase):
    launcher = os.path.join(ROOT, 'tools', 'faultproxy')

    def test_bad_arguments_one_line_and_status_2(self):
        for argv in ([], ['--listen', 'nowhere', '--to', '/tmp/x.sock'],
                     ['--listen', '/tmp/x', '--to', '/tmp/x.sock']):
            done = subprocess.run([sys.executable, self.launcher] + argv, capture_output=True,
                                  text=True, timeout=30)
            self.assertEqual(done.returncode, 2, argv)
            self.assertEqual(done.stdout, '')
            self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)

    def test_faults_through_the_control_socket(self):
        work = tempfile.mkdtemp(prefix='reliableq-faultproxy-')
        redis = RedisServer(os.path.join(work, 'redis')).start()
        control = os.path.join(work, 'control.sock')
        port = free_port()
        proc = subprocess.Popen([sys.executable, self.launcher, '--listen', '%s:%d' % (HOST, port),
                                 '--to', redis.sock, '--control', control],
                                stdout=subprocess.PIPE, text=True)
        try:
            self.assertIn('listening on %s:%d' % (HOST, port), proc.stdout.readline())

            def command(text):
                with socket.socket(socket.AF_UNIX) as c:
                    c.settimeout(5)
                    c.connect(control)
                    c.sendall(text.encode() + b'\n')
                    return c.makefile().readline().strip()
            client = Redis((HOST, port), timeout=5)
            self.assertLess(statistics.median(round_trips(client)), 0.1)
            self.assertEqual(command('delay replies 200'), 'ok')
            self.assertGreaterEqual(min(round_trips(client, 3)), 0.2)
            self.assertTrue(command('delay sideways 5').startswith('error '))
            self.assertEqual(command('clear'), 'ok')
            self.assertLess(statistics.median(round_trips(client)), 0.1)
            self.assertRegex(command('stats'), r'^ok accepted 1 open 1 ')
            client.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            stop_process(proc)
            redis.stop()
            shutil.rmtree(work, ignore_errors=True)
        self.assertEqual(proc.returncode, 0)
        self.assertFalse(os.path.exists(control))


if __name__ == '__main__':
    unittest.main()
