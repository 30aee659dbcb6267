#!/usr/bin/env bash
# Runs scripts/baselines.py (classical baselines on random splits or contiguous
# blocks) with Debian's scikit-learn and XGBoost, installing them when missing.
#   scripts/baselines.sh --data ../shared/data --folds blocks > gpu/eval/recorded/baselines_blocks.json
set -euo pipefail
PY=/usr/bin/python3
have() { [ -x "$PY" ] && "$PY" -c 'import sklearn, xgboost, numpy' >/dev/null 2>&1; }
if ! have; then
  echo "python3-sklearn / python3-xgboost not found; installing the distribution's packages…" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "cannot install them here: install python3 with scikit-learn and xgboost by hand" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-sklearn python3-xgboost >/dev/null
  have || { echo "python3-sklearn installed but still not importable by $PY" >&2; exit 1; }
fi
exec "$PY" "$(dirname "$0")/baselines.py" "$@"
