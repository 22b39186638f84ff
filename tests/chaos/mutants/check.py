#!/usr/bin/env python3
"""Runs the saturated chaos run (tools/chaos --profile saturated) against each
mutant program (tests/mutants/mutants.py) and checks that it reports lost
jobs: the run must catch each deliberate defect, every time, not by luck.

  check.py [--chaos-arg ARG | --chaos-arg=ARG]... NAME=PROGRAM...

Each --chaos-arg is passed to every tools/chaos run (e.g. --duration); the
plugin and the producer come from the environment, as tools/chaos reads them.
Prints one line per mutant (the lost jobs and the faults of its run) and
exits 1 when a mutant was not caught, or its run failed for another reason
than lost jobs (then the tools/chaos output is printed); 0 when every mutant
was caught.
"""

import json
import os
import subprocess
import sys

# tools/chaos, in the nearest folder above this one that holds it.
ROOT = os.path.dirname(os.path.abspath(__file__))
while not os.path.isfile(os.path.join(ROOT, 'tools', 'chaos')) and ROOT != os.path.dirname(ROOT):
    ROOT = os.path.dirname(ROOT)
CHAOS = os.path.join(ROOT, 'tools', 'chaos')


def main(argv):
    chaos_args, mutants = [], []
    args = iter(argv)
    for arg in args:
        if arg == '--chaos-arg':
            chaos_args.append(next(args, ''))
        elif arg.startswith('--chaos-arg='):
            chaos_args.append(arg[len('--chaos-arg='):])
        elif '=' in arg:
            mutants.append(arg.split('=', 1))
        else:
            sys.exit(__doc__)
    if not mutants:
        sys.exit(__doc__)
    survived = []
    for name, program in mutants:
        command = [sys.executable, CHAOS, '--profile', 'saturated', '--bin', program] + chaos_args
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors='replace')
        report = None
        for line in reversed(run.stdout.splitlines()):
            if line.startswith('{'):
                report = json.loads(line)
                break
        if report is None:
            print('mutant %s: tools/chaos printed no report (exit %d)' % (name, run.returncode))
        else:
            print('mutant %s: lost %d of %d jobs; kills %d, crashes %d, terms %d, redis '
                  'restarts %d; other problems: %s' % (
                      name, report['lost'], report['accepted'], report['worker_kills'],
                      report['worker_crashes'], report['worker_terms'],
                      report['redis_restarts'], report['problems'] or 'none'), flush=True)
        if report is None or report['lost'] == 0 or run.returncode != 1:
            survived.append(name)
            print(run.stdout)
    if survived:
        print('check: chaos did not catch: %s' % ', '.join(survived))
        return 1
    print('check: chaos caught every mutant (%d)' % len(mutants))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
