#!/usr/bin/env bash
# Builds refbench (testdata/refbench/main.go) in a temporary Go workspace
# beside this tree, with the engine of a reference commit (default d53c18b,
# the commit before context-first Fit and Predict) as package refbench/refgpu,
# and runs it with the given flags. Run from anywhere inside the repository:
#
#   gpu/largectx/testdata/refbench.sh -rows 100000 -queries 1000 -features 8 -sides ref,policy
#   REF=<commit> gpu/largectx/testdata/refbench.sh ...
set -euo pipefail
ref=${REF:-d53c18b}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/refbench/refgpu"
git -C "$root" archive "$ref" gpu | tar -x -C "$tmp" --wildcards --exclude='*_test.go' --exclude='gpu/eval' 'gpu/*'
mv "$tmp"/gpu/* "$tmp/refbench/refgpu/"
cp "$root/gpu/largectx/testdata/refbench/main.go" "$tmp/refbench/"
sysver=$(cd "$root" && go list -m -f '{{.Version}}' golang.org/x/sys)
cat >"$tmp/refbench/go.mod" <<MOD
module refbench

go 1.26.0

require golang.org/x/sys $sysver
MOD
cp "$root/go.sum" "$tmp/refbench/go.sum"
(cd "$tmp" && go work init ./refbench "$root" && cd refbench && go build -o "$tmp/refbench.bin" .)
"$tmp/refbench.bin" "$@"
