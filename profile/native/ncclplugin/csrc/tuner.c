/*
 * libnccl-tuner-gotune: an NCCL tuner plugin that applies the table gotune
 * wrote from a tuned profile, and otherwise leaves NCCL's own choice.
 *
 * The ABI is declared here from NCCL's documented plugin interface (tuner
 * v4 for NCCL 2.24-2.27, v5 for 2.28-2.29, v6 for 2.30); no NCCL header is
 * used. NCCL tries the newest symbol it knows first.
 *
 * The table is the file GOTUNE_NCCL_TABLE names (nccl.conf sets it, and
 * NCCL exports that file's lines into the environment), one rule a line:
 *
 *   COLLECTIVE MIN_BYTES MAX_BYTES RANKS ALGORITHM PROTOCOL CHANNELS
 *
 * COLLECTIVE is broadcast, reduce, allgather, reducescatter or allreduce;
 * the byte range is inclusive; RANKS 0 matches any communicator size;
 * ALGORITHM and PROTOCOL are NCCL's names (tree, ring, collnet_direct,
 * collnet_chain, nvls, nvls_tree, pat; ll, ll128, simple), both "-" to
 * keep NCCL's; CHANNELS 0 keeps NCCL's. Lines starting with '#' and blank
 * lines are skipped. The first rule that matches a call decides it.
 * Malformed lines are skipped too (logged as warnings): NCCL must not
 * fail on a bad table.
 *
 * Every entry point returns success: NCCL propagates an error from
 * getCollInfo to the collective. A rule whose algorithm and protocol NCCL
 * marks unavailable for a call (-1 in its cost table) leaves the call to
 * NCCL. With GOTUNE_NCCL_TUNER_STATS set, finalize appends one line of
 * counts to that file: how many calls the table decided.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int result_t; /* ncclResult_t: 0 is ncclSuccess */
typedef int func_t;   /* ncclFunc_t: broadcast 0 .. allreduce 4 */
typedef void (*logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

enum { LOG_WARN = 2, LOG_INFO = 3 };
enum { SUBSYS_INIT = 0x1, SUBSYS_TUNING = 0x40 };
enum { SUCCESS = 0 };

#define UNAVAILABLE (-1.0f) /* NCCL_ALGO_PROTO_IGNORE */
#define KEEP (-1)

static const char *const collectives[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
static const char *const algorithms[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
static const char *const protocols[] = {"ll", "ll128", "simple"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

struct rule {
	int coll;
	unsigned long long lo, hi;
	unsigned long ranks;
	int algo, proto, channels;
};

/* A communicator's tuner keeps, per collective and in table order, only
 * the rules for its size: a call scans the few that can match it. */
struct tuner {
	size_t nranks;
	uint64_t comm;
	logger_t log;
	struct rule *rules[COUNT(collectives)];
	int nrules[COUNT(collectives)], cap[COUNT(collectives)], kept;
	unsigned long long calls, decided, channeled, unavailable;
};

static int lookup(const char *const *names, int n, const char *s) {
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -2;
}

/* parse reads one rule from line; 0 on success. */
static int parse(const char *line, struct rule *r) {
	char coll[32], algo[32], proto[32], extra[2];
	int channels;
	if (sscanf(line, "%31s %llu %llu %lu %31s %31s %d %1s", coll, &r->lo, &r->hi, &r->ranks, algo, proto, &channels, extra) != 7)
		return -1;
	r->coll = lookup(collectives, COUNT(collectives), coll);
	r->algo = strcmp(algo, "-") == 0 ? KEEP : lookup(algorithms, COUNT(algorithms), algo);
	r->proto = strcmp(proto, "-") == 0 ? KEEP : lookup(protocols, COUNT(protocols), proto);
	r->channels = channels;
	if (r->coll < 0 || r->algo == -2 || r->proto == -2 || r->lo > r->hi || channels < 0)
		return -1;
	if ((r->algo == KEEP) != (r->proto == KEEP)) /* NCCL takes both or neither */
		return -1;
	return 0;
}

static void load(struct tuner *t) {
	const char *path = getenv("GOTUNE_NCCL_TABLE");
	if (path == NULL || *path == '\0') {
		if (t->log)
			t->log(LOG_WARN, SUBSYS_INIT | SUBSYS_TUNING, __FILE__, __LINE__, "gotune tuner: GOTUNE_NCCL_TABLE is not set: NCCL decides every call");
		return;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		if (t->log)
			t->log(LOG_WARN, SUBSYS_INIT | SUBSYS_TUNING, __FILE__, __LINE__, "gotune tuner: cannot open %s: NCCL decides every call", path);
		return;
	}
	char line[512];
	int lineno = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		lineno++;
		char *s = line + strspn(line, " \t");
		if (*s == '#' || *s == '\n' || *s == '\r' || *s == '\0')
			continue;
		struct rule r;
		if (parse(s, &r) != 0) {
			if (t->log)
				t->log(LOG_WARN, SUBSYS_TUNING, __FILE__, __LINE__, "gotune tuner: %s:%d: not a rule, skipped", path, lineno);
			continue;
		}
		if (r.ranks != 0 && r.ranks != t->nranks)
			continue;
		int c = r.coll;
		if (t->nrules[c] == t->cap[c]) {
			int grown = t->cap[c] ? 2 * t->cap[c] : 16;
			struct rule *more = realloc(t->rules[c], (size_t)grown * sizeof *more);
			if (more == NULL)
				break;
			t->rules[c] = more, t->cap[c] = grown;
		}
		t->rules[c][t->nrules[c]++] = r;
		t->kept++;
	}
	fclose(f);
	if (t->log)
		t->log(LOG_INFO, SUBSYS_INIT | SUBSYS_TUNING, __FILE__, __LINE__, "gotune tuner: %d rules from %s for %zu ranks", t->kept, path, t->nranks);
}

static result_t start(void **ctx, uint64_t comm, size_t nranks, logger_t log) {
	struct tuner *t = calloc(1, sizeof *t);
	*ctx = t;
	if (t == NULL)
		return SUCCESS; /* no table: NCCL decides */
	t->nranks = nranks, t->comm = comm, t->log = log;
	load(t);
	return SUCCESS;
}

static result_t decide(void *ctx, func_t coll, size_t nbytes, int pipeOps, float **costs, int nalgo, int nproto, int regBuff,
                       int *channels) {
	(void)pipeOps, (void)regBuff;
	struct tuner *t = ctx;
	if (t == NULL)
		return SUCCESS;
	t->calls++;
	if (coll < 0 || coll >= COUNT(collectives))
		return SUCCESS;
	const struct rule *rules = t->rules[coll];
	for (int i = 0; i < t->nrules[coll]; i++) {
		const struct rule *r = &rules[i];
		if (nbytes < r->lo || nbytes > r->hi)
			continue;
		if (r->algo != KEEP) {
			float *cell = (float *)costs + (size_t)r->algo * (size_t)nproto + (size_t)r->proto;
			if (r->algo >= nalgo || r->proto >= nproto || *cell == UNAVAILABLE) {
				t->unavailable++;
				return SUCCESS;
			}
			*cell = 0.0f; /* below every cost NCCL models: its pick */
			t->decided++;
		}
		if (r->channels > 0 && channels != NULL) {
			*channels = r->channels;
			t->channeled++;
		}
		return SUCCESS;
	}
	return SUCCESS;
}

static result_t finish(void *ctx) {
	struct tuner *t = ctx;
	if (t == NULL)
		return SUCCESS;
	const char *path = getenv("GOTUNE_NCCL_TUNER_STATS");
	if (path != NULL && *path != '\0') {
		FILE *f = fopen(path, "a");
		if (f != NULL) {
			fprintf(f, "comm %llx ranks %zu rules %d calls %llu decided %llu channels %llu unavailable %llu\n",
			        (unsigned long long)t->comm, t->nranks, t->kept, t->calls, t->decided, t->channeled, t->unavailable);
			fclose(f);
		}
	}
	for (int c = 0; c < COUNT(collectives); c++)
		free(t->rules[c]);
	free(t);
	return SUCCESS;
}

static result_t init_v4(size_t nranks, size_t nnodes, logger_t log, void **ctx) {
	(void)nnodes;
	return start(ctx, 0, nranks, log);
}

/* v5 and v6 pass NVLink domain facts and NCCL's model constants, which
 * this plugin leaves as they are. */
static result_t init_v5(void **ctx, uint64_t comm, size_t nranks, size_t nnodes, logger_t log, void *nvlDomain, void *constants) {
	(void)nnodes, (void)nvlDomain, (void)constants;
	return start(ctx, comm, nranks, log);
}

typedef result_t (*decide_t)(void *, func_t, size_t, int, float **, int, int, int, int *);

struct tuner_v4 {
	const char *name;
	result_t (*init)(size_t, size_t, logger_t, void **);
	decide_t getCollInfo;
	result_t (*destroy)(void *);
};

struct tuner_v5 {
	const char *name;
	result_t (*init)(void **, uint64_t, size_t, size_t, logger_t, void *, void *);
	decide_t getCollInfo;
	result_t (*finalize)(void *);
};

struct tuner_v6 {
	const char *name;
	result_t (*init)(void **, uint64_t, size_t, size_t, logger_t, void *, void *);
	decide_t getCollInfo;
	result_t (*finalize)(void *);
	result_t (*getChunkSize)(void *, func_t, size_t, int, int, int, size_t *); /* optional: NULL keeps NCCL's */
};

#define NAME "gotune"
EXPORT const struct tuner_v4 ncclTunerPlugin_v4 = {NAME, init_v4, decide, finish};
EXPORT const struct tuner_v5 ncclTunerPlugin_v5 = {NAME, init_v5, decide, finish};
EXPORT const struct tuner_v6 ncclTunerPlugin_v6 = {NAME, init_v5, decide, finish, NULL};
