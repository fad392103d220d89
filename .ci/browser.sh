#!/usr/bin/env bash
# CI (root, Debian): install headless Chromium from Debian's package and run the real-browser test
# with the browser required, so that a missing binary fails instead of skipping. Run it with the
# project's virtual environment active, after the reports are rendered (they are committed).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
COPYDECODE_REQUIRE_BROWSER=1 python -m pytest -q tests/test_browser.py
