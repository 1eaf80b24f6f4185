"""One PostgreSQL connection for the store: the store's `:name` SQL, rows like sqlite3's, transactions.

The store's portable SQL (store/history/ingest.py, store/history/reply.py, store/anchors.py, ...) is
written with `:name` parameters and reads rows by name or position; `Database.execute` translates the
parameters to psycopg's, returns rows that answer both, and gives INSERTs a `lastrowid` (via
`RETURNING id`).
Transactions are explicit (autocommit connection), nest through savepoints, and the outermost one
can take a transaction-scoped advisory lock (released by COMMIT or ROLLBACK, or when a killed
process's session ends). Independent reads can go together in one round trip (`read_many`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql as pgsql

from config.errors import StoreError
from config.fair_lock import FairRLock
from store.runner import Result

_PARAM = re.compile(r"(?<![:\w[]):([A-Za-z_]\w*)")
_ID_TABLES = "messages|anchors|compaction_events|forwarded|tool_rounds"
_INSERT_WITH_ID = re.compile(rf"^\s*INSERT\s+INTO\s+({_ID_TABLES})\b", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """`:name` parameters as psycopg's `%(name)s` (literal `%` escaped; `::type` casts untouched)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


class Row:
    """A result row read by column name or position, like sqlite3.Row."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        return self._values[key if isinstance(key, int) else self._index[key]]

    def keys(self) -> list[str]:
        return list(self._index)


_Shape = tuple[int, dict[str, int]]  # (column count, name -> position) of one statement's rows


def _rows(cur: psycopg.Cursor[Any], shapes: dict[str, _Shape], sql: str) -> list[Row]:
    """The rows, read by name through the statement's column index; built once per SQL text
    (psycopg's description makes an object per column per call: most of a short query's cost)."""
    result = cur.pgresult
    if result is None or result.status != psycopg.pq.ExecStatus.TUPLES_OK:
        return []
    shape = shapes.get(sql)
    if shape is None or shape[0] != result.nfields:  # new, or the table changed (a migration)
        index: dict[str, int] = {}
        for i, col in enumerate(cur.description or ()):
            index.setdefault(col.name, i)  # a joined duplicate name reads as its first column, like sqlite3
        shape = shapes[sql] = (result.nfields, index)
    return [Row(values, shape[1]) for values in cur.fetchall()]


@functools.lru_cache(maxsize=1024)
def _with_id(sql: str) -> tuple[str, bool]:
    """The statement to send and whether it returns the id it inserted (`RETURNING id` added)."""
    returns_id = _INSERT_WITH_ID.match(sql) is not None and "RETURNING" not in sql.upper()
    return sql + (" RETURNING id" if returns_id else ""), returns_id


class Database:
    """The store's one connection (autocommit; explicit transactions), guarded by a lock."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.conn = self._connect()
        self.lock = FairRLock()  # engine threads take turns (config/fair_lock.py)
        self._depth = 0  # open transaction() blocks: never reconnect inside one
        self._shapes: dict[str, _Shape] = {}

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._url, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the PostgreSQL store: {_first_line(exc)}") from exc

    def _usable(self) -> None:
        """A connection the server dropped (restart, failover, idle kill) is replaced before the next
        statement outside a transaction; the statement that met the loss has failed as a StoreError."""
        if self.conn.broken or self.conn.closed:
            self.conn = self._connect()

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> Result:
        """Run one statement of the store's `:name` SQL; psycopg errors become StoreError."""
        text, returns_id = _with_id(sql)
        with self._statement():  # without parameters psycopg sends the text as is (no `%` processing)
            cur = self.conn.execute(to_pyformat(text), params) if params else self.conn.execute(text)
            found = _rows(cur, self._shapes, text)
        return Result(found, int(found[-1][0]) if returns_id and found else None)

    def execute_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        """One statement of the store's `:name` SQL per parameter row, pipelined by psycopg."""
        with self._statement(), self.conn.cursor() as cur:
            cur.executemany(to_pyformat(sql), rows)

    @contextmanager
    def _statement(self) -> Iterator[None]:
        """Under the lock, on a usable connection (outside a transaction); psycopg errors become
        StoreError."""
        with self.lock:
            if not self._depth:
                self._usable()
            try:
                yield
            except psycopg.Error as exc:
                raise StoreError(f"store query failed ({_kind(exc)}): {_first_line(exc)}") from exc

    @contextmanager
    def transaction(self, *lock_keys: str, durable: bool = True) -> Iterator[None]:
        """All-or-nothing; nests through savepoints. The outermost one first waits for each key's
        advisory lock in the order given (held until it ends), so writers of one key serialise
        across processes; BEGIN and the locks go in one round trip. `durable=False` commits without
        waiting for the WAL flush (a server crash may lose the last moments of such commits: for
        records that are reports, never conversation data)."""
        with self.lock:
            if self._depth:
                with self._nested():
                    yield
                return
            self._usable()
            self._depth += 1
            try:
                try:
                    self._begin(lock_keys, durable)
                    yield
                except BaseException:
                    self._end("ROLLBACK")
                    raise
                self._end("COMMIT")
            except psycopg.Error as exc:
                raise StoreError(f"store transaction failed ({_kind(exc)}): "
                                 f"{_first_line(exc)}") from exc
            finally:
                self._depth -= 1

    @contextmanager
    def _nested(self) -> Iterator[None]:
        """A savepoint inside the open transaction (psycopg's, as the server is in a transaction)."""
        self._depth += 1
        try:
            with self.conn.transaction():
                yield
        except psycopg.Error as exc:
            raise StoreError(f"store transaction failed ({_kind(exc)}): {_first_line(exc)}") from exc
        finally:
            self._depth -= 1

    def _begin(self, lock_keys: Sequence[str], durable: bool) -> None:
        """BEGIN, the commit mode and the advisory locks as one simple-protocol script."""
        parts: list[pgsql.Composable] = [pgsql.SQL("BEGIN")]
        if not durable:
            parts.append(pgsql.SQL("SET LOCAL synchronous_commit = off"))
        parts += [pgsql.SQL("SELECT pg_advisory_xact_lock(hashtextextended({}, 0))").format(pgsql.Literal(k))
                  for k in lock_keys]
        self.conn.execute(pgsql.SQL("; ").join(parts))

    def _end(self, command: str) -> None:
        """COMMIT or ROLLBACK; a ROLLBACK on a lost connection is moot (the server rolled back)."""
        if command == "ROLLBACK" and (self.conn.broken or self.conn.closed):
            return
        self.conn.execute(command)

    def read_many(self, statements: Sequence[tuple[str, dict[str, Any]]],
                  settings: Mapping[str, str] | None = None) -> list[Result]:
        """Read-only statements sent together: one round trip (pipeline mode), one transaction (the
        pipeline's implicit one, or the open one), with `settings` local to it; each statement planned
        for its own values (never prepared, so never a generic plan)."""
        with self.lock:
            if not self._depth:
                self._usable()
            try:
                with self.conn.pipeline():
                    if settings:
                        self.conn.execute(_set_local(settings))
                    cursors = [self.conn.execute(to_pyformat(sql), params, prepare=False)
                               for sql, params in statements]
                return [Result(_rows(cur, self._shapes, sql), None)
                        for cur, (sql, _) in zip(cursors, statements, strict=True)]
            except psycopg.Error as exc:
                raise StoreError(f"store query failed ({_kind(exc)}): {_first_line(exc)}") from exc

    def close(self) -> None:
        with self.lock:
            self.conn.close()


def _set_local(settings: Mapping[str, str]) -> pgsql.Composed:
    """One statement setting each server setting until the transaction ends."""
    return pgsql.SQL("SELECT {}").format(pgsql.SQL(", ").join(
        pgsql.SQL("set_config({}, {}, true)").format(pgsql.Literal(name), pgsql.Literal(value))
        for name, value in settings.items()))


_DBAPI = ("IntegrityError", "OperationalError", "ProgrammingError", "DataError", "InternalError",
          "NotSupportedError", "InterfaceError", "DatabaseError")


def _kind(exc: BaseException) -> str:
    """The DB-API class of a psycopg error (UniqueViolation -> IntegrityError), as sqlite3 names it."""
    return next((c.__name__ for c in type(exc).__mro__ if c.__name__ in _DBAPI), type(exc).__name__)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
