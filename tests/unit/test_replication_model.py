"""One leader and its followers under arbitrary interleavings, driven through the pure
replication rules.

The model holds what each replica really has (a prefix of the leader's log: one leader,
so no divergence), what each has flushed, and the leader's view: follower progress, ISR,
pending ISR change, HW, and the acks=all produces waiting. Steps: appends, follower
fetches (which may flush), time passing, ISR shrink proposals, ISR writes succeeding or
failing, refused fetches from past the leader's end, and follower crashes that lose the
unflushed tail. A crash of an ISR member is seen by the controller, which removes it
from the ISR and bumps the leader epoch (KIP-380), failing the produces waiting.

Checked after every step: the HW never moves back; every member of the maximal ISR
holds everything below the HW (so a replica joining the ISR is never behind it); an
acks=all produce answered success is held by at least min.insync.replicas replicas.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from brokerd.replication.rules import (
    AckOutcome,
    FollowerProgress,
    acks_all_outcome,
    after_fetch,
    fetch_offset_in_range,
    high_watermark,
    lagging_replicas,
    maximal_isr,
    may_join_isr,
)

LEADER = 0
LAG_MAX_MS = 1_000
LOG_START = 0


class ReplicationModel(RuleBasedStateMachine):
    @initialize(
        follower_count=st.integers(1, 3),
        min_isr=st.integers(1, 3),
        leader_end=st.integers(0, 10),
        data=st.data(),
    )
    def start(
        self, follower_count: int, min_isr: int, leader_end: int, data: st.DataObject
    ) -> None:
        """A leader that just took over: followers anywhere up to its end, some in sync."""
        self.followers = list(range(1, follower_count + 1))
        self.min_isr = min(min_isr, follower_count + 1)
        self.now_ms = 0
        self.held = {LEADER: leader_end}  # each replica's real LEO
        for replica in self.followers:
            self.held[replica] = data.draw(st.integers(0, leader_end))
        self.flushed = {r: data.draw(st.integers(0, self.held[r])) for r in self.followers}
        self.isr = [LEADER] + [r for r in self.followers if data.draw(st.booleans())]
        self.proposed: list[int] | None = None
        self.progress = {r: FollowerProgress(last_caught_up_ms=0) for r in self.followers}
        self.hw = min(self.held[r] for r in self.isr)
        self.epoch_start = leader_end
        self.waiting: list[int] = []  # last offsets of acks=all produces

    def maximal(self) -> list[int]:
        return maximal_isr(self.isr, self.proposed)

    def advance_hw(self) -> None:
        ends = {r: p.log_end_offset for r, p in self.progress.items()}
        moved = high_watermark(self.hw, LEADER, self.held[LEADER], ends, self.maximal())
        assert moved >= self.hw, "the HW moved back"
        self.hw = moved
        self.answer_produces()

    def answer_produces(self) -> None:
        still = []
        for last in self.waiting:
            outcome = acks_all_outcome(last, self.hw, len(self.maximal()), self.min_isr)
            if outcome is AckOutcome.PENDING:
                still.append(last)
            elif outcome is AckOutcome.COMMITTED:
                holders = [r for r, end in self.held.items() if end > last]
                assert len(holders) >= self.min_isr, (last, self.held, self.isr)
        self.waiting = still

    @rule(count=st.integers(1, 5), acks_all=st.booleans())
    def append(self, count: int, acks_all: bool) -> None:
        if acks_all and len(self.isr) < self.min_isr:
            return  # NOT_ENOUGH_REPLICAS, nothing appended
        self.held[LEADER] += count
        if acks_all:
            self.waiting.append(self.held[LEADER] - 1)
        self.advance_hw()

    def leader_sees_fetch(self, replica: int, offset: int) -> bool:
        """The leader's side of a fetch from `offset`: False if refused, recording nothing."""
        if not fetch_offset_in_range(offset, LOG_START, self.held[LEADER]):
            return False
        progress = after_fetch(self.progress[replica], offset, self.held[LEADER], self.now_ms)
        self.progress[replica] = progress
        joins = may_join_isr(progress.log_end_offset, self.hw, self.epoch_start)
        if self.proposed is None and replica not in self.isr and joins:
            self.proposed = sorted([*self.isr, replica])
        self.advance_hw()
        return True

    @rule(data=st.data(), chunk=st.integers(1, 8), flush=st.booleans())
    def fetch(self, data: st.DataObject, chunk: int, flush: bool) -> None:
        replica = data.draw(st.sampled_from(self.followers))
        offset = self.held[replica]
        assert self.leader_sees_fetch(replica, offset), "a real follower's offset is in range"
        self.held[replica] = min(self.held[LEADER], offset + chunk)
        if flush:
            self.flushed[replica] = self.held[replica]

    @rule(data=st.data(), past=st.integers(1, 5))
    def fetch_past_the_end(self, data: st.DataObject, past: int) -> None:
        replica = data.draw(st.sampled_from(self.followers))
        before = (self.progress[replica], self.proposed, self.hw)
        assert not self.leader_sees_fetch(replica, self.held[LEADER] + past)
        assert (self.progress[replica], self.proposed, self.hw) == before

    @rule(ms=st.integers(0, 1_500))
    def tick(self, ms: int) -> None:
        self.now_ms += ms

    @rule()
    def propose_shrink(self) -> None:
        if self.proposed is not None:
            return
        lagging = lagging_replicas(self.isr, LEADER, self.progress, self.now_ms, LAG_MAX_MS)
        if lagging:
            self.proposed = [r for r in self.isr if r not in lagging]

    @rule()
    def isr_written(self) -> None:
        if self.proposed is None:
            return
        joining = set(self.proposed) - set(self.isr)
        for replica in joining:
            assert self.progress[replica].log_end_offset >= self.hw, "joined behind the HW"
        self.isr, self.proposed = self.proposed, None
        self.advance_hw()

    @rule()
    def isr_write_failed(self) -> None:
        self.proposed = None
        self.answer_produces()

    @rule(data=st.data(), lost=st.integers(0, 10))
    def crash(self, data: st.DataObject, lost: int) -> None:
        replica = data.draw(st.sampled_from(self.followers))
        self.held[replica] = max(self.flushed[replica], self.held[replica] - lost)
        if replica in self.maximal():
            # The controller removes it and bumps the epoch: the leader starts afresh.
            self.isr = [r for r in self.isr if r != replica]
            self.proposed = None
            self.progress = {
                r: FollowerProgress(last_caught_up_ms=self.now_ms) for r in self.followers
            }
            self.epoch_start = self.held[LEADER]
            self.waiting = []

    @invariant()
    def maximal_isr_holds_everything_below_the_hw(self) -> None:
        if not hasattr(self, "hw"):
            return
        assert self.hw <= self.held[LEADER]
        for replica in self.maximal():
            assert self.held[replica] >= self.hw, (replica, self.held, self.hw)


TestReplicationModel = ReplicationModel.TestCase
TestReplicationModel.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
