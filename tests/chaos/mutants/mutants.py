#!/usr/bin/env python3
"""Deliberately broken scripts: each a defect that loses or doubles jobs only
under faults, which a chaos run (tools/chaos --profile saturated, by default)
or a test that puts the fault exactly there must report.
tests/chaos/mutants/check.py runs it against each; the mutant programs are
built by tests/chaos/mutants/meson.build, each `reliableq` with one script
changed.

  mutants.py --list [MODE]               the mutants' names, one a line; with
                                         MODE (saturated, network, sequences,
                                         test),
                                         those whose defect that run reports
  mutants.py NAME OUT.cc LUA_DIR SCRIPT...
      writes lua_scripts.cc (tools/embed_lua.py) for the scripts with the
      mutant NAME applied
  mutants.py --source NAME SOURCE.cc OUT.cc
      writes SOURCE.cc with the source mutant NAME applied (a worker part
      linked in place of its own)

A mutant is a list of (script, text, replacement) edits of the script with
its includes expanded; each text must occur exactly once, so that a change of
the script that moves the text fails the build here instead of leaving a
mutant that no longer breaks anything.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', '..', 'tools'))
import embed_lua  # noqa: E402

MUTANTS = {
    # The defect tools/chaos missed at its old default load: the oldest job of
    # every fetch batch of two or more is returned to the worker but not put
    # in its working list. Lost when the worker dies before that job ends;
    # an idle worker fetches one job at a time and never shows it.
    'fetch_leaves_oldest': [
        ('fetch', '      moved[#moved + 1] = jobs[i]\n',
         '      if i ~= count or count == 1 then moved[#moved + 1] = jobs[i] end\n'),
    ],
    # The janitor empties a dead process's working list but gives back all
    # of each batch but one.
    'recover_drops_one': [
        ('recover', '  if goes_dead then dead[#dead + 1] = new_payload else back[#back + 1] = '
                    'new_payload end\n',
         '  if goes_dead then dead[#dead + 1] = new_payload '
         'elseif _ > 1 then back[#back + 1] = new_payload end\n'),
    ],
    # A worker told to stop hands back its prefetched jobs, all but one.
    'requeue_drops_one': [
        ('requeue', '      back[#back + 1] = payload\n',
         '      if dropped then back[#back + 1] = payload end\n      dropped = true\n'),
        ('requeue', 'local kept, back, dead, leaving = {}, {}, {}, {}\n',
         'local kept, back, dead, leaving, dropped = {}, {}, {}, {}, false\n'),
    ],
    # The janitor moves the jobs of a process it read as dead without looking
    # again: a worker that healed and beat between the pass's read of the
    # heartbeats and the move loses a job it is running, which runs twice.
    'recover_ignores_heartbeat': [
        ('recover', "if force ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then\n",
         'if false then\n'),
    ],
    # The fetch does not gate jobs of a sequence: every fetched job runs,
    # whoever holds its key (lib/sequence.lua's sequence_gate_plan always
    # says 'run'). No job is lost; the jobs of one key run at once and out
    # of order.
    'fetch_ignores_sequence': [
        ('fetch', "  local seq = sequence_of(payload)\n"
                  "  if seq == nil or ctx.queue_prefix .. seq.queue ~= queue_key then return 'run' end\n",
         "  if payload then return 'run' end\n"
         "  local seq = sequence_of(payload)\n"
         "  if seq == nil or ctx.queue_prefix .. seq.queue ~= queue_key then return 'run' end\n"),
    ],
    # A retry lets the sequence key go whatever the job says, as if every
    # job were "sequence_release_on_retry": true: the next job of the key
    # starts while the failed one waits for its retry, which then runs after
    # it. Needs jobs that fail (--throw-fraction).
    'finish_releases_on_retry': [
        ('finish', '  return seq ~= nil and seq.release_on_retry\n', '  return seq ~= nil\n'),
    ],
}

# The run that must report each mutant: the saturated run (lost jobs) unless
# listed here; 'test' is the worker test case that holds a janitor pass
# between its read of a heartbeat and its move while the worker heals
# (tests/chaos/meson.build, janitor-race-mutant); 'sequences' is the
# saturated run with --sequences, whose check reports jobs of one key run
# at once or out of order (chaos-sequences-mutants). The network mode's
# partitions heal at random: the window of one round trip is hit too rarely
# to catch a defect every time.
CAUGHT_BY = {'recover_ignores_heartbeat': 'test', 'fetch_ignores_sequence': 'sequences',
             'finish_releases_on_retry': 'sequences'}

# Mutants of a C++ source of the worker, by the same rule (each text once):
# NAME: (the source under src/, [(text, replacement)]). The program links
# the library's other objects with the mutated one. All are for the network
# mode.
SOURCE_MUTANTS = {
    # A worker that never fences itself: cut off from Redis past its ttl,
    # it runs its jobs on while a janitor gives them to others.
    'never_fences': ('server/self_fence.cc', [
        ('  timer_.Start(std::max(delay, std::chrono::milliseconds(0)));\n',
         '  (void)delay;\n'),
    ]),
}


def mutate_source(name, text):
    for old, new in SOURCE_MUTANTS[name][1]:
        count = text.count(old)
        if count != 1:
            sys.exit(f'mutant {name}: {SOURCE_MUTANTS[name][0]} holds {old!r} {count} times, '
                     f'not once; update tests/chaos/mutants/mutants.py to the source as it is now')
        text = text.replace(old, new)
    return text


def mutate(entries, name):
    entries = [list(entry) for entry in entries]
    for script, text, replacement in MUTANTS[name]:
        matches = [entry for entry in entries if entry[0] == script]
        if len(matches) != 1:
            sys.exit(f'mutant {name}: no script {script}.lua')
        entry = matches[0]
        count = entry[1].count(text)
        if count != 1:
            sys.exit(f'mutant {name}: {script}.lua holds {text!r} {count} times, not once; '
                     f'update tests/chaos/mutants/mutants.py to the script as it is now')
        entry[1] = entry[1].replace(text, replacement)
    return [tuple(entry) for entry in entries]


def main(argv):
    if argv[:1] == ['--list'] and len(argv) <= 2:
        mode = argv[1] if len(argv) == 2 else None
        print('\n'.join(sorted(name for name in MUTANTS
                                if mode in (None, CAUGHT_BY.get(name, 'saturated')))))
        return 0
    if argv[:1] == ['--source'] and len(argv) == 4 and argv[1] in SOURCE_MUTANTS:
        with open(argv[2], encoding='utf-8') as f:
            text = f.read()
        with open(argv[3], 'w', encoding='utf-8') as f:
            f.write('// Generated by tests/chaos/mutants/mutants.py: the mutant %s of %s.\n'
                    % (argv[1], SOURCE_MUTANTS[argv[1]][0]) + mutate_source(argv[1], text))
        return 0
    if len(argv) < 4 or argv[0] not in MUTANTS:
        sys.exit(__doc__)
    name, out, lua_dir, scripts = argv[0], argv[1], argv[2], argv[3:]
    _, body = embed_lua.render(mutate(embed_lua.load(lua_dir, scripts), name))
    with open(out, 'w', encoding='utf-8') as f:
        f.write(body)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
