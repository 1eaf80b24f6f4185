"""Parameters checked before anything is forwarded: a wrong type or range is our 400.

Without this a `"stream": "yes"` reached the provider and came back as a 502, and an invalid
`max_tokens` was forwarded. One table per API (chat, Responses, Messages), each with the types and
ranges its provider documents; unknown keys pass through untouched (providers have their own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from config.errors import InvalidRequestError

Kind = Literal["bool", "int", "number", "string", "object", "stop", "tool_choice", "strings", "system"]


@dataclass(frozen=True)
class Param:
    """One parameter's expected JSON type and, for numbers, its inclusive range."""

    kind: Kind
    low: float | None = None
    high: float | None = None


PARAMS: dict[str, Param] = {
    "stream": Param("bool"),
    "stream_options": Param("object"),
    "max_tokens": Param("int", 1),
    "max_completion_tokens": Param("int", 1),
    "n": Param("int", 1, 128),
    "temperature": Param("number", 0, 2),
    "top_p": Param("number", 0, 1),
    "presence_penalty": Param("number", -2, 2),
    "frequency_penalty": Param("number", -2, 2),
    "seed": Param("int"),
    "logprobs": Param("bool"),
    "top_logprobs": Param("int", 0, 20),
    "parallel_tool_calls": Param("bool"),
    "user": Param("string"),
    "logit_bias": Param("object"),
    "response_format": Param("object"),
    "stop": Param("stop"),
    "tool_choice": Param("tool_choice"),
}
RESPONSES_PARAMS: dict[str, Param] = {
    "stream": Param("bool"),
    "stream_options": Param("object"),
    "background": Param("bool"),
    "store": Param("bool"),
    "max_output_tokens": Param("int", 1),
    "max_tool_calls": Param("int", 1),
    "temperature": Param("number", 0, 2),
    "top_p": Param("number", 0, 1),
    "top_logprobs": Param("int", 0, 20),
    "parallel_tool_calls": Param("bool"),
    "instructions": Param("string"),
    "previous_response_id": Param("string"),
    "user": Param("string"),
    "metadata": Param("object"),
    "reasoning": Param("object"),
    "text": Param("object"),
    "tool_choice": Param("tool_choice"),
    "truncation": Param("string"),
}
MESSAGES_PARAMS: dict[str, Param] = {
    "max_tokens": Param("int", 1),
    "stream": Param("bool"),
    "temperature": Param("number", 0, 1),
    "top_p": Param("number", 0, 1),
    "top_k": Param("int", 0),
    "system": Param("system"),
    "stop_sequences": Param("strings"),
    "metadata": Param("object"),
    "tool_choice": Param("object"),
    "thinking": Param("object"),
}
_NAMES: dict[Kind, str] = {"bool": "a boolean", "int": "an integer", "number": "a number",
                           "string": "a string", "object": "an object",
                           "stop": "a string or an array of strings",
                           "tool_choice": "a string or an object",
                           "strings": "an array of strings",
                           "system": "a string or an array of content blocks"}

_JSON_TYPES: dict[type, str] = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
                                list: "an array", dict: "an object"}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_CHECKS: dict[Kind, Callable[[object], bool]] = {
    "bool": lambda v: isinstance(v, bool),
    "int": _is_int,
    "number": lambda v: _is_int(v) or isinstance(v, float),
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "stop": lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(s, str) for s in v)),
    "tool_choice": lambda v: isinstance(v, str | dict),
    "strings": lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
    "system": lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(b, dict) for b in v)),
}


def validate_params(body: Mapping[str, Any], params: Mapping[str, Param] = PARAMS) -> None:
    """Raise a 400 naming the parameter when a known one of `params` (chat's by default) has the
    wrong type or is out of range.

    `null` is accepted everywhere: OpenAI's SDKs send it for "not given".
    """
    for name, spec in params.items():
        value = body.get(name)
        if value is None:
            continue
        if not _CHECKS[spec.kind](value):
            raise _invalid(name, f"expected {_NAMES[spec.kind]}, got {_JSON_TYPES.get(type(value), 'null')}")
        if spec.low is not None and value < spec.low:
            raise _invalid(name, f"{value!r} is below the minimum of {_num(spec.low)}")
        if spec.high is not None and value > spec.high:
            raise _invalid(name, f"{value!r} is above the maximum of {_num(spec.high)}")


def validate_messages_params(body: Mapping[str, Any]) -> None:
    """Anthropic's Messages parameters, `max_tokens` required as Anthropic requires it."""
    if body.get("max_tokens") is None:
        raise InvalidRequestError("max_tokens: Field required", param="max_tokens",
                                  code="missing_required_parameter")
    validate_params(body, MESSAGES_PARAMS)


def _num(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _invalid(name: str, why: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid '{name}': {why}.", param=name, code="invalid_value")
