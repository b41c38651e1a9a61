"""Where the npm adapters' tests find their package: the environment, or a cache of their own.

`python -m matrix` sets `LEASECHECK_NPM_DIR`; a plain test run installs the pin once
into `.leasecheck/npm` (as the matrix does) and points the adapter there. Without node
or npm the tests skip, naming what is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from matrix import npm

REPO = Path(__file__).resolve().parent.parent


def use(pin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the adapters at an installed `pin`, installing it first if need be (or skip)."""
    reason = npm.missing_tools()
    if reason is not None:
        pytest.skip(reason)
    root = Path(os.environ.get("LEASECHECK_NPM_DIR") or REPO / ".leasecheck" / "npm")
    try:
        npm.ensure(pin, root)
    except npm.NpmError as exc:
        pytest.skip(str(exc))
    monkeypatch.delenv("LEASECHECK_NODE_MODULES", raising=False)
    monkeypatch.setenv("LEASECHECK_NPM_DIR", str(root))
    monkeypatch.setenv("LEASECHECK_NPM_PIN", pin)
