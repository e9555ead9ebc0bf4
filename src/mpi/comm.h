/* comm.h — what the MPI ops (ops.c) share with the job's runtime (comm.c):
 * one collective at a time per process, each waited for up to the deadline. */
#ifndef MF_MPI_COMM_H
#define MF_MPI_COMM_H

#include "core/base.h"
#include "core/status.h"
#include "graph/op_def.h"

#include <mpi.h>

/* The ops, registered by mf_mpi_init. */
extern const mf_op_table mf_mpi_ops;

/* Collectives of one process are serialized (runs of several threads may
 * reach MPI ops): each kernel holds the lock from its first MPI call to
 * its last. Taking it first waits until the communication thread has run
 * every job submitted before, so that collectives go to MPI in the order the
 * ops asked for them. */
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
/* A collective run by the process's communication thread, one job after the
 * other in the order they were submitted, each under the collective lock:
 * the asynchronous allreduce (ops.c) hands its buffer over and the executor
 * goes on while the thread waits for the other ranks. The submitter owns
 * the job; the thread writes it until `done`. */
typedef struct comm_job comm_job;
struct comm_job {
  void (*run)(comm_job *job);   /* on the thread, under the collective lock; sets status */
  void (*free)(comm_job *job);  /* frees a job nobody took (at shutdown) */
  mf_status status;
  int64_t ticket;               /* set by comm_submit */
  int64_t bytes;                /* for the log of recent collectives */
  int tensors;
  double submitted, started, finished; /* mf_mpi_clock() */
  bool done;                    /* under the queue's lock */
  comm_job *next_queued, *next_outstanding;
};
/* Queues job for the thread (started on first use) and gives it a ticket;
 * it stays outstanding until comm_take. Else an error naming `who`. */
mf_code comm_submit(comm_job *job, const char *who, mf_status *s);
/* The outstanding job with this ticket once the thread has run it (waiting
 * until then), no longer outstanding; NULL when there is none. */
comm_job *comm_take(int64_t ticket);

/* MF_OK for MPI_SUCCESS, else an error naming who, what and MPI's message. */
mf_code comm_check(int rc, const char *who, const char *what, mf_status *s);

#endif
