"""Producer ids that never repeat across brokers, handed out in blocks claimed in ZooKeeper.

As in Kafka, `/latest_producer_id_block` holds the last block claimed by any broker::

    {"version": 1, "broker": 2, "block_start": 1000, "block_end": 1999}

A broker claims the next block with a conditional set on the znode's version; losing
the race to another broker just means reading the new block and trying again. Ids of a
claimed block that a broker never hands out (it restarts) are skipped, never reused:
reuse could let a new producer inherit the sequence state of an old one.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from kazoo.client import KazooClient

from spark_replica.errors import (
    ZnodeExistsError,
    ZnodeMissingError,
    ZnodeVersionError,
    ZooKeeperError,
)
from spark_replica.zk.kazoo_errors import translated

LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000
VERSION = 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """The ids [block_start, block_end] (both included), claimed by `broker`."""

    broker: int
    block_start: int
    block_end: int

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": VERSION,
                "broker": self.broker,
                "block_start": self.block_start,
                "block_end": self.block_end,
            },
            separators=(",", ":"),
        ).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        try:
            value = json.loads(data.decode("utf-8"))
            if value["version"] != VERSION:
                raise ZooKeeperError(
                    f"{LATEST_PRODUCER_ID_BLOCK_PATH} has version {value['version']}, "
                    f"expected {VERSION}"
                )
            return cls(int(value["broker"]), int(value["block_start"]), int(value["block_end"]))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ZooKeeperError(
                f"{LATEST_PRODUCER_ID_BLOCK_PATH} does not hold a producer id block: {exc}"
            ) from exc


def claim_block(zk: KazooClient, broker_id: int) -> ProducerIdBlock:
    """Claim the block after the latest one for `broker_id`; blocking (run off the loop)."""
    while True:
        try:
            with translated():
                data, stat = zk.get(LATEST_PRODUCER_ID_BLOCK_PATH)
        except ZnodeMissingError:
            block = ProducerIdBlock(broker_id, 0, BLOCK_SIZE - 1)
            try:
                with translated():
                    zk.create(LATEST_PRODUCER_ID_BLOCK_PATH, block.encode(), makepath=True)
            except ZnodeExistsError:
                continue
            return block
        latest = ProducerIdBlock.decode(data)
        block = ProducerIdBlock(broker_id, latest.block_end + 1, latest.block_end + BLOCK_SIZE)
        try:
            with translated():
                zk.set(LATEST_PRODUCER_ID_BLOCK_PATH, block.encode(), version=stat.version)
        except ZnodeVersionError:
            continue
        return block


class ProducerIdManager:
    """Hands out this broker's producer ids one by one, claiming a new block when needed.

    Used from the event loop; the lock keeps two concurrent requests from both claiming
    a block (harmless but wasteful) or handing out the same id.
    """

    def __init__(self, zk: KazooClient, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._block is None or self._next_id > self._block.block_end:
                self._block = await asyncio.to_thread(claim_block, self._zk, self._broker_id)
                self._next_id = self._block.block_start
            producer_id = self._next_id
            self._next_id += 1
            return producer_id
