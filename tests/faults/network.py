"""Worker hosts on a real network: one network namespace per host, on a bridge to this one.

The fault runner's network scenarios run each worker in its own network namespace, as a
separate host would be: the host has one interface (``eth0``, one end of a veth pair
whose other end is on a bridge in this namespace) and one address on a private /24; the
private PostgreSQL, Redis and the Cloud API simulator listen on the bridge's address, so
a worker reaches all three over TCP, through the host's own network stack. What one host's
network does to it (a partition, a slow path) touches that host alone.

    net = Network.create()                    # bridge wbf<pid>br, 10.X.Y.1/24
    host = net.add_host("a")                  # namespace wbf-<pid>-a, address 10.X.Y.10
    host.command(["python", "manage.py", ...])  # ip netns exec wbf-<pid>-a python ...
    host.partition(6379)                      # DROP, both ways, at the host's firewall
    host.heal(6379)
    host.slow(port, delay_s=2, loss=0.05)     # netem's delay and loss, see below
    net.destroy()                             # namespaces, veths, bridge; also at exit

A partition is a DROP (iptables in the host's namespace, ``OUTPUT`` to the port and
``INPUT`` from it), not a REJECT: nothing tells the worker, its packets and the server's
go unanswered, as when a switch or a firewall between them fails. The worker notices only
by its own timeouts (docs/operations.md: REDIS_SOCKET_TIMEOUT, DB_TCP_USER_TIMEOUT_MS).

The slow path is netem's ``delay 2s loss 5%`` on the host's side. This machine's kernel
has no ``netem`` qdisc (``CONFIG_NET_SCH_NETEM`` is not set), so the same two effects
are made with netfilter, still in the host's own stack: 5 % of the path's outgoing packets
are dropped (``-m statistic --mode random``, TCP retransmits them) and the rest are held
2 s in a queue (``-j NFQUEUE``) by ``tests.faults.delay`` running in the namespace.

Names carry this process's pid, so parallel runs never clash; namespaces whose pid is gone
(a run killed before its clean-up) are removed by the next run. Everything is removed on
``destroy()``, which the runner calls in ``finally`` and ``atexit`` calls again.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "wbf"
HOST_OFFSET = 10  # host i has address .10+i; the bridge (the services) has .1


class NetworkUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no ``ip``, or the kernel refuses)."""


def _ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """``ip ARGS`` here, or ``ARGS`` (any command) run inside namespace ``netns``."""
    argv = ["ip", *args] if netns is None else ["ip", "netns", "exec", netns, *args]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)  # noqa: S603
    if check and result.returncode != 0:
        raise NetworkUnavailable(f"{' '.join(argv)}: {result.stderr.strip()}")
    return result.stdout


def unavailable_reason() -> str | None:
    """Why worker hosts cannot be put in namespaces here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (the fault suite is not running as root)"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"network namespaces need '{tool}' (apt-get install iproute2 iptables)"
    probe = f"{PREFIX}-{os.getpid()}-probe"
    try:
        _ip("netns", "add", probe)
        _ip("iptables", "-w", "-S", netns=probe)
    except NetworkUnavailable as exc:
        return f"network namespaces are not allowed here: {exc}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Remove namespaces and bridges of runs whose process is gone; return their names."""
    removed = []
    for line in _ip("netns", "list", check=False).splitlines():
        match = re.match(rf"({PREFIX}-(\d+)-\w+)", line)
        if match and not _alive(int(match.group(2))):
            _ip("netns", "del", match.group(1), check=False)
            removed.append(match.group(1))
    for line in _ip("-o", "link", "show", check=False).splitlines():
        match = re.search(rf"\d+: ({PREFIX}(\d+)[a-z]+)[@:]", line)
        if match and not _alive(int(match.group(2))):
            _ip("link", "del", match.group(1), check=False)
            removed.append(match.group(1))
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.200.0.0–10.250.255.0 that no address or route of this machine uses."""
    used = [
        ipaddress.ip_network(m, strict=False)
        for m in re.findall(r"(\d+\.\d+\.\d+\.\d+/\d+)", _ip("-o", "-4", "addr", "show"))
    ]
    used += [
        ipaddress.ip_network(m, strict=False)
        for m in re.findall(r"^(\d+\.\d+\.\d+\.\d+/\d+)", _ip("-4", "route", "show"), re.M)
    ]
    for _ in range(200):
        candidate = ipaddress.ip_network(
            f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"  # noqa: S311
        )
        if not any(candidate.overlaps(net) for net in used):
            return candidate
    raise NetworkUnavailable("no free private /24 for the worker hosts")


@dataclass
class Host:
    """One worker host: a namespace with one interface on the bridge."""

    name: str
    netns: str
    address: str
    services: str  # the bridge's address: PostgreSQL, Redis and the simulator
    rules: list[list[str]] = field(default_factory=list)
    delayer: subprocess.Popen[bytes] | None = None

    def prefix(self) -> list[str]:
        """What to put before a command to run it on this host."""
        return ["ip", "netns", "exec", self.netns]

    def _iptables(self, *rule: str) -> None:
        _ip("iptables", "-w", *rule, netns=self.netns)

    def _add(self, chain: str, *match: str) -> None:
        self._iptables("-A", chain, *match)
        self.rules.append([chain, *match])

    def partition(self, port: int) -> None:
        """Drop every packet between this host and the services' ``port``, both ways."""
        self._add("OUTPUT", "-d", self.services, "-p", "tcp", "--dport", str(port), "-j", "DROP")
        self._add("INPUT", "-s", self.services, "-p", "tcp", "--sport", str(port), "-j", "DROP")

    def slow(self, port: int, *, delay_s: float, loss: float, log: Path) -> None:
        """netem's ``delay <delay_s> loss <loss>`` on this host's packets to ``port``."""
        queue = 7
        log.parent.mkdir(parents=True, exist_ok=True)
        self.delayer = subprocess.Popen(  # noqa: S603 - our own module, arguments built here
            [
                *self.prefix(),
                sys.executable,
                "-m",
                "tests.faults.delay",
                "--queue",
                str(queue),
                "--delay",
                str(delay_s),
            ],
            cwd=Path(__file__).resolve().parents[2],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        path = ["-d", self.services, "-p", "tcp", "--dport", str(port)]
        self._add("OUTPUT", *path, "-m", "statistic", "--mode", "random",
                  "--probability", str(loss), "-j", "DROP")  # fmt: skip
        self._add("OUTPUT", *path, "-j", "NFQUEUE", "--queue-num", str(queue))

    def heal(self) -> None:
        """Remove every rule this host was given (a held packet still leaves on time)."""
        for rule in reversed(self.rules):
            self._iptables("-D", *rule)
        self.rules.clear()

    def stop_delayer(self) -> None:
        if self.delayer is not None and self.delayer.poll() is None:
            self.delayer.terminate()
            self.delayer.wait(10)
        self.delayer = None


@dataclass
class Network:
    """A bridge in this namespace and the hosts on it."""

    tag: str
    subnet: ipaddress.IPv4Network
    hosts: dict[str, Host] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.tag}br"

    @property
    def services(self) -> str:
        return str(self.subnet.network_address + 1)

    @classmethod
    def create(cls) -> Network:
        reason = unavailable_reason()
        if reason is not None:
            raise NetworkUnavailable(reason)
        sweep_stale()
        net = cls(tag=str(os.getpid()), subnet=_free_subnet())
        atexit.register(net.destroy)
        try:
            _ip("link", "add", net.bridge, "type", "bridge")
            _ip("addr", "add", f"{net.services}/{net.subnet.prefixlen}", "dev", net.bridge)
            _ip("link", "set", net.bridge, "up")
        except Exception:
            net.destroy()
            raise
        return net

    def add_host(self, name: str) -> Host:
        index = len(self.hosts)
        netns = f"{PREFIX}-{self.tag}-{name}"
        outside = f"{PREFIX}{self.tag}{name}"  # at most 3 + 7 + 2 of the 15 characters
        address = str(self.subnet.network_address + HOST_OFFSET + index)
        try:
            _ip("netns", "add", netns)
            _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", netns)
            _ip("link", "set", outside, "master", self.bridge)
            _ip("link", "set", outside, "up")
            _ip("-n", netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
            _ip("-n", netns, "link", "set", "eth0", "up")
            _ip("-n", netns, "link", "set", "lo", "up")
        except Exception:
            _ip("netns", "del", netns, check=False)
            _ip("link", "del", outside, check=False)
            raise
        host = Host(name=name, netns=netns, address=address, services=self.services)
        self.hosts[name] = host
        return host

    def destroy(self) -> None:
        for host in self.hosts.values():
            host.stop_delayer()
            _ip("netns", "del", host.netns, check=False)
            _ip("link", "del", f"{PREFIX}{self.tag}{host.name}", check=False)
        self.hosts.clear()
        _ip("link", "del", self.bridge, check=False)

    def leftovers(self) -> list[str]:
        """Namespaces and links of this run still present (empty after ``destroy``)."""
        names = _ip("netns", "list", check=False) + _ip("-o", "link", "show", check=False)
        return sorted(set(re.findall(rf"\b({PREFIX}-?{self.tag}-?\w*)", names)))


def command(host: Host | None, argv: Sequence[str]) -> list[str]:
    """``argv`` run on ``host`` (or here, when None)."""
    return [*host.prefix(), *argv] if host is not None else list(argv)
