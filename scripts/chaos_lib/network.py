"""A network namespace per node, so that one node can be cut off from the others and the clients.

Layout: a bridge in the root namespace holds the gateway address ``10.<a>.<b>.1/24`` and one end of
a veth pair per node; the other end is ``eth0`` in the node's namespace, with the address
``10.<a>.<b>.<10 + id>``. Nodes reach each other across the bridge, clients in the root namespace
reach them through the bridge's address. Isolating a node takes its bridge-side link down:
packets to and from it are dropped (no reset, no error), as with a pulled cable. Names carry a tag
of the run's process id so that concurrent runs do not collide, and ``teardown`` removes
everything (``ip netns del`` also removes the veth pair).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

IP = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else "ip"
COMMAND_TIMEOUT_S = 10.0


class NetworkError(RuntimeError):
    pass


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run([IP, *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    if check and ran.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {ran.stderr.strip() or ran.stdout.strip()}")
    return ran


@dataclass
class NodeNetwork:
    """The namespaces, links and addresses of ``node_ids``; ``setup`` makes them, ``teardown`` removes them."""

    node_ids: Sequence[int]
    tag: str = field(default_factory=lambda: str(os.getpid() % 100000))
    created: list[str] = field(default_factory=list)  # namespaces made so far
    bridge_made: bool = False
    isolated: set[int] = field(default_factory=set)

    @property
    def subnet(self) -> str:
        number = int(self.tag)
        return f"10.{200 + number % 50}.{number // 50 % 250}"

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"

    @property
    def bridge(self) -> str:
        return f"chb{self.tag}"

    def address(self, node_id: int) -> str:
        return f"{self.subnet}.{10 + node_id}"

    def namespace(self, node_id: int) -> str:
        return f"chaos{self.tag}-n{node_id}"

    def host_link(self, node_id: int) -> str:
        return f"chh{self.tag}n{node_id}"

    def wrap(self, node_id: int, command: Sequence[str]) -> list[str]:
        """``command`` run in the node's namespace (``ip netns exec`` execs it: same process id)."""
        return [IP, "netns", "exec", self.namespace(node_id), *command]

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise NetworkError("network namespaces need root (ip netns add)")
        routed = ip("-4", "route", "show", "to", "match", f"{self.gateway}", check=False).stdout
        if any(not line.startswith("default") for line in routed.splitlines()):
            raise NetworkError(f"{self.subnet}.0/24 is routed here already: {routed.strip()}")
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            self.bridge_made = True
            ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            for node_id in self.node_ids:
                self._add_node(node_id)
        except BaseException:
            self.teardown()
            raise

    def _add_node(self, node_id: int) -> None:
        ns, host = self.namespace(node_id), self.host_link(node_id)
        peer = f"chp{self.tag}n{node_id}"
        ip("netns", "add", ns)
        self.created.append(ns)
        ip("link", "add", host, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", ns)
        ip("-n", ns, "link", "set", peer, "name", "eth0")
        ip("-n", ns, "addr", "add", f"{self.address(node_id)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "set", host, "master", self.bridge)
        ip("link", "set", host, "up")

    def isolate(self, node_id: int) -> None:
        ip("link", "set", self.host_link(node_id), "down")
        self.isolated.add(node_id)

    def heal(self, node_id: int) -> None:
        ip("link", "set", self.host_link(node_id), "up")
        self.isolated.discard(node_id)

    def teardown(self) -> None:
        """Remove what ``setup`` made; each step even when another failed (cleanup must not stop half-way)."""
        for ns in reversed(self.created):
            ip("netns", "del", ns, check=False)
        self.created.clear()
        if self.bridge_made:
            ip("link", "del", self.bridge, check=False)
            self.bridge_made = False
        self.isolated.clear()


STALE_NAMESPACE = re.compile(r"^(chaos(\d+)-n\d+)\b")


def remove_stale(log: Callable[[str], None]) -> None:
    """Remove the namespaces and bridge of each run killed before it could clean up: a run whose
    namespaces (of this naming) have no process left in any of them."""
    runs: dict[str, list[str]] = {}
    for line in ip("netns", "list", check=False).stdout.splitlines():
        found = STALE_NAMESPACE.match(line.strip())
        if found is not None:
            runs.setdefault(found.group(2), []).append(found.group(1))
    for tag, names in runs.items():
        if any(ip("netns", "pids", name, check=False).stdout.strip() for name in names):
            continue  # a run still going
        for name in names:
            ip("netns", "del", name, check=False)
        ip("link", "del", f"chb{tag}", check=False)
        log(f"removed the namespaces {', '.join(names)} and bridge chb{tag} of a run that is gone")
