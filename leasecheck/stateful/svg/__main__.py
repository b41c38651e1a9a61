"""`python -m leasecheck.stateful.svg FILE.json`, the same as `leasecheck svg FILE.json`."""

from __future__ import annotations

from leasecheck.stateful.svg.command import main

raise SystemExit(main())
