#!/usr/bin/env bash
# Make sure a headless Chromium exists for the report's browser test (tests/test_report_browser.py).
# Installs Debian's `chromium` package with apt-get when none is on PATH. Never fails: without
# root or apt it says why and returns 0, and that test then skips with the same reason.
set -u
for name in chromium chromium-browser google-chrome google-chrome-stable chromium-headless-shell; do
  if command -v "$name" >/dev/null 2>&1; then
    echo "chromium: found $(command -v "$name")"
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not installed and apt-get is unavailable; the report browser test will skip"
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "chromium: not installed; installing needs root (or passwordless sudo); the report browser test will skip"
  exit 0
fi
echo "chromium: installing with apt-get (Debian package 'chromium', about 120 MB download, 410 MB on disk)"
export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get update -q >/tmp/ensure_chromium.log 2>&1 \
    && $SUDO apt-get install -y -q --no-install-recommends chromium >>/tmp/ensure_chromium.log 2>&1; then
  echo "chromium: installed $(command -v chromium)"
else
  echo "chromium: apt-get install failed (last lines of /tmp/ensure_chromium.log below); the report browser test will skip"
  tail -n 5 /tmp/ensure_chromium.log
fi
exit 0
