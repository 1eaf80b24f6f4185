"""Opening the configured store backend (SQLite, the embedded default)."""

from __future__ import annotations

from config.settings import StoreSettings
from store.interface import StoreBackend


def open_store(settings: StoreSettings, *, autocheckpoint: bool = True) -> StoreBackend:
    """Open (and migrate) the store `settings` names. A server passes `autocheckpoint=False` and
    checkpoints periodically off the event loop."""
    from store.store import Store

    return Store.open(settings, autocheckpoint=autocheckpoint)
