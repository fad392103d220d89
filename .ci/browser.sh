#!/usr/bin/env bash
# CI (root, Debian): install headless Chromium from Debian's package for the real-browser test
# (tests/pipeline/test_browser.py), which .ci/run then runs with the browser required, so that a missing
# binary fails instead of skipping.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
