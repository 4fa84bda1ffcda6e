"""The one retrying way to call partition leaders: route, send, refresh, back off, retry.

Requests about a partition (fetch, produce, list offsets) must reach its leader. The
leader moves (an election, a killed or restarting broker), and a client learns of it
only from an error: NOT_LEADER, a fenced leader epoch, an unknown partition, a lost
connection. Every caller follows the same loop here:

1. route each pending partition to its leader as the cluster metadata says now
   (fetching metadata for a topic not known yet);
2. send one request per leader, all leaders at once, over the connection for the
   caller's purpose (fetches never queue behind produces);
3. keep the answers; a partition whose answer is a retriable error stays pending, and a
   non-retriable error ends the call at once;
4. after an error whose `invalid_metadata` flag is set, refresh the metadata, then wait
   as the retry policy says (nothing before the first retry after a stale leader), and
   go round again until the deadline.

At the deadline the call raises TimeoutExpiredError naming the partitions still
pending and the last error (also its `__cause__`), or, with `partial`, returns what it
has. The caller's `send` builds and sends the request and turns the answer into values
or typed errors; this module knows no request type, nor which listener it talks to: the
leaders come from `Leaders`, the Cluster for replog's listeners, the Kafka admin
client's view for Kafka's.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from spark_replica.errors import ProtocolError, ReplogError, TimeoutExpiredError
from spark_replica.topics import TopicPartition

from .retry import DEFAULT_RETRY_POLICY, Attempts, RetryPolicy, refreshes_metadata

T = TypeVar("T")
C = TypeVar("C")  # a connection to a broker
M = TypeVar("M")  # a metadata answer
C_co = TypeVar("C_co", covariant=True)
M_co = TypeVar("M_co", covariant=True)

# Per partition: its value, or the error its leader answered for it.
GroupAnswer = Mapping[TopicPartition, T | ReplogError]
SendGroup = Callable[[C, list[TopicPartition]], Awaitable[GroupAnswer[T]]]
Send = Callable[[C], Awaitable[T]]
# Told every metadata answer taken after a stale-leader error; may raise to end the call.
OnRefresh = Callable[[M], None]


class Leaders(Protocol[C_co, M_co]):
    """Where partitions' leaders are, as last learnt, and how to reach them."""

    @property
    def topics(self) -> Mapping[str, object]:
        """The topics whose metadata is known."""
        ...

    async def refresh(self, topics: list[str]) -> M_co:
        """Learn these topics' metadata again."""
        ...

    def leader_for(self, tp: TopicPartition) -> int:
        """The leader's broker id; raises a retriable error when there is none."""
        ...

    async def connection(self, broker_id: int, purpose: str) -> C_co:
        """A connection to the broker for this purpose (fetches apart from produces)."""
        ...


async def call_leaders(
    cluster: Leaders[C, M],
    partitions: Iterable[TopicPartition],
    send_group: SendGroup[C, T],
    *,
    timeout_s: float,
    purpose: str = "default",
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    partial: bool = False,
    on_refresh: OnRefresh[M] | None = None,
) -> dict[TopicPartition, T]:
    """Each partition's value from its leader, retrying until `timeout_s` has passed.

    `send_group(connection, partitions)` sends one request for partitions that share a
    leader and answers per partition; if it raises, the error stands for all of them.
    """
    loop = asyncio.get_running_loop()
    attempts = Attempts(policy, loop.time() + timeout_s)
    pending = sorted(set(partitions))
    found: dict[TopicPartition, T] = {}
    while True:
        errors = await _one_round(cluster, pending, send_group, purpose, found)
        pending = [tp for tp in pending if tp not in found]
        if not pending:
            return found
        if not errors:
            names = ", ".join(str(tp) for tp in pending)
            raise ProtocolError(f"the leaders' answers leave out {names}")
        error = next((e for e in errors if refreshes_metadata(e)), errors[-1])
        delay = attempts.next_delay(error, loop.time())
        if delay is None:
            if not error.retriable:
                raise error
            if partial:
                return found
            names = ", ".join(str(tp) for tp in pending)
            raise TimeoutExpiredError(
                f"no answer for {names} from its leader within {timeout_s:g} s "
                f"(last error: {error})"
            ) from error
        if refreshes_metadata(error):
            await _refresh(cluster, pending, on_refresh)
        if delay > 0:
            await asyncio.sleep(delay)


async def call_leader(
    cluster: Leaders[C, M],
    tp: TopicPartition,
    send: Send[C, T],
    *,
    timeout_s: float,
    purpose: str = "default",
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    on_refresh: OnRefresh[M] | None = None,
) -> T:
    """`send(connection to tp's leader)`, retried as call_leaders retries."""

    async def send_group(conn: C, _: list[TopicPartition]) -> dict[TopicPartition, T]:
        return {tp: await send(conn)}

    found = await call_leaders(
        cluster,
        [tp],
        send_group,
        timeout_s=timeout_s,
        purpose=purpose,
        policy=policy,
        on_refresh=on_refresh,
    )
    return found[tp]


async def _one_round(
    cluster: Leaders[C, M],
    pending: list[TopicPartition],
    send_group: SendGroup[C, T],
    purpose: str,
    found: dict[TopicPartition, T],
) -> list[ReplogError]:
    """Ask every pending partition's leader once; store answers, return retriable errors.

    A non-retriable error is raised as soon as it is seen.
    """
    errors: list[ReplogError] = []
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    try:
        unknown = sorted({tp.topic for tp in pending if tp.topic not in cluster.topics})
        if unknown:
            await cluster.refresh(unknown)
        for tp in pending:
            try:
                by_leader[cluster.leader_for(tp)].append(tp)
            except ReplogError as exc:
                _keep_retriable(exc, errors)
    except ReplogError as exc:
        _keep_retriable(exc, errors)
        return errors

    async def ask(leader: int, tps: list[TopicPartition]) -> GroupAnswer[T]:
        conn = await cluster.connection(leader, purpose)
        return await send_group(conn, tps)

    groups = list(by_leader.items())
    outcomes = await asyncio.gather(*(ask(*group) for group in groups), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, ReplogError):
            _keep_retriable(outcome, errors)
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            for tp, value in outcome.items():
                if isinstance(value, ReplogError):
                    _keep_retriable(value, errors)
                else:
                    found[tp] = value
    return errors


def _keep_retriable(error: ReplogError, errors: list[ReplogError]) -> None:
    if not error.retriable:
        raise error
    errors.append(error)


async def _refresh(
    cluster: Leaders[C, M], pending: list[TopicPartition], on_refresh: OnRefresh[M] | None
) -> None:
    """Fresh metadata for the pending partitions' topics; a failed refresh is retried
    with the next round (its error shows there)."""
    try:
        response = await cluster.refresh(sorted({tp.topic for tp in pending}))
    except ReplogError:
        return
    if on_refresh is not None:
        on_refresh(response)
