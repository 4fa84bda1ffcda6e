"""Producer ids that never repeat across brokers, handed out in blocks claimed in ZooKeeper.

As in Kafka, `/latest_producer_id_block` holds the last block claimed by any broker::

    {"version": 1, "broker": 2, "block_start": 1000, "block_end": 1999}

A broker claims the next block with a conditional set on the znode's version; losing
the race to another broker just means reading the new block and trying again. Ids of a
claimed block that a broker never hands out (it restarts) are skipped, never reused:
reuse could let a new producer inherit the sequence state of an old one.

An InitProducerId naming an existing producer id and epoch asks for the next epoch, which
fences every batch of the older one. KIP-360's rule decides (`next_identity`): the epoch
is bumped only when the one named is the current one, so a client holding a stale or
someone else's identity cannot fence the producer that owns it; anything else gets a new
id, which fences nobody (what Kafka gives every non-transactional producer). There is no
transaction coordinator to say which epoch is current: the broker that handed out an id
or its last epoch remembers it (ProducerIdManager, up to MAX_REMEMBERED_PRODUCERS ids,
in memory), and an id it does not remember gets a new id too.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from kazoo.client import KazooClient

from brokerd.core.context import BrokerContext
from spark_replica.errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    ZnodeExistsError,
    ZnodeMissingError,
    ZnodeVersionError,
    ZooKeeperError,
)
from spark_replica.records import NO_PRODUCER_ID
from spark_replica.zk.kazoo_errors import translated

LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000
VERSION = 1
MAX_PRODUCER_EPOCH = 2**15 - 1
# The epoch a request without a producer id carries (with NO_PRODUCER_ID).
NO_PRODUCER_EPOCH = -1
# The ids whose current epoch a broker remembers; the least recently used is forgotten
# first (its next bump then gets a new id, which is safe).
MAX_REMEMBERED_PRODUCERS = 50_000


def next_identity(producer_id: int, epoch: int, current_epoch: int | None) -> tuple[int, int]:
    """KIP-360: (producer_id, epoch + 1) when `epoch` is the id's current epoch and can
    grow; otherwise (NO_PRODUCER_ID, 0), meaning a new producer id with epoch 0.
    `current_epoch` is None when the id's current epoch is not known here."""
    if current_epoch is not None and epoch == current_epoch and epoch < MAX_PRODUCER_EPOCH:
        return producer_id, epoch + 1
    return NO_PRODUCER_ID, 0


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
    """Hands out this broker's producer ids one by one, claiming a new block when needed,
    and remembers the current epoch of each id it handed out or bumped.

    Used from the event loop; the lock keeps two concurrent requests from both claiming
    a block (harmless but wasteful), handing out the same id, or bumping one epoch twice.
    """

    def __init__(self, zk: KazooClient, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        self._lock = asyncio.Lock()
        self._epochs: OrderedDict[int, int] = OrderedDict()  # producer id -> current epoch

    async def init(self, producer_id: int, epoch: int) -> tuple[int, int]:
        """The identity for an InitProducerId: a new id for (NO_PRODUCER_ID, -1), else
        the next epoch of `producer_id` if `epoch` is its current one, else a new id."""
        async with self._lock:
            if producer_id != NO_PRODUCER_ID:
                bumped_id, bumped_epoch = next_identity(
                    producer_id, epoch, self._epochs.get(producer_id)
                )
                if bumped_id != NO_PRODUCER_ID:
                    self._remember(bumped_id, bumped_epoch)
                    return bumped_id, bumped_epoch
            fresh = await self._new_id()
            self._remember(fresh, 0)
            return fresh, 0

    async def _new_id(self) -> int:
        if self._block is None or self._next_id > self._block.block_end:
            self._block = await asyncio.to_thread(claim_block, self._zk, self._broker_id)
            self._next_id = self._block.block_start
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def _remember(self, producer_id: int, epoch: int) -> None:
        self._epochs[producer_id] = epoch
        self._epochs.move_to_end(producer_id)
        while len(self._epochs) > MAX_REMEMBERED_PRODUCERS:
            self._epochs.popitem(last=False)


# One id allocator per ZooKeeper client, i.e. per broker: its current block lives here.
_managers: WeakKeyDictionary[KazooClient, ProducerIdManager] = WeakKeyDictionary()


async def init_producer(ctx: BrokerContext, producer_id: int, epoch: int) -> tuple[int, int]:
    """The (producer id, epoch) InitProducerId answers on either listener: a fresh id for
    (-1, -1), else the next epoch of the one named (see ProducerIdManager.init)."""
    new_producer = producer_id == NO_PRODUCER_ID
    if new_producer != (epoch == NO_PRODUCER_EPOCH) or (
        not new_producer and (producer_id < 0 or epoch < 0)
    ):
        raise InvalidRequestError(
            f"producer id {producer_id} with epoch {epoch}: send "
            "both -1 for a new producer, or both of an existing one to bump its epoch"
        )
    if ctx.zk is None:
        raise BrokerNotAvailableError("the broker is not connected to ZooKeeper yet")
    manager = _managers.get(ctx.zk)
    if manager is None:
        manager = _managers[ctx.zk] = ProducerIdManager(ctx.zk, ctx.config.broker_id)
    try:
        return await manager.init(producer_id, epoch)
    except ZooKeeperError as exc:
        raise BrokerNotAvailableError(f"cannot claim a producer id block: {exc}") from exc


async def allocate_producer_id(ctx: BrokerContext) -> int:
    """A fresh producer id from the same allocator, for the transaction coordinator: a
    transactional id's producer id is one of the broker's like any other."""
    producer_id, _ = await init_producer(ctx, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    return producer_id
