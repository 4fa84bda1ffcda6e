"""Kafka's Fetch: the same partitions and long poll as replog's, answered in v2 batches.

Reads are replog's (whole batches below the HW, from the batch holding the fetch
offset; brokerd/core/fetch.py waits for min_bytes or max_wait, counting stored bytes).
Once the answer is final its stored batches are converted to Kafka batches with the
same base offset, leader epoch, producer fields and timestamps (fetch_convert.py: the
fetch limits applied to the converted bytes, the first batch always sent), compressed
with the codec the topic's compression.type names or, for "producer", the one each
batch was produced with (zstd only from Fetch v10, whose clients read it). Converted
batches go through a cache (fetch_cache.py) that every consumer of this broker shares;
conversions that are not cheap run on CONVERT_WORKERS worker threads, so a large batch
never holds the event loop and at most that many are expanded in memory at once. One
cache and one pool per process: a process is one broker.

Every partition's records field is a (maybe empty) record set, never null, errors
included: librdkafka refuses a null one ("invalid MessageSetSize -1"), and an
OFFSET_OUT_OF_RANGE it cannot read would never let auto.offset.reset run. That answer
carries the log start offset and the HW, as the replog listener's does.

IsolationLevel 1 (read_committed) reads stop at the last stable offset, and the answer
lists the aborted transactions of the range it returns (producer id, first offset), as
Kafka's does: its clients drop those records, and skip the control batches (markers),
which are sent as stored, as Kafka sends them. Every answer's LastStableOffset is the
partition's LSO, read_uncommitted ones included. There are no fetch sessions: every
fetch names its partitions and gets session id 0, which Kafka's clients take as "full
fetches from now on". Replicas fetch over the replog listener,
never here: a fetch with a replica id is refused. The converted bytes sent are counted
per topic (BytesOut) once the answer is final.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from brokerd.core.authorization import authorize_topic, topic_denied
from brokerd.core.context import BrokerContext
from brokerd.core.fetch import FETCH_MAX_BYTES, long_poll, partition_to_read
from brokerd.core.isolation import aborted_in
from brokerd.core.partitions import serve_partition
from brokerd.kafka.fetch_cache import FetchCache
from brokerd.kafka.fetch_convert import Conversion, StoredRead
from brokerd.kafka.request import KafkaRequest
from brokerd.replication.partition import Partition
from spark_replica.errors import BrokerResponseError, InvalidRequestError
from spark_replica.security.acl import Operation
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data

CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1  # Kafka's IsolationLevel: 0 read_uncommitted, 1 read_committed
# The first Fetch version whose clients read zstd batches (KIP-110).
FIRST_ZSTD_FETCH_VERSION = 10
FETCH_CACHE = FetchCache()
# Threads converting fetched batches: each holds at most one batch's records expanded
# (bounded by max.message.bytes on produce), so this bounds that memory too.
CONVERT_WORKERS = 2
_CONVERTER = ThreadPoolExecutor(CONVERT_WORKERS, thread_name_prefix="kafka-fetch-convert")


async def handle_fetch(ctx: BrokerContext, request: KafkaRequest) -> Data:
    body = request.body
    denied: dict[str, BrokerResponseError | None] = {}
    for topic in body.topics:
        if body.replica_id != CONSUMER_REPLICA_ID:
            denied[topic.topic] = InvalidRequestError(
                f"replica {body.replica_id} fetches on the Kafka listener; replicas fetch "
                "over the replog listener"
            )
        elif not authorize_topic(ctx, request, Operation.READ, topic.topic):
            denied[topic.topic] = topic_denied(request, Operation.READ, topic.topic)
        else:
            denied[topic.topic] = None
    read_all = functools.partial(_read_all, ctx, body, denied)
    response, reads = await long_poll(read_all, body.max_wait_ms, body.min_bytes)
    conversion = Conversion(
        reads,
        min(body.max_bytes, FETCH_MAX_BYTES),
        FETCH_CACHE,
        zstd=request.version >= FIRST_ZSTD_FETCH_VERSION,
    )
    if not conversion.run(inline=True):
        await asyncio.get_running_loop().run_in_executor(_CONVERTER, conversion.run, False)
    for topic in response.responses:
        sent = sum(len(batch) for p in topic.partitions if p.records for batch in p.records)
        if sent:
            ctx.replicas.metrics.fetched(topic.topic, sent)
    return response


def _read_all(
    ctx: BrokerContext, body: Data, denied: dict[str, BrokerResponseError | None]
) -> tuple[tuple[Data, list[StoredRead]], int, list[Partition]]:
    """Read every requested partition once: the answer (records still stored), the
    reads to convert into it, the stored bytes read and what to watch."""
    remaining = min(body.max_bytes, FETCH_MAX_BYTES)
    read_committed = body.isolation_level == READ_COMMITTED
    total = 0
    watched: list[Partition] = []
    reads: list[StoredRead] = []
    responses = []
    for topic in body.topics:
        results = []
        for entry in topic.partitions:
            result = Data(
                partition_index=entry.partition,
                error_code=0,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                aborted_transactions=[],
                preferred_read_replica=-1,
                records=b"",
            )

            def serve(tp: TopicPartition, entry: Data = entry, result: Data = result) -> None:
                nonlocal remaining, total
                partition = partition_to_read(
                    ctx,
                    tp,
                    body.max_bytes,
                    entry.partition_max_bytes,
                    entry.current_leader_epoch,
                )
                # Set before the offset is checked: OFFSET_OUT_OF_RANGE carries them.
                result.high_watermark = partition.high_watermark
                result.last_stable_offset = partition.last_stable_offset
                result.log_start_offset = partition.log.log_start_offset
                stored = b""
                if remaining > 0:
                    stored = partition.read(
                        entry.fetch_offset,
                        min(entry.partition_max_bytes, remaining),
                        current_leader_epoch=entry.current_leader_epoch,
                        for_replica=False,
                        read_committed=read_committed,
                    )
                if read_committed and stored:
                    result.aborted_transactions = aborted_in(partition, entry.fetch_offset, stored)
                remaining -= len(stored)
                total += len(stored)
                reads.append(
                    StoredRead(
                        result, tp, stored, entry.partition_max_bytes, partition.compression_type
                    )
                )
                watched.append(partition)

            serve_partition(topic.topic, entry.partition, result, denied[topic.topic], serve)
            results.append(result)
        responses.append(Data(topic=topic.topic, partitions=results))
    response = Data(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)
    return (response, reads), total, watched
