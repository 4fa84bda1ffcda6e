"""Opening a kazoo session from a connect string, chroot included.

A connect string is ``host:port[,host:port...][/chroot]``. kazoo applies the chroot
itself but needs the chroot znode to exist, so it is created first through a session
without the chroot.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from spark_replica.errors import ConfigError, ZooKeeperError
from spark_replica.zk.kazoo_errors import translated

DEFAULT_SESSION_TIMEOUT_S = 10.0
DEFAULT_CONNECT_TIMEOUT_S = 15.0


def split_connect_string(connect: str) -> tuple[str, str | None]:
    """Split into (hosts, chroot or None); raise ConfigError if it is malformed."""
    connect = connect.strip()
    if not connect:
        raise ConfigError("the ZooKeeper connect string is empty (expected host:port[/chroot])")
    hosts, slash, chroot = connect.partition("/")
    for host in hosts.split(","):
        name, colon, port = host.rpartition(":")
        if not colon or not name or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"ZooKeeper connect string {connect!r}: {host!r} is not host:port")
    if not slash:
        return hosts, None
    chroot = "/" + chroot.strip("/")
    return hosts, (None if chroot == "/" else chroot)


def connect(
    connect_string: str,
    *,
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> KazooClient:
    """A started kazoo client rooted at the connect string's chroot."""
    hosts, chroot = split_connect_string(connect_string)
    if chroot is not None:
        root = _start(hosts, session_timeout_s, connect_timeout_s)
        try:
            root.ensure_path(chroot)
        finally:
            root.stop()
            root.close()
    return _start(hosts + (chroot or ""), session_timeout_s, connect_timeout_s)


def _start(hosts: str, session_timeout_s: float, connect_timeout_s: float) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=session_timeout_s)
    try:
        with translated():
            client.start(timeout=connect_timeout_s)
    except ZooKeeperError as exc:
        client.close()
        raise ZooKeeperError(
            f"could not reach ZooKeeper at {hosts} within {connect_timeout_s:.0f} s"
        ) from exc
    return client
