"""leasecheck: property-based correctness tests for PostgreSQL job queues with leases.

A queue under test implements `leasecheck.stateful.contract.Queue`; `Claim` is
re-exported here as a convenience (any object with `job_id`, `token` and `worker`
attributes, or a 3-tuple, will do). The property tests live in `leasecheck.suite`.
"""

from __future__ import annotations

from leasecheck.stateful.contract import Claim

__all__ = ["Claim", "__version__"]
__version__ = "0.2.0"
