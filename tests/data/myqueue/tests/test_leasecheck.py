from leasecheck.suite import *  # noqa: F403
