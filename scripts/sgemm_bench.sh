#!/usr/bin/env bash
# sgemm_bench.sh: the score kernel beside single-threaded OpenBLAS sgemm on
# the same shape, in one run (docs/BENCHMARKS.md, "AVX-512 kernels").
#
#   scripts/sgemm_bench.sh [BENCHTIME]     (default 5x)
#
# Installs Debian's libopenblas-dev with apt-get if its header is missing,
# builds scripts/sgemm_ref.c into a temporary directory, runs it with
# OPENBLAS_NUM_THREADS=1 for D = 96 and 384 (8 and 32 features) at 10,000
# rows, then `go test -bench Score -cpu 1` (one core, every kernel this CPU
# runs, BenchmarkScoreTile: the loop before chunks beside the one after,
# BenchmarkScoreInt8: an int8 store, and BenchmarkTileKeys: the avx512
# kernel's once-per-layer-view transposition), then sgemm once more, so
# load drift shows as a change between the two sgemm lines. Compare
# Gcoord/s.
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime=${1:-5x}

if [ ! -e /usr/include/x86_64-linux-gnu/cblas.h ] && [ ! -e /usr/include/cblas.h ]; then
	echo "installing libopenblas-dev" >&2
	if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libopenblas-dev >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/sgemm_ref" scripts/sgemm_ref.c -lopenblas

sgemm() {
	for d in 96 384; do
		OPENBLAS_NUM_THREADS=1 "$tmp/sgemm_ref" 10000 "$d" 50
	done
}

grep -m1 'model name' /proc/cpuinfo
echo "avx512 flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^avx512(f|_bf16|_vnni)$' | tr '\n' ' ' || true)"
sgemm
go test -run '^$' -bench '^Benchmark(Score(Tile|Int8)?|TileKeys)$/./kernel=(go|avx2|avx2fma|avx512|avx512bf16)$' -benchtime "$benchtime" -cpu 1 ./gpu/ | grep -E '^Benchmark|^cpu'
sgemm
