"""The adapter author's kit: a database, pool and connection for an adapter's tests, and
the tests every adapter passes, to subclass.

```python
from leasecheck import kit
from mylib_adapter import MyLibQueue

adapter_dsn, pool, conn = kit.fixtures(MyLibQueue, "mylib")


class TestMyLib(kit.AdapterTests):
    queue = MyLibQueue
    given_up = frozenset({"fencing"})  # what the library does not promise
```

The module's own tests of the library's behaviour take the same `conn` (simulated time,
the queue and the clock reset) and `pool` (the machine's sessions).
"""

from __future__ import annotations

from leasecheck.kit.adapter_tests import AdapterTests
from leasecheck.kit.budget import budget
from leasecheck.kit.fixtures import fixtures

__all__ = ["AdapterTests", "budget", "fixtures"]
