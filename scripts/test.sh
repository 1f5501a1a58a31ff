#!/usr/bin/env bash
# Installs toposched with its test extra into .venv and runs the whole test suite.
# Cross-check tests compare against hwloc's own reading of the real topologies; when run as
# root on Debian this script installs hwloc for them (set TOPOSCHED_NO_APT=1 to skip), and
# those tests skip with a reason where hwloc is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${TOPOSCHED_NO_APT:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v lstopo >/dev/null; then
    echo "test.sh: installing hwloc (used by cross-check tests)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hwloc) >/dev/null 2>&1 \
      || echo "test.sh: could not install hwloc; the hwloc cross-check tests will skip"
  fi
  if ! command -v chromium >/dev/null; then
    echo "test.sh: installing chromium (renders the simulator's HTML report in a test)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
      || echo "test.sh: could not install chromium; the report rendering test will skip"
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
# pytest exits 5 when it collects no test; that is a failure here too.
exec .venv/bin/python -m pytest "$@"
