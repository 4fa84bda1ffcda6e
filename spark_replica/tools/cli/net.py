"""`replog net cut|heal|show`: network partitions between the hosts of a cluster started
with `replog up --netns`.

A host is a broker (by id, `1`, or as `broker-1`), `zookeeper`, or `clients`: this
machine's side of the bridge, where every `replog` command, test and Spark job runs.
A cut drops packets silently, as a broken link does: connections across it hang and time
out rather than being refused. `cut A B` cuts both directions, `--one-way` only packets
from A to B; `cut A --all` cuts A from every other host. The cuts in force are recorded
in cluster.json, so `net show` and `status` list them; `net heal` undoes every one, and
`replog down` heals and removes the whole network.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spark_replica.errors import ConfigError
from spark_replica.tools.cli import hosts
from spark_replica.tools.cli.output import print_table
from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.netns import network
from spark_replica.tools.netns.topology import Cut, Topology, cuts_between

HOST_HELP = "a broker id (1, or broker-1), zookeeper or clients (this machine's side)"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    net = subparsers.add_parser(
        "net",
        help="cut and heal links between the hosts of a cluster started with `up --netns`",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = net.add_subparsers(dest="action", required=True)

    cut = actions.add_parser("cut", help="drop the packets between two hosts, or one and all")
    cut.add_argument("a", metavar="A", help=f"the host to cut: {HOST_HELP}")
    cut.add_argument("b", metavar="B", nargs="?", help=f"the host to cut A from: {HOST_HELP}")
    cut.add_argument(
        "--all",
        action="store_true",
        help="cut A from every other host, clients included (instead of B)",
    )
    cut.add_argument(
        "--one-way",
        action="store_true",
        help="drop only the packets A sends (to B, or with --all to everyone); "
        "default: both directions",
    )
    _add_dir_option(cut)
    cut.set_defaults(handler=run_cut)

    heal = actions.add_parser("heal", help="undo every cut: all hosts reach each other again")
    _add_dir_option(heal)
    heal.set_defaults(handler=run_heal)

    show = actions.add_parser("show", help="the hosts, their addresses and the cuts in force")
    show.add_argument("--json", action="store_true", help="one JSON document (default: a table)")
    _add_dir_option(show)
    show.set_defaults(handler=run_show)


def _add_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=cluster_dir.DEFAULT_DIR,
        help="the cluster directory (default ./.replog)",
    )


def planned_cuts(
    topology: Topology, a: str, b: str | None, every: bool, one_way: bool
) -> list[Cut]:
    """The directions `net cut` drops, every host named checked against the network."""
    if every == (b is not None):
        raise ConfigError("name the host to cut A from, or pass --all (not both)")
    if b is None:
        return topology.cuts_from_all(a, one_way=one_way)
    cuts = cuts_between(a, b, one_way=one_way)
    for cut in cuts:
        topology.host(cut.source)
        topology.host(cut.target)
    return cuts


def run_cut(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    with cluster_dir.locked(directory):
        info = cluster_dir.load(directory)
        topology = hosts.live_topology(info, directory)
        cuts = planned_cuts(topology, args.a, args.b, args.all, args.one_way)
        network.require()
        assert info.network is not None
        recorded = info.network.cuts
        try:
            for cut in cuts:
                if [cut.source, cut.target] not in recorded:
                    network.apply_cuts(topology, [cut])
                    recorded.append([cut.source, cut.target])
        finally:
            cluster_dir.save(directory, info)
    print(f"Cut: {hosts.describe_cuts(recorded)}.")
    return 0


def run_heal(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    with cluster_dir.locked(directory):
        info = cluster_dir.load(directory)
        topology = hosts.live_topology(info, directory)
        network.require()
        network.heal(topology)
        assert info.network is not None
        info.network.cuts = []
        cluster_dir.save(directory, info)
    print("Healed: every host reaches every other again.")
    return 0


def run_show(args: argparse.Namespace) -> int:
    info = cluster_dir.load(args.dir)
    view = hosts.network_view(info)
    if view is None:
        raise ConfigError(
            f"the cluster in {args.dir} was not started with --netns: its processes share "
            "this machine's network"
        )
    if args.json:
        print(json.dumps(view))
        return 0
    print(f"Network: {hosts.network_line(view)}")
    print_table(
        ["HOST", "ADDRESS", "NAMESPACE"],
        [[h["name"], h["address"], h["namespace"] or "-"] for h in view["hosts"]],
    )
    return 0
