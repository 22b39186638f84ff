"""Network namespaces for the chaos run's processes, each joined to the root
namespace by a veth pair whose link the run takes down and up (a network
partition of that one process).

Network(owner_pid) makes, in the root namespace, an anchor: a bridge with no
ports holding one address (ANCHOR/32), on which the Redis the processes
reach listens, beside 127.0.0.1. Each Place (place()) is a namespace with
one veth pair: the root end holds .1 and the namespace end .2 of a private
/30 of the run's 10.B.0.0/16, and the namespace routes the anchor through
the root end. Packets from the namespace to the anchor are delivered
locally in the root namespace, so nothing is forwarded and no host route,
interface or sysctl is touched. partition() takes the root end down: the
namespace keeps its address and route, its packets go nowhere and its TCP
connections wait (no reset), as across a broken link; heal() brings it up.

Every name carries the owner's pid (the chaos run): namespaces
rqchaos-PID-NAME, links rqcPID[a|rN|pN] (15 characters at most). remove()
deletes everything by name; leftovers() and remove_leftovers() find and
delete those of runs whose pid is no longer a live python process (a run
that was SIGKILLed), and a new Network does that first. B comes from the
pid, moved on past any /16 some interface already uses. Needs root and
iproute2's `ip`.
"""

import os
import re
import subprocess

NETNS_PREFIX = 'rqchaos-'
LINK_PREFIX = 'rqc'
NETNS_NAME = re.compile(r'^rqchaos-(\d+)-')
LINK_NAME = re.compile(r'^rqc(\d+)[arp]\d*$')


class NetworkError(RuntimeError):
    pass


def ip(*args, check=True):
    """Runs `ip ARGS`; returns its stdout; raises NetworkError naming the
    command when it fails and `check`."""
    done = subprocess.run(('ip',) + args, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetworkError('ip %s: %s' % (' '.join(args), done.stderr.strip()))
    return done.stdout


def owner_alive(pid):
    """True while `pid` is a live python process (a chaos run); a pid reused
    by another program counts as dead."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return b'python' in f.read()
    except OSError:
        return False


def leftovers():
    """(namespaces, links) of runs whose owner is gone."""
    spaces = []
    for line in ip('netns', 'list').splitlines():
        name = line.split(' ', 1)[0]
        found = NETNS_NAME.match(name)
        if found and not owner_alive(int(found.group(1))):
            spaces.append(name)
    links = []
    for line in ip('-o', 'link', 'show').splitlines():
        name = line.split(':', 2)[1].strip().split('@', 1)[0]
        found = LINK_NAME.match(name)
        if found and not owner_alive(int(found.group(1))):
            links.append(name)
    return spaces, links


def remove_leftovers():
    """Deletes the namespaces and links of dead runs; returns how many."""
    spaces, links = leftovers()
    for name in spaces:
        ip('netns', 'delete', name, check=False)
    for name in links:
        # A veth went with its namespace; the anchor bridge stays until now.
        ip('link', 'delete', name, check=False)
    return len(spaces) + len(links)


def used_second_octets():
    """The B of every 10.B.x.y address on an interface now."""
    used = set()
    for found in re.finditer(r'inet 10\.(\d+)\.', ip('-o', '-4', 'addr', 'show')):
        used.add(int(found.group(1)))
    return used


class Place:
    """One namespace and its veth pair."""

    def __init__(self, network, number, name):
        self.network = network
        self.netns = '%s%d-%s' % (NETNS_PREFIX, network.owner, name)
        self.root_link = '%s%dr%d' % (LINK_PREFIX, network.owner, number)
        inner_link = '%s%dp%d' % (LINK_PREFIX, network.owner, number)
        base = number * 4
        subnet = '10.%d.%d.' % (network.octet, base >> 8)
        self.root_address = subnet + str((base & 255) + 1)
        self.address = subnet + str((base & 255) + 2)
        self.partitioned = False
        ip('netns', 'add', self.netns)
        network.places.append(self)
        ip('link', 'add', self.root_link, 'type', 'veth', 'peer', 'name', inner_link)
        ip('link', 'set', inner_link, 'netns', self.netns)
        ip('addr', 'add', self.root_address + '/30', 'dev', self.root_link)
        ip('link', 'set', self.root_link, 'up')
        inside = ('-n', self.netns)
        ip(*inside, 'addr', 'add', self.address + '/30', 'dev', inner_link)
        ip(*inside, 'link', 'set', inner_link, 'up')
        ip(*inside, 'link', 'set', 'lo', 'up')
        ip(*inside, 'route', 'add', network.anchor + '/32', 'via', self.root_address)

    def command(self, argv):
        """`argv` run inside the namespace: `ip netns exec` execs it in
        place, so the process started has the pid of the program itself."""
        return ['ip', 'netns', 'exec', self.netns] + list(argv)

    def partition(self):
        ip('link', 'set', self.root_link, 'down')
        self.partitioned = True

    def heal(self):
        ip('link', 'set', self.root_link, 'up')
        self.partitioned = False

    def remove(self):
        # The namespace end goes with the namespace, and the pair with it.
        ip('netns', 'delete', self.netns, check=False)
        ip('link', 'delete', self.root_link, check=False)


class Network:
    """The run's anchor and places; owner: the pid in every name."""

    def __init__(self, owner=None):
        self.owner = owner or os.getpid()
        self.removed_leftovers = remove_leftovers()
        used = used_second_octets()
        self.octet = next(o for o in [192 + (self.owner + i) % 62 for i in range(62)]
                          if o not in used)
        self.anchor = '10.%d.0.1' % self.octet
        self.anchor_link = '%s%da' % (LINK_PREFIX, self.owner)
        self.places = []
        self.count = 0
        ip('link', 'add', self.anchor_link, 'type', 'bridge')
        ip('addr', 'add', self.anchor + '/32', 'dev', self.anchor_link)
        ip('link', 'set', self.anchor_link, 'up')

    def place(self, name):
        """A new namespace called `name` (unique in the run) with its link."""
        self.count += 1
        if self.count >= 16384:
            raise NetworkError('more than 16383 namespaces in one run')
        return Place(self, self.count, name)

    def remove(self):
        """Deletes every namespace and link of the run (its processes must be
        gone first: a namespace lives on while a process is in it)."""
        for place in self.places:
            place.remove()
        self.places = []
        ip('link', 'delete', self.anchor_link, check=False)

    def names(self):
        """The run's namespaces and links that exist now (empty after
        remove())."""
        spaces = [line.split(' ', 1)[0] for line in ip('netns', 'list').splitlines()
                  if line.startswith('%s%d-' % (NETNS_PREFIX, self.owner))]
        links = [line.split(':', 2)[1].strip().split('@', 1)[0]
                 for line in ip('-o', 'link', 'show').splitlines()]
        mine = re.compile(r'^%s%d[arp]\d*$' % (LINK_PREFIX, self.owner))
        return spaces + [name for name in links if mine.match(name)]
