"""The folder layout is the architecture: these import rules keep it so (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("config", "store", "compaction", "replay", "proxy")  # each may import only those before it


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", LAYERS)
def test_packages_import_only_lower_layers(package: str) -> None:
    forbidden = set(LAYERS[LAYERS.index(package) + 1:]) | {"bench", "tests"}
    offenders = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & forbidden) for p in sources(package)}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_engine_never_imports_aiohttp() -> None:
    assert [str(p) for p in sources("compaction") if "aiohttp" in imported_roots(p)] == []


def test_only_compaction_llm_imports_litellm() -> None:
    everything = [p for pkg in (*LAYERS, "bench") for p in sources(pkg)]
    importers = sorted(str(p.relative_to(ROOT)) for p in everything if "litellm" in imported_roots(p))
    assert importers == ["compaction/llm.py"]
