"""A byte range of a file, written to a socket as it is stored.

A broker answers a consumer's fetch with log segment bytes exactly as stored. Handing
the connection a range of the file, rather than bytes read from it, spares reading the
range into memory and, on a plaintext connection on asyncio's loop, lets sendfile(2)
copy it from the page cache to the socket (transport.py). Elsewhere (TLS, uvloop) the
range is read when it is written, still with no copy beyond the one the read makes.

A region holds a descriptor of its own (a duplicate of the segment's), so retention or a
topic deletion that closes and unlinks the segment in the meantime does not change what
is sent: the inode lives while the region does. The descriptor is closed when the region
is closed or dropped, whichever comes first.

A file can shrink under a region (a log truncated after an unclean election): reading
or sending then comes up short, which `ShortRegionError` reports, and the connection the
frame was going to must be closed, since its size prefix is already on the wire.
"""

from __future__ import annotations

import os
import weakref

from spark_replica.errors import ReplogError


class ShortRegionError(ReplogError):
    """The file ended before the region did: it was truncated after the region was taken."""


class FileRegion:
    """`count` bytes of a file from `offset`, by a descriptor of its own."""

    __slots__ = ("__weakref__", "_close", "_fd", "count", "offset")

    def __init__(self, fd: int, offset: int, count: int) -> None:
        if offset < 0 or count <= 0:
            raise ValueError(f"a file region needs offset >= 0 and count > 0, not {offset}/{count}")
        own = os.dup(fd)
        self._fd = own
        self._close = weakref.finalize(self, os.close, own)
        self.offset = offset
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"FileRegion(offset={self.offset}, count={self.count})"

    def fileno(self) -> int:
        """The region's own descriptor, for sendfile; it shares the file's position."""
        return self._fd

    def read(self) -> bytes:
        """The region's bytes, read now (ShortRegionError if the file is shorter now)."""
        data = os.pread(self._fd, self.count, self.offset)
        if len(data) != self.count:
            raise ShortRegionError(
                f"a stored range of {self.count} bytes at {self.offset} holds only "
                f"{len(data)} now: the log was truncated under it"
            )
        return data

    def close(self) -> None:
        """Close the descriptor now (idempotent); the region can no longer be read."""
        self._close()

    @property
    def closed(self) -> bool:
        return not self._close.alive
