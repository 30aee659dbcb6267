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
# A finding writes its input under testdata/fuzz and fails the run. Go's
# fuzzer can also end a clean run with a bare "context deadline exceeded"
# when its time runs out mid-step, writing nothing: that is said, not failed.
for t in "${targets[@]}"; do
	pkg=${t%%:*} name=${t#*:}
	echo "fuzz $name ($pkg) for $time"
	set +e
	out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg" 2>&1)
	rc=$?
	set -e
	printf '%s\n' "$out"
	if [ "$rc" -ne 0 ]; then
		if ! grep -q 'Failing input written to' <<<"$out" && grep -q 'context deadline exceeded' <<<"$out"; then
			echo "ops/fuzz.sh: $name stopped at the end of its time with no failing input written: not a finding" >&2
			continue
		fi
		exit "$rc"
	fi
done
