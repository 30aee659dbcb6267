#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl) are on this machine:
# regressd's private cluster and the tests start their own server from them.
# Installs the distribution's package when they are missing.
set -euo pipefail

have_pg() {
  command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ] && return 0
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && return 0
  command -v initdb >/dev/null 2>&1
}

have_pg && exit 0

echo "PostgreSQL server binaries not found; installing the distribution's package…" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if command -v apt-get >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
elif command -v dnf >/dev/null 2>&1; then
  $SUDO dnf install -y -q postgresql-server
elif command -v apk >/dev/null 2>&1; then
  $SUDO apk add -q postgresql
elif command -v brew >/dev/null 2>&1; then
  brew install -q postgresql
else
  echo "cannot install PostgreSQL here: install its server package (initdb, pg_ctl) by hand" >&2
  exit 1
fi
have_pg || { echo "PostgreSQL installed but initdb still not found" >&2; exit 1; }
