"""One strategy over one recorded conversation, measured on what the agent needed later.

The replay itself is replay/run.py (the real engine over a throw-away store) or
replay/baseline_run.py (passthrough, sliding window); a `Collector` observes each forwarded request
and keeps per-request scores, placeholder tokens, the compaction steps and, for engine runs, why
each identifier the sliding window kept was lost. Planted facts with a `used_at` index (generated
sets) are checked at the request whose reply uses them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate

from compaction import REPLY_PRIMING, Budget, Message, Summarizer, TokenCounter
from replay.baseline_run import budget_for, replay_baseline
from replay.baselines import BASELINES, sliding_window
from replay.checks import CachedCounter, message_identity
from replay.fallback import level_counts, outcome_counts
from replay.needed_later.attribution import Mechanism, explain_loss, kept_by, trace_origins
from replay.needed_later.identifiers import IdentifierExtractor, Kind
from replay.needed_later.needed import NeededIndex
from replay.needed_later.placeholders import placeholder_tokens
from replay.needed_later.scoring import LOOKAHEADS, RequestScore, score_request
from replay.needed_later.texts import TextIndex, readable_text
from replay.records import Check, RecordedConversation
from replay.report import ConversationReport
from replay.run import ObservedRequest, ReplayOptions, replay_engine
from store.models import CompactionEvent

MAX_EXAMPLES = 40  # loss examples kept per conversation and strategy


@dataclass(frozen=True)
class LossExample:
    """A needed identifier the sliding window kept and ctxproxy lost, with the mechanism."""

    point: int
    ident: str
    kind: Kind
    last_seen: int
    mechanism: Mechanism


@dataclass(frozen=True)
class PlantedUse:
    """A planted fact at the request whose reply uses it: was it in the forwarded context?"""

    kind: str
    fact: str
    used_at: int
    kept: bool


@dataclass(frozen=True)
class StrategyResult:
    """Everything measured for one strategy on one conversation."""

    conversation: str
    strategy: str
    scores: tuple[RequestScore, ...]
    report: ConversationReport
    steps: dict[str, int] = field(default_factory=dict)  # committed compaction steps by level
    outcomes: dict[str, int] = field(default_factory=dict)  # step attempts by outcome
    losses: dict[str, int] = field(default_factory=dict)  # mechanism -> identifiers (vs sliding window)
    gains: dict[str, int] = field(default_factory=dict)  # origin kind -> identifiers the window lost
    examples: tuple[LossExample, ...] = ()
    planted: tuple[PlantedUse, ...] = ()


def forwarded_text(messages: Sequence[Message]) -> str:
    """Everything the model reads in a forwarded list (tool schemas excluded)."""
    return "\n".join(readable_text(m) for m in messages)


class Collector:
    """The per-request observer of a replay: scores, placeholders, steps, loss attribution."""

    def __init__(self, conv: RecordedConversation, index: NeededIndex, counter: CachedCounter,
                 budget: Budget, *, contrast: bool) -> None:
        self.conv, self.index, self.counter, self.budget = conv, index, counter, budget
        self.contrast = contrast
        tools_tokens = counter.count_tools(conv.tools)
        self._history_tokens = list(accumulate((counter.count_message(m) for m in conv.messages),
                                               initial=REPLY_PRIMING + tools_tokens))
        self._recorded = {message_identity(m) for m in conv.messages}
        self.scores: list[RequestScore] = []
        self.events: list[CompactionEvent] = []
        self.losses: Counter[str] = Counter()
        self.gains: Counter[str] = Counter()
        self.examples: list[LossExample] = []
        self.planted: list[PlantedUse] = []
        self._uses: dict[int, list[Check]] = {}
        for check in conv.checks:
            if check.used_at is not None:
                self._uses.setdefault(check.used_at, []).append(check)

    def __call__(self, seen: ObservedRequest) -> None:
        history: list[Message] = list(self.conv.messages[:seen.point])
        text = TextIndex(forwarded_text(list(seen.forwarded)))
        made = [m for m in seen.forwarded if message_identity(m) not in self._recorded]  # ctxproxy's own
        score = score_request(self.index.needs(seen.point), text,
                              history_tokens=self._history_tokens[seen.point],
                              budget=seen.check.budget, forwarded_tokens=seen.check.tokens_forwarded,
                              placeholder_tokens=placeholder_tokens(made, self.counter.counter.count_text))
        self.scores.append(score)
        self.events += seen.events
        self.planted += [PlantedUse(c.kind, c.fact, seen.point, c.fact in text.text)
                         for c in self._uses.get(seen.point, ())]
        if self.contrast and score.over_window:
            self._attribute(seen, history, score)

    def _attribute(self, seen: ObservedRequest, history: list[Message], score: RequestScore) -> None:
        """Compare with a sliding window of the same budget: why each identifier only the window kept
        was lost, and where ctxproxy kept each identifier only it kept."""
        window = TextIndex(forwarded_text(sliding_window(history, self.budget.messages, self.counter)))
        every = {i.ident: i for i in self.index.needs(seen.point).select(max(LOOKAHEADS))}
        window_lost = {ident for ident in every if not window.has(ident)}
        origins = trace_origins(history, seen.forwarded)
        levels = {s.id: str(s.level) for s in seen.summaries}
        ranges = [(s.first_seq, s.last_seq) for s in seen.summaries]
        for ident in sorted(score.missing - window_lost):
            item = every[ident]
            mechanism = explain_loss(ident, item.last_seen, origins, levels, ranges)
            self.losses[mechanism] += 1
            if len(self.examples) < MAX_EXAMPLES:
                self.examples.append(LossExample(seen.point, ident, item.kind, item.last_seen, mechanism))
        for ident in window_lost - score.missing:
            self.gains[kept_by(ident, origins, seen.forwarded) or "unknown"] += 1

    def result(self, strategy: str, report: ConversationReport) -> StrategyResult:
        """The collected figures, with the replay's own report."""
        return StrategyResult(self.conv.id, strategy, tuple(self.scores), report, level_counts(self.events),
                              outcome_counts(self.events), dict(self.losses), dict(self.gains),
                              tuple(self.examples), tuple(self.planted))


@lru_cache(maxsize=1)
def default_extractor() -> IdentifierExtractor:
    """One extractor per process (its ordinary-word cache is shared)."""
    return IdentifierExtractor()


def collector_for(conv: RecordedConversation, options: ReplayOptions, *, contrast: bool,
                  extractor: IdentifierExtractor | None = None) -> Collector:
    """A collector for `conv` with the budget the engine computes for `options`."""
    counter = CachedCounter(TokenCounter.for_model(options.model))
    index = NeededIndex(conv.messages, conv.tools, extractor or default_extractor())
    return Collector(conv, index, counter, budget_for(options, conv.tools, counter.counter),
                     contrast=contrast)


async def run_engine(conv: RecordedConversation, options: ReplayOptions, strategy: str,
                     summarizer: Summarizer | None = None,
                     extractor: IdentifierExtractor | None = None) -> StrategyResult:
    """ctxproxy (the real engine, `summarizer` or the options' one) over `conv`, measured."""
    collector = collector_for(conv, options, contrast=True, extractor=extractor)
    report = await replay_engine(conv, options, summarizer=summarizer, strategy=strategy,
                                 observer=collector)
    return collector.result(strategy, report)


def run_baseline(conv: RecordedConversation, name: str, options: ReplayOptions,
                 extractor: IdentifierExtractor | None = None) -> StrategyResult:
    """A baseline of replay/baselines.py (`passthrough`, `sliding_window`, ...) over `conv`, measured."""
    collector = collector_for(conv, options, contrast=False, extractor=extractor)
    report = replay_baseline(conv, name, BASELINES[name], options, observer=collector)
    return collector.result(name, report)
