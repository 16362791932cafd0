"""The SQLite store (``sqlite:///path.db``): :class:`SqliteStore` and its schema version.

The class lives in :mod:`.store`; its statements and migrations are this package's ``.sql`` files.
"""

from corral.runtime.stores.sqlite.store import SCHEMA_VERSION, SqliteStore

__all__ = ["SCHEMA_VERSION", "SqliteStore"]
