"""`replog up --security MODE`: a secure local cluster in one command, used through the CLI
with nothing but `--dir` (its admin.properties), and ZooKeeper closed to anonymous writers."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from tests.support import SecureCluster, replog, secure_cluster

pytestmark = pytest.mark.slow

ZK_CONNECT_TIMEOUT_S = 15


def _ok(*args: str, stdin: bytes = b"") -> str:
    result = replog(*args, stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def _round_trip(cluster: SecureCluster, topic: str, lines: list[str]) -> None:
    """Create the topic (RF 3), produce the lines with acks=all, read them all back."""
    where = ("--dir", str(cluster.dir))
    _ok("topics", "create", topic, "--partitions", "2", "--replication-factor", "3", *where)
    _produce_and_read(cluster, topic, lines, lines)


def _produce_and_read(
    cluster: SecureCluster, topic: str, lines: list[str], expected: list[str]
) -> None:
    """Produce the lines with acks=all, then read the topic from its start: `expected`."""
    where = ("--dir", str(cluster.dir))
    _ok("produce", topic, *where, stdin="".join(f"{line}\n" for line in lines).encode())
    out = _ok(
        "consume", topic, "--from-beginning", "--max-records", str(len(expected)),
        "--timeout", "30", *where,
    )  # fmt: skip
    assert sorted(out.split()) == sorted(expected)


def _leader(cluster: SecureCluster, topic: str) -> int:
    described = json.loads(_ok("topics", "describe", topic, "--json", "--dir", str(cluster.dir)))
    return int(described[0]["partitions"][0]["leader"])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_private_files(directory: Path) -> None:
    security = directory / "security"
    assert _mode(security) == 0o700
    private = [directory / "admin.properties", security / "ca-key.pem", security / "secrets.json"]
    private += [*security.glob("broker-*.pem"), *security.glob("broker-*.properties")]
    assert {p.name: _mode(p) for p in private} == {p.name: 0o600 for p in private}


def _assert_znodes_closed_to_anonymous(
    cluster: SecureCluster, topic: str, *, credentials: bool
) -> None:
    zk = KazooClient(hosts=cluster.zookeeper)
    zk.start(timeout=ZK_CONNECT_TIMEOUT_S)
    try:
        assert zk.get(f"/brokers/topics/{topic}")[0]  # readable by all, as in Kafka
        with pytest.raises(NoAuthError):
            zk.set(f"/brokers/topics/{topic}", b'{"version":2,"partitions":{}}')
        with pytest.raises(NoAuthError):
            zk.create("/brokers/topics/planted", b"{}")
        with pytest.raises(NoAuthError):
            zk.delete("/controller")
        if credentials:
            with pytest.raises(NoAuthError):
                zk.get("/config/users/admin")  # salted credentials: not even readable
    finally:
        zk.stop()
        zk.close()


def test_sasl_ssl_cluster_through_the_cli(tmp_path: Path) -> None:
    with secure_cluster(tmp_path / ".replog", "sasl_ssl", brokers=3) as cluster:
        assert cluster.admin_security.protocol == "SASL_SSL"
        _round_trip(cluster, "secure", ["a", "b", "c"])
        _assert_private_files(cluster.dir)
        _assert_znodes_closed_to_anonymous(cluster, "secure", credentials=True)
        assert _ok("groups", "list", "--dir", str(cluster.dir)) == ""  # Kafka port: SASL_SSL
        kafka = _ok("status", "--get", "kafka-bootstrap", "--dir", str(cluster.dir)).strip()
        anonymous_kafka = replog("groups", "list", "--bootstrap-server", kafka, "--timeout", "10")
        assert anonymous_kafka.returncode != 0

        refused = replog("topics", "list", "--bootstrap", cluster.bootstrap)
        assert refused.returncode != 0

        config = ("configs", "alter", "--topic", "secure", "--add-config", "retention.ms=3600000")
        _ok(*config, "--dir", str(cluster.dir))  # its ZooKeeper login is in admin.properties
        anonymous = replog(*config, "--zookeeper", cluster.zookeeper)
        assert anonymous.returncode == 1 and b"NoAuth" in anonymous.stderr

        leader = _leader(cluster, "secure")
        _ok("broker", "kill", str(leader), "--dir", str(cluster.dir))
        # The topic whose leader died, not a new one: a new topic of RF 3 needs three live
        # brokers, and the killed one counted as live only until its session expired.
        _produce_and_read(cluster, "secure", ["d", "e"], ["a", "b", "c", "d", "e"])
        _ok("broker", "start", str(leader), "--dir", str(cluster.dir))
        status = _ok("status", "--dir", str(cluster.dir))
        assert "Security:   sasl_ssl" in status


def test_ssl_cluster_with_client_certificates(tmp_path: Path) -> None:
    directory = tmp_path / ".replog"
    with secure_cluster(directory, "ssl", brokers=3) as cluster:
        assert cluster.admin_security.cert_file is not None
        _round_trip(cluster, "mtls", ["x", "y"])
        _assert_znodes_closed_to_anonymous(cluster, "mtls", credentials=False)
    again = replog("up", "--dir", str(directory), "--security", "sasl_ssl")
    assert again.returncode == 2
    assert "--security ssl" in again.stderr.decode()
