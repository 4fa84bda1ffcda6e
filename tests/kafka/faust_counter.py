"""A Faust stream processor as a user would write one, for
tests/kafka/test_stream_processor_changelog.py: it counts the records of each key of an
input topic in a Table and writes each new count to an output topic.

Faust keeps the Table in memory and in a changelog topic it creates itself (compacted,
one partition per input partition); on start it rebuilds the Table from that changelog
before it reads on, so with the memory store used here the changelog is the only place
the counts survive a restart. Run as `python -m tests.kafka.faust_counter worker
--without-web` (Faust's web server would take a fixed port), configured by the COUNTER_*
environment variables the test sets.
"""

from __future__ import annotations

import os

import faust

app = faust.App(
    os.environ["COUNTER_APP_ID"],
    broker=f"kafka://{os.environ['COUNTER_BOOTSTRAP']}",
    datadir=os.environ["COUNTER_DATADIR"],
    store="memory://",
    topic_replication_factor=int(os.environ["COUNTER_REPLICATION_FACTOR"]),
    topic_partitions=int(os.environ["COUNTER_PARTITIONS"]),
    # Commit often: the test waits for the commit of everything it produced before it
    # stops the application, and a short wait is a short test.
    broker_commit_every=100,
    broker_commit_interval=0.5,
    consumer_auto_offset_reset="earliest",
    # Batches well below the changelog's segment.bytes, also once the broker has stored
    # them in its own format: a larger append is refused (RECORD_LIST_TOO_LARGE), and
    # Faust only logs the loss of changelog records.
    producer_max_batch_size=1024,
)

records = app.topic(
    os.environ["COUNTER_INPUT"], key_serializer="raw", value_serializer="raw", internal=False
)
counts_topic = app.topic(
    os.environ["COUNTER_OUTPUT"], key_serializer="raw", value_serializer="raw", internal=False
)
# Raw keys in the changelog too: Faust would otherwise read them back as JSON. The
# changelog's segments are small and any dirt is worth a cleaning, so that the broker's
# cleaner compacts nearly all of it while the test runs.
counts = app.Table(
    "counts",
    default=int,
    key_type=bytes,
    value_type=int,
    extra_topic_configs={
        "segment.bytes": os.environ["COUNTER_CHANGELOG_SEGMENT_BYTES"],
        "min.cleanable.dirty.ratio": "0.01",
    },
)


@app.agent(records)
async def count(stream: faust.Stream) -> None:
    async for key, _value in stream.items():
        counts[key] += 1
        await counts_topic.send(key=key, value=str(counts[key]).encode())


if __name__ == "__main__":
    app.main()
