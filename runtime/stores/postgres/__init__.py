"""The PostgreSQL store (``postgresql://...``): :class:`PostgresStore` and its schema version.

The class lives in :mod:`.store`; its statements and migrations are this package's ``.sql`` files.
Importing this package needs psycopg and psycopg-pool (``pip install 'corral[postgres]'``).
"""

from corral.runtime.stores.postgres.store import SCHEMA_VERSION, PostgresStore

__all__ = ["SCHEMA_VERSION", "PostgresStore"]
