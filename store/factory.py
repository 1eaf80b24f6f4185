"""Opening the configured store backend: SQLite (the embedded default) or PostgreSQL (`store.url`)."""

from __future__ import annotations

from config.settings import StoreSettings
from store.interface import StoreBackend


def open_store(settings: StoreSettings, *, autocheckpoint: bool = True) -> StoreBackend:
    """Open (and migrate) the store `settings` names. A server passes `autocheckpoint=False` and
    checkpoints periodically off the event loop."""
    if settings.url:
        from store.postgres.store import PgStore

        return PgStore.open(settings)
    from store.sqlite.store import Store

    return Store.open(settings, autocheckpoint=autocheckpoint)
