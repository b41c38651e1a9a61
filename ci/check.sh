#!/usr/bin/env bash
# Lint, type-check, then run the suite exactly as README.md says (the `ci` profile).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
ruff format --check .
mypy
CI=1 .venv/bin/pytest -n auto
