"""The fallback chain of one summary: LLM normal -> LLM aggressive -> local
extractive -> local truncation.

A level's output is rejected when the call fails or times out, the text is empty, not shorter than
the input, far over the target, or invents facts (verify.py); a rejected output moves to the next
level. Only transport failures and timeouts count against the summarizer's circuit breaker (the
breaker sees them as the exceptions they are); content rejections never do, so a summarizer that
answers badly is bypassed per summary without being switched off for everyone. The local levels
never wait on the network: past the request's deadline they are all that runs. The truncation level
keeps whole source messages and names the others in ONE pointer line (never per-message husks).
Failures are data in the outcome, never raised: when even truncation leaves nothing (blank sources,
a limit below the pointer line) the outcome is failed (`ok` false) and must not be committed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from compaction.deadline import Deadline
from compaction.offload import off_loop
from compaction.summarize.prompts import PROMPT_VERSION, build_request
from compaction.summarize.redact import redact
from compaction.summarize.source_blocks import truncate_sources
from compaction.summarize.summarizers import ExtractiveSummarizer
from compaction.summarize.verify import verify_summary
from compaction.tokens import TokenCounter
from compaction.types import LevelRejection, PromptLevel, Summarizer, SummaryRequest
from config.settings import LOCAL_EXTRACTIVE
from store.models import SummaryKind, SummaryLevel, Verification

__all__ = ["BREAKER_FAILURES", "LOCAL_TRUNCATION", "EscalationOutcome", "LevelAttempt",
           "report_unusable", "summarize_with_escalation", "truncate_sources"]

LOCAL_TRUNCATION = "local/truncation"
MAX_TARGET_RATIO = 1.5  # an LLM summary above 1.5x the asked size is rejected
# The rejections the circuit breaker counts. It counts them itself (an exception or a cancelled,
# timed-out call passes through it); every other rejection is about content and never counts.
BREAKER_FAILURES: frozenset[LevelRejection] = frozenset({"error", "timeout"})
Detach = Callable[["asyncio.Task[str]"], None]  # takes over a call the deadline cut (still running)


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


@dataclass(frozen=True)
class _Level:
    name: SummaryLevel
    summarizer: Summarizer
    prompt: PromptLevel

    @property
    def local(self) -> bool:
        return self.summarizer.name == LOCAL_EXTRACTIVE


@dataclass(frozen=True)
class _Job:
    """One summary to write: its input and how its output is judged."""

    kind: SummaryKind
    sources_text: str
    anchors_text: str
    target_tokens: int
    input_tokens: int
    counter: TokenCounter


async def summarize_with_escalation(summarizer: Summarizer, *, kind: SummaryKind, sources_text: str,
                                    anchors_text: str, target_tokens: int, counter: TokenCounter,
                                    input_tokens: int, timeout_s: float | None = None,
                                    deadline: Deadline | None = None,
                                    detach: Detach | None = None) -> EscalationOutcome:
    """Summarize `sources_text`, going down the chain until a level's output is acceptable.

    `deadline` bounds the LLM levels (skipped once it has passed); a call the deadline cuts is
    handed to `detach` to finish in the background when given (so it is not counted as the
    summarizer's timeout), else cancelled.
    """
    job = _Job(kind, sources_text, anchors_text, target_tokens, input_tokens, counter)
    limit = deadline or Deadline.never()
    attempts: list[LevelAttempt] = []
    for level in _levels(summarizer, counter):
        if not level.local and not limit.allows_call():
            if not limit.local:  # a missed deadline is reported; a chosen local-only step is not
                attempts.append(LevelAttempt(level.name, level.summarizer.name, False, "deadline",
                                             "the request's compaction deadline has passed"))
            continue
        text, attempt = await _attempt(level, job, timeout_s, limit, detach)
        attempts.append(attempt)
        if text is not None and not attempt.accepted:
            report_unusable(level.summarizer)
        if attempt.accepted and text is not None:
            return _outcome(redact(text), level.name, "passed", attempts, level.summarizer.name, counter)
    return await off_loop(len(job.sources_text), _truncation, job, attempts)


def report_unusable(summarizer: object) -> None:
    """Tell the circuit breaker (possibly wrapped, e.g. by an observer) that an answer arrived but
    its content was rejected: counted as a rejection, which never opens the circuit (the endpoint
    works; the next level handles the content). Transport failures and timeouts need no report:
    they pass through the breaker as exceptions."""
    for _ in range(4):  # breaker -> observer wrappers are shallow
        hook = getattr(summarizer, "record_rejection", None)
        if callable(hook):
            hook()
            return
        summarizer = getattr(summarizer, "inner", None)
        if summarizer is None:
            return


def _levels(summarizer: Summarizer, counter: TokenCounter) -> list[_Level]:
    """The chain for `summarizer`: its own levels, then the local extractive one (once)."""
    local = _Level("extractive", ExtractiveSummarizer(counter), "normal")
    if summarizer.name == LOCAL_EXTRACTIVE:
        return [_Level("extractive", summarizer, "normal")]
    return [_Level("normal", summarizer, "normal"), _Level("aggressive", summarizer, "aggressive"), local]


def _truncation(job: _Job, attempts: list[LevelAttempt]) -> EscalationOutcome:
    """The last level: whole source messages within the size asked, one pointer line for the rest."""
    text = truncate_sources(job.sources_text, min(job.target_tokens, job.input_tokens - 1), job.counter)
    tokens = job.counter.count_text(text)
    if not text.strip():  # nothing to keep: fail rather than commit a blank summary
        attempts.append(LevelAttempt("truncation", LOCAL_TRUNCATION, False, "empty", tokens=tokens))
        failed = _outcome("", "truncation", "not_run", attempts, LOCAL_TRUNCATION, job.counter)
        return replace(failed, failure="every level, local truncation included, gave empty text")
    attempts.append(LevelAttempt("truncation", LOCAL_TRUNCATION, True, tokens=tokens))
    return _outcome(text, "truncation", "not_run", attempts, LOCAL_TRUNCATION, job.counter)


def _outcome(text: str, level: SummaryLevel, verification: Verification, attempts: list[LevelAttempt],
             model: str, counter: TokenCounter) -> EscalationOutcome:
    rejected = tuple(sorted({f for a in attempts for f in a.rejected_facts}))
    return EscalationOutcome(text=text, level=level, verification=verification, rejected_facts=rejected,
                             attempts=tuple(attempts), model=model, prompt_version=PROMPT_VERSION,
                             token_count=counter.count_text(text))


async def _attempt(level: _Level, job: _Job, timeout_s: float | None, deadline: Deadline,
                   detach: Detach | None) -> tuple[str | None, LevelAttempt]:
    """Call one level and judge its answer; a failure becomes a rejected attempt."""
    request = build_request(job.kind, level.prompt, job.sources_text, job.anchors_text,
                            job.target_tokens)
    started = time.perf_counter()
    name = level.summarizer.name
    try:
        raw = await (level.summarizer.complete(request) if level.local  # local: never bounded
                     else _call(level.summarizer, request, timeout_s, deadline, detach))
    except TimeoutError:
        return None, LevelAttempt(level.name, name, False, "timeout",
                                  f"no answer within {deadline.bound(timeout_s)}s", duration_ms=_ms(started))
    except Exception as exc:  # any summarizer failure is data: the next level runs
        error = redact(f"{type(exc).__name__}: {exc}")[:500]
        return None, LevelAttempt(level.name, name, False, "error", error, duration_ms=_ms(started))
    attempt = LevelAttempt(level.name, name, True, duration_ms=_ms(started))
    raw_text = raw if isinstance(raw, str) else ""
    return await off_loop(len(raw_text) + len(job.sources_text), _redacted_judged, raw_text, attempt, job)


def _redacted_judged(raw: str, attempt: LevelAttempt, job: _Job) -> tuple[str, LevelAttempt]:
    """A level's answer redacted, and judged (CPU work: the verifier reads the whole source)."""
    text = redact(raw)
    return text, _judge(attempt, text, job)


async def _call(summarizer: Summarizer, request: SummaryRequest, timeout_s: float | None,
                deadline: Deadline, detach: Detach | None) -> str:
    """The summarizer's answer within the timeout and the deadline (TimeoutError otherwise)."""
    bound = deadline.bound(timeout_s)
    if detach is None or deadline.at is None or bound == timeout_s:
        return await asyncio.wait_for(summarizer.complete(request), bound)
    task = asyncio.ensure_future(summarizer.complete(request))
    done, _ = await asyncio.wait({task}, timeout=bound)
    if not done:  # the deadline, not the summarizer's own timeout: let the call finish elsewhere
        detach(task)
        raise TimeoutError
    return task.result()


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _judge(attempt: LevelAttempt, text: str, job: _Job) -> LevelAttempt:
    """Accept or reject a level's (already redacted) output."""
    judged = replace(attempt, tokens=job.counter.count_text(text))
    if not text.strip():
        return replace(judged, accepted=False, reason="empty")
    if judged.tokens >= job.input_tokens:
        return replace(judged, accepted=False, reason="not_shorter")
    if judged.tokens > job.target_tokens * MAX_TARGET_RATIO:
        return replace(judged, accepted=False, reason="too_long")
    result = verify_summary(text, job.sources_text, job.anchors_text)
    if not result.ok:
        return replace(judged, accepted=False, reason="unverified", rejected_facts=result.rejected_facts)
    return judged
