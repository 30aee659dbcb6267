#!/usr/bin/env bash
# Verifies every unit in this folder with `systemd-analyze verify` (which
# needs no running systemd, so it works in a container and in CI). The units
# start /usr/local/bin/regressd; verify checks that the command exists, so
# the units are checked in a copy that points at a freshly built binary.
# Any warning (an unknown or misspelt directive, a bad value) fails, and so
# does a unit whose hardening `systemd-analyze security` rates above 2.0
# on its scale from 0 (locked down) to 10 (fully exposed); --threshold
# takes that times ten.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bash "$here/../ensure-package.sh" systemd-analyze systemd

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/bin/regressd" ./cmd/regressd)
mkdir -p "$tmp/units"
for unit in "$here"/*.service; do
  sed "s#/usr/local/bin/regressd#$tmp/bin/regressd#g" "$unit" > "$tmp/units/$(basename "$unit")"
done

status=0
for unit in "$tmp"/units/*.service; do
  out=$(systemd-analyze verify --man=no "$unit" 2>&1) || status=1
  if [ -n "$out" ]; then
    echo "$out" | sed "s#$tmp/units/#ops/systemd/#g" >&2
    status=1
  fi
  if ! out=$(systemd-analyze security --offline=true --threshold=20 --no-pager "$unit" 2>&1); then
    echo "$out" | tail -n 1 | sed "s#$tmp/units/#ops/systemd/#g" >&2
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "systemd-analyze verify and security: $(ls "$here"/*.service | wc -l) units OK"
exit "$status"
