// sgemm_ref: single-threaded OpenBLAS sgemm on the score kernel's shape,
// the reference rate for BenchmarkScore (scripts/sgemm_bench.sh builds and
// runs it beside the Go benchmark).
//
// The score pass of 64 queries against n rows of D coordinates is, in the
// dot form, the product Q (64×D) · Kᵀ (D×n): 2·64·n·D FLOPs, or 64·n·D
// coordinates. Usage: sgemm_ref N D [REPS]; prints one line per run:
//   sgemm M=64 N=… K=… s=… GFLOP/s=… Gcoord/s=… Gcoord/cpu-s=…
// (per CPU second of the process: steadier than wall time under load).
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_s(clockid_t id) {
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: sgemm_ref N D [REPS]\n");
		return 2;
	}
	const int m = 64, n = atoi(argv[1]), k = atoi(argv[2]);
	const int reps = argc > 3 ? atoi(argv[3]) : 20;
	if (n <= 0 || k <= 0 || reps <= 0) {
		fprintf(stderr, "sgemm_ref: N, D and REPS must be positive\n");
		return 2;
	}
	float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * n * k),
	      *c = malloc(sizeof(float) * m * n);
	if (!a || !b || !c) {
		fprintf(stderr, "sgemm_ref: out of memory\n");
		return 1;
	}
	srand(1);
	for (long i = 0; i < (long)m * k; i++) a[i] = (float)rand() / RAND_MAX - 0.5f;
	for (long i = 0; i < (long)n * k; i++) b[i] = (float)rand() / RAND_MAX - 0.5f;
	// Warm up, then time reps products: C = Q · Kᵀ, row-major.
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);
	double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (int r = 0; r < reps; r++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);
	double s = (clock_s(CLOCK_MONOTONIC) - t0) / reps;
	double cpu = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
	double coords = (double)m * n * k;
	printf("sgemm M=%d N=%d K=%d s=%.6f GFLOP/s=%.2f Gcoord/s=%.3f Gcoord/cpu-s=%.3f (c[0]=%g)\n", m, n, k, s,
	       2 * coords / s / 1e9, coords / s / 1e9, coords / cpu / 1e9, c[0]);
	free(a);
	free(b);
	free(c);
	return 0;
}
