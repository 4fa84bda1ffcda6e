"""Opening a kazoo session from a connect string, chroot included.

A connect string is ``host:port[,host:port...][/chroot]``. kazoo applies the chroot
itself but needs the chroot znode to exist for creates, so a session that writes creates
it first through a session without the chroot. A session that only looks does not
(`create_chroot=False`): the chroot would carry that session's ACL, the open one for an
anonymous look before the first broker of a secured cluster ran, and whoever may change
the cluster's root may delete /controller or plant znodes beside the cluster's own.

With a digest login (``user:password``, zookeeper.set.acl) the session authenticates and
creates znodes that only that identity may change while everyone may read them, as
Kafka's brokers do with zookeeper.set.acl=true. Nodes holding secrets narrow that further
(spark_replica/zk/security_store.py).
"""

from __future__ import annotations

import warnings

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry
from kazoo.security import ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl

from spark_replica.errors import ConfigError, ZooKeeperError
from spark_replica.zk.kazoo_errors import translated

DEFAULT_SESSION_TIMEOUT_S = 10.0
DEFAULT_CONNECT_TIMEOUT_S = 15.0
# Between rounds over the ensemble's hosts kazoo backs off exponentially, by default up
# to an hour: after a quorum outage of a few seconds a client would sleep past its
# session timeout and lose a session the returning quorum still held. ZooKeeper's own
# client waits at most a second between rounds; so do we (less for short sessions).
MAX_RECONNECT_DELAY_S = 1.0

# kazoo warns on start when the chroot is missing; connect() makes it for sessions that
# write, and one that only reads (create_chroot=False) finds nothing there, as it should.
warnings.filterwarnings("ignore", message="No chroot path exists", module="kazoo.client")


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


def split_digest(digest: str) -> tuple[str, str]:
    """``user:password`` -> (user, password); ConfigError naming the setting otherwise."""
    user, colon, password = digest.partition(":")
    if not colon or not user or not password:
        raise ConfigError("zookeeper.digest must be USER:PASSWORD")
    return user, password


def digest_acls(digest: str) -> list[ACL]:
    """The default ACL of a digest-authenticated session: its identity may do anything,
    everyone else may only read."""
    user, password = split_digest(digest)
    return [make_digest_acl(user, password, all=True), *READ_ACL_UNSAFE]


def connect(
    connect_string: str,
    *,
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    digest: str | None = None,
    create_chroot: bool = True,
) -> KazooClient:
    """A started kazoo client rooted at the connect string's chroot (made where missing
    unless `create_chroot` is False: for sessions that only read)."""
    hosts, chroot = split_connect_string(connect_string)
    if chroot is not None and create_chroot:
        root = _start(hosts, session_timeout_s, connect_timeout_s, digest)
        try:
            root.ensure_path(chroot)
        finally:
            root.stop()
            root.close()
    return _start(hosts + (chroot or ""), session_timeout_s, connect_timeout_s, digest)


def reconnect_retry(session_timeout_s: float) -> KazooRetry:
    """Retry forever, never waiting long enough between rounds to outlive the session."""
    return KazooRetry(
        max_tries=-1,
        delay=0.1,
        backoff=2,
        max_delay=min(MAX_RECONNECT_DELAY_S, session_timeout_s / 4),
    )


def _start(
    hosts: str, session_timeout_s: float, connect_timeout_s: float, digest: str | None
) -> KazooClient:
    retry = reconnect_retry(session_timeout_s)
    if digest is None:
        client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            default_acl=OPEN_ACL_UNSAFE,
            connection_retry=retry,
        )
    else:
        client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            auth_data=[("digest", digest)],
            default_acl=digest_acls(digest),
            connection_retry=retry,
        )
    try:
        with translated():
            client.start(timeout=connect_timeout_s)
    except ZooKeeperError as exc:
        client.close()
        raise ZooKeeperError(
            f"could not reach ZooKeeper at {hosts} within {connect_timeout_s:.0f} s"
        ) from exc
    return client
