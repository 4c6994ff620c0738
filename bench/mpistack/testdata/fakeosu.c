/* A stand-in for the OSU Micro-Benchmarks in tests: an MPI program that
 * prints, on rank 0, the block OSU's benchmark of its own name prints, one
 * row per power of two between -m's bounds, each value 1000 x the ranks
 * plus the -i iterations (0 when not given), so that a test sees what the
 * launcher and the arguments were. Where $FAKEOSU_CVAR names one of the
 * library's integer control variables (MPI_T), its value is added too:
 * the test sees what a file or variable it loaded set. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cvar reads the integer control variable name through MPI_T (0 when
 * unset or unknown: the row then shows that it did not arrive). */
static double cvar(const char *name) {
    int provided, index, count;
    unsigned long long v = 0;
    if (!name || MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return 0;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &h, &count) == MPI_SUCCESS) {
        MPI_T_cvar_read(h, &v); /* int, unsigned, size_t or long long: v zeroed first */
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return (double)v;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    double extra = cvar(getenv("FAKEOSU_CVAR"));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long lo = 1, hi = 4 << 20, iters = 0;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "-m")) sscanf(argv[i + 1], "%ld:%ld", &lo, &hi);
        if (!strcmp(argv[i], "-i")) iters = atol(argv[i + 1]);
    }
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (rank == 0) {
        if (!strcmp(name, "osu_mbw_mr")) {
            printf("# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n");
            printf("# [ pairs: %d ] [ window size: 64 ]\n# Size                  MB/s        Messages/s\n", size / 2);
        } else if (!strcmp(name, "osu_alltoall")) {
            printf("# OSU MPI All-to-All Personalized Exchange Latency Test v7.4\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n");
        } else {
            printf("# OSU MPI Bandwidth Test v7.4\n# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n");
        }
        for (long n = lo; n <= hi; n *= 2) {
            if (!strcmp(name, "osu_mbw_mr"))
                printf("%-10ld%20.2f%18.2f\n", n, 1000.0 * size + iters + extra, 1.0);
            else
                printf("%-10ld%18.2f\n", n, 1000.0 * size + iters + extra);
        }
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
