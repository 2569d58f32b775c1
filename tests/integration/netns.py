"""A private network of Linux network namespaces for partition tests, made and removed by
the test itself: every node on an address of its own, the servers on two addresses (the
coordinator's, the broker's), and a router between them that can silently drop the
traffic between one node and one server, like a cut cable, until it is healed.

Layout (``B`` is a free ``10.x`` prefix chosen at setup; names carry a run tag)::

    node i   ns <tag>-n<i>  B.<i>.2/24 ---- B.<i>.1   \\
    servers  ns <tag>-s     B.100.2 (coordinator)       router ns <tag>-r (forwards;
                            B.100.3 (broker)   ---- B.100.1   its policy rules cut)
    test     this process   B.200.2/24  ---- B.200.1   /   (root ns: route B.0.0/16)

Only veth pairs between namespaces of this machine: nothing leaves it. The root namespace
gets one veth, its route, and a blackhole route for the whole prefix under it (a client
of the test that outlives the veth has its packets dropped, not sent out by the default
route), all removed at teardown. A cut is a pair of
``blackhole`` policy rules in the router (from the node to the server and back), so both
sides see packets vanish (no reset, no ICMP), as in a real partition; established TCP
connections resume after ``heal`` when the next retransmission gets through. Needs root
(CAP_NET_ADMIN and CAP_SYS_ADMIN) and ``ip``/``nsenter``; ``unavailable()`` says why not.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

SERVERS_LINK = 100
HOST_LINK = 200
RULE_PRIORITY = 100
FALLBACK_METRIC = 4242


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                          check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why this machine cannot make network namespaces for a test (None: it can)."""
    if os.geteuid() != 0:
        return "making network namespaces needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    for tool in ("ip", "nsenter"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (iproute2, util-linux)"
    probe = f"nrs-probe-{uuid.uuid4().hex[:6]}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_prefix() -> str:
    """A ``10.x`` prefix no address or route of the root namespace uses."""
    used = _ip("-o", "addr").stdout + _ip("route").stdout
    for second in range(213, 250):
        if f"10.{second}." not in used:
            return f"10.{second}"
    raise RuntimeError("no free 10.x prefix for the partition network")


@dataclass
class Network:
    """The namespaces of one test (module docstring). ``enter(ns)`` is the command prefix
    that runs a program inside a namespace (``nsenter``: its network only)."""

    tag: str
    prefix: str
    nodes: list[str]
    cuts: set[tuple[str, str]] = field(default_factory=set)

    @property
    def router(self) -> str:
        return f"{self.tag}-r"

    @property
    def servers(self) -> str:
        return f"{self.tag}-s"

    def node_ns(self, node: str) -> str:
        return f"{self.tag}-n{self.nodes.index(node) + 1}"

    def node_address(self, node: str) -> str:
        return f"{self.prefix}.{self.nodes.index(node) + 1}.2"

    @property
    def coordinator_address(self) -> str:
        return f"{self.prefix}.{SERVERS_LINK}.2"

    @property
    def broker_address(self) -> str:
        return f"{self.prefix}.{SERVERS_LINK}.3"

    def enter(self, namespace: str) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{namespace}", "--"]

    def cut(self, node: str, server_address: str) -> None:
        """Drop every packet between ``node`` and ``server_address``, both ways."""
        for rule in self._rules(node, server_address):
            _ip("-n", self.router, "rule", "add", *rule)
        self.cuts.add((node, server_address))

    def heal(self, node: str, server_address: str) -> None:
        for rule in self._rules(node, server_address):
            _ip("-n", self.router, "rule", "del", *rule, check=False)
        self.cuts.discard((node, server_address))

    def _rules(self, node: str, server: str) -> list[list[str]]:
        here = self.node_address(node)
        return [["from", here, "to", server, "blackhole", "priority", str(RULE_PRIORITY)],
                ["from", server, "to", here, "blackhole", "priority", str(RULE_PRIORITY)]]

    # setup and teardown -------------------------------------------------------------
    @property
    def namespaces(self) -> list[str]:
        return [self.router, self.servers, *(self.node_ns(n) for n in self.nodes)]

    @property
    def host_link(self) -> str:
        return f"{self.tag}h"

    def _link(self, inside: str, name: str, address: str, router_address: str,
              *extra: str) -> None:
        """A veth pair from ``inside`` (None: the root namespace) to the router."""
        peer = f"{name}r"
        _ip("link", "add", name, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", self.router)
        _ip("-n", self.router, "addr", "add", f"{router_address}/24", "dev", peer)
        _ip("-n", self.router, "link", "set", peer, "up")
        where = [] if not inside else ["-n", inside]
        if inside:
            _ip("link", "set", name, "netns", inside)
        for each in (address, *extra):
            _ip(*where, "addr", "add", f"{each}/24", "dev", name)
        _ip(*where, "link", "set", name, "up")

    def build(self) -> None:
        for namespace in self.namespaces:
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
        subprocess.run([*self.enter(self.router), "sh", "-c",
                        "echo 1 > /proc/sys/net/ipv4/ip_forward"], check=True, timeout=30)
        p = self.prefix
        for i, node in enumerate(self.nodes, start=1):
            self._link(self.node_ns(node), f"{self.tag}n{i}", f"{p}.{i}.2", f"{p}.{i}.1")
            _ip("-n", self.node_ns(node), "route", "add", "default", "via", f"{p}.{i}.1")
        self._link(self.servers, f"{self.tag}s", self.coordinator_address,
                   f"{p}.{SERVERS_LINK}.1", self.broker_address)
        _ip("-n", self.servers, "route", "add", "default", "via", f"{p}.{SERVERS_LINK}.1")
        # while the network exists, a client of the test that outlives its veth finds its
        # packets dropped here, never sent out by the default route
        _ip("route", "add", "blackhole", f"{p}.0.0/16", "metric", str(FALLBACK_METRIC))
        self._link("", self.host_link, f"{p}.{HOST_LINK}.2", f"{p}.{HOST_LINK}.1")
        _ip("route", "add", f"{p}.0.0/16", "via", f"{p}.{HOST_LINK}.1")

    def remove(self) -> None:
        """Kill what still runs in the namespaces (the test's own processes), delete them
        and the root namespace's veth (its route goes with it)."""
        for namespace in self.namespaces:
            listed = _ip("netns", "pids", namespace, check=False).stdout.split()
            for pid in listed:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for namespace in self.namespaces:
            for _ in range(50):
                if not _ip("netns", "pids", namespace, check=False).stdout.split():
                    break
                time.sleep(0.1)
            _ip("netns", "del", namespace, check=False)
        _ip("link", "del", self.host_link, check=False)
        gc.collect()  # the test's clients nobody holds any more go now, not after the route
        _ip("route", "del", "blackhole", f"{self.prefix}.0.0/16", "metric",
            str(FALLBACK_METRIC), check=False)


@contextlib.contextmanager
def partition_network(nodes: Sequence[str]) -> Iterator[Network]:
    """The network of the module docstring for ``nodes``; everything of it removed on exit,
    whatever happened."""
    network = Network(tag=f"nr{uuid.uuid4().hex[:4]}", prefix=_free_prefix(), nodes=list(nodes))
    try:
        network.build()
        yield network
    finally:
        network.remove()
