"""The group coordinator of one broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brokerd.api.context import BrokerContext


class GroupCoordinator:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def start(self) -> None:
        """Begin serving the groups this broker coordinates."""

    async def stop(self) -> None:
        """Stop every group's timers; members find the next coordinator."""
