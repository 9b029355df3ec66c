#!/bin/sh
# Install Debian's chromium for tests/test_viewer_browser.py if it is not there yet.
# Exits 0 when /usr/bin/chromium exists (already, or after installing it).
set -eu
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup_chromium: no apt-get here; install chromium yourself" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "setup_chromium: not root and no sudo; install chromium yourself" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
test -x /usr/bin/chromium
