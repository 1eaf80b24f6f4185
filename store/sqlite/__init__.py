"""The SQLite backend, the embedded default: one database file, its migrations and FTS5 search."""
