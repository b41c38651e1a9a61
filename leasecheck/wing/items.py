"""Which test items are leasecheck's own, and what they were given (no pytest hooks here)."""

from __future__ import annotations

from typing import Any

import pytest

SUITE = "leasecheck.suite"
PROPERTIES_TEST = "test_leasecheck_properties"
REGRESSION_TEST = "test_leasecheck_regression"


def is_suite(item: pytest.Item) -> bool:
    """Return whether `item` is one of leasecheck's property tests (from `leasecheck.suite`)."""
    function = getattr(item, "function", None)
    return getattr(function, "__module__", None) == SUITE


def param(item: pytest.Item, name: str, default: Any = None) -> Any:
    """Return the value `item` was parametrized with for `name`, or `default`."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(name, default) if callspec is not None else default
