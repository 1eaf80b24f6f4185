"""The folder layout is the architecture: these import rules keep it so (docs/architecture.md)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("config", "store", "compaction", "replay", "proxy")  # each may import only those before it
MAX_MODULES_PER_FOLDER = 12  # in compaction/, store/, proxy/ and each sub-package of theirs (__init__ aside)

# compaction/: the sub-packages each sub-package may import (besides the modules at compaction/'s root,
# which import no sub-package). Only compaction/engine.py and the face (compaction/__init__.py) import
# them all; no sub-package imports the engine or the face.
COMPACTION_SUBPACKAGES: dict[str, frozenset[str]] = {
    "anchors": frozenset(),
    "summarize": frozenset({"anchors"}),
    "view": frozenset({"anchors", "summarize"}),
    "steps": frozenset({"anchors", "summarize", "view"}),
    "recall": frozenset(),
    "resend": frozenset(),
}
STORE_BACKENDS = ("sqlite", "postgres")  # store/<backend>/: neither imports the other
STORE_OPENER = "store.factory"  # the one module outside a backend that imports one

# proxy/: routes/ holds the HTTP handlers, which only the app wires up; server/ the machinery they share;
# upstream/ the transports; wire/ the formats, at the bottom. Each unit may import only these of proxy/.
PROXY_ROUTES_IMPORTER = "proxy.app"
PROXY_MAY_IMPORT: dict[str, frozenset[str]] = {
    "wire": frozenset({"wire"}),
    "upstream": frozenset({"upstream", "wire", "error_mapping"}),
}
AIOHTTP_SERVER = ("aiohttp.web", "aiohttp.typedefs")  # the server side of aiohttp (handlers, requests)


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


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(path: Path) -> Iterator[str]:
    """Every module `path` imports (function-level imports too): `from pkg import mod` names `pkg.mod`."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                yield child if is_module(child) else node.module


def graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    return {module_name(p): {m for m in imported_modules(p) if m.split(".")[0] == package}
            for p in sources(package)}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


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


@pytest.mark.parametrize("package", ["compaction", "store", "proxy"])
def test_no_import_cycles(package: str) -> None:
    edges = {m: targets - {package} for m, targets in graph(package).items() if m != package}
    assert cycles(edges) == []


@pytest.mark.parametrize("package", ["compaction", "store", "proxy"])
def test_at_most_twelve_modules_per_folder(package: str) -> None:
    folders = [ROOT / package, *(p.parent for p in (ROOT / package).glob("*/__init__.py"))]
    counts = {str(f.relative_to(ROOT)): len([p for p in f.glob("*.py") if p.name != "__init__.py"])
              for f in folders}
    assert {f: n for f, n in counts.items() if n > MAX_MODULES_PER_FOLDER} == {}


def test_compaction_has_exactly_the_known_subpackages() -> None:
    found = {p.parent.name for p in (ROOT / "compaction").glob("*/__init__.py")}
    assert found == set(COMPACTION_SUBPACKAGES)


def compaction_unit(module: str) -> str:
    """`face`, `engine`, `core` (another module at compaction/'s root) or the sub-package's name."""
    parts = module.split(".")
    if len(parts) == 1:
        return "face"
    if parts[1] in COMPACTION_SUBPACKAGES:
        return parts[1]
    return "engine" if parts[1] == "engine" else "core"


def allowed_compaction_units(unit: str) -> set[str]:
    if unit in ("face", "engine"):
        return {"core", *COMPACTION_SUBPACKAGES, "engine"}
    if unit == "core":
        return {"core"}
    return {"core", unit, *COMPACTION_SUBPACKAGES[unit]}


def test_compaction_subpackages_import_only_those_below_them() -> None:
    offenders: dict[str, list[str]] = {}
    for module, targets in graph("compaction").items():
        allowed = allowed_compaction_units(compaction_unit(module))
        bad = sorted(t for t in targets if compaction_unit(t) not in allowed)
        if bad:
            offenders[module] = bad
    assert offenders == {}


def store_unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else module


def test_store_backends_never_import_each_other() -> None:
    offenders = {m: sorted(t for t in targets if store_unit(t) in STORE_BACKENDS
                           and store_unit(t) != store_unit(m))
                 for m, targets in graph("store").items() if store_unit(m) in STORE_BACKENDS}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_only_the_opener_imports_a_store_backend() -> None:
    offenders = {m: sorted(t for t in targets if store_unit(t) in STORE_BACKENDS)
                 for m, targets in graph("store").items()
                 if store_unit(m) not in STORE_BACKENDS and m != STORE_OPENER}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_store_encoding_imports_nothing_else_of_the_store() -> None:
    """Encodings sit at the bottom of the store: they see only each other and the record types
    (store/models.py imports nothing of the store)."""
    offenders = {m: sorted(t for t in targets if store_unit(t) != "encoding" and t != "store.models")
                 for m, targets in graph("store").items() if store_unit(m) == "encoding"}
    assert {m: t for m, t in offenders.items() if t} == {}


def proxy_unit(module: str) -> str:
    """The sub-package of proxy/ a module is in, or the module's own name at proxy/'s root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else module


def imported_names(path: Path) -> Iterator[str]:
    """Every dotted name `path` imports: `from pkg import name` gives `pkg.name`, module or not."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_only_the_app_imports_a_route() -> None:
    offenders = {m: sorted(t for t in targets if proxy_unit(t) == "routes")
                 for m, targets in graph("proxy").items() if m != PROXY_ROUTES_IMPORTER}
    assert {m: t for m, t in offenders.items() if t} == {}


@pytest.mark.parametrize("unit", sorted(PROXY_MAY_IMPORT))
def test_proxy_lower_units_import_nothing_above_them(unit: str) -> None:
    """wire/ sees only formats; upstream/ only formats, transports and the error mapping: neither
    reaches a route, the shared server machinery, recall or the app."""
    offenders = {m: sorted(t for t in targets if proxy_unit(t) not in PROXY_MAY_IMPORT[unit])
                 for m, targets in graph("proxy").items() if proxy_unit(m) == unit and m != f"proxy.{unit}"}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_wire_formats_use_no_http_server_code() -> None:
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in imported_names(p)
                                                  if n.startswith(AIOHTTP_SERVER))
                 for p in sources("proxy/wire")}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_no_proxy_module_is_named_like_its_folder() -> None:
    clashes = [str(p.relative_to(ROOT)) for p in sources("proxy") if p.stem == p.parent.name]
    assert clashes == []
