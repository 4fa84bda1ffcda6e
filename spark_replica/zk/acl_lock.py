"""Locking the znodes a cluster made before zookeeper.set.acl was on (Kafka's
`zookeeper-security-migration --zookeeper.acl=secure`).

With zookeeper.set.acl every znode is made with its creator's ACL; what was made before
(with the setting off, or by a replog whose controller packed partition states with the
open ACL) stays open to anyone who reaches ZooKeeper until it is locked here. Only
znodes that let the world do more than read are changed, to the ACL the session gives a
new znode (its identity may do anything, everyone may read), or to its identity alone
for the secrets (SCRAM credentials), which are not world-readable.

The tree is walked one level at a time, each level's reads and ACL changes pipelined, so
a cluster of thousands of partitions costs a round trip per level, not per znode. The
walk covers the whole chroot when the cluster has one, else only the cluster's own
top-level znodes (znodes.CLUSTER_ROOTS), so that an ensemble shared with other
applications keeps their ACLs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL, Permissions

from spark_replica.errors import ConfigError, ZnodeMissingError, ZnodeNoAuthError
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import children_if_present, translated
from spark_replica.zk.security_store import FAKE_KEY_PATH, USERS_PATH, private_acl

_WORLD = ("world", "anyone")


@dataclass
class LockOutcome:
    locked: list[str] = field(default_factory=list)
    # Open to the world but not to be changed by this session (it lacks ADMIN on them).
    refused: list[str] = field(default_factory=list)


def world_may_change(acl: Sequence[ACL]) -> bool:
    """True if the ACL gives anyone (world:anyone) more than READ."""
    return any(
        (entry.id.scheme, entry.id.id) == _WORLD and entry.perms & ~Permissions.READ
        for entry in acl
    )


def is_secret(path: str) -> bool:
    """The SCRAM credentials and the key of unknown users' fake ones: readable by the
    cluster's identity alone, as security_store makes them."""
    return path in (USERS_PATH, FAKE_KEY_PATH) or path.startswith(USERS_PATH + "/")


def lock_cluster_znodes(zk: KazooClient) -> LockOutcome:
    """Give every znode of the cluster that the world may change the session's ACL."""
    own = private_acl(zk)
    if own is None:
        raise ConfigError(
            "locking znodes needs a ZooKeeper login: zookeeper.digest=USER:PASSWORD, the "
            "brokers' own, in --command-config (or the cluster directory's admin.properties)"
        )
    shared = list(zk.default_acl)
    outcome = LockOutcome()
    level = ["/"] if zk.chroot else [f"/{name}" for name in _cluster_roots(zk)]
    while level:
        with translated():
            acls = [zk.get_acls_async(path) for path in level]
            children = [zk.get_children_async(path) for path in level]
        unlocked = [path for path, answer in zip(level, acls, strict=True) if _is_open(answer)]
        with translated():
            changes = [
                zk.set_acls_async(path, own if is_secret(path) else shared) for path in unlocked
            ]
        for path, change in zip(unlocked, changes, strict=True):
            try:
                with translated():
                    change.get()
                outcome.locked.append(path)
            except ZnodeNoAuthError:
                outcome.refused.append(path)
            except ZnodeMissingError:
                continue  # deleted meanwhile
        level = [
            f"{path.rstrip('/')}/{child}"
            for path, answer in zip(level, children, strict=True)
            for child in sorted(_settled(answer) or [])
        ]
    return outcome


def _cluster_roots(zk: KazooClient) -> list[str]:
    return sorted(name for name in children_if_present(zk, "/") if name in znodes.CLUSTER_ROOTS)


def _settled(answer: Any) -> Any:
    """A pipelined call's value; None for a znode gone meanwhile or closed to this session."""
    try:
        with translated():
            return answer.get()
    except (ZnodeMissingError, ZnodeNoAuthError):
        return None


def _is_open(answer: Any) -> bool:
    found = _settled(answer)
    return found is not None and world_may_change(found[0])
