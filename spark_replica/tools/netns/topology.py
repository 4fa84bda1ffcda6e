"""The plan of a network of hosts on one machine, as the `ip` and `tc` commands that make,
cut, heal and remove it. Pure: nothing here runs a command (network.py does).

Each host (ZooKeeper, each broker) is a network namespace with one link, `eth0`, whose
other end is a port of a bridge in the machine's own namespace. The bridge holds the
address `.1` of the subnet and stands for "clients": replog's commands, tests and Spark
run there and reach every host through it.

A cut drops a direction's packets silently, as a broken switch or a firewall rule does,
rather than refusing them: TCP connections hang and time out, which is what exposes the
bugs that only partitions cause. Every link gets, when it is made, an htb qdisc with two
classes: 1:1 where traffic goes by default, and 1:2 whose leaf is a `pfifo limit 0` queue,
which drops everything put in it. A cut is a u32 filter steering one source (or
destination) into 1:2; healing deletes the filters. This needs no netfilter and no tc
actions, which many kernels (and containers) lack.

Packets from X to Y are dropped where they leave the bridge towards Y (the egress of Y's
bridge port, matched on X's address), or, when Y is the clients, where they leave X
(X's `eth0`, matched on the clients' address): either way every direction is one rule.

Addresses are in 198.18.0.0/15, the range set aside for benchmarking networks (RFC 2544),
so that they do not clash with a real network the machine is on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spark_replica.errors import ConfigError

CLIENTS = "clients"
ZOOKEEPER = "zookeeper"
INNER_LINK = "eth0"
NAMESPACE_PREFIX = "replog-"
SUBNET_PREFIX = "198.18"
PREFIX_LENGTH = 24
_FIRST_BROKER_OCTET = 10
MAX_BROKER_ID = 254 - _FIRST_BROKER_OCTET
_RATE = ["rate", "10gbit", "quantum", "200000"]


def broker_host(broker_id: int) -> str:
    return f"broker-{broker_id}"


def host_name(text: str) -> str:
    """What a user names a host by -> its name: `1` and `broker-1` are broker 1."""
    name = text.strip().lower()
    if name in (CLIENTS, ZOOKEEPER):
        return name
    number = name.removeprefix("broker-")
    if number.isdigit():
        return broker_host(int(number))
    raise ConfigError(
        f"{text!r} is not a host: name a broker by its id (1) or as broker-1, "
        f"or say {ZOOKEEPER} or {CLIENTS}"
    )


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    namespace: str | None  # None: the clients, in the machine's own namespace
    outer_link: str | None  # the bridge's end of the host's link; None for the clients


@dataclass(frozen=True)
class Cut:
    """Packets from `source` to `target` are dropped (one direction)."""

    source: str
    target: str


def cuts_between(a: str, b: str, *, one_way: bool = False) -> list[Cut]:
    a, b = host_name(a), host_name(b)
    if a == b:
        raise ConfigError(f"cannot cut {a} from itself")
    return [Cut(a, b)] if one_way else [Cut(a, b), Cut(b, a)]


@dataclass(frozen=True)
class Topology:
    tag: str
    subnet: int
    hosts: tuple[Host, ...]

    @property
    def bridge(self) -> str:
        return f"rl{self.tag}br"

    @property
    def gateway(self) -> str:
        return self.host(CLIENTS).address

    def names(self) -> list[str]:
        return [host.name for host in self.hosts]

    def host(self, name: str) -> Host:
        wanted = host_name(name)
        for host in self.hosts:
            if host.name == wanted:
                return host
        raise ConfigError(f"no host {wanted} in this network: it has {', '.join(self.names())}")

    def address(self, name: str) -> str:
        return self.host(name).address

    def namespaces(self) -> list[str]:
        return [host.namespace for host in self.hosts if host.namespace is not None]

    def exec_prefix(self, name: str) -> list[str]:
        """What runs a command on host `name` (nothing for the clients)."""
        namespace = self.host(name).namespace
        return [] if namespace is None else ["ip", "netns", "exec", namespace]

    def cuts_from_all(self, name: str, *, one_way: bool = False) -> list[Cut]:
        """`name` cut from every other host, clients included (one way: its packets out)."""
        cut = host_name(name)
        self.host(cut)
        cuts: list[Cut] = []
        for other in self.names():
            if other != cut:
                cuts.extend(cuts_between(cut, other, one_way=one_way))
        return cuts

    def setup_commands(self) -> list[list[str]]:
        bridge = self.bridge
        commands = [
            ["ip", "link", "add", bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{self.gateway}/{PREFIX_LENGTH}", "dev", bridge],
            ["ip", "link", "set", bridge, "up"],
        ]
        for host in self.hosts:
            if host.namespace is None or host.outer_link is None:
                continue
            ns, outer = host.namespace, host.outer_link
            commands += [
                ["ip", "netns", "add", ns],
                [
                    "ip",
                    "link",
                    "add",
                    outer,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    INNER_LINK,
                    "netns",
                    ns,
                ],
                ["ip", "link", "set", outer, "master", bridge],
                ["ip", "link", "set", outer, "up"],
                [
                    "ip",
                    "-n",
                    ns,
                    "addr",
                    "add",
                    f"{host.address}/{PREFIX_LENGTH}",
                    "dev",
                    INNER_LINK,
                ],
                ["ip", "-n", ns, "link", "set", INNER_LINK, "up"],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
                *_droppable(["tc"], outer),
                *_droppable(["tc", "-n", ns], INNER_LINK),
            ]
        return commands

    def teardown_commands(self) -> list[list[str]]:
        """Each host's link (both ends) goes before its namespace: the kernel frees a deleted
        namespace, and the links in it, only once nothing holds it any more, which can be
        long after, and until then its link would stay on the bridge's side."""
        commands: list[list[str]] = []
        for host in self.hosts:
            if host.namespace is None or host.outer_link is None:
                continue
            commands.append(["ip", "link", "del", host.outer_link])
            commands.append(["ip", "netns", "del", host.namespace])
        return [*commands, ["ip", "link", "del", self.bridge]]

    def cut_commands(self, cut: Cut) -> list[list[str]]:
        source, target = self.host(cut.source), self.host(cut.target)
        if source.name == target.name:
            raise ConfigError(f"cannot cut {source.name} from itself")
        if target.outer_link is not None:
            return [_drop_filter(["tc"], target.outer_link, "src", source.address)]
        assert source.namespace is not None
        return [_drop_filter(["tc", "-n", source.namespace], INNER_LINK, "dst", target.address)]

    def heal_commands(self) -> list[list[str]]:
        commands: list[list[str]] = []
        for host in self.hosts:
            if host.namespace is None or host.outer_link is None:
                continue
            commands.append(["tc", "filter", "del", "dev", host.outer_link, "parent", "1:"])
            commands.append(
                ["tc", "-n", host.namespace, "filter", "del", "dev", INNER_LINK, "parent", "1:"]
            )
        return commands

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "subnet": self.subnet,
            "hosts": [
                {
                    "name": h.name,
                    "address": h.address,
                    "namespace": h.namespace,
                    "outer_link": h.outer_link,
                }
                for h in self.hosts
            ],
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Topology:
        try:
            hosts = tuple(
                Host(
                    str(h["name"]),
                    str(h["address"]),
                    None if h["namespace"] is None else str(h["namespace"]),
                    None if h["outer_link"] is None else str(h["outer_link"]),
                )
                for h in document["hosts"]
            )
            return cls(str(document["tag"]), int(document["subnet"]), hosts)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"the recorded network is not readable: {exc!r}") from exc


def _inner_end(namespace: str) -> list[str]:
    return ["name", INNER_LINK, "netns", namespace]


def _droppable(tc: list[str], link: str) -> list[list[str]]:
    """An htb qdisc on `link`: class 1:1 passes (the default), class 1:2 drops."""
    return [
        [*tc, "qdisc", "add", "dev", link, "root", "handle", "1:", "htb", "default", "1"],
        [*tc, "class", "add", "dev", link, "parent", "1:", "classid", "1:1", "htb", *_RATE],
        [*tc, "class", "add", "dev", link, "parent", "1:", "classid", "1:2", "htb", *_RATE],
        [*tc, "qdisc", "add", "dev", link, "parent", "1:2", "handle", "2:", "pfifo", "limit", "0"],
    ]


def _drop_filter(tc: list[str], link: str, field: str, address: str) -> list[str]:
    return [
        *tc, "filter", "add", "dev", link, "parent", "1:", "protocol", "ip", "prio", "1",
        "u32", "match", "ip", field, f"{address}/32", "flowid", "1:2",
    ]  # fmt: skip


def plan_topology(
    tag: str, subnet: int, broker_ids: Iterable[int], *, zookeeper: bool = True
) -> Topology:
    """Clients at .1, ZooKeeper at .2, broker i at .(10 + i)."""
    if not (tag.isascii() and tag.isalnum() and tag == tag.lower() and 1 <= len(tag) <= 6):
        raise ConfigError(f"a network tag is 1 to 6 lower-case letters or digits, not {tag!r}")
    if not 0 <= subnet <= 255:
        raise ConfigError(f"subnet must be between 0 and 255, not {subnet}")
    base = f"{SUBNET_PREFIX}.{subnet}"
    hosts = [Host(CLIENTS, f"{base}.1", None, None)]
    if zookeeper:
        hosts.append(_namespaced(tag, ZOOKEEPER, f"{base}.2", "zk"))
    ids = sorted(set(broker_ids))
    for broker_id in ids:
        if not 0 <= broker_id <= MAX_BROKER_ID:
            raise ConfigError(
                f"a broker on its own host needs an id between 0 and {MAX_BROKER_ID}, "
                f"not {broker_id}"
            )
        octet = _FIRST_BROKER_OCTET + broker_id
        hosts.append(_namespaced(tag, broker_host(broker_id), f"{base}.{octet}", f"b{broker_id}"))
    return Topology(tag, subnet, tuple(hosts))


def _namespaced(tag: str, name: str, address: str, short: str) -> Host:
    # Link names are at most 15 bytes: "rl" + tag (<= 6) + "-" + short (<= 4) fits.
    return Host(name, address, f"{NAMESPACE_PREFIX}{tag}-{name}", f"rl{tag}-{short}")


def free_subnet(used: set[int], preferred: int) -> int:
    """The first subnet from `preferred` on (wrapping) that no link of the machine uses."""
    for step in range(256):
        candidate = (preferred + step) % 256
        if candidate not in used:
            return candidate
    raise ConfigError(f"every subnet of {SUBNET_PREFIX}.0.0/16 is in use on this machine")


def subnets_in_use(ip_addr_output: str) -> set[int]:
    """Third octets of the 198.18.x.y addresses in `ip -o -4 addr show` output."""
    used: set[int] = set()
    for line in ip_addr_output.splitlines():
        for word in line.split():
            if word.startswith(f"{SUBNET_PREFIX}."):
                octets = word.split("/")[0].split(".")
                if len(octets) == 4 and octets[2].isdigit():
                    used.add(int(octets[2]))
    return used
