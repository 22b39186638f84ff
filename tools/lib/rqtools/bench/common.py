"""What tools/bench's modules share."""

import os
import sys

from .. import ROOT

RUBY_JOBS = os.path.join(ROOT, "tools", "bench.d", "sidekiq_jobs.rb")
# The system name of the tree's own build.
CURRENT = "reliableq"


class BenchError(Exception):
    pass


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
