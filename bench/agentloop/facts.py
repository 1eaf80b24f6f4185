"""The facts an agent-loop conversation carries: shapes the first generator does not use.

Each fact is a verbatim value with, where it makes the test harder, a near-identical decoy that is
also in the history (an id with another suffix, a hash sharing its prefix, a path one character
off, another release candidate). Values are drawn from a seeded RNG only.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

FactKind = Literal["suffixed_id", "commit", "account", "version", "exception", "command", "path",
                   "amount", "migration", "endpoint"]

_PREFIXES = ("INC", "CHG", "LOT", "REQ", "PAG")
_PACKAGES = ("conciliacao", "ledger", "settlement", "faturas", "payouts", "kyc")
_STEMS = ("rate_table", "batch_close", "fx_quote", "split_rule", "fee_matrix", "cutoff")
_KEYS = ("ledger_region", "tenant_shard", "fx_source", "cutoff_tz", "payout_rail", "iban_hint")
_SERVICES = ("ledger-api", "payout-worker", "fx-sync", "recon-cron")
_CASES = ("half_even_rounding", "cutoff_across_dst", "duplicate_capture", "partial_refund_split")


@dataclass(frozen=True)
class Fact:
    """One planted value, its kind, and a near-identical decoy that is legitimately in the history."""

    kind: FactKind
    value: str
    decoy: str | None = None


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def suffixed_id(rng: random.Random) -> Fact:
    """`LOT-40913-c`: the suffix is part of the id (the decoy has another suffix)."""
    number, suffix = rng.randint(10_000, 99_999), rng.choice("bcdef")
    prefix = rng.choice(_PREFIXES)
    return Fact("suffixed_id", f"{prefix}-{number}-{suffix}", f"{prefix}-{number}-{chr(ord(suffix) - 1)}")


def commit(rng: random.Random) -> Fact:
    """A 12-hex commit whose 7-character prefix is shared by the decoy."""
    head = _hex(rng, 7)
    return Fact("commit", head + _hex(rng, 5), head + _hex(rng, 5))


def account(rng: random.Random) -> Fact:
    """A mixed-case account id (`acct_8Hq2Lm9xZt`)."""
    alphabet = string.ascii_letters + string.digits
    return Fact("account", "acct_" + "".join(rng.choice(alphabet) for _ in range(10)))


def version(rng: random.Random) -> Fact:
    """A pre-release version; the decoy is the previous release candidate."""
    major, minor, patch, rc = rng.randint(2, 9), rng.randint(0, 30), rng.randint(0, 9), rng.randint(2, 6)
    return Fact("version", f"{major}.{minor}.{patch}-rc.{rc}", f"{major}.{minor}.{patch}-rc.{rc - 1}")


def exception(rng: random.Random) -> Fact:
    """An exception line with its quoted key."""
    return Fact("exception", f"KeyError: '{rng.choice(_KEYS)}'")


def command(rng: random.Random) -> Fact:
    """A test command the agent must rerun exactly (node id, keyword, flags)."""
    package, case = rng.choice(_PACKAGES), rng.choice(_CASES)
    return Fact("command", f"pytest tests/{package}/test_{case}.py::test_{case}_{rng.randint(2, 9)} -x -q")


def path(rng: random.Random) -> Fact:
    """A source path and a decoy one character away (`rate_table_v2.py` / `rate_tables_v2.py`)."""
    package, stem, n = rng.choice(_PACKAGES), rng.choice(_STEMS), rng.randint(2, 4)
    real, decoy = f"src/{package}/{stem}_v{n}.py", f"src/{package}/{stem}s_v{n}.py"
    return Fact("path", *((real, decoy) if rng.random() < 0.5 else (decoy, real)))


def _lakh(value: int) -> str:
    """Indian grouping: `₹3,45,120`."""
    return f"₹{value // 100_000},{value // 1_000 % 100:02d},{value % 1_000:03d}"


def amount(rng: random.Random) -> Fact:
    """An amount in another currency and format (Brazilian, Swiss, Japanese, Indian, French, Swedish)."""
    whole, cents = rng.randint(1_200, 98_000), rng.randint(1, 99)
    formats: tuple[Callable[[], str], ...] = (
        lambda: f"R$ {whole:,}".replace(",", ".") + f",{cents:02d}",
        lambda: f"CHF {whole:,}".replace(",", "'") + f".{cents:02d}",
        lambda: f"¥{whole * 100:,}",
        lambda: _lakh(whole * 37 + 100_000) + f".{cents:02d}",
        lambda: f"{whole:,}".replace(",", " ") + f",{cents:02d} €",
        lambda: f"{whole:,}".replace(",", " ") + f",{cents:02d} kr",
    )
    return Fact("amount", rng.choice(formats)())


def migration(rng: random.Random) -> Fact:
    """An alembic revision command (a hash the agent must not mistype)."""
    return Fact("migration", f"alembic downgrade {_hex(rng, 12)}")


def endpoint(rng: random.Random) -> Fact:
    """An internal URL with a versioned path and query."""
    service = rng.choice(_SERVICES)
    return Fact("endpoint", f"https://{service}.internal:{rng.randint(8000, 8999)}/v{rng.randint(2, 4)}"
                            f"/batches?cursor={_hex(rng, 8)}")


DRAWERS: tuple[Callable[[random.Random], Fact], ...] = (
    suffixed_id, commit, account, version, exception, command, path, amount, migration, endpoint)


def draw_facts(rng: random.Random) -> list[Fact]:
    """One fact of every kind, in a shuffled order."""
    facts = [draw(rng) for draw in DRAWERS]
    rng.shuffle(facts)
    return facts
