#!/usr/bin/env bash
# Fuzzes every input reader (YAML/JSON text, pods, nodes, NodeResourceTopology, scenarios, CSVs,
# sysfs trees, hwloc XML) with hypothesis for SECONDS (default 180) each: the `slow` variants of
# tests/hostile/test_fuzz_readers.py. Any input that makes a reader fail other than with one
# InputError line is a finding (docs/inputs.md). Usage: scripts/fuzz.sh [SECONDS] [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-180}"
shift || true
TOPOSCHED_FUZZ_SECONDS="$seconds" exec .venv/bin/python -m pytest -q -m slow tests/hostile/test_fuzz_readers.py "$@"
