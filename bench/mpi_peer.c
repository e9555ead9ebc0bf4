/* bench/mpi_peer.c — the peer of the MPI bench rows: Open MPI's own
 * MPI_Allreduce in a C loop, built with mpicc by bench/run.lua and called
 * through the FFI from bench/mpi_worker.lua, on the same buffers moonflow's
 * allreduce reduces. */
#include <mpi.h>

/* Sums n floats over the ranks `calls` times; returns the seconds taken. */
double mpi_peer_allreduce(const float *in, float *out, int n, int calls) {
  double t0 = MPI_Wtime();
  for (int i = 0; i < calls; i++) MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return MPI_Wtime() - t0;
}
