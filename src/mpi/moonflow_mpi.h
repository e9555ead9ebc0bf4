/* moonflow_mpi.h — the C API of libmoonflow_mpi.so, moonflow's data-parallel
 * training across processes on MPI (Open MPI). The core library never links
 * MPI: this library does, and adds its graph ops (MpiAllreduce, MpiAllgather,
 * MpiBroadcast and the internal MpiAllgatherGrad, MpiAllreduceStart and
 * MpiAllreduceWait, ops.c) to the core's registry when mf_mpi_init runs. Lua
 * loads it through require "moonflow.mpi". Overlapped allreduces run on a
 * communication thread of the process (comm.c), in the order they were
 * started, which the plan makes the same on every rank.
 *
 * Collectives block until every rank has joined, polled up to a deadline
 * (mf_mpi_set_timeout): a rank that died, stopped or ran other ops makes the
 * others fail with an error saying so instead of hanging. After such a
 * timeout MPI is unusable in the process (the collective cannot be taken
 * back): every later collective fails at once, and at exit the process
 * aborts the MPI job (MPI_Abort) so that mpirun ends every rank.
 *
 * The block between MF_CDEF_BEGIN and MF_CDEF_END becomes LuaJIT FFI
 * declarations (tools/gencdef.sh, lua/moonflow/mpi_cdef.lua). */
#ifndef MOONFLOW_MPI_H
#define MOONFLOW_MPI_H

#include "moonflow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MF_CDEF_BEGIN */
/* Initializes MPI once per process (MPI_Init_thread; later calls do
 * nothing) and registers the MPI ops. A collective's deadline starts at
 * MOONFLOW_MPI_TIMEOUT seconds from the environment, else 300. Without
 * mpirun the process is a job of one rank. */
MF_API mf_code mf_mpi_init(mf_status *s);
MF_API bool mf_mpi_initialized(void);
/* This process's rank in the job and the job's size; -1 before mf_mpi_init. */
MF_API int mf_mpi_rank(void);
MF_API int mf_mpi_size(void);
/* Its rank among the ranks on this machine and their number (one GPU per
 * local rank); -1 before mf_mpi_init. */
MF_API int mf_mpi_local_rank(void);
MF_API int mf_mpi_local_size(void);
/* Seconds a collective waits for the other ranks before failing; 0 or less
 * waits forever. */
MF_API void mf_mpi_set_timeout(double seconds);
MF_API double mf_mpi_timeout(void);
/* Waits until every rank has called it (with the deadline). */
MF_API mf_code mf_mpi_barrier(mf_status *s);
/* One collective the communication thread ran for an overlapped allreduce
 * (MpiAllreduceStart), times in seconds on mf_mpi_clock's clock: when the
 * op handed it over, when the thread began it (after the ones before) and
 * when every rank had joined and it was done. */
typedef struct mf_mpi_collective {
  int64_t ticket;   /* 1, 2, ... in the order they were handed over */
  int64_t bytes;    /* of the fused buffer */
  int tensors;      /* tensors fused into it */
  double submitted, started, finished;
} mf_mpi_collective;
/* Copies the last n (at most 64) into out, oldest first; returns how many. */
MF_API int mf_mpi_recent_collectives(mf_mpi_collective *out, int n);
/* Seconds on a monotonic clock (CLOCK_MONOTONIC). */
MF_API double mf_mpi_clock(void);
/* Ends MPI for the process (after the communication thread has run what it
 * was handed; MPI_Finalize, or MPI_Abort after a timeout); idempotent, and
 * run at exit when not called. No MPI use may follow. */
MF_API void mf_mpi_shutdown(void);
/* MF_CDEF_END */

#ifdef __cplusplus
}
#endif
#endif
