"""The openai SDK's request-param types for the wire JSON the tests build as plain dicts.

The SDK sends message and tool dicts as they are (extra keys such as `pinned` included), which is
what the proxy tests rely on; these casts only tell mypy so, at one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam


def sdk_messages(messages: Sequence[Mapping[str, Any]]) -> list[ChatCompletionMessageParam]:
    """Wire-JSON messages, typed as the SDK's `messages` param (a new list; the dicts are shared)."""
    return cast("list[ChatCompletionMessageParam]", list(messages))


def sdk_tools(tools: Sequence[Mapping[str, Any]]) -> list[ChatCompletionToolUnionParam]:
    """Wire-JSON tool definitions, typed as the SDK's `tools` param."""
    return cast("list[ChatCompletionToolUnionParam]", list(tools))
