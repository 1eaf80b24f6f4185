"""How store code runs its queries, whatever the backend: a tenant-scoped runner and its cursor."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    """What store code reads from a query, whatever the backend (sqlite3's cursor, or PostgreSQL's)."""

    @property
    def lastrowid(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Result:
    """A finished query: its rows (fetched at once, under the store's lock: a cursor read after it
    would keep a read transaction open on the connection the engine threads share) and, for an
    INSERT, the last id it wrote."""

    def __init__(self, rows: list[Any], lastrowid: int | None) -> None:
        self._rows = rows
        self._lastrowid = lastrowid

    @property
    def lastrowid(self) -> int | None:
        return self._lastrowid

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return list(self._rows)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class Runner(Protocol):
    """A TenantStore's one query function: binds `:tenant` itself."""

    def __call__(self, sql: str, params: dict[str, Any] | None = None, *, plain: bool = False) -> Cursor: ...


# A tenant's statement run once per row of parameters (`:tenant` bound in each): bulk inserts.
Many = Callable[[str, Sequence[dict[str, Any]]], None]
