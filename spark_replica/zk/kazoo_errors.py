"""The one place where kazoo's exceptions become replog's typed errors.

Everything that talks to ZooKeeper through kazoo wraps its calls in `translated()` (or
reads a multi-op's results with `failures()`) and catches only the errors of
spark_replica.errors: ZnodeMissingError, ZnodeExistsError, ZnodeVersionError,
ZnodeNoAuthError (the znode's ACL refuses this session),
ZooKeeperConnectionError (retriable: the outcome of a write in flight is unknown), and
ZooKeeperError for the rest. kazoo's own recipes (watches) keep kazoo's exceptions
inside kazoo. For the common read where a missing znode is an answer rather than an
error, read_if_present and children_if_present return None or nothing instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from spark_replica.errors import (
    ZnodeExistsError,
    ZnodeMissingError,
    ZnodeNoAuthError,
    ZnodeVersionError,
    ZooKeeperConnectionError,
    ZooKeeperError,
)

_TRANSLATIONS: tuple[tuple[type[Exception], type[ZooKeeperError]], ...] = (
    (NoNodeError, ZnodeMissingError),
    (NodeExistsError, ZnodeExistsError),
    (BadVersionError, ZnodeVersionError),
    (NoAuthError, ZnodeNoAuthError),
    (ConnectionLoss, ZooKeeperConnectionError),
    (ConnectionClosedError, ZooKeeperConnectionError),
    (SessionExpiredError, ZooKeeperConnectionError),
    (KazooTimeoutError, ZooKeeperConnectionError),
)


def error_of_code(code: int) -> ZooKeeperError | None:
    """replog's error for an error code in a ZooKeeper answer; None for NONODE, the
    answer "no such znode" of a read (multi_read.py reads answers kazoo does not)."""
    if code == NoNodeError.code:
        return None
    return translate(EXCEPTIONS[code]())


def translate(exc: BaseException) -> ZooKeeperError:
    """replog's error for a kazoo exception (ZooKeeperError when it has no closer one)."""
    for kazoo_type, replog_type in _TRANSLATIONS:
        if isinstance(exc, kazoo_type):
            return replog_type(f"ZooKeeper: {type(exc).__name__} {exc}".strip())
    return ZooKeeperError(f"ZooKeeper: {exc!r}")


@contextmanager
def translated() -> Iterator[None]:
    """Raise kazoo's exceptions from the block as replog's, the original as the cause."""
    try:
        yield
    except (KazooException, KazooTimeoutError) as exc:
        raise translate(exc) from exc


def failures(results: Sequence[object]) -> list[ZooKeeperError | None]:
    """A multi-op's results, one per operation: its error, or None if it succeeded or was
    only rolled back because another operation failed."""
    return [
        translate(r) if isinstance(r, Exception) and not isinstance(r, RolledBackError) else None
        for r in results
    ]


def read_if_present(zk: KazooClient, path: str) -> tuple[bytes, ZnodeStat] | None:
    """A znode's data and stat, or None if it does not exist (blocking)."""
    try:
        with translated():
            return zk.get(path)
    except ZnodeMissingError:
        return None


def children_if_present(zk: KazooClient, path: str) -> list[str]:
    """A znode's children, none if the znode does not exist (blocking)."""
    try:
        with translated():
            return zk.get_children(path)
    except ZnodeMissingError:
        return []
