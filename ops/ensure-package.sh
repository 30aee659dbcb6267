#!/usr/bin/env bash
# ensure-package.sh COMMAND PACKAGE: makes sure COMMAND is on this machine,
# installing the distribution's PACKAGE when it is missing. The ops checks
# use it for promtool (package prometheus) and systemd-analyze (systemd);
# CI starts from a clean machine.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 COMMAND PACKAGE" >&2; exit 2; }
cmd=$1 pkg=$2
command -v "$cmd" >/dev/null 2>&1 && exit 0

echo "$cmd not found; installing the distribution's $pkg package…" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  # --no-install-recommends: the tool is wanted, not a running service.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
else
  echo "cannot install $pkg here: install it by hand (it provides $cmd)" >&2
  exit 1
fi
command -v "$cmd" >/dev/null 2>&1 || { echo "$pkg installed but $cmd still not found" >&2; exit 1; }
