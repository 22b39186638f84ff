"""What tools/bench and its scenario modules share."""

import socket
import sys


class BenchError(Exception):
    pass


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
