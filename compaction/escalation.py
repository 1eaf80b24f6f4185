"""Three-level escalation per summariser call (seed 000): normal -> aggressive -> local truncation.

A level's output is rejected when the call fails or times out, the text is empty, not shorter than
the input, far over the target, or invents facts (verify.py). The truncation level is local and
deterministic, so compaction progresses whenever there is something to keep. Failures are data in
the outcome, never raised: when even truncation leaves nothing (blank sources, a limit below one
token) the outcome is failed (`ok` false, `failure` says why) and its text must not be committed.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, replace

from compaction.prompts import PROMPT_VERSION, build_request
from compaction.redact import redact
from compaction.tokens import TokenCounter
from compaction.truncate import prefix_within
from compaction.types import LevelRejection, PromptLevel, Summarizer, SummaryRequest
from compaction.verify import verify_summary
from config.settings import LOCAL_EXTRACTIVE
from store.models import SummaryKind, SummaryLevel, Verification

LOCAL_TRUNCATION = "local/truncation"
MAX_TARGET_RATIO = 1.5  # an LLM summary above 1.5x the asked size is rejected
_BLOCK_HEADER = re.compile(r"(?m)^\[(?:#(\d+) \w+|(sum_\w+) summary[^\]]*)\]$")


@dataclass(frozen=True)
class LevelAttempt:
    """What one escalation level did: accepted, or why it was rejected."""

    level: SummaryLevel
    model: str
    accepted: bool
    reason: LevelRejection | None = None
    error: str | None = None
    tokens: int = 0
    rejected_facts: tuple[str, ...] = ()
    duration_ms: float = 0.0


@dataclass(frozen=True)
class EscalationOutcome:
    text: str  # redacted, committed-ready
    level: SummaryLevel
    verification: Verification  # not_run: truncation is verbatim by construction
    rejected_facts: tuple[str, ...]  # facts rejected at any level, for the event log
    attempts: tuple[LevelAttempt, ...]
    model: str  # what wrote the committed text
    prompt_version: str
    token_count: int
    failure: str | None = None  # set when no level produced committable text

    @property
    def ok(self) -> bool:
        """Whether `text` may be committed (a failed outcome never carries text)."""
        return self.failure is None and bool(self.text.strip())


async def summarize_with_escalation(summarizer: Summarizer, *, kind: SummaryKind, sources_text: str,
                                    anchors_text: str, target_tokens: int, counter: TokenCounter,
                                    input_tokens: int, timeout_s: float | None = None
                                    ) -> EscalationOutcome:
    """Summarise `sources_text`, escalating until a level's output is acceptable."""
    extractive = summarizer.name == LOCAL_EXTRACTIVE
    levels: tuple[PromptLevel, ...] = ("normal",) if extractive else ("normal", "aggressive")
    attempts: list[LevelAttempt] = []
    for level in levels:
        request = build_request(kind, level, sources_text, anchors_text, target_tokens)
        text, attempt = await _attempt(summarizer, request_level=level, request=request,
                                       timeout_s=timeout_s)
        if text is not None:
            attempt = _judge(attempt, text, sources_text, anchors_text, target_tokens, counter,
                             input_tokens)
        attempts.append(attempt)
        if text is not None and not attempt.accepted:
            report_unusable(summarizer)
        if attempt.accepted and text is not None:
            return _outcome(redact(text), "extractive" if extractive else level, "passed", attempts,
                            summarizer.name, counter)
    text = truncate_sources(sources_text, min(target_tokens, input_tokens - 1), counter)
    tokens = counter.count_text(text)
    if not text.strip():  # nothing to keep: fail rather than commit a blank summary
        attempts.append(LevelAttempt("truncation", LOCAL_TRUNCATION, False, "empty", tokens=tokens))
        failed = _outcome("", "truncation", "not_run", attempts, LOCAL_TRUNCATION, counter)
        return replace(failed, failure="every level, local truncation included, gave empty text")
    attempts.append(LevelAttempt("truncation", LOCAL_TRUNCATION, True, tokens=tokens))
    return _outcome(text, "truncation", "not_run", attempts, LOCAL_TRUNCATION, counter)


def report_unusable(summarizer: object) -> None:
    """Tell the circuit breaker (possibly wrapped, e.g. by an observer) that an answer was unusable,
    so a summariser that keeps answering empty or invented text trips it like one that errors."""
    for _ in range(4):  # breaker -> observer wrappers are shallow
        hook = getattr(summarizer, "record_failure", None)
        if callable(hook):
            hook()
            return
        summarizer = getattr(summarizer, "inner", None)
        if summarizer is None:
            return


def _outcome(text: str, level: SummaryLevel, verification: Verification, attempts: list[LevelAttempt],
             model: str,
             counter: TokenCounter) -> EscalationOutcome:
    rejected = tuple(sorted({f for a in attempts for f in a.rejected_facts}))
    return EscalationOutcome(text=text, level=level, verification=verification, rejected_facts=rejected,
                             attempts=tuple(attempts), model=model, prompt_version=PROMPT_VERSION,
                             token_count=counter.count_text(text))


async def _attempt(summarizer: Summarizer, *, request_level: PromptLevel, request: SummaryRequest,
                   timeout_s: float | None) -> tuple[str | None, LevelAttempt]:
    """Call the summariser once; a failure becomes a rejected attempt."""
    started = time.perf_counter()
    try:
        raw = await asyncio.wait_for(summarizer.complete(request), timeout_s)
    except TimeoutError:
        return None, LevelAttempt(request_level, summarizer.name, False, "timeout",
                                  f"no answer within {timeout_s}s", duration_ms=_ms(started))
    except Exception as exc:  # any summariser failure is data: the next level runs
        error = redact(f"{type(exc).__name__}: {exc}")[:500]
        return None, LevelAttempt(request_level, summarizer.name, False, "error", error,
                                  duration_ms=_ms(started))
    text = redact(raw if isinstance(raw, str) else "")
    return text, LevelAttempt(request_level, summarizer.name, True, duration_ms=_ms(started))


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _judge(attempt: LevelAttempt, text: str, sources_text: str, anchors_text: str,
           target_tokens: int, counter: TokenCounter, input_tokens: int) -> LevelAttempt:
    """Accept or reject a level's (already redacted) output."""
    judged = replace(attempt, tokens=counter.count_text(text))
    if not text.strip():
        return replace(judged, accepted=False, reason="empty")
    if judged.tokens >= input_tokens:
        return replace(judged, accepted=False, reason="not_shorter")
    if judged.tokens > target_tokens * MAX_TARGET_RATIO:
        return replace(judged, accepted=False, reason="too_long")
    result = verify_summary(text, sources_text, anchors_text)
    if not result.ok:
        return replace(judged, accepted=False, reason="unverified", rejected_facts=result.rejected_facts)
    return judged


# ------------------------------------------------------------------------ deterministic truncation


def _blocks(sources_text: str) -> list[tuple[str, str, str]]:
    """(header line, ref, body) per source block; one anonymous block when there are no headers."""
    headers = list(_BLOCK_HEADER.finditer(sources_text))
    if not headers:
        return [("", "", sources_text)]
    blocks = []
    for index, match in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(sources_text)
        ref = match.group(1) or match.group(2) or ""
        blocks.append((match.group(), ref, sources_text[match.end():end].strip()))
    return blocks


def _excerpt(header: str, ref: str, body: str, chars: int) -> str:
    if len(body) <= chars:
        return f"{header}\n{body}".strip()
    head = body[: chars * 2 // 3].rstrip()
    tail = body[len(body) - chars // 3:].lstrip() if chars >= 3 else ""
    marker = f"[... truncated; expand {ref} ...]" if ref else "[... truncated ...]"
    return "\n".join(p for p in (header, head, marker, tail) if p)


def truncate_sources(sources_text: str, limit_tokens: int, counter: TokenCounter) -> str:
    """Head/tail excerpts of every source block within `limit_tokens` (local, deterministic).

    Shrinks the per-block allowance until it fits; as a last resort returns a prefix of the text,
    so the result never exceeds the limit (empty only when the limit is below one token).
    """
    blocks = _blocks(sources_text)
    chars = max(len(body) for _, _, body in blocks)
    while True:  # the last try (chars == 0) keeps only headers and markers
        text = "\n\n".join(_excerpt(h, r, b, chars) for h, r, b in blocks)
        if counter.count_text(text) <= limit_tokens:
            return text
        if chars == 0:
            break
        chars = chars // 2 if chars >= 16 else 0
    return prefix_within(sources_text, limit_tokens, counter.count_text)
