"""The job stores and the scheme registry: :func:`open_store` turns a store URL into its store.

One folder per store: :mod:`.sqlite` (``sqlite:///path.db``, the embedded default), :mod:`.postgres`
(``postgresql://`` or ``postgres://``; imported only when asked for, as it needs psycopg) and
:mod:`.memory` (``memory://``, for tests). They share the :class:`~.protocol.Store` protocol and its
records (:mod:`.protocol`) and, for the SQL stores, the ``.sql`` file loader (:mod:`.sqlfiles`).
"""

from __future__ import annotations

from collections.abc import Callable

from corral.runtime.errors import ConfigError, StoreUnavailable
from corral.runtime.stores.memory import MemoryStore
from corral.runtime.stores.protocol import Store
from corral.runtime.stores.sqlite import SqliteStore

__all__ = ["open_store"]


def _postgres(url: str, max_conns: int) -> Store:
    try:
        from corral.runtime.stores.postgres import PostgresStore
    except ImportError as exc:
        raise StoreUnavailable(
            f"the PostgreSQL store needs psycopg and psycopg-pool: pip install 'corral[postgres]' ({exc})"
        ) from exc
    return PostgresStore.from_url(url, max_size=max_conns)


# URL prefix -> how to open it. Any ``sqlite:`` URL goes to the SQLite store, which names the
# spellings it accepts when it refuses one.
_SCHEMES: tuple[tuple[tuple[str, ...], Callable[[str, int], Store]], ...] = (
    (("sqlite:",), lambda url, max_conns: SqliteStore.from_url(url)),
    (("postgresql://", "postgres://"), _postgres),
    (("memory://",), lambda url, max_conns: MemoryStore.from_url(url)),
)


def open_store(store: str | Store, *, max_conns: int = 40) -> Store:
    """Turn a store URL (``sqlite:///path.db``, ``postgresql://...``, ``memory://``) into a
    :class:`Store`; pass a Store through. A PostgreSQL URL gets a pool of ``max_conns`` connections."""
    if isinstance(store, str):
        for prefixes, opener in _SCHEMES:
            if store.startswith(prefixes):
                return opener(store, max_conns)
        raise StoreUnavailable(
            f"unsupported store URL {store!r}: use sqlite:///path.db or postgresql://user@host/database"
        )
    if not isinstance(store, Store):
        raise ConfigError(f"store must be a URL or a Store, got {type(store).__name__}")
    return store
