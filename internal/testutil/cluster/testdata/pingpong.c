/* Two ranks exchange a patterned 4 MiB buffer and check every byte: proves
 * that MPI traffic flows between the namespace-hosts (internal/testutil/cluster). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N (4 << 20)

int main(int argc, char **argv) {
	int rank, size, len, bad = 0;
	char host[MPI_MAX_PROCESSOR_NAME];
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &len);
	if (size != 2) {
		fprintf(stderr, "pingpong: want 2 ranks, have %d\n", size);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	unsigned char *buf = malloc(N);
	if (rank == 0) {
		for (int i = 0; i < N; i++) buf[i] = (unsigned char)(i * 7 + 1);
		MPI_Send(buf, N, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
		MPI_Recv(buf, N, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (int i = 0; i < N; i++) bad += buf[i] != (unsigned char)(i * 7 + 2);
	} else {
		MPI_Recv(buf, N, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (int i = 0; i < N; i++) {
			bad += buf[i] != (unsigned char)(i * 7 + 1);
			buf[i]++;
		}
		MPI_Send(buf, N, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
	}
	printf("rank %d on %s: %d bad bytes\n", rank, host, bad);
	MPI_Finalize();
	return bad != 0;
}
