#!/usr/bin/env bash
# Makes sure a Chromium the browser tests can drive (through chromedp) is on
# this machine. Installs the distribution's package when none is found; the
# ui package's tests find it at /usr/bin/chromium (or $REGRESSD_CHROMIUM).
set -euo pipefail

have_chromium() {
  [ -n "${REGRESSD_CHROMIUM:-}" ] && [ -x "$REGRESSD_CHROMIUM" ] && return 0
  for b in chromium chromium-browser google-chrome google-chrome-stable headless-shell; do
    command -v "$b" >/dev/null 2>&1 && return 0
  done
  return 1
}

have_chromium && exit 0

echo "Chromium not found; installing the distribution's package…" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
elif command -v dnf >/dev/null 2>&1; then
  $SUDO dnf install -y -q chromium
elif command -v apk >/dev/null 2>&1; then
  $SUDO apk add -q chromium
elif command -v brew >/dev/null 2>&1; then
  brew install -q --cask chromium
else
  echo "cannot install Chromium here: install it by hand (or set REGRESSD_CHROMIUM to a Chrome binary)" >&2
  exit 1
fi
have_chromium || { echo "Chromium installed but not found on PATH" >&2; exit 1; }
