"""Multi-ops of thousands of operations, built without kazoo's per-operation overhead.

A broker failover at 10,000 partitions writes 10,000 partition states in 20 multi-ops.
kazoo's TransactionRequest normalizes and checks each path and builds a request object
per operation, then serializes them one by one: about 300 ms of a 2-core machine for
10,000 writes, most of a failover's time. MultiWrite packs each operation's bytes
directly (paths are the caller's, already absolute and normal) and is sent through
kazoo's one entry point for requests, `KazooClient._call`, as kazoo's own
Transaction is; its answer is read by kazoo's Transaction (a list with a result or an
exception per operation, as `TransactionRequest.commit_async` gives).

Creates carry the ACL the session gives every create (`for_session`): with
zookeeper.set.acl the cluster's identity may change the znode and everyone else may only
read it, as for everything the session creates through kazoo. The ACL is packed once per
multi-op, in kazoo's encoding, rather than once per operation.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.serialization import Transaction
from kazoo.security import ACL, OPEN_ACL_UNSAFE

MULTI = 14  # ZooDefs.OpCode.multi
CREATE = 1
SET_DATA = 5
CHECK = 13

_HEADER = struct.Struct("!i?i")  # MultiHeader: type, done, err
_INT = struct.Struct("!i")
_DONE = _HEADER.pack(-1, True, -1)
_PERSISTENT = _INT.pack(0)  # CreateMode.PERSISTENT
_NULL = _INT.pack(-1)  # how jute (and kazoo) write an empty string


def _jute_string(value: str) -> bytes:
    encoded = value.encode()
    return _INT.pack(len(encoded)) + encoded if encoded else _NULL


def pack_acl(acl: Sequence[ACL]) -> bytes:
    """An ACL list as a create request carries it: count, then perms, scheme, id each."""
    entries = [
        _INT.pack(entry.perms) + _jute_string(entry.id.scheme) + _jute_string(entry.id.id)
        for entry in acl
    ]
    return _INT.pack(len(entries)) + b"".join(entries)


class MultiWrite:
    """The operations of one multi-op, in order; `send` sends them (not blocking)."""

    type = MULTI

    def __init__(self, chroot: str, acl: Sequence[ACL]) -> None:
        """`acl` is given every znode `create` makes: there is no default, so that no
        caller ends up with the open ACL by forgetting one (`for_session` gives the right
        one)."""
        self._chroot = chroot
        self._acl = pack_acl(acl)
        self._parts: list[bytes] = []
        self.operations = 0

    @classmethod
    def for_session(cls, zk: KazooClient) -> MultiWrite:
        """A multi-op whose paths are under the session's chroot and whose creates get the
        ACL the session's own creates get (its default ACL; kazoo's open ACL without one)."""
        return cls(zk.chroot or "", zk.default_acl or OPEN_ACL_UNSAFE)

    def _string(self, path: str) -> bytes:
        encoded = (self._chroot + path).encode()
        return _INT.pack(len(encoded)) + encoded

    def check(self, path: str, version: int) -> None:
        self._parts += (_HEADER.pack(CHECK, False, -1), self._string(path), _INT.pack(version))
        self.operations += 1

    def set_data(self, path: str, data: bytes, version: int) -> None:
        self._parts += (
            _HEADER.pack(SET_DATA, False, -1),
            self._string(path),
            _INT.pack(len(data)),
            data,
            _INT.pack(version),
        )
        self.operations += 1

    def create(self, path: str, data: bytes) -> None:
        """A persistent znode with this multi-op's ACL."""
        self._parts += (
            _HEADER.pack(CREATE, False, -1),
            self._string(path),
            _INT.pack(len(data)),
            data,
            self._acl,
            _PERSISTENT,
        )
        self.operations += 1

    def serialize(self) -> bytes:
        return b"".join(self._parts) + _DONE

    @staticmethod
    def deserialize(buffer: bytes, offset: int) -> list[Any]:
        return list(Transaction.deserialize(buffer, offset))

    def send(self, zk: KazooClient) -> Any:
        """The answer to wait for: per operation a result (a created path, a set's stat,
        True) or kazoo's exception, as kazoo's own transactions answer."""
        answer = zk.handler.async_result()
        zk._call(self, answer)
        return answer
