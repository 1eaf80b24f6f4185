"""Per-conversation results of a replay (one strategy), and their aggregation across conversations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compaction import Message
from replay.baselines import estimate_cost
from replay.checks import RequestCheck
from replay.facts import FactResult, check_facts, invented_facts
from replay.records import RecordedConversation


@dataclass(frozen=True)
class TurnStats:
    """What the engine reported for one request, beyond the independent checks (engine runs only)."""

    occupancy: dict[str, int]
    compacted: bool
    summary_ids: tuple[str, ...]
    waited_on_summarizer: bool
    forced_truncation: bool
    prefix_stable: bool | None
    summarizer_calls: int  # calls during this request and the background work after it
    rejections: int  # verification rejections recorded in this turn's events
    anchors: int  # active anchors after this turn

    def to_dict(self) -> dict[str, Any]:
        return {"occupancy": self.occupancy, "compacted": self.compacted,
                "summary_ids": list(self.summary_ids), "waited_on_summarizer": self.waited_on_summarizer,
                "forced_truncation": self.forced_truncation, "prefix_stable": self.prefix_stable,
                "summarizer_calls": self.summarizer_calls, "rejections": self.rejections,
                "anchors": self.anchors}


@dataclass(frozen=True)
class ConversationReport:
    """Every request's checks, the conversation-end fact checks and (engine runs) per-turn stats."""

    conversation_id: str
    strategy: str
    requests: tuple[RequestCheck, ...]
    facts: tuple[FactResult, ...]
    invented: tuple[str, ...]
    turns: tuple[TurnStats, ...] = ()
    summarizer_calls: int = 0
    cost_usd: float | None = None  # estimated prompt cost of the forwarded requests
    cost_passthrough_usd: float | None = None  # the same requests forwarded whole
    errors: tuple[str, ...] = field(default=())

    @property
    def facts_retained(self) -> float:
        return _share(sum(f.present for f in self.facts), len(self.facts))

    @property
    def corrections_current(self) -> float:
        must = [f for f in self.facts if f.must_be_current]
        return _share(sum(f.current for f in must), len(must))

    @property
    def over_budget(self) -> int:
        return sum(r.over_budget for r in self.requests)

    @property
    def pairing_violations(self) -> int:
        return sum(len(r.pairing) for r in self.requests)

    @property
    def compression_ratio(self) -> float:
        sent = sum(r.tokens_forwarded for r in self.requests)
        return sum(r.tokens_received for r in self.requests) / sent if sent else 0.0

    @property
    def final_compression_ratio(self) -> float:
        last = self.requests[-1] if self.requests else None
        return last.tokens_received / last.tokens_forwarded if last and last.tokens_forwarded else 0.0

    @property
    def prefix_stability(self) -> float | None:
        """Share of requests extending the previous one; None when not measured (sampled runs)."""
        pairs = [r.extends_previous for r in self.requests if r.extends_previous is not None]
        return sum(pairs) / len(pairs) if pairs else None

    @property
    def calls_per_turn(self) -> float:
        return self.summarizer_calls / len(self.requests) if self.requests else 0.0

    @property
    def missing_system_or_last_user(self) -> int:
        return sum(not (r.system_present and r.last_user_present) for r in self.requests)

    def summary(self) -> dict[str, Any]:
        """The headline figures (what tables and the eval gate read)."""
        return {"conversation": self.conversation_id, "strategy": self.strategy,
                "requests": len(self.requests), "facts_retained": self.facts_retained,
                "corrections_current": self.corrections_current, "invented": len(self.invented),
                "over_budget": self.over_budget, "pairing_violations": self.pairing_violations,
                "compression_ratio": self.compression_ratio,
                "final_compression_ratio": self.final_compression_ratio,
                "prefix_stability": self.prefix_stability, "calls_per_turn": self.calls_per_turn,
                "summarizer_calls": self.summarizer_calls,
                "missing_system_or_last_user": self.missing_system_or_last_user,
                "cost_usd": self.cost_usd, "cost_passthrough_usd": self.cost_passthrough_usd,
                "errors": len(self.errors)}

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "facts": [f.to_dict() for f in self.facts],
                "invented_facts": list(self.invented), "error_messages": list(self.errors),
                "per_request": [r.to_dict() for r in self.requests],
                "per_turn": [t.to_dict() for t in self.turns]}


def _share(part: float, whole: int) -> float:
    return part / whole if whole else 1.0


def aggregate(reports: Sequence[ConversationReport]) -> dict[str, Any]:
    """One strategy's figures over several conversations (totals and request-weighted means)."""
    if not reports:
        return {}
    facts = [f for r in reports for f in r.facts]
    must = [f for f in facts if f.must_be_current]
    requests = [q for r in reports for q in r.requests]
    sent = sum(q.tokens_forwarded for q in requests)
    pairs = [q.extends_previous for q in requests if q.extends_previous is not None]
    calls = sum(r.summarizer_calls for r in reports)
    return {"strategy": reports[0].strategy, "conversations": len(reports), "requests": len(requests),
            "facts_retained": _share(sum(f.present for f in facts), len(facts)),
            "corrections_current": _share(sum(f.current for f in must), len(must)),
            "invented": sum(len(r.invented) for r in reports),
            "over_budget": sum(r.over_budget for r in reports),
            "pairing_violations": sum(r.pairing_violations for r in reports),
            "compression_ratio": sum(q.tokens_received for q in requests) / sent if sent else 0.0,
            "prefix_stability": sum(pairs) / len(pairs) if pairs else None,
            "calls_per_turn": calls / len(requests) if requests else 0.0,
            "missing_system_or_last_user": sum(r.missing_system_or_last_user for r in reports),
            "errors": sum(len(r.errors) for r in reports),
            "facts_by_kind": _by_kind(facts)}


def _by_kind(facts: Sequence[FactResult]) -> dict[str, float]:
    """Share of each fact kind present in the final forwarded context (first-seen kind order)."""
    kinds = list(dict.fromkeys(f.kind for f in facts))
    return {k: _share(sum(f.present for f in facts if f.kind == k), sum(f.kind == k for f in facts))
            for k in kinds}


def prompt_cost(model: str, tokens: Sequence[int]) -> float | None:
    """Estimated input cost of requests of `tokens` prompt tokens each (litellm's local price map)."""
    total = 0.0
    for count in tokens:
        cost = estimate_cost(model, count, 0)
        if cost is None:
            return None
        total += cost
    return total


def finish_report(conv: RecordedConversation, strategy: str, model: str,
                  requests: list[RequestCheck], final: Sequence[Message], **extra: Any
                  ) -> ConversationReport:
    """Conversation-end checks over the last forwarded request, and cost estimates."""
    history = list(conv.messages)
    report = ConversationReport(
        conversation_id=conv.id, strategy=strategy, requests=tuple(requests),
        facts=tuple(check_facts(final, history, conv.checks)),
        invented=tuple(invented_facts(final, history)),
        cost_usd=prompt_cost(model, [r.tokens_forwarded for r in requests]),
        cost_passthrough_usd=prompt_cost(model, [r.tokens_received for r in requests]))
    return replace(report, **extra) if extra else report
