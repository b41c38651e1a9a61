"""The old private name of `leasecheck.adapters.pinned`, kept for existing imports."""

from leasecheck.adapters.pinned import PinnedConnection, PinnedCursor, PinnedPool, PoolClosed

__all__ = ["PinnedConnection", "PinnedCursor", "PinnedPool", "PoolClosed"]
