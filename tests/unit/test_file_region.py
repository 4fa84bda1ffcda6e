"""Stored ranges sent as they are: a FileRegion, the log's read of them, and the frame
stream that sends them (by sendfile on asyncio's loop, read and written on uvloop).

What must hold: the bytes sent are exactly the bytes the log read would have returned;
a range outlives the segment it came from (retention may delete it before the answer is
written); a range cut short by truncation ends the connection rather than sending a
frame shorter than its size prefix; every descriptor a range takes is given back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import uvloop

from brokerd.log import Log, LogConfig
from spark_replica.errors import ConnectionLostError
from spark_replica.file_region import FileRegion, ShortRegionError
from spark_replica.records import build_batch
from spark_replica.transport import FrameStream, open_frame_stream, serve_frame_streams
from spark_replica.wire.native.frames import SIZE

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def test_a_region_reads_its_range_and_outlives_the_file_it_came_from(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    path.write_bytes(bytes(range(256)) * 4)
    fd = os.open(path, os.O_RDONLY)
    region = FileRegion(fd, 100, 300)
    os.close(fd)
    path.unlink()
    assert len(region) == 300
    assert region.read() == (bytes(range(256)) * 4)[100:400]
    region.close()
    region.close()
    assert region.closed


def test_a_region_cut_short_by_truncation_says_so(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 1000)
    fd = os.open(path, os.O_RDWR)
    region = FileRegion(fd, 500, 400)
    os.ftruncate(fd, 600)
    os.close(fd)
    with pytest.raises(ShortRegionError, match="holds only 100"):
        region.read()


def test_a_dropped_region_gives_its_descriptor_back(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 10)
    fd = os.open(path, os.O_RDONLY)
    regions = [FileRegion(fd, 0, 10) for _ in range(20)]
    ours = os.fstat(fd)
    numbers = [region.fileno() for region in regions]
    assert len(set(numbers)) == 20 and fd not in numbers
    del regions
    os.close(fd)
    for number in numbers:
        # Closed, or reused since by something else: no longer a descriptor of our file.
        try:
            now = os.fstat(number)
        except OSError:
            continue
        assert (now.st_dev, now.st_ino) != (ours.st_dev, ours.st_ino)


@pytest.mark.parametrize("bad", [(-1, 10), (0, 0)])
def test_a_region_needs_a_real_range(tmp_path: Path, bad: tuple[int, int]) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"x")
    fd = os.open(path, os.O_RDONLY)
    with pytest.raises(ValueError, match="offset >= 0 and count > 0"):
        FileRegion(fd, *bad)
    os.close(fd)


def filled_log(path: Path, batches: int, values_per_batch: int) -> Log:
    log = Log.open(path / "topic-0", LogConfig(segment_bytes=200_000), now_ms=0)
    for i in range(batches):
        values = [f"{i:04d}-{j:04d}" * 10 for j in range(values_per_batch)]
        log.append(build_batch(values), assign_offsets=True, now_ms=0)
    return log


def joined(stored: list[bytes | FileRegion]) -> bytes:
    return b"".join(part.read() if isinstance(part, FileRegion) else part for part in stored)


def test_the_logs_stored_read_is_its_read_with_large_ranges_left_in_the_files(
    tmp_path: Path,
) -> None:
    log = filled_log(tmp_path, batches=40, values_per_batch=200)
    assert log.segment_count > 2
    end = log.log_end_offset
    for start, max_bytes in [(0, 10**7), (1234, 300_000), (end - 1, 10**7), (0, 1)]:
        stored = log.read_stored(start, max_bytes, max_offset=end, region_bytes=64 * 1024)
        assert joined(stored) == log.read(start, max_bytes, max_offset=end)
    stored = log.read_stored(0, 10**7, max_offset=end, region_bytes=64 * 1024)
    assert len(stored) == log.segment_count
    assert all(isinstance(part, FileRegion) for part in stored)
    small = log.read_stored(0, 10**7, max_offset=end, region_bytes=10**9)
    assert all(isinstance(part, bytes) for part in small)
    assert log.read_stored(end, 10**7, max_offset=end, region_bytes=1) == []
    log.close()


def test_a_stored_read_survives_retention_deleting_its_segments(tmp_path: Path) -> None:
    log = filled_log(tmp_path, batches=40, values_per_batch=200)
    expected = log.read(0, 10**7, max_offset=log.log_end_offset)
    stored = log.read_stored(0, 10**7, max_offset=log.log_end_offset, region_bytes=1)
    log.delete()
    assert joined(stored) == expected


def run_on(loop_name: str, main: Callable[[], Awaitable[None]]) -> None:
    loop = LOOPS[loop_name]()
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 20))
    finally:
        loop.close()


async def serve_once(
    answer: Callable[[FrameStream], Awaitable[None]],
) -> tuple[FrameStream, asyncio.Future[BaseException | None]]:
    """A server that writes one answer on its first connection; the client's stream and
    what the server's write raised (None if nothing)."""
    outcome: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def write(stream: FrameStream) -> None:
        try:
            await answer(stream)
        except Exception as exc:
            outcome.set_result(exc)
        else:
            outcome.set_result(None)
        finally:
            stream.transport.close()

    def on_stream(stream: FrameStream) -> None:
        asyncio.get_running_loop().create_task(write(stream))

    server = await serve_frame_streams("127.0.0.1", 0, 64 * 1024**2, 64, on_stream)
    port = server.sockets[0].getsockname()[1]
    client = await open_frame_stream("127.0.0.1", port, 64 * 1024**2, 5.0)
    server.close()
    return client, outcome


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_frame_with_stored_ranges_arrives_whole(tmp_path: Path, loop_name: str) -> None:
    content = os.urandom(3 * 1024**2)
    path = tmp_path / "segment"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    ranges = [(0, 1024**2), (1024**2 + 7, 1024**2), (3 * 1024**2 - 10, 10)]
    regions = [FileRegion(fd, start, count) for start, count in ranges]

    async def answer(stream: FrameStream) -> None:
        body = [b"head", *regions, b"tail"]
        await stream.write([SIZE.pack(sum(len(part) for part in body)), *body])

    async def main() -> None:
        client, outcome = await serve_once(answer)
        frame = await client.read_frame()
        assert await outcome is None
        expected = b"head" + b"".join(content[s : s + c] for s, c in ranges) + b"tail"
        assert bytes(frame) == expected
        client.transport.close()
        await asyncio.sleep(0.05)  # the transports' close callbacks run before the loop ends

    run_on(loop_name, main)
    # asyncio's sendfile leaves the shared file position where the last range ended;
    # uvloop has no sendfile, so its ranges are read with pread, which never moves it.
    position = os.lseek(fd, 0, os.SEEK_CUR)
    assert position == (sum(ranges[-1]) if loop_name == "asyncio" else 0)
    os.close(fd)
    assert all(region.closed for region in regions), "each range is closed once sent"


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_range_truncated_before_it_is_sent_ends_the_connection(
    tmp_path: Path, loop_name: str
) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"r" * 200_000)
    fd = os.open(path, os.O_RDWR)

    async def answer(stream: FrameStream) -> None:
        region = FileRegion(fd, 100_000, 100_000)
        os.ftruncate(fd, 150_000)
        await stream.write([SIZE.pack(len(region)), region])

    async def main() -> None:
        client, outcome = await serve_once(answer)
        error = await outcome
        assert isinstance(error, ConnectionLostError)
        assert "truncated" in str(error)
        with pytest.raises(ConnectionLostError):
            await client.read_frame()
        client.transport.close()
        await asyncio.sleep(0.05)  # the transports' close callbacks run before the loop ends

    run_on(loop_name, main)
    os.close(fd)
