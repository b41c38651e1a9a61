"""Thin on purpose: leasecheck's own plugin comes from its entry point (installed with
`pip install -e .`); the repository's own fixtures live in `tests/fixtures.py`."""

pytest_plugins = ["tests.fixtures"]

# A queue author's repository, run from its own directory by tests/test_adoption.py.
collect_ignore = ["tests/data"]
