"""`python -m leasecheck.stateful.story.svg FILE.json`, the same as `leasecheck svg FILE.json`."""

from __future__ import annotations

from leasecheck.stateful.story.svg.command import main

raise SystemExit(main())
