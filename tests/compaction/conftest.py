"""Shared builders for compaction tests: plain chat dicts, a real token counter."""

from __future__ import annotations

import os
from typing import Any

import pytest

from compaction.types import Message

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from compaction.tokens import TokenCounter  # noqa: E402

MODEL = "gpt-4o-mini"


def sys(text: str = "You are helpful.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def asst(text: str | None = None, calls: list[str] | None = None) -> dict[str, Any]:
    """An assistant message; each call looks up its own id (distinct calls, never a re-run)."""
    msg: Message = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = [{"id": c, "type": "function",
                              "function": {"name": "lookup", "arguments": f'{{"q": "{c}"}}'}} for c in calls]
    return msg


def tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TokenCounter.for_model(MODEL)
