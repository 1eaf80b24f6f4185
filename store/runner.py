"""How store code runs its queries, whatever the backend: a tenant-scoped runner and its cursor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class Cursor(Protocol):
    """What store code reads from a query, whatever the backend (sqlite3's cursor, or PostgreSQL's)."""

    @property
    def lastrowid(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Runner(Protocol):
    """A TenantStore's one query function: binds `:tenant` itself."""

    def __call__(self, sql: str, params: dict[str, Any] | None = None) -> Cursor: ...
