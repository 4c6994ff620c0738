/*
 * fakenccl stands in for libnccl.so.2 in the loader's tests: the entry
 * points gotune's binding calls, with NCCL's C signatures, recording what
 * they were given. Not NCCL: nothing moves.
 */
#include <stdint.h>
#include <string.h>

typedef struct { char internal[128]; } uniqueid_t;

static int version = 22809;
static char last_id[128];
static int last_nranks = -1, last_rank = -1, last_nid = -1;
static void *last_config = (void *)1;

int ncclGetVersion(int *v) { *v = version; return 0; }
const char *ncclGetErrorString(int code) { return code == 4 ? "invalid argument" : "unhandled error"; }

int ncclGetUniqueId(uniqueid_t *id) {
	for (int i = 0; i < 128; i++)
		id->internal[i] = (char)(i * 7 + 1);
	return 0;
}

int ncclCommInitRankScalable(void **comm, int nranks, int rank, int nid, uniqueid_t *ids, void *config) {
	last_nranks = nranks, last_rank = rank, last_nid = nid, last_config = config;
	memcpy(last_id, ids[0].internal, 128);
	if (rank < 0 || rank >= nranks)
		return 4;
	*comm = (void *)(uintptr_t)(0x1000 + rank);
	return 0;
}

int ncclCommDestroy(void *comm) { return comm == NULL ? 4 : 0; }

/* fake_last reports what ncclCommInitRankScalable was last given. */
int fake_last(int *nranks, int *rank, int *nid, void **config, char *id) {
	*nranks = last_nranks, *rank = last_rank, *nid = last_nid, *config = last_config;
	memcpy(id, last_id, 128);
	return 0;
}

void fake_set_version(int v) { version = v; }
