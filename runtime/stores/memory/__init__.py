"""The in-memory store (``memory://``): :class:`MemoryStore`, for the tests of applications that use corral.

The class lives in :mod:`.store`.
"""

from corral.runtime.stores.memory.store import MemoryStore

__all__ = ["MemoryStore"]
