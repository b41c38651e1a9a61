"""Thin on purpose: leasecheck's own plugin comes from its entry point (installed with
`pip install -e .`); the repository's own fixtures live in `tests/fixtures.py`."""

pytest_plugins = ["tests.fixtures"]
