/*
 * fakehost loads the tuner plugin as NCCL 2.28 does (dlopen, the v5
 * structure), initialises a communicator and times getCollInfo call by
 * call with a cost table laid out as NCCL's.
 *
 *   fakehost PLUGIN CALLS COLLECTIVE BYTES RANKS
 *
 * prints "calls N clock C p50 P p99 Q max M" in nanoseconds, each call's
 * time less the clock's own cost C (the median of empty readings).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*init_t)(void **, uint64_t, size_t, size_t, void *, void *, void *);
typedef int (*decide_t)(void *, int, size_t, int, float **, int, int, int, int *);
typedef int (*fini_t)(void *);
struct v5 {
	const char *name;
	init_t init;
	decide_t decide;
	fini_t finalize;
};

static long long now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	if (argc != 6) {
		fprintf(stderr, "usage: fakehost PLUGIN CALLS COLLECTIVE BYTES RANKS\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	const struct v5 *p = dlsym(lib, "ncclTunerPlugin_v5");
	if (p == NULL) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	long n = atol(argv[2]);
	int coll = atoi(argv[3]);
	size_t bytes = strtoull(argv[4], NULL, 10), ranks = strtoull(argv[5], NULL, 10);
	void *ctx = NULL;
	if (p->init(&ctx, 1, ranks, 1, NULL, NULL, NULL) != 0)
		return 1;
	float costs[7][3];
	long long *t = malloc(sizeof *t * (size_t)n), *empty = malloc(sizeof *empty * (size_t)n);
	for (long i = 0; i < n; i++) {
		long long a = now();
		empty[i] = now() - a;
	}
	for (long i = 0; i < n; i++) {
		for (int a = 0; a < 7; a++)
			for (int q = 0; q < 3; q++)
				costs[a][q] = 10.0f;
		int channels = 0;
		long long a = now();
		p->decide(ctx, coll, bytes, 1, (float **)costs, 7, 3, 0, &channels);
		t[i] = now() - a;
	}
	p->finalize(ctx);
	qsort(t, (size_t)n, sizeof *t, cmp);
	qsort(empty, (size_t)n, sizeof *empty, cmp);
	long long clk = empty[n / 2];
	printf("calls %ld clock %lld p50 %lld p99 %lld max %lld\n", n, clk, t[n / 2] - clk, t[n * 99 / 100] - clk, t[n - 1] - clk);
	return 0;
}
