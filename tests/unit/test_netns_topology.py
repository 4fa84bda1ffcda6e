"""The plan of a network of hosts: names, addresses, the commands for a cut, heal and
teardown (pure: no command runs here)."""

from __future__ import annotations

import pytest

from spark_replica.errors import ConfigError
from spark_replica.tools.netns.topology import (
    Cut,
    Topology,
    cuts_between,
    free_subnet,
    host_name,
    plan_topology,
    subnets_in_use,
)


def topology() -> Topology:
    return plan_topology("ab12", 7, [2, 1])


def test_hosts_and_addresses() -> None:
    net = topology()
    assert net.names() == ["clients", "zookeeper", "broker-1", "broker-2"]
    assert net.gateway == "198.18.7.1" and net.address("zookeeper") == "198.18.7.2"
    assert net.address("1") == net.address("broker-1") == "198.18.7.11"
    assert net.exec_prefix("clients") == []
    assert net.exec_prefix("2") == ["ip", "netns", "exec", "replog-ab12-broker-2"]
    assert all(len(h.outer_link or "") <= 15 for h in net.hosts)
    assert len(net.bridge) <= 15


@pytest.mark.parametrize("text", ["broker-x", "", "kafka", "-1"])
def test_unknown_host_names_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a host"):
        host_name(text)


def test_a_host_not_in_the_network_is_refused() -> None:
    with pytest.raises(ConfigError, match="no host broker-9"):
        topology().address("9")


def test_plan_checks_its_inputs() -> None:
    with pytest.raises(ConfigError, match="tag"):
        plan_topology("AB-1", 1, [1])
    with pytest.raises(ConfigError, match="subnet"):
        plan_topology("ab", 256, [1])
    with pytest.raises(ConfigError, match="id between 0 and 244"):
        plan_topology("ab", 1, [245])


def test_a_tag_of_digits_only_is_a_tag() -> None:
    """create_network draws tags with secrets.token_hex, which is all digits now and then."""
    assert plan_topology("824097", 1, [1]).bridge == "rl824097br"


def test_cuts_between_are_two_way_unless_told() -> None:
    assert cuts_between("1", "zookeeper") == [
        Cut("broker-1", "zookeeper"),
        Cut("zookeeper", "broker-1"),
    ]
    assert cuts_between("broker-1", "2", one_way=True) == [Cut("broker-1", "broker-2")]
    with pytest.raises(ConfigError, match="from itself"):
        cuts_between("1", "broker-1")


def test_cut_from_all_covers_every_other_host() -> None:
    cuts = topology().cuts_from_all("1")
    assert {(c.source, c.target) for c in cuts} == {
        (a, b)
        for other in ("clients", "zookeeper", "broker-2")
        for a, b in (("broker-1", other), (other, "broker-1"))
    }
    assert all(c.source == "broker-1" for c in topology().cuts_from_all("1", one_way=True))


def test_a_cut_into_a_host_is_filtered_on_its_bridge_port_by_source() -> None:
    (command,) = topology().cut_commands(Cut("zookeeper", "broker-1"))
    assert command[:5] == ["tc", "filter", "add", "dev", "rlab12-b1"]
    assert command[-5:] == ["ip", "src", "198.18.7.2/32", "flowid", "1:2"]


def test_a_cut_into_the_clients_is_filtered_where_it_leaves_the_host() -> None:
    (command,) = topology().cut_commands(Cut("broker-2", "clients"))
    assert command[:7] == ["tc", "-n", "replog-ab12-broker-2", "filter", "add", "dev", "eth0"]
    assert command[-5:] == ["ip", "dst", "198.18.7.1/32", "flowid", "1:2"]


def test_every_link_can_drop_and_heal_clears_every_link() -> None:
    net = topology()
    setup = net.setup_commands()
    drops = [c for c in setup if c[-3:] == ["pfifo", "limit", "0"]]
    assert len(drops) == 2 * 3  # both ends of the three hosts' links
    heal = net.heal_commands()
    assert len(heal) == 6 and all("del" in c for c in heal)
    assert net.teardown_commands()[-1] == ["ip", "link", "del", "rlab12br"]


def test_json_round_trip() -> None:
    net = topology()
    assert Topology.from_json(net.to_json()) == net
    with pytest.raises(ConfigError, match="not readable"):
        Topology.from_json({"tag": "x"})


def test_subnets_in_use_and_the_next_free_one() -> None:
    output = (
        "1: lo    inet 127.0.0.1/8 scope host lo\n"
        "5: rlab12br    inet 198.18.7.1/24 scope global rlab12br\n"
        "6: other    inet 198.18.8.1/24 scope global other\n"
    )
    assert subnets_in_use(output) == {7, 8}
    assert free_subnet({7, 8}, preferred=7) == 9
    assert free_subnet({255}, preferred=255) == 0
    with pytest.raises(ConfigError, match="in use"):
        free_subnet(set(range(256)), preferred=0)
