"""`Entry`: one item of the working view (a stored summary or a raw message) with its token count."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Entry:
    """One item of the working view with its cached token count."""

    kind: Literal["message", "summary"]
    ref: str  # message seq (decimal) or summary id
    tokens: int
    role: str  # message role; "summary" for summaries
    group: int  # atomic group key, unique per group across the view
    seq: int  # message seq; for summaries the last covered seq
    depth: int = -1  # summaries only
    pinned: bool = False
    message_id: int | None = None  # messages only
    elided: str | None = None  # messages only: the in-place summary standing for its text



def last_user_index(entries: Sequence[Entry]) -> int | None:
    """Index of the last user message (protected on its own, wherever it sits), or None."""
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind == "message" and entries[i].role == "user":
            return i
    return None
