"""Reading many znodes in a few requests: ZooKeeper's multiRead (3.6 and newer).

A controller taking over a cluster of 10,000 partitions reads 10,000 state znodes.
Pipelined single reads already cost one round trip, but kazoo spends a tenth of a
millisecond of its connection thread on every request and answer, so 10,000 of them
take over a second of a 2-core machine. One multiRead carries up to READS_PER_REQUEST
reads and comes back as one answer, which removes that per-request work.

kazoo has no multiRead, so MultiReadRequest is a request of its own in kazoo's request
shape (a `type`, `serialize()` and `deserialize(buffer, offset)`), sent through kazoo's
one entry point for requests, `KazooClient._call`, like its own requests are.

The wire format is ZooKeeper's MultiOperationRecord of GetData operations, each behind a
MultiHeader (type, done, err), ending with the header (-1, true, -1); the answer is a
MultiResponse in the same shape, each read's (data, stat) or its error code.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat

from spark_replica.errors import MultiReadError, ZooKeeperError
from spark_replica.zk.kazoo_errors import error_of_code, translated

MULTI_READ = 22  # ZooDefs.OpCode.multiRead
GET_DATA = 4  # ZooDefs.OpCode.getData
ERROR = -1  # ZooDefs.OpCode.error: an operation that failed
# Answers stay well under a megabyte (a partition state with its stat is ~250 bytes).
READS_PER_REQUEST = 1000

_HEADER = struct.Struct("!i?i")  # MultiHeader: type, done, err
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")  # czxid, mzxid, ctime, mtime, version, ... pzxid

Found = tuple[bytes, ZnodeStat] | None


class MultiReadRequest:
    """One multiRead of GetData operations, in the shape kazoo's connection sends."""

    type = MULTI_READ

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)

    def serialize(self) -> bytes:
        out = bytearray()
        for path in self.paths:
            encoded = path.encode()
            out += _HEADER.pack(GET_DATA, False, -1)
            out += _INT.pack(len(encoded))
            out += encoded
            out += b"\x00"  # watch: false (multiRead sets no watches)
        out += _HEADER.pack(-1, True, -1)
        return bytes(out)

    def deserialize(self, buffer: bytes, offset: int) -> list[Found | ZooKeeperError]:
        """Each read's (data, stat), None for a missing znode, or replog's error."""
        results: list[Found | ZooKeeperError] = []
        while True:
            kind, done, err = _HEADER.unpack_from(buffer, offset)
            offset += _HEADER.size
            if done:
                break
            if kind == GET_DATA:
                (length,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                data = b"" if length < 0 else bytes(buffer[offset : offset + length])
                offset += max(length, 0)
                stat = ZnodeStat._make(_STAT.unpack_from(buffer, offset))
                offset += _STAT.size
                results.append((data, stat))
            elif kind == ERROR:
                offset += _INT.size  # ErrorResponse repeats the header's err
                results.append(error_of_code(err))
            else:
                raise MultiReadError(f"unexpected operation type {kind} in a multiRead answer")
        if len(results) != len(self.paths):
            raise MultiReadError(f"{len(results)} answers to {len(self.paths)} reads")
        return results


def get_many(zk: KazooClient, paths: Sequence[str]) -> list[Found]:
    """Each znode's data and stat (None where it does not exist), in one round trip:
    every multiRead is sent before the first answer is waited for."""
    prefix = zk.chroot or ""
    chunks = [paths[i : i + READS_PER_REQUEST] for i in range(0, len(paths), READS_PER_REQUEST)]
    pending = []
    for chunk in chunks:
        answer = zk.handler.async_result()
        zk._call(MultiReadRequest([prefix + path for path in chunk]), answer)
        pending.append(answer)
    found: list[Found] = []
    for answer in pending:
        with translated():
            results = answer.get()
        for result in results:
            if isinstance(result, ZooKeeperError):
                raise result
            found.append(result)
    return found
