/* comm.h — what the MPI ops (ops.c) share with the job's runtime (comm.c):
 * one collective at a time per process, each waited for up to the deadline. */
#ifndef MF_MPI_COMM_H
#define MF_MPI_COMM_H

#include "core/base.h"
#include "graph/op_def.h"

#include <mpi.h>

/* The ops, registered by mf_mpi_init. */
extern const mf_op_table mf_mpi_ops;

/* Collectives of one process are serialized (runs of several threads may
 * reach MPI ops): each kernel holds the lock from its first MPI call to
 * its last. */
void comm_lock(void);
void comm_unlock(void);
/* OK when the job can run a collective: initialized, and no earlier
 * collective timed out. Else FAILED_PRECONDITION naming `who`. */
mf_code comm_ready(const char *who, mf_status *s);
/* MPI_COMM_WORLD, with errors returned rather than fatal. */
MPI_Comm comm_world(void);
/* Polls req until it completes or the deadline passes; a timeout leaves the
 * job unusable (comm_ready fails from then on) and says so, naming `who` and
 * `what` it waited for. The caller keeps the request's buffers alive when
 * this fails (MPI may still write them). */
mf_code comm_wait(MPI_Request *req, const char *who, const char *what, mf_status *s);
/* MF_OK for MPI_SUCCESS, else an error naming who, what and MPI's message. */
mf_code comm_check(int rc, const char *who, const char *what, mf_status *s);

#endif
