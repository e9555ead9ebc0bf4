/* worker.h — one thread that runs jobs one at a time, first in first out
 * (worker.c). It knows nothing of sessions: a job is a function and its
 * links. A session owns one worker for its asynchronous runs (async.c).
 *
 * A job is owned by its submitter. The worker touches a job only between
 * taking it off the queue and marking it done, both under the worker's lock,
 * so the submitter may free a done job at any time, even after the worker is
 * gone (mf_worker_free marks every queued job done and cancelled). */
#ifndef MF_EXEC_WORKER_H
#define MF_EXEC_WORKER_H

#include "core/base.h"

#include <stdatomic.h>

typedef struct mf_worker mf_worker;
typedef struct mf_job mf_job;

struct mf_job {
  void (*run)(mf_job *job); /* called on the worker's thread */
  mf_worker *worker;        /* set by mf_worker_submit; cleared when cancelled */
  int state;                /* MF_JOB_*, under the worker's lock while it exists */
  atomic_bool done;         /* state == MF_JOB_DONE, readable without the lock */
  bool cancelled;           /* the worker was freed before the job started */
  mf_job *next;             /* queue link */
};
enum { MF_JOB_QUEUED, MF_JOB_RUNNING, MF_JOB_DONE };

/* A new worker thread; NULL with s set when no thread can be started. */
mf_worker *mf_worker_start(mf_status *s);
/* Queues j (its run set, the rest zeroed) behind the jobs already there. */
void mf_worker_submit(mf_worker *w, mf_job *j);
bool mf_job_done(const mf_job *j);
/* Blocks until j is done. When j is next in line and the worker has not
 * started it, the calling thread runs it itself (the worker waits meanwhile). */
void mf_job_wait(mf_job *j);
/* Takes j off the queue when it has not started, else waits for it; then j is done. */
void mf_job_withdraw(mf_job *j);
/* Returns once w has no job queued or running; NULL is fine, and so is a
 * call from the thread running w's job (it returns at once: a job must not
 * wait for itself). */
void mf_worker_drain(mf_worker *w);
/* Cancels the jobs not started yet, waits for the running one, ends the
 * thread and frees w; NULL is fine. */
void mf_worker_free(mf_worker *w);

#endif
