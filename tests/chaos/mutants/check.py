"""Runs a chaos run (or a test) against each mutant program (mutants.py,
and never_fences) and checks that it reports the defect: the run must catch
each deliberate defect, every time, not by luck.

  check.py [--mode network|sequences] [--chaos-arg ARG | --chaos-arg=ARG]... NAME=PROGRAM...
  check.py --mode test --test TEST_PROGRAM CASE MESSAGE NAME=PROGRAM...

Without --mode, the saturated run (tools/chaos --profile saturated) must
report lost jobs. With --mode network (tools/chaos --mode network
--expect-fencing, as root), it must report jobs lost, run twice with no
fault to explain it, or run on past a partition past the ttl. With --mode
sequences (the saturated run with --sequences, its keys given by a
--chaos-arg), it must report two jobs of one sequence key run at once
outside the stated window, first started out of push order, or an attempt
of a job started after the next job of its key (a retry that let the key
go). Each
--chaos-arg is passed to every tools/chaos run (e.g. --duration); the
plugin and the producer come from the environment, as tools/chaos reads
them. With --mode test, the doctest case CASE of TEST_PROGRAM, run with
RELIABLEQ_BIN set to the mutant, must fail and print MESSAGE. Prints one
line per mutant and exits 1 when a mutant was not caught, or its run failed
for another reason (then the output is printed); 0 when every mutant was
caught.
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
    chaos_args, mutants, mode, test = [], [], 'saturated', None
    args = iter(argv)
    for arg in args:
        if arg == '--mode':
            mode = next(args, '')
            if mode not in ('saturated', 'network', 'sequences', 'test'):
                sys.exit(__doc__)
        elif arg == '--test':
            test = [next(args, '') for _ in range(3)]
        elif arg == '--chaos-arg':
            chaos_args.append(next(args, ''))
        elif arg.startswith('--chaos-arg='):
            chaos_args.append(arg[len('--chaos-arg='):])
        elif '=' in arg:
            mutants.append(arg.split('=', 1))
        else:
            sys.exit(__doc__)
    if not mutants or (mode == 'test') != (test is not None and all(test)):
        sys.exit(__doc__)
    if mode == 'test':
        return check_test(test, mutants)
    survived = []
    for name, program in mutants:
        if mode == 'network':
            command = [sys.executable, CHAOS, '--mode', 'network', '--expect-fencing']
        else:
            command = [sys.executable, CHAOS, '--profile', 'saturated']
        command += ['--bin', program] + chaos_args
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors='replace')
        report = None
        for line in reversed(run.stdout.splitlines()):
            if line.startswith('{'):
                report = json.loads(line)
                break
        if report is None:
            print('mutant %s: tools/chaos printed no report (exit %d)' % (name, run.returncode))
        elif mode == 'sequences':
            print('mutant %s: lost %d of %d jobs; sequence overlaps %d (%d unexplained), first '
                  'starts out of order %d, attempts after the next job started %d (%d '
                  'unexplained); problems: %s' % (
                      name, report['lost'], report['accepted'], report['sequence_overlaps'],
                      report['sequence_overlaps_unexplained'],
                      report['sequence_order_violations'],
                      report['sequence_attempts_after_next'],
                      report['sequence_attempts_after_next_unexplained'],
                      report['problems'] or 'none'), flush=True)
        elif mode == 'network':
            print('mutant %s: lost %d of %d jobs; run twice unexplained %d; finished past the '
                  'fence %d; faults %s; problems: %s' % (
                      name, report['lost'], report['accepted'], report['unexplained_duplicates'],
                      report['finished_past_the_fence'], report['faults'],
                      report['problems'] or 'none'), flush=True)
        else:
            print('mutant %s: lost %d of %d jobs; kills %d, crashes %d, terms %d, redis '
                  'restarts %d; other problems: %s' % (
                      name, report['lost'], report['accepted'], report['worker_kills'],
                      report['worker_crashes'], report['worker_terms'],
                      report['redis_restarts'], report['problems'] or 'none'), flush=True)
        if report is None:
            caught = False
        elif mode == 'sequences':
            caught = (report['sequence_overlaps_unexplained'] +
                      report['sequence_order_violations'] +
                      report['sequence_attempts_after_next_unexplained']) > 0
        elif mode == 'network':
            caught = (report['lost'] + report['unexplained_duplicates'] +
                      report['finished_past_the_fence']) > 0
        else:
            caught = report['lost'] > 0
        if not caught or run.returncode != 1:
            survived.append(name)
            print(run.stdout)
    if survived:
        print('check: chaos did not catch: %s' % ', '.join(survived))
        return 1
    print('check: chaos caught every mutant (%d)' % len(mutants))
    return 0


def check_test(test, mutants):
    program, case, message = test
    survived = []
    for name, mutant in mutants:
        run = subprocess.run([program, '-tc=' + case], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors='replace',
                             env=dict(os.environ, RELIABLEQ_BIN=mutant))
        caught = run.returncode != 0 and message in run.stdout
        print('mutant %s: the case %s %s' % (
            name, 'failed with' if caught else 'did not fail with', repr(message)), flush=True)
        if not caught:
            survived.append(name)
            print(run.stdout)
    if survived:
        print('check: the test did not catch: %s' % ', '.join(survived))
        return 1
    print('check: the test caught every mutant (%d)' % len(mutants))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
