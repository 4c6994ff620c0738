/*
 * anchor: gotune's reference MPI benchmark, built with the measured stack's
 * own compiler wrapper and launched with its own launcher (2 ranks).
 *
 *   anchor PATTERN SIZES REPS ITERS WARMUP WINDOW
 *
 * PATTERN is latency, bw, bibw or msgrate; SIZES a comma-separated list of
 * byte counts; ITERS and WARMUP 0 select OSU's counts for each size. The
 * loops are OSU's: blocking ping-pong for latency, a window of non-blocking
 * sends answered by a 4-byte acknowledgement for bw and msgrate, windows in
 * both directions for bibw. Rank 1 only serves; rank 0 times and prints.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum pattern { LATENCY, BW, BIBW, MSGRATE };

/* OSU's loop constants, as bench.DefaultIters. */
enum {
    LARGE_MESSAGE = 8192,
    LAT_ITERS = 10000, LAT_WARMUP = 100,
    LAT_ITERS_LARGE = 1000, LAT_WARMUP_LARGE = 10,
    BW_ITERS = 100, BW_WARMUP = 10,
    BW_ITERS_LARGE = 20, BW_WARMUP_LARGE = 2,
};

enum { TAG_DATA = 1, TAG_ACK = 2, ACK_BYTES = 4 };

struct loop {
    enum pattern pattern;
    int rank, peer;
    int size, iters, warmup, window;
    char *sbuf, *rbuf;
    char ack[ACK_BYTES];
    MPI_Request *reqs;
    double *iter_times; /* distribution pass only, else NULL */
};

static int my_rank = -1;

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "anchor rank %d: ", my_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2); /* not reached */
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
    static const char *const names[] = {"latency", "bw", "bibw", "msgrate"};
    for (int p = LATENCY; p <= MSGRATE; p++)
        if (strcmp(s, names[p]) == 0)
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

static void ping_pong(struct loop *l)
{
    if (l->rank == 0) {
        MPI_Send(l->sbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(l->rbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(l->rbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(l->sbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD);
    }
}

/* stream_window: rank 0 sends a window from one buffer, rank 1 receives it
 * into one buffer and acknowledges. */
static void stream_window(struct loop *l)
{
    for (int w = 0; w < l->window; w++) {
        if (l->rank == 0)
            MPI_Isend(l->sbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
        else
            MPI_Irecv(l->rbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
    }
    MPI_Waitall(l->window, l->reqs, MPI_STATUSES_IGNORE);
    if (l->rank == 0)
        MPI_Recv(l->ack, ACK_BYTES, MPI_CHAR, l->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(l->ack, ACK_BYTES, MPI_CHAR, l->peer, TAG_ACK, MPI_COMM_WORLD);
}

/* exchange_windows: both ranks post a window of receives, then of sends. */
static void exchange_windows(struct loop *l)
{
    for (int w = 0; w < l->window; w++)
        MPI_Irecv(l->rbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[w]);
    for (int w = 0; w < l->window; w++)
        MPI_Isend(l->sbuf, l->size, MPI_CHAR, l->peer, TAG_DATA, MPI_COMM_WORLD, &l->reqs[l->window + w]);
    MPI_Waitall(2 * l->window, l->reqs, MPI_STATUSES_IGNORE);
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
            exchange_windows(l);
            break;
        default:
            stream_window(l);
        }
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
        return 2.0 * l->size * msgs / seconds / 1e6;
    default:
        return (double)l->size * msgs / seconds / 1e6;
    }
}

static void measure(struct loop *l, int reps, double clock_s)
{
    if (l->rank == 0)
        printf("size %d %d %d\n", l->size, l->iters, l->warmup);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double s = run(l);
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
    if (argc != 7)
        die("usage: anchor PATTERN SIZES REPS ITERS WARMUP WINDOW");
    if (nranks != 2)
        die("needs exactly 2 ranks, got %d", nranks);

    struct loop l = {.rank = rank, .peer = 1 - rank};
    l.pattern = parse_pattern(argv[1]);
    int nsizes;
    int *sizes = parse_sizes(argv[2], &nsizes);
    int reps = parse_count(argv[3], "reps");
    int iters = parse_count(argv[4], "iters");
    int warmup = parse_count(argv[5], "warmup");
    l.window = l.pattern == LATENCY ? 1 : parse_count(argv[6], "window");
    if (reps < 1 || l.window < 1)
        die("reps and window must be at least 1");

    int max_size = 0;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > max_size)
            max_size = sizes[i];
    l.sbuf = alloc_filled((size_t)max_size, 'a');
    l.rbuf = alloc_filled((size_t)max_size, 'b');
    l.reqs = malloc(sizeof *l.reqs * 2 * (size_t)l.window);
    if (l.reqs == NULL)
        die("out of memory");
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

    free(l.reqs);
    free(l.rbuf);
    free(l.sbuf);
    free(sizes);
    MPI_Finalize();
    return 0;
}
