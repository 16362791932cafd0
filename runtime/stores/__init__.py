"""The job stores and the scheme registry: :func:`open_store` turns a store URL into its store.

One folder per store: :mod:`.sqlite` (``sqlite:///path.db``, the embedded default), :mod:`.postgres`
(``postgresql://`` or ``postgres://``; imported only when asked for, as it needs psycopg) and
:mod:`.memory` (``memory://``, for tests). They share the :class:`~.protocol.Store` protocol and its
records (:mod:`.protocol`) and, for the SQL stores, the ``.sql`` file loader (:mod:`.sqlfiles`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from corral.runtime.errors import ConfigError, StoreUnavailable
from corral.runtime.stores.memory import MemoryStore
from corral.runtime.stores.protocol import Store
from corral.runtime.stores.sqlite import SqliteStore

__all__ = ["SCHEMES", "Scheme", "open_store"]


def _postgres(url: str, max_conns: int) -> Store:
    try:
        from corral.runtime.stores.postgres import PostgresStore
    except ImportError as exc:
        raise StoreUnavailable(
            f"the PostgreSQL store needs psycopg and psycopg-pool: pip install 'corral[postgres]' ({exc})"
        ) from exc
    return PostgresStore.from_url(url, max_size=max_conns)


class Scheme(NamedTuple):
    """One store's URLs: its name (its folder under stores/; the conformance suite runs every one), the
    prefixes it answers, an example URL for messages, and how to open it (url, max_conns)."""

    name: str
    prefixes: tuple[str, ...]
    example: str
    open: Callable[[str, int], Store]


# Any ``sqlite:`` URL goes to the SQLite store, which names the spellings it accepts when it refuses one.
SCHEMES: tuple[Scheme, ...] = (
    Scheme("sqlite", ("sqlite:",), "sqlite:///path.db", lambda url, max_conns: SqliteStore.from_url(url)),
    Scheme("postgres", ("postgresql://", "postgres://"), "postgresql://user@host/database", _postgres),
    Scheme("memory", ("memory://",), "memory://", lambda url, max_conns: MemoryStore.from_url(url)),
)


def open_store(store: str | Store, *, max_conns: int = 40) -> Store:
    """Turn a store URL (``sqlite:///path.db``, ``postgresql://...``, ``memory://``) into a
    :class:`Store`; pass a Store through. A PostgreSQL URL gets a pool of ``max_conns`` connections."""
    if isinstance(store, str):
        for scheme in SCHEMES:
            if store.startswith(scheme.prefixes):
                return scheme.open(store, max_conns)
        *others, last = (scheme.example for scheme in SCHEMES)
        raise StoreUnavailable(f"unsupported store URL {store!r}: use {', '.join(others)} or {last}")
    if not isinstance(store, Store):
        raise ConfigError(f"store must be a URL or a Store, got {type(store).__name__}")
    return store
