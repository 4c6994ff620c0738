/*
 * anchor: gotune's reference MPI benchmark, built with the measured stack's
 * own compiler wrapper and launched with its own launcher.
 *
 *   anchor PATTERN SIZES REPS ITERS WARMUP WINDOW [VALIDATE]
 *
 * PATTERN is latency, bw, bibw, msgrate or alloc (2 ranks), mbw_mr (an even
 * number of ranks) or alltoall (2 or more), or one of the stack hazards h2h
 * (2 ranks) and flood (2 or more); SIZES a comma-separated list
 * of byte counts; ITERS and WARMUP 0 select OSU's counts for each size. The
 * loops are OSU's: blocking ping-pong for latency, a window of non-blocking
 * sends answered by a 4-byte acknowledgement for bw and msgrate, windows in
 * both directions for bibw. Rank 1 only serves; rank 0 times and prints.
 *
 * h2h: both ranks post a window of receives and then a window of sends, as
 * bibw, and on every other iteration the sends first: then every message
 * arrives unexpected, head to head with the peer's (FIFO exhaustion,
 * ompi#12979). flood: every rank but 0 sends a window to rank 0, which
 * receives them all and acknowledges each sender (mpich#7171). Both report
 * the bytes rank 0 moved (h2h: both directions) in MB/s.
 *
 * mbw_mr: rank i of the first half streams bw's windows to rank i + N/2,
 * every pair at once, as osu_mbw_mr; reported as all pairs' bytes over the
 * slowest rank's time (MB/s). alltoall: every iteration is one
 * MPI_Alltoall of size bytes per rank pair between two buffers of N
 * messages side by side, as osu_alltoall calls it, so that the library's
 * own algorithm and OSU's buffer footprint are what is measured; reported
 * as the time per iteration in microseconds, averaged over the ranks. Both
 * match gotune's own bench --ranks patterns.
 *
 * alloc is bw with the allocator in the loop, as gotune's own alloc pattern
 * (bench/alloc.go): every message gets a buffer of its size from malloc
 * right before its send (rank 0) or receive (rank 1) is posted, and both
 * ranks free the window's buffers once it has completed (rank 1 after
 * checking them); then a 1-byte acknowledgement. Nothing else touches the
 * buffers unless validating, so what it measures is the stack plus the
 * malloc in the ranks (a preloaded one and its purge policy included), as
 * an application that allocates per message sees them. Reported as bw.
 *
 * VALIDATE 1 gives every message its own buffer and a pattern of its own
 * (sender, iteration, window slot, byte offset), poisons every receive
 * buffer before posting it, and checks every received byte; the first bad
 * byte is reported on stderr as "payload mismatch", and appended to the file
 * GOTUNE_ANCHOR_REPORT names if set (a launcher may drop an aborting rank's
 * output), and the job aborts with code 3. GOTUNE_ANCHOR_CORRUPT=RANK (a
 * test hook) makes that rank flip one byte of the first message it
 * receives, before the check.
 *
 * For each size, REPS repetitions take two clock readings each (the OSU
 * number), then one distribution pass reads the clock after every iteration,
 * corrected for the cost of the reading, to give per-iteration values.
 *
 * Output (rank 0, stdout), values in the pattern's unit (us, MB/s, msg/s):
 *
 *   size SIZE ITERS WARMUP
 *   rep SIZE REP VALUE        REPS lines, REP counting from 0
 *   iter SIZE VALUE           ITERS lines
 *   end                       after the last size
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum pattern { LATENCY, BW, BIBW, MSGRATE, H2H, FLOOD, ALLOC, MBW_MR, ALLTOALL, NPATTERNS };

static const char *const pattern_names[NPATTERNS] = {"latency", "bw", "bibw", "msgrate", "h2h", "flood", "alloc", "mbw_mr", "alltoall"};

/* OSU's loop constants, as bench.DefaultIters. */
enum {
    LARGE_MESSAGE = 8192,
    LAT_ITERS = 10000, LAT_WARMUP = 100,
    LAT_ITERS_LARGE = 1000, LAT_WARMUP_LARGE = 10,
    BW_ITERS = 100, BW_WARMUP = 10,
    BW_ITERS_LARGE = 20, BW_WARMUP_LARGE = 2,
    COLL_ITERS = 1000, COLL_WARMUP = 200, /* osu_util.h's collectives */
    COLL_ITERS_LARGE = 100, COLL_WARMUP_LARGE = 10,
};

enum { TAG_DATA = 1, TAG_ACK = 2, ACK_BYTES = 4 };

/* EXIT_CORRUPT is the abort code of a failed payload check. */
enum { EXIT_CORRUPT = 3 };

struct loop {
    enum pattern pattern;
    int rank, nranks, peer;
    int sender; /* bw-like patterns: this rank sends the windows (rank 0 of a pair, or mbw_mr's first half) */
    int size, iters, warmup, window;
    int validate;
    long seq;      /* iteration counter over every pass, the same on every rank */
    int nbufs;     /* message buffers per direction: 1, or one per message when validating; alloc: 0 */
    char **sbufs, **rbufs;
    char **fresh;  /* alloc: the window's buffers, from malloc, in flight */
    char ack[ACK_BYTES];
    MPI_Request *reqs;
    MPI_Status *stats; /* not MPI_STATUSES_IGNORE: gcc 12 warns on MPICH's (MPI_Status *)1 */
    double *iter_times; /* distribution pass only, else NULL */
    int corrupt;        /* test hook: flip a byte of the next received message */
};

static int my_rank = -1;

static void vdie(int code, const char *fmt, va_list ap)
{
    fprintf(stderr, "anchor rank %d: ", my_rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* not reached */
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdie(2, fmt, ap);
    va_end(ap);
}

static int parse_count(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > INT_MAX)
        die("bad %s \"%s\"", what, s);
    return (int)v;
}

static enum pattern parse_pattern(const char *s)
{
    for (int p = LATENCY; p < NPATTERNS; p++)
        if (strcmp(s, pattern_names[p]) == 0)
            return (enum pattern)p;
    die("unknown pattern %s", s);
    return LATENCY; /* not reached */
}

/* parse_sizes splits a comma-separated list; the caller frees the array. */
static int *parse_sizes(const char *list, int *n)
{
    char *copy = strdup(list);
    int cap = 1;
    for (const char *c = list; *c; c++)
        cap += *c == ',';
    int *sizes = malloc(sizeof *sizes * (size_t)cap);
    if (copy == NULL || sizes == NULL)
        die("out of memory");
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        sizes[(*n)++] = parse_count(tok, "size");
    free(copy);
    if (*n == 0)
        die("no sizes in \"%s\"", list);
    return sizes;
}

static void default_iters(enum pattern p, int size, int *iters, int *warmup)
{
    int large = size > LARGE_MESSAGE;
    if (p == LATENCY) {
        *iters = large ? LAT_ITERS_LARGE : LAT_ITERS;
        *warmup = large ? LAT_WARMUP_LARGE : LAT_WARMUP;
    } else if (p == ALLTOALL) {
        *iters = large ? COLL_ITERS_LARGE : COLL_ITERS;
        *warmup = large ? COLL_WARMUP_LARGE : COLL_WARMUP;
    } else {
        *iters = large ? BW_ITERS_LARGE : BW_ITERS;
        *warmup = large ? BW_WARMUP_LARGE : BW_WARMUP;
    }
}

/* alloc_filled returns page-aligned memory with every byte set to c: OSU's
 * 'a' for send buffers and 'b' for receive buffers, as gotune's ranks. */
static char *alloc_filled(size_t n, int c)
{
    void *p;
    if (n == 0)
        n = 1;
    if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), n) != 0)
        die("cannot allocate message buffers");
    memset(p, c, n);
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* clock_cost is the median time one MPI_Wtime call adds, in seconds. */
static double clock_cost(void)
{
    enum { BATCHES = 31, CALLS = 1000 };
    double per[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = MPI_Wtime();
        for (int c = 0; c < CALLS; c++)
            (void)MPI_Wtime();
        per[b] = (MPI_Wtime() - t0) / CALLS;
    }
    qsort(per, BATCHES, sizeof per[0], cmp_double);
    return per[BATCHES / 2];
}

/* pattern_byte is byte k of the message that src sends in iteration seq
 * from window slot w: a message from another sender, iteration or slot, or
 * shifted, differs in most bytes. */
static unsigned char pattern_byte(int src, long seq, int w, size_t k)
{
    uint32_t x = (uint32_t)k * 2654435761u + ((uint32_t)seq * 64u + (uint32_t)w * 8u + (uint32_t)src) * 0x9e3779b9u;
    return (unsigned char)((x >> 24) ^ (x >> 11));
}

/* fill writes the message's pattern, xor mask: 0 for a send buffer, 0xff
 * to poison a receive buffer so that a byte never written cannot pass. */
static void fill(const struct loop *l, char *buf, int src, int w, unsigned char mask)
{
    if (!l->validate)
        return;
    for (size_t k = 0; k < (size_t)l->size; k++)
        buf[k] = (char)(pattern_byte(src, l->seq, w, k) ^ mask);
}

/* check verifies a received message and aborts at its first bad byte. */
static void check(struct loop *l, char *buf, int src, int w)
{
    if (!l->validate)
        return;
    if (l->corrupt && l->size > 0) {
        l->corrupt = 0;
        buf[l->size / 2] ^= 0x5a;
    }
    for (size_t k = 0; k < (size_t)l->size; k++) {
        unsigned char want = pattern_byte(src, l->seq, w, k), got = (unsigned char)buf[k];
        if (got != want) {
            char msg[256];
            snprintf(msg, sizeof msg, "anchor rank %d: payload mismatch: %s size %d iteration %ld window slot %d from rank %d: byte %zu is 0x%02x, want 0x%02x\n",
                     l->rank, pattern_names[l->pattern], l->size, l->seq, w, src, k, got, want);
            fputs(msg, stderr);
            fflush(stderr);
            const char *path = getenv("GOTUNE_ANCHOR_REPORT");
            FILE *f = path != NULL && *path != '\0' ? fopen(path, "a") : NULL;
            if (f != NULL) {
                fputs(msg, f);
                fclose(f);
            }
            MPI_Abort(MPI_COMM_WORLD, EXIT_CORRUPT);
            exit(EXIT_CORRUPT); /* not reached */
        }
    }
}

/* sbuf and rbuf return message slot i's buffers: its own when validating,
 * else the one buffer every message shares (as OSU). */
static char *sbuf(const struct loop *l, int i) { return l->sbufs[l->nbufs > 1 ? i : 0]; }
static char *rbuf(const struct loop *l, int i) { return l->rbufs[l->nbufs > 1 ? i : 0]; }

static void ping_pong(struct loop *l)
{
    if (l->rank == 0) {
        fill(l, sbuf(l, 0), 0, 0, 0);
        fill(l, rbuf(l, 0), 1, 0, 0xff);
        MPI_Send(sbuf(l, 0), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(rbuf(l, 0), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(l, rbuf(l, 0), 1, 0);
    } else {
        fill(l, rbuf(l, 0), 0, 0, 0xff);
        MPI_Recv(rbuf(l, 0), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        check(l, rbuf(l, 0), 0, 0);
        fill(l, sbuf(l, 0), 1, 0, 0);
        MPI_Send(sbuf(l, 0), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD);
    }
}

/* stream_window: the sender sends a window, its peer receives it and
 * acknowledges. */
static void stream_window(struct loop *l)
{
    int src = l->sender ? l->rank : l->peer;
    for (int w = 0; w < l->window; w++) {
        if (l->sender) {
            fill(l, sbuf(l, w), src, w, 0);
            MPI_Isend(sbuf(l, w), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
        } else {
            fill(l, rbuf(l, w), src, w, 0xff);
            MPI_Irecv(rbuf(l, w), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
        }
    }
    MPI_Waitall(l->window, l->reqs, l->stats);
    if (l->sender) {
        MPI_Recv(l->ack, ACK_BYTES, MPI_CHAR, l->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        for (int w = 0; w < l->window; w++)
            check(l, rbuf(l, w), src, w);
        MPI_Send(l->ack, ACK_BYTES, MPI_CHAR, l->peer, TAG_ACK, MPI_COMM_WORLD);
    }
}

/* exchange_all: alltoall's iteration, one MPI_Alltoall. Slot j of the
 * send buffer goes to rank j, slot j of the receive buffer comes from it;
 * the message from src to dst carries slot (dst - src) mod N's pattern, as
 * step k of gotune's exchange. */
static void exchange_all(struct loop *l)
{
    int n = l->nranks;
    for (int j = 0; j < n; j++) {
        int k = (j - l->rank + n) % n;
        fill(l, l->sbufs[0] + (size_t)j * (size_t)l->size, l->rank, k, 0);
        fill(l, l->rbufs[0] + (size_t)j * (size_t)l->size, j, (l->rank - j + n) % n, 0xff);
    }
    MPI_Alltoall(l->sbufs[0], l->size, MPI_CHAR, l->rbufs[0], l->size, MPI_CHAR, MPI_COMM_WORLD);
    for (int j = 0; j < n; j++)
        if (j != l->rank)
            check(l, l->rbufs[0] + (size_t)j * (size_t)l->size, j, (l->rank - j + n) % n);
}

/* churn_window: alloc's iteration. rank 0 allocates and sends a window,
 * rank 1 allocates and receives it; both free the window's buffers once it
 * has completed; then a 1-byte acknowledgement, as gotune's alloc. */
static void churn_window(struct loop *l)
{
    for (int w = 0; w < l->window; w++) {
        char *b = malloc(l->size > 0 ? (size_t)l->size : 1);
        if (b == NULL)
            die("cannot allocate a %d-byte message buffer", l->size);
        l->fresh[w] = b;
        if (l->rank == 0) {
            fill(l, b, 0, w, 0);
            MPI_Isend(b, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
        } else {
            fill(l, b, 0, w, 0xff);
            MPI_Irecv(b, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
        }
    }
    MPI_Waitall(l->window, l->reqs, l->stats);
    for (int w = 0; w < l->window; w++) {
        if (l->rank == 1)
            check(l, l->fresh[w], 0, w);
        free(l->fresh[w]);
        l->fresh[w] = NULL;
    }
    if (l->rank == 0)
        MPI_Recv(l->ack, 1, MPI_CHAR, l->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(l->ack, 1, MPI_CHAR, l->peer, TAG_ACK, MPI_COMM_WORLD);
}

static void post_recvs(struct loop *l)
{
    for (int w = 0; w < l->window; w++) {
        fill(l, rbuf(l, w), l->peer, w, 0xff);
        MPI_Irecv(rbuf(l, w), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
    }
}

static void post_sends(struct loop *l)
{
    for (int w = 0; w < l->window; w++) {
        fill(l, sbuf(l, w), l->rank, w, 0);
        MPI_Isend(sbuf(l, w), l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[l->window + w]);
    }
}

/* exchange_windows: both ranks post a window of receives, then of sends;
 * h2h posts the sends first on odd iterations. */
static void exchange_windows(struct loop *l)
{
    if (l->pattern == H2H && l->seq % 2 == 1) {
        post_sends(l);
        post_recvs(l);
    } else {
        post_recvs(l);
        post_sends(l);
    }
    MPI_Waitall(2 * l->window, l->reqs, l->stats);
    for (int w = 0; w < l->window; w++)
        check(l, rbuf(l, w), l->peer, w);
}

/* flood: every rank but 0 sends a window to rank 0, which acknowledges
 * each sender once it has them all. */
static void flood(struct loop *l)
{
    if (l->rank == 0) {
        int n = 0;
        for (int src = 1; src < l->nranks; src++)
            for (int w = 0; w < l->window; w++, n++) {
                fill(l, rbuf(l, n), src, w, 0xff);
                MPI_Irecv(rbuf(l, n), l->size, MPI_CHAR, src, TAG_DATA, MPI_COMM_WORLD, &l->reqs[n]);
            }
        MPI_Waitall(n, l->reqs, l->stats);
        n = 0;
        for (int src = 1; src < l->nranks; src++)
            for (int w = 0; w < l->window; w++, n++)
                check(l, rbuf(l, n), src, w);
        for (int src = 1; src < l->nranks; src++)
            MPI_Send(l->ack, ACK_BYTES, MPI_CHAR, src, TAG_ACK, MPI_COMM_WORLD);
    } else {
        for (int w = 0; w < l->window; w++) {
            fill(l, sbuf(l, w), l->rank, w, 0);
            MPI_Isend(sbuf(l, w), l->size, MPI_CHAR, 0, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
        }
        MPI_Waitall(l->window, l->reqs, l->stats);
        MPI_Recv(l->ack, ACK_BYTES, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

/* run executes the warm-up and timed iterations and returns the elapsed
 * seconds of the timed part (meaningful on rank 0). */
static double run(struct loop *l)
{
    double start = 0, last = 0;
    for (int i = 0; i < l->warmup + l->iters; i++) {
        if (i == l->warmup)
            start = last = MPI_Wtime();
        switch (l->pattern) {
        case LATENCY:
            ping_pong(l);
            break;
        case BIBW:
        case H2H:
            exchange_windows(l);
            break;
        case FLOOD:
            flood(l);
            break;
        case ALLOC:
            churn_window(l);
            break;
        case ALLTOALL:
            exchange_all(l);
            break;
        default:
            stream_window(l);
        }
        l->seq++;
        if (l->iter_times != NULL && i >= l->warmup) {
            double now = MPI_Wtime();
            l->iter_times[i - l->warmup] = now - last;
            last = now;
        }
    }
    return MPI_Wtime() - start;
}

/* value converts seconds over n iterations into the pattern's unit. */
static double value(const struct loop *l, double seconds, int n)
{
    double msgs = (double)l->window * n;
    switch (l->pattern) {
    case LATENCY:
        return seconds * 1e6 / (2.0 * n);
    case MSGRATE:
        return msgs / seconds;
    case BIBW:
    case H2H:
        return 2.0 * l->size * msgs / seconds / 1e6;
    case FLOOD:
        return (double)(l->nranks - 1) * l->size * msgs / seconds / 1e6;
    case MBW_MR:
        return (double)(l->nranks / 2) * l->size * msgs / seconds / 1e6;
    case ALLTOALL:
        return seconds * 1e6 / n;
    default:
        return (double)l->size * msgs / seconds / 1e6;
    }
}

/* combine makes rank 0's times of n iterations (n values, in place) the
 * job's: unchanged where rank 0 alone times; mbw_mr's slowest rank; the
 * ranks' mean for alltoall. Every rank calls it. */
static void combine(const struct loop *l, double *t, int n)
{
    if (l->pattern != MBW_MR && l->pattern != ALLTOALL)
        return;
    double *out = malloc(sizeof *out * (size_t)n);
    if (out == NULL)
        die("out of memory");
    MPI_Reduce(t, out, n, MPI_DOUBLE, l->pattern == MBW_MR ? MPI_MAX : MPI_SUM, 0, MPI_COMM_WORLD);
    if (l->rank == 0)
        for (int i = 0; i < n; i++)
            t[i] = l->pattern == MBW_MR ? out[i] : out[i] / l->nranks;
    free(out);
}

static void measure(struct loop *l, int reps, double clock_s)
{
    if (l->rank == 0)
        printf("size %d %d %d\n", l->size, l->iters, l->warmup);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double s = run(l);
        combine(l, &s, 1);
        if (l->rank == 0)
            printf("rep %d %d %.9g\n", l->size, r, value(l, s, l->iters));
    }
    double *times = malloc(sizeof *times * (size_t)l->iters);
    if (times == NULL)
        die("out of memory");
    l->iter_times = times;
    MPI_Barrier(MPI_COMM_WORLD);
    run(l);
    l->iter_times = NULL;
    combine(l, times, l->iters);
    if (l->rank == 0) {
        /* never below one nanosecond, as gotune's own correction */
        for (int i = 0; i < l->iters; i++) {
            double t = times[i] - clock_s;
            printf("iter %d %.9g\n", l->size, value(l, t > 1e-9 ? t : 1e-9, 1));
        }
        fflush(stdout);
    }
    free(times);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    my_rank = rank;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 7 && argc != 8)
        die("usage: anchor PATTERN SIZES REPS ITERS WARMUP WINDOW [VALIDATE]");

    struct loop l = {.rank = rank, .nranks = nranks, .peer = 1 - rank, .sender = rank == 0};
    l.pattern = parse_pattern(argv[1]);
    switch (l.pattern) {
    case FLOOD:
    case ALLTOALL:
        if (nranks < 2)
            die("%s needs at least 2 ranks, got %d", argv[1], nranks);
        break;
    case MBW_MR:
        if (nranks < 2 || nranks % 2 != 0)
            die("%s needs an even number of ranks, got %d", argv[1], nranks);
        l.sender = rank < nranks / 2;
        l.peer = l.sender ? rank + nranks / 2 : rank - nranks / 2;
        break;
    default:
        if (nranks != 2)
            die("%s needs exactly 2 ranks, got %d", argv[1], nranks);
    }
    int nsizes;
    int *sizes = parse_sizes(argv[2], &nsizes);
    int reps = parse_count(argv[3], "reps");
    int iters = parse_count(argv[4], "iters");
    int warmup = parse_count(argv[5], "warmup");
    l.window = l.pattern == LATENCY || l.pattern == ALLTOALL ? 1 : parse_count(argv[6], "window");
    l.validate = argc == 8 && parse_count(argv[7], "validate") != 0;
    if (reps < 1 || l.window < 1)
        die("reps and window must be at least 1");
    const char *corrupt = getenv("GOTUNE_ANCHOR_CORRUPT");
    l.corrupt = corrupt != NULL && *corrupt != '\0' && parse_count(corrupt, "GOTUNE_ANCHOR_CORRUPT") == rank;

    int max_size = 0;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > max_size)
            max_size = sizes[i];
    /* rank 0 of a flood receives a window from every other rank */
    int inflight = l.pattern == FLOOD && rank == 0 ? l.window * (nranks - 1) : 2 * l.window;
    /* alloc holds no buffer between windows: the allocator sees only the
     * churn (and the pointer array, allocated before any message);
     * alltoall's one buffer a direction holds a message per rank */
    l.nbufs = l.pattern == ALLOC ? 0 : l.validate && l.pattern != ALLTOALL ? inflight : 1;
    size_t buf_bytes = (size_t)max_size * (l.pattern == ALLTOALL ? (size_t)nranks : 1);
    l.sbufs = malloc(sizeof *l.sbufs * (size_t)(l.nbufs + 1));
    l.rbufs = malloc(sizeof *l.rbufs * (size_t)(l.nbufs + 1));
    l.fresh = calloc((size_t)l.window, sizeof *l.fresh);
    l.reqs = malloc(sizeof *l.reqs * (size_t)inflight);
    l.stats = malloc(sizeof *l.stats * (size_t)inflight);
    if (l.sbufs == NULL || l.rbufs == NULL || l.fresh == NULL || l.reqs == NULL || l.stats == NULL)
        die("out of memory");
    for (int i = 0; i < l.nbufs; i++) {
        l.sbufs[i] = alloc_filled(buf_bytes, 'a');
        l.rbufs[i] = alloc_filled(buf_bytes, 'b');
    }
    double clock_s = clock_cost();

    for (int i = 0; i < nsizes; i++) {
        l.size = sizes[i];
        default_iters(l.pattern, l.size, &l.iters, &l.warmup);
        if (iters > 0)
            l.iters = iters;
        if (warmup > 0)
            l.warmup = warmup;
        measure(&l, reps, clock_s);
    }
    if (rank == 0) {
        printf("end\n");
        fflush(stdout);
    }

    for (int i = 0; i < l.nbufs; i++) {
        free(l.rbufs[i]);
        free(l.sbufs[i]);
    }
    free(l.fresh);
    free(l.rbufs);
    free(l.sbufs);
    free(l.stats);
    free(l.reqs);
    free(sizes);
    MPI_Finalize();
    return 0;
}
