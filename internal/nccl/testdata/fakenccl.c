/*
 * fakenccl stands in for libnccl.so.2 in the loader's tests: the entry
 * points gotune's binding calls, with NCCL's C signatures, recording what
 * they were given. Not NCCL: nothing moves.
 */
#include <stdint.h>
#include <stddef.h>
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

/* Every other entry point records its name and arguments for fake_call;
 * a negative rank or count argument fails as NCCL does (invalid argument). */
static char last_op[32];
static uintptr_t last_args[8];
static int record(const char *op, int n, uintptr_t *args) {
	strncpy(last_op, op, sizeof last_op - 1);
	memset(last_args, 0, sizeof last_args);
	memcpy(last_args, args, n * sizeof *args);
	for (int i = 0; i < n; i++)
		if ((intptr_t)args[i] < 0)
			return 4;
	return 0;
}
#define REC(op, ...) do { uintptr_t a[] = {__VA_ARGS__}; return record(op, sizeof a / sizeof a[0], a); } while (0)

int ncclCommAbort(void *comm) { REC("abort", (uintptr_t)comm); }
int ncclCommGetAsyncError(void *comm, int *err) { *err = comm == (void *)0xbad ? 6 : 0; REC("asyncerror", (uintptr_t)comm); }
int ncclGroupStart(void) { REC("groupstart", 0); }
int ncclGroupEnd(void) { REC("groupend", 0); }
int ncclSend(const void *buf, size_t count, int type, int peer, void *comm, void *stream) {
	REC("send", (uintptr_t)buf, count, type, peer, (uintptr_t)comm, (uintptr_t)stream);
}
int ncclRecv(void *buf, size_t count, int type, int peer, void *comm, void *stream) {
	REC("recv", (uintptr_t)buf, count, type, peer, (uintptr_t)comm, (uintptr_t)stream);
}
int ncclAllReduce(const void *s, void *r, size_t count, int type, int op, void *comm, void *stream) {
	REC("allreduce", (uintptr_t)s, (uintptr_t)r, count, type, op, (uintptr_t)comm, (uintptr_t)stream);
}
int ncclAllGather(const void *s, void *r, size_t count, int type, void *comm, void *stream) {
	REC("allgather", (uintptr_t)s, (uintptr_t)r, count, type, (uintptr_t)comm, (uintptr_t)stream);
}
int ncclReduceScatter(const void *s, void *r, size_t count, int type, int op, void *comm, void *stream) {
	REC("reducescatter", (uintptr_t)s, (uintptr_t)r, count, type, op, (uintptr_t)comm, (uintptr_t)stream);
}
int ncclBroadcast(const void *s, void *r, size_t count, int type, int root, void *comm, void *stream) {
	REC("broadcast", (uintptr_t)s, (uintptr_t)r, count, type, root, (uintptr_t)comm, (uintptr_t)stream);
}

/* fake_call reports the last recorded call: its name into op (32 bytes)
 * and its arguments into args (8 words). */
void fake_call(char *op, uintptr_t *args) {
	memcpy(op, last_op, sizeof last_op);
	memcpy(args, last_args, sizeof last_args);
}
