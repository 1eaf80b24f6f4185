"""Summary verifier: a summary may not introduce facts its sources lack.

Facts are what a summarizer can get wrong while sounding right: numbers, ids, paths, URLs, emails,
dates, amounts and names. Ordinary words never are: a faithful summary rewords freely. Each fact of
the summary must occur in the sources or the anchor block, compared the way a reader would:
- ids, paths, versions and symbols as whole tokens, case-insensitively ("ORD-4471" is not found in
  "ORD-4471-B"; "src/a.py" is found in "/repo/src/a.py"; "6.0.0rc2" in "6.0.0rc2.dev33");
- numbers normalised ("1,200" == "1200" == "1.200,00"; "0.50" == "0.5"), so reformatting passes;
  amounts also keep their currency ("$1,250" is not "€1,250");
- dates in ISO or month-name form ("2026-03-15" == "March 15, 2026");
- names as whole words, case-insensitively. A capitalised word at a sentence or line start is a name
  only if it is not an ordinary word (compaction/summarize/lexicon.py), so "Copy the text." passes and
  "Zoe approved it." does not.
`calibration_rates` measures the verifier on a labelled corpus (bench/verifier_eval.py builds one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from compaction.summarize.lexicon import word_class

FactKind = Literal["url", "email", "path", "id", "version", "date", "amount", "number", "name",
                   "lead"]

_LETTER = r"A-Za-z\u00C0-\u024F"
_WORDCH = rf"{_LETTER}0-9_"
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?:\.\d{3})+,\d+|\d+(?:\.\d+)?"
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
          r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_CURRENCY = {"$": "usd", "us$": "usd", "usd": "usd", "€": "eur", "eur": "eur", "£": "gbp",
             "gbp": "gbp", "r$": "brl", "brl": "brl", "¥": "jpy", "jpy": "jpy", "chf": "chf"}
_MDATE = (rf"\b{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?\b"
          rf"|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}(?:,? \d{{4}})?\b")
_AMOUNT = (rf"(?:US\$|R\$|[$€£¥])\s?(?:{_NUMBER})|\b(?:USD|EUR|GBP|BRL|JPY|CHF)\s?(?:{_NUMBER})\b"
           rf"|(?<![\w.,])(?:{_NUMBER})\s?(?:USD|EUR|GBP|BRL|JPY|CHF)\b")
_FACT = re.compile(
    r"(?P<url>https?://[^\s<>\"'()\[\]`]*[^\s<>\"'()\[\]`.,;:!?])"
    r"|(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})"
    rf"|(?P<mdate>{_MDATE})|(?P<amount>{_AMOUNT})"
    rf"|(?P<bignum>(?<![\w.,])(?:\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d{{1,3}}(?:\.\d{{3}})+,\d+)(?![\w]))"
    rf"|(?P<token>(?:~?/|\./|[#@])?[{_WORDCH}]+(?:(?:::|[-.:/\\#@+]{{1,2}})[{_WORDCH}]+)*)"
)
_REFERENCE_FACTS = re.compile(rf"(?P<mdate>{_MDATE})|(?P<amount>{_AMOUNT})"
                              r"|(?P<iso>\b\d{4}-\d{2}-\d{2}\b)")
_LIST_MARKER = re.compile(r"(?m)^(\s*)\d{1,2}[.)](?=\s)")
_HEADER_LINE = re.compile(r"(?m)^\s*</?ctxproxy:[^>]*>.*$")
_TITLE_LINE = re.compile(r"(?m)^\s*(?:#{1,6}\s.*|\*\*[^*\n]+\*\*:?.*|[^\n.:!?]{1,40}:\s*)$")
_SENTENCE_END = set(".!?:;\n-*#>|([{\"'`“‘—–")
_PLAIN_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_NUMBER_WITH_UNIT = re.compile(r"(\d+(?:\.\d+)?)(?:[A-Za-z%]{1,3})")
_LINE_REF = re.compile(r"(.*[A-Za-z_].*?):(\d+)(?::(\d+))?")
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_VERSION = re.compile(r"v?\d+(?:\.\w+)+(?:[+-]\w+(?:\.\w+)*)?", re.IGNORECASE)
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "a.k.a", "n/a", "w/o", "w/", "and/or",
                            "i/o", "e.g.", "p.s"})
# Words of the summary format and the prompts: capitalised by the format, not facts.
SECTION_WORDS = frozenset("""
intent decisions decision files file artifacts artifact errors error fixes fix open operations
operation approvals approval next steps step expand details about user assistant summary tool
system none pending unknown the this that these those and but also then however note notes
current state task tasks todo todos durable facts rationale context conversation messages
message agent session
""".split())  # noqa: SIM905
# Short or ambiguous words the lexicon cannot judge well (2 letters, first names that are words).
COMMON_WORDS = SECTION_WORDS | frozenset("""
a am an as at be by do go he if in is it me my no of oh on or so to up us we ok id ids
i all any are was were has have had not now new old one two per via yes its our out off own few
however meanwhile furthermore moreover additionally nevertheless nonetheless consequently overall
finally lastly firstly secondly thirdly next then thus hence therefore otherwise instead likewise
similarly alternatively accordingly subsequently afterwards afterward earlier later previously
currently initially eventually ultimately meantime also still yet besides indeed regardless
""".split())  # noqa: SIM905
# An unknown (rare) word with an inflection suffix is a word form, not a name ("Parametrised").
_INFLECTED = re.compile(r"(?:ed|ing|ly|is(?:ed|es|ing)|iz(?:ed|es|ing)|tion|ment|ness|able|ible|ful"
                        r"|less)$")
_PREFIXES = ("re", "un", "pre", "de", "non", "mis", "over", "under", "sub", "co")
# Acronyms of everyday technical prose: not facts a summary could invent.
COMMON_ACRONYMS = frozenset("""
api apis url urls uri json yaml toml xml html css sql http https tcp udp ip dns ssh tls ssl ui ux
cli gui ide os cpu gpu ram io ci cd pr prs mr ok id ids uuid utf ascii csv pdf png jpg svg md rst
llm ai ml db env vm tbd todo fyi eta asap faq n/a na tldr imo nb ps re utc gmt am pm cwd pid tty
stdin stdout stderr regex sdk ssh git npm pip eof exe dll tmp etc
""".split())  # noqa: SIM905


@dataclass(frozen=True)
class VerificationResult:
    ok: bool
    rejected_facts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fact:
    """One fact of a text: its kind, its comparable value, and the currency of an amount."""

    kind: FactKind
    value: str  # lowercased; numbers canonical; dates ISO ("2026-03-15" or "03-15")
    currency: str = ""


def normalise_number(text: str) -> str:
    """Canonical digits: thousands separators dropped, decimal point kept, trailing zero decimals cut."""
    if "," in text and "." in text:
        decimal = "," if text.rfind(",") > text.rfind(".") else "."
    elif text.count(",") + text.count(".") == 1:
        sep = "," if "," in text else "."
        decimal = sep if len(text) - text.index(sep) - 1 != 3 else ""
    else:
        decimal = ""
    integer, _, fraction = text.rpartition(decimal) if decimal else (text, "", "")
    integer = re.sub(r"[,.]", "", integer) or "0"
    fraction = fraction.rstrip("0")
    return f"{integer.lstrip('0') or '0'}.{fraction}" if fraction else integer.lstrip("0") or "0"


def _month_date(text: str) -> str:
    """ISO form of a month-name date: "2026-03-15", or "03-15" without a year."""
    name = re.search(_MONTH, text)
    month = _MONTHS.index(name.group()[:3].lower()) + 1 if name else 1
    numbers = re.findall(r"\d+", text)
    day = next(n for n in numbers if len(n) <= 2)
    year = next((n for n in numbers if len(n) == 4), "")
    return f"{year}-{month:02d}-{int(day):02d}" if year else f"{month:02d}-{int(day):02d}"


def _at_sentence_start(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t*_")
    return not before or before[-1] in _SENTENCE_END


def _prepare(text: str) -> str:
    return _LIST_MARKER.sub(r"\1", _HEADER_LINE.sub("", text))


def _title_spans(text: str) -> list[tuple[int, int]]:
    """Headings, bold labels and short "Label:" lines: Title Case there is formatting, not names."""
    return [m.span() for m in _TITLE_LINE.finditer(text)]


def text_facts(text: str) -> list[Fact]:
    """Every fact of `text`, in order (see the module docstring for what counts as one)."""
    text = _prepare(text)
    titles = _title_spans(text)
    facts: list[Fact] = []
    for match in _FACT.finditer(text):
        kind, value = match.lastgroup or "", match.group()
        if kind in ("url", "email"):
            facts.append(Fact(kind, value.lower().rstrip(".")))  # type: ignore[arg-type]
        elif kind == "mdate":
            facts.append(Fact("date", _month_date(value)))
        elif kind == "amount":
            facts.append(_amount(value))
        elif kind == "bignum":
            facts.append(Fact("number", normalise_number(value)))
        else:
            lead = _at_sentence_start(text, match.start()) or any(s <= match.start() < e for s, e in titles)
            facts += _token_facts(value, lead)
    return facts


def _amount(text: str) -> Fact:
    number = re.search(_NUMBER, text)
    symbol = re.sub(r"[\d\s.,]", "", text).lower()
    return Fact("amount", normalise_number(number.group() if number else text), _CURRENCY.get(symbol, ""))


def _token_facts(token: str, lead: bool) -> list[Fact]:
    """Facts of one identifier-shaped token (none for an ordinary word)."""
    lowered = token.lower()
    if lowered in _ABBREVIATIONS or lowered.startswith("@") and not any(c.isdigit() for c in token):
        return [] if lowered in _ABBREVIATIONS else [Fact("id", lowered)]
    line_ref = _LINE_REF.fullmatch(token)
    if line_ref and ("/" in token or "." in line_ref.group(1)):
        refs = [Fact("number", n) for n in line_ref.groups()[1:] if n]
        return _token_facts(line_ref.group(1), lead) + refs
    if "/" in token or "\\" in token:
        return [] if _word_pair(token) else [Fact("path", lowered)]
    if _PLAIN_NUMBER.fullmatch(token):
        return [Fact("number", normalise_number(token))]
    iso = _ISO_DATE.fullmatch(token)
    if iso:
        return [Fact("date", lowered)]
    unit = _NUMBER_WITH_UNIT.fullmatch(token)
    if unit:
        return [Fact("number", normalise_number(unit.group(1)))]
    if _VERSION.fullmatch(token) and token[0].isdigit() or token[:1] in "vV" and _VERSION.fullmatch(token):
        return [Fact("version", lowered)]
    if any(c.isdigit() for c in token) or any(s in token for s in ("_", ".", "::", "#", "@", ":", "+")):
        return [Fact("id", lowered)]
    if "-" in token:
        return _hyphenated(token, lead)
    return _word_facts(token, lead)


def _word_pair(token: str) -> bool:
    """ "and/or", "read/write": two ordinary words joined by a slash, not a path."""
    parts = token.split("/")
    return (len(parts) == 2 and all(p.isalpha() and p.islower() for p in parts)
            and all(word_class(p) == "ordinary" for p in parts))


def _hyphenated(token: str, lead: bool) -> list[Fact]:
    parts = token.split("-")
    if any(len(p) >= 2 and p.isupper() for p in parts):
        return [Fact("id", token.lower())]
    facts: list[Fact] = []
    for index, part in enumerate(parts):
        facts += _word_facts(part, lead if index == 0 else lead or parts[0][:1].isupper())
    return facts


def _word_facts(word: str, lead: bool) -> list[Fact]:
    lowered = word.lower()
    if len(word) < 2 or lowered in COMMON_WORDS:
        return []
    if re.search(r"[a-z\u00DF-\u00FF][A-Z]", word):  # CamelCase: GitHub, McDonald, setUp
        return [Fact("name", lowered)]
    if word.isupper():
        return [] if lowered in COMMON_ACRONYMS else [Fact("name", lowered)]
    if word[0].isupper():
        return [Fact("lead" if lead else "name", lowered)]
    return []


def fact_tokens(text: str) -> set[str]:
    """Normalised fact values of `text` (lowercased; numbers canonical).

    Capitalised words at a sentence start are left out: alone, they may be ordinary words.
    """
    return {f.value for f in text_facts(text) if f.kind != "lead"}


# ------------------------------------------------------------------------------------ reference


@dataclass
class Reference:
    """The sources plus the anchors, indexed for fact look-ups."""

    text: str
    lowered: str = ""
    numbers: set[str] = field(default_factory=set)
    amounts: dict[str, set[str]] = field(default_factory=dict)  # number -> currencies
    dates: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.lowered = self.text.lower()
        for run in re.findall(r"\d[\d.,]*\d|\d", self.text):
            self.numbers.add(normalise_number(run) if re.fullmatch(_NUMBER, run) else run)
            self.numbers.update(normalise_number(d) for d in re.findall(r"\d+(?:\.\d+)?", run))
            self.numbers.update(normalise_number(d) for d in re.findall(r"(?<=\.)\d+\.\d+", run))
        for match in _REFERENCE_FACTS.finditer(self.text):
            if match.lastgroup == "amount":
                amount = _amount(match.group())
                self.amounts.setdefault(amount.value, set()).add(amount.currency)
                self.numbers.add(amount.value)
            else:
                date = match.group() if match.lastgroup == "iso" else _month_date(match.group())
                self.dates.update((date, date[5:]))  # "2026-03-15" also answers "03-15"

    def has(self, fact: Fact) -> bool:
        if fact.kind == "number":
            return fact.value in self.numbers
        if fact.kind == "amount":
            currencies = self.amounts.get(fact.value, set())
            if not fact.currency or fact.currency in currencies:
                return fact.value in self.numbers
            return fact.value in self.numbers and not (currencies - {""})
        if fact.kind == "date":
            return fact.value in self.dates or _occurs(self.lowered, fact.value, "atomic")
        if fact.kind in ("name", "lead"):
            return _occurs(self.lowered, fact.value, "word")
        style = "component" if fact.kind in ("path", "url", "email", "version") or "." in fact.value \
            else "atomic"
        return _occurs(self.lowered, fact.value, style)


@lru_cache(maxsize=4096)
def _pattern(value: str, style: str) -> re.Pattern[str]:
    escaped = re.escape(value)
    if style == "word":  # names: "_" and "." are boundaries (a name inside an identifier counts)
        return re.compile(rf"(?<![{_LETTER}0-9]){escaped}(?![{_LETTER}0-9])")
    if style == "component":  # paths, dotted names: a whole component run ("/", "." may surround)
        tail = r"(?![\w-])" if "." in value else r"(?![\w-])(?!\.\w)"
        return re.compile(rf"(?<![\w-]){escaped}{tail}")
    return re.compile(rf"(?<![\w])(?<!\w[-.]){escaped}(?![\w])(?![-.:]\w)")


def _occurs(lowered: str, value: str, style: str) -> bool:
    return _pattern(value, style).search(lowered) is not None


def _lead_is_fact(fact: Fact, reference: Reference) -> bool:
    """A capitalised word at a sentence start is a fact only if it reads as a name."""
    forms = _stems(fact.value)
    if any(form in COMMON_WORDS or _occurs(reference.lowered, form, "word") for form in forms):
        return False
    if len(fact.value) <= 2:
        return True
    classes = {word_class(form) for form in forms}
    if "ordinary" in classes:
        return False
    if word_class(fact.value) == "name":
        return True
    if _word_form(fact.value):
        return False
    return not _shares_stem(fact.value, reference.lowered)


def _word_form(word: str) -> bool:
    """A rare word that is still a word: a British -is- spelling, a prefixed ordinary word
    ("rerun", "rebased"), or an inflected form ("parametrised")."""
    if "is" in word and word_class(word.replace("is", "iz")) == "ordinary":
        return True
    for prefix in _PREFIXES:
        rest = word[len(prefix):]
        if word.startswith(prefix) and len(rest) >= 3 and any(
                word_class(form) == "ordinary" for form in _stems(rest)):
            return True
    return len(word) >= 6 and _INFLECTED.search(word) is not None


def _shares_stem(word: str, lowered: str) -> bool:
    """A rare word (or one of another language) whose stem the sources use: "decidimos"/"decidiu"."""
    stem = word[: max(5, len(word) - 3)]
    return len(word) >= 6 and re.search(rf"(?<![{_LETTER}]){re.escape(stem)}", lowered) is not None


def _stems(word: str) -> tuple[str, ...]:
    """The word and its plausible stems without -s/-es/-d/-ed/-ing (doubled consonant undone)."""
    forms = [word]
    for suffix in ("s", "es", "d", "ed", "ing", "ly"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3:
            forms.append(stem)
            if len(stem) >= 4 and stem[-1] == stem[-2]:
                forms.append(stem[:-1])
    return tuple(forms)


class FactChecker:
    """The verifier for many texts against the same sources (the reference is indexed once)."""

    def __init__(self, sources_text: str, anchors_text: str = "") -> None:
        self._reference = Reference(f"{sources_text}\n{anchors_text}")

    def unsupported(self, text: str) -> list[str]:
        """The facts of `text` that the sources and anchors do not hold (sorted, unique)."""
        rejected: set[str] = set()
        for fact in text_facts(text):
            missing = (_lead_is_fact(fact, self._reference) if fact.kind == "lead"
                       else not self._reference.has(fact))
            if missing:
                rejected.add(fact.value)
        return sorted(rejected)


def verify_summary(summary_text: str, sources_text: str, anchors_text: str = "") -> VerificationResult:
    """Accept the summary only if each of its facts occurs in the sources or the anchors."""
    rejected = FactChecker(sources_text, anchors_text).unsupported(summary_text)
    return VerificationResult(ok=not rejected, rejected_facts=tuple(rejected))


# ---------------------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class CalibrationCase:
    """One labelled summary: faithful (`invented` empty) or carrying one invented fact."""

    category: str  # e.g. "faithful/abstractive", "invented/new_path"
    summary: str
    sources: str
    anchors: str = ""
    invented: str = ""  # the invented value, as written in the summary


@dataclass(frozen=True)
class CalibrationReport:
    """False rejections of faithful summaries and catches of invented facts, per category."""

    faithful: int
    false_rejections: int
    invented: int
    caught: int
    by_category: dict[str, tuple[int, int]]  # category -> (cases, verifier rejected)
    misjudged: tuple[tuple[str, str], ...]  # (category, reason) of wrong verdicts, for review

    @property
    def false_rejection_rate(self) -> float:
        return self.false_rejections / self.faithful if self.faithful else 0.0

    @property
    def catch_rate(self) -> float:
        return self.caught / self.invented if self.invented else 0.0


def calibration_rates(cases: Iterable[CalibrationCase]) -> CalibrationReport:
    """Run the verifier over labelled cases (pure: no I/O)."""
    counts: dict[str, list[int]] = {}
    faithful = rejected_faithful = invented = caught = 0
    misjudged: list[tuple[str, str]] = []
    for case in cases:
        result = verify_summary(case.summary, case.sources, case.anchors)
        tally = counts.setdefault(case.category, [0, 0])
        tally[0] += 1
        tally[1] += 0 if result.ok else 1
        if case.invented:
            invented += 1
            caught += 0 if result.ok else 1
            if result.ok:
                misjudged.append((case.category, f"missed {case.invented!r}"))
        else:
            faithful += 1
            rejected_faithful += 0 if result.ok else 1
            if not result.ok:
                misjudged.append((case.category, f"rejected {', '.join(result.rejected_facts)}"))
    return CalibrationReport(faithful, rejected_faithful, invented, caught,
                             {k: (v[0], v[1]) for k, v in sorted(counts.items())}, tuple(misjudged))
