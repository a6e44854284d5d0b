#!/usr/bin/env bash
# `make demo`: set up the venv if needed, then run the embedded-default demo (scripts/demo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python scripts/demo.py
