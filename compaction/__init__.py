"""The compaction engine's public face: proxy/, replay/ and bench/ import compaction only from here.

What one chat request's provider sees is `Engine`'s job (compaction/engine.py); the sub-packages behind
it are internal: view/ (what one request's view is), steps/ (the steps that change it), summarize/
(turning a chunk into a verified summary), anchors/, recall/ and resend/. `recall` is the recall
tools' own small face (compaction/recall/__init__.py). tests/compaction/test_public_face.py pins
`__all__` and checks that proxy/, replay/ and bench/ import nothing else.
"""

from compaction import recall
from compaction.engine import EarlyStart, Engine
from compaction.llm import bundled_model_windows, get_litellm, get_litellm_async
from compaction.messages import OPAQUE_TEXT_FIELD
from compaction.recall.result_budget import ResultBudget
from compaction.resend.early_forward import EarlyForward
from compaction.summarize.prompts import bound_text, build_request, build_source_text
from compaction.summarize.redact import redact, redact_obj
from compaction.summarize.summarizers import ExtractiveSummarizer, LiteLLMSummarizer, endpoint_identity
from compaction.summarize.verify import CalibrationCase, CalibrationReport, calibration_rates
from compaction.tokens import REPLY_PRIMING, TokenCounter
from compaction.toolpairs import SYSTEM_ROLES, group_messages
from compaction.types import (
    ChatTurn,
    Credentials,
    Message,
    PreparedRequest,
    Summarizer,
    SummarizerChoice,
    SummaryRequest,
)
from compaction.view.backrefs import analyze as back_references
from compaction.view.backrefs import is_unchanged_marker
from compaction.view.budget import Budget, WindowSource, resolve_context_window
from config.sized_lru import SizedLru

__all__ = [
    "OPAQUE_TEXT_FIELD",
    "REPLY_PRIMING",
    "SYSTEM_ROLES",
    "Budget",
    "CalibrationCase",
    "CalibrationReport",
    "ChatTurn",
    "Credentials",
    "EarlyForward",
    "EarlyStart",
    "Engine",
    "ExtractiveSummarizer",
    "LiteLLMSummarizer",
    "Message",
    "PreparedRequest",
    "ResultBudget",
    "SizedLru",
    "Summarizer",
    "SummarizerChoice",
    "SummaryRequest",
    "TokenCounter",
    "WindowSource",
    "back_references",
    "bound_text",
    "build_request",
    "build_source_text",
    "bundled_model_windows",
    "calibration_rates",
    "endpoint_identity",
    "get_litellm",
    "get_litellm_async",
    "group_messages",
    "is_unchanged_marker",
    "recall",
    "redact",
    "redact_obj",
    "resolve_context_window",
]
