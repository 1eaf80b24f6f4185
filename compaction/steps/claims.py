"""Compaction steps of one conversation run one at a time, across every process sharing the store.

A step (request path, background or operator) first claims the conversation's lease row
(`TenantAccess.claim_step`, `store.lease_s`); each step claims under its own holder name, so two
steps of one engine exclude each other as two replicas do. Background steps skip when the claim is
taken (the next turn schedules them again); request and operator steps wait for it, polling, until
their deadline, then go on without it: past the deadline only the local levels run, and those are
deterministic, so a racing writer's identical summary is stored once (store/summaries.py).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from compaction.deadline import Deadline
from store.interface import TenantAccess

POLL_S = 0.05  # how often a waiting step asks for the claim again


@dataclass(frozen=True)
class Claim:
    held: bool  # this step holds the conversation (False: went on without it past the deadline)
    waited: bool  # another step held it first


class StepClaims:
    """Claims taken by one engine, each under `holder:<n>` (the holder names the process)."""

    def __init__(self, holder: str, lease_s: float, poll_s: float = POLL_S) -> None:
        self.holder = holder
        self.lease_s = lease_s
        self.poll_s = poll_s
        self._numbers = itertools.count(1)

    def _name(self) -> str:
        return f"{self.holder}:{next(self._numbers)}"

    @asynccontextmanager
    async def attempt(self, tenant: TenantAccess, conversation_id: str) -> AsyncIterator[bool]:
        """Claim once: yields whether this step holds the conversation (released on exit)."""
        name = self._name()
        held = tenant.claim_step(conversation_id, name, self.lease_s)
        try:
            yield held
        finally:
            if held:
                tenant.release_step(conversation_id, name)

    @asynccontextmanager
    async def waiting(self, tenant: TenantAccess, conversation_id: str,
                      deadline: Deadline) -> AsyncIterator[Claim]:
        """Claim, waiting for another step to finish until `deadline`."""
        name = self._name()
        claim = await self._wait(tenant, conversation_id, name, deadline)
        try:
            yield claim
        finally:
            if claim.held:
                tenant.release_step(conversation_id, name)

    async def _wait(self, tenant: TenantAccess, conversation_id: str, name: str,
                    deadline: Deadline) -> Claim:
        waited = False
        while not tenant.claim_step(conversation_id, name, self.lease_s):
            left = deadline.remaining()
            if left is not None and left <= 0:
                return Claim(held=False, waited=True)
            waited = True
            await asyncio.sleep(self.poll_s if left is None else min(self.poll_s, left))
        return Claim(held=True, waited=waited)
