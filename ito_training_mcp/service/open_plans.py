"""The plans this server process opened and that still wait for a person, by backend, booking and digest.

`plan_training` consults it after gate 2 and refuses, locally and before anything is sent, to plan
the same manifest for the same booking while the request it opened last time is pending: the agent
is pointed at that request (`confirmation_status`) instead of opening more requests for one intent.
A request leaves when `confirmation_status` sees it decided or expired, or when its own expiry
passes. In memory, bounded (the oldest entry goes first); a restarted server starts empty and the
backend still answers a repeated plan with the request already pending.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

MAX_REMEMBERED = 256


@dataclass(frozen=True)
class OpenPlan:
    request_id: str
    review_url: str
    expires_at: datetime


class OpenPlans:
    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self._limit = limit
        self._by_intent: OrderedDict[tuple[str, str, str], OpenPlan] = OrderedDict()

    def remember(self, origin: str, booking_id: str, sha256: str, plan: OpenPlan) -> None:
        key = (origin, booking_id, sha256)
        self._by_intent.pop(key, None)
        self._by_intent[key] = plan
        while len(self._by_intent) > self._limit:
            self._by_intent.popitem(last=False)

    def pending(self, origin: str, booking_id: str, sha256: str, now: datetime) -> OpenPlan | None:
        key = (origin, booking_id, sha256)
        plan = self._by_intent.get(key)
        if plan is not None and plan.expires_at <= now:
            del self._by_intent[key]
            return None
        return plan

    def settled(self, request_id: str) -> None:
        """The request was decided or expired: the same manifest may be planned again."""
        for key in [k for k, plan in self._by_intent.items() if plan.request_id == request_id]:
            del self._by_intent[key]
