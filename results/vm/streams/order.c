// order: rank 0 isends WINDOW messages of SIZE from one buffer; rank 1 irecvs them into one buffer and
// reports when each completes (MPI_Waitany), as a fraction of the window's time.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc,char**argv){ MPI_Init(&argc,&argv); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
  int size=atoi(argv[1]), w=atoi(argv[2]); char*b=malloc(size); memset(b,r?'b':'a',size); MPI_Request q[1024]; double t[1024];
  for(int it=0;it<4;it++){ MPI_Barrier(MPI_COMM_WORLD); double t0=MPI_Wtime();
    for(int i=0;i<w;i++){ if(r==0) MPI_Isend(b,size,MPI_CHAR,1,1,MPI_COMM_WORLD,&q[i]); else MPI_Irecv(b,size,MPI_CHAR,0,1,MPI_COMM_WORLD,&q[i]); }
    if(r==1){ for(int k=0;k<w;k++){ int idx; MPI_Waitany(w,q,&idx,MPI_STATUS_IGNORE); t[k]=MPI_Wtime()-t0; }
      printf("it%d total %.1f ms, GB/s %.1f; completions at fraction:",it,t[w-1]*1e3,(double)size*w/t[w-1]/1e9); for(int k=0;k<w;k+=w/8) printf(" %d:%.2f",k,t[k]/t[w-1]); printf("\n"); }
    else MPI_Waitall(w,q,MPI_STATUSES_IGNORE); }
  MPI_Finalize(); }
