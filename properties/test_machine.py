"""The property run, adopted the way a queue's own repository adopts it.

This repository names its queue (the reference) in pyproject.toml; this file is
all a queue's repository needs besides that.
"""

from leasecheck.suite import *  # noqa: F403
