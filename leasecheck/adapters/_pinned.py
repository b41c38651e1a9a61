"""The old private name of `leasecheck.adapters.pinned`, kept for existing imports."""

from leasecheck.adapters.pinned import (
    NestedBorrow,
    PinnedConnection,
    PinnedCursor,
    PinnedPool,
    PoolClosed,
)

__all__ = ["NestedBorrow", "PinnedConnection", "PinnedCursor", "PinnedPool", "PoolClosed"]
