"""compaction's public face: `__all__` is pinned, and proxy/, replay/ and bench/ import nothing else of it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import compaction
from compaction import recall

ROOT = Path(__file__).resolve().parents[2]
FACE = [
    "OPAQUE_TEXT_FIELD", "REPLY_PRIMING", "SYSTEM_ROLES", "Budget", "CalibrationCase", "CalibrationReport",
    "ChatTurn", "Credentials", "EarlyForward", "EarlyStart", "Engine", "ExtractiveSummarizer",
    "LiteLLMSummarizer", "Message", "PreparedRequest", "ResultBudget", "SizedLru", "Summarizer",
    "SummarizerChoice",
    "SummaryRequest", "TokenCounter", "WindowSource", "back_references", "bound_text", "build_request",
    "build_source_text", "bundled_model_windows",
    "calibration_rates", "endpoint_identity", "get_litellm", "get_litellm_async", "group_messages",
    "is_unchanged_marker", "recall", "redact", "redact_obj",
    "resolve_context_window",
]
RECALL_FACE = ["execute", "is_recall_tool", "offered_for_request", "should_offer", "tool_schemas"]
USERS = ("proxy", "replay", "bench")


def compaction_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every import of compaction in `path`; plain `import compaction.x` as (x, "")."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.split(".")[0] == "compaction"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "compaction":
            found += [(node.module, a.name) for a in node.names]
    return found


def test_the_face_is_pinned() -> None:
    assert sorted(compaction.__all__) == sorted(FACE)
    assert all(hasattr(compaction, name) for name in compaction.__all__)


def test_the_recall_face_is_pinned() -> None:
    assert sorted(recall.__all__) == RECALL_FACE
    assert all(callable(getattr(recall, name)) for name in recall.__all__)


@pytest.mark.parametrize("package", USERS)
def test_users_import_compaction_only_through_its_face(package: str) -> None:
    offenders = {str(p.relative_to(ROOT)): bad for p in sorted((ROOT / package).rglob("*.py"))
                 if (bad := [f"{m}:{n}" for m, n in compaction_imports(p)
                             if m != "compaction" or n not in compaction.__all__])}
    assert offenders == {}


def test_users_import_the_face() -> None:
    """The check above looks at real imports: the packages do import compaction."""
    assert any(compaction_imports(p) for pkg in USERS for p in (ROOT / pkg).rglob("*.py"))
