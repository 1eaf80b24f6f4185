"""The planted facts of one generated conversation, drawn deterministically from a seeded RNG.

Retention is measured with concrete facts planted early and asked about late, with
near-identical file names, corrections, pending approvals and discarded hypotheses. Each fact is a
verbatim string that a check looks for in the final forwarded context.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_FIRST = ("Ingrid", "Tomasz", "Marisol", "Oluwaseun", "Henrike", "Anselm", "Yusra", "Bartholomew",
          "Leocadia", "Quentin", "Saoirse", "Evander")
_LAST = ("Valtonen", "Okonkwo-Reyes", "Quintanilla", "Haddad", "Brennecke", "Ferreira-Lund",
         "Castellanos", "Nakashima", "Wojcik", "Delacroix", "Abernathy", "Szabo")
_APPROVERS = ("Dana Whitfield", "Rafael Montague", "Priya Venkataraman", "Corinne Ashdown")
_MODULES = ("billing/invoice", "shipping/label", "payments/refund", "orders/reconcile")
_CURRENCIES = ("$", "€", "£")
_WEIGHTS = ("2.5 kg", "3.7 kg", "4.5 kg", "6.2 kg", "7.8 kg", "11.4 kg")
_ROUNDING = ("ROUND_HALF_EVEN", "ROUND_HALF_DOWN", "ROUND_CEILING")


@dataclass(frozen=True)
class PlantedFacts:
    """Every fact a conversation plants, as the verbatim strings the checks look for."""

    customer: str
    order: str
    refund: str  # amount with currency
    weight: str  # amount with a unit
    deadline: str  # ISO date
    real_path: str
    decoy_path: str  # near-identical name that is NOT the file being changed
    ticket: str
    budget_old: str  # stated first ...
    budget_new: str  # ... then corrected: the current value
    approval_id: str
    approver: str
    hypothesis_value: str  # the fix the discarded hypothesis proposed (never adopted)
    decision: str  # what replaced the hypothesis
    release: str


def _money(symbol: str, amount: int, cents: int | None) -> str:
    whole = f"{symbol}{amount:,}"
    return whole if cents is None else f"{whole}.{cents:02d}"


def draw_facts(rng: random.Random) -> PlantedFacts:
    """Draw one conversation's facts; the same RNG state always yields the same facts."""
    module = rng.choice(_MODULES)
    real, decoy = (3, 2) if rng.random() < 0.5 else (2, 3)
    budget = rng.randrange(3_000, 7_000, 100)
    symbol = rng.choice(_CURRENCIES)
    return PlantedFacts(
        customer=f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        order=f"ORD-{rng.randint(10_000, 99_999)}",
        refund=_money(symbol, rng.randint(1_000, 2_999), rng.randint(1, 99)),
        weight=rng.choice(_WEIGHTS),
        deadline=f"2027-{rng.randint(1, 12):02d}-{rng.randint(10, 28):02d}",
        real_path=f"src/{module}_v{real}.py",
        decoy_path=f"src/{module}_v{decoy}.py",
        ticket=f"SUP-{rng.randint(1_000, 9_999)}",
        budget_old=_money("$", budget, None),
        budget_new=_money("$", budget + rng.randrange(500, 1_500, 100), None),
        approval_id=f"APR-{rng.randint(1_000, 9_999)}",
        approver=rng.choice(_APPROVERS),
        hypothesis_value=f"{rng.choice((45, 75, 90, 120))} seconds",
        decision=rng.choice(_ROUNDING),
        release=f"2.{rng.randint(10, 40)}.{rng.randint(0, 9)}",
    )
