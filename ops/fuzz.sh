#!/usr/bin/env bash
# Runs every fuzz target for a bounded time each (default 15s): go test
# fuzzes one target per run. Used by `go tool task fuzz` and the test task.
set -euo pipefail
time=${1:-15s}
targets=(
	./gateway:FuzzPredictBody
	./gateway:FuzzDecodeBody
	./schemas:FuzzDecodeRecord
	./scheduler:FuzzParseEngineBody
	./scheduler:FuzzEngineEndpoint
	./scheduler:FuzzSplitArgs
	./scheduler:FuzzResolveArgs
	./scheduler:FuzzParseSpec
)
# A target added to the code but not here fails the run: every one is fuzzed.
found=$(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' . | sed 's/^func //' | sort)
listed=$(printf '%s\n' "${targets[@]}" | sed 's/.*://' | sort)
if [ "$found" != "$listed" ]; then
	echo "ops/fuzz.sh: the fuzz targets in the code differ from its list:" >&2
	diff <(echo "$listed") <(echo "$found") >&2 || true
	exit 1
fi
for t in "${targets[@]}"; do
	pkg=${t%%:*} name=${t#*:}
	echo "fuzz $name ($pkg) for $time"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg"
done
