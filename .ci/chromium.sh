#!/usr/bin/env bash
# Install Debian's `chromium` for the browser test of report.html (tests/search/report/test_report_browser.py).
# Usage: `source .ci/chromium.sh` (the lead's .ci/run does this before pytest), or run it. Needs root for
# apt-get when chromium is missing; idempotent. The test runs it headless with a fresh --user-data-dir, no network.

_forge_chromium_setup() {
    if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
        return 0
    fi
    echo "chromium.sh: installing Debian's chromium package" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
        || { echo "chromium.sh: apt-get install chromium failed" >&2; return 1; }
}

_forge_chromium_setup
