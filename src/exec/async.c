/* async.c — asynchronous runs of callables on a per-session worker thread.
 *
 * A session's worker (worker.c, started under the session's lock by its first
 * mf_callable_run_async) runs the session's jobs one at a time, first in
 * first out. Runs are safe from several threads at once (each takes its own
 * run state, see run.c), so the queue is about order, not safety: the
 * session's other entry points wait for it to empty first (mf_worker_drain,
 * called by session.c and executor.c), so a caller's runs see its
 * asynchronous runs' effects in the order it made them. A job that
 * mf_async_wait finds next in line and not started runs on the waiting
 * thread, the worker holding the queue back meanwhile (worker.c): on a busy
 * machine the worker's thread may wait long for a core, and a consumer
 * (prefetch) must never be slower than running the job itself. Nothing here
 * is global: the worker, its queue and its lock belong to the session.
 *
 * A job is owned by its caller (see worker.h for when the worker touches it).
 * Feed values are retained by the job and released by whoever waits for or
 * frees it (the caller's thread), never by the worker: a wrapped value's
 * release callback may belong to the caller's runtime. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

struct mf_async {
  mf_job job;             /* first: the worker's run gets &job */
  mf_callable *callable;
  bool waited;
  int nfeeds, nfetches;
  mf_tensor **feeds;      /* retained */
  mf_tensor **fetches;    /* results not yet handed out */
  mf_status status;
};

static void run_job(mf_job *job) {
  mf_async *a = (mf_async *)job;
  mf_callable_run_now(a->callable, a->feeds, a->fetches, &a->status);
}

mf_async *mf_callable_run_async(mf_callable *c, mf_tensor *const *feed_values, mf_status *s) {
  mf_status_clear(s);
  if (!c) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "mf_callable_run_async: the callable is NULL");
    return NULL;
  }
  mf_session *sess = c->plan.sess;
  if (sess->closed) {
    mf_session_closed_error(s);
    return NULL;
  }
  int nfeeds = c->plan.nfeeds, nfetches = c->plan.nfetches;
  mf_async *a = mf_calloc(1, sizeof *a);
  if (a) {
    a->feeds = mf_calloc((size_t)(nfeeds > 0 ? nfeeds : 1), sizeof *a->feeds);
    a->fetches = mf_calloc((size_t)(nfetches > 0 ? nfetches : 1), sizeof *a->fetches);
  }
  if (!a || !a->feeds || !a->fetches) {
    if (a) {
      mf_free(a->feeds);
      mf_free(a->fetches);
      mf_free(a);
    }
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory starting an asynchronous run");
    return NULL;
  }
  mf_worker *worker = sess->worker;
  if (!worker) {
    pthread_mutex_lock(&sess->lock);
    if (!(worker = sess->worker) && (worker = mf_worker_start(s))) sess->worker = worker;
    pthread_mutex_unlock(&sess->lock);
  }
  if (!worker) {
    mf_free(a->feeds);
    mf_free(a->fetches);
    mf_free(a);
    return NULL;
  }
  a->callable = c;
  a->nfeeds = nfeeds;
  a->nfetches = nfetches;
  /* A missing feed is the run's error (reported by the run, as mf_callable_run does). */
  for (int i = 0; i < nfeeds; i++) a->feeds[i] = feed_values && feed_values[i] ? mf_tensor_retain(feed_values[i]) : NULL;
  a->job.run = run_job;
  mf_worker_submit(worker, &a->job);
  return a;
}

static void release_feeds(mf_async *a) {
  for (int i = 0; i < a->nfeeds; i++) {
    mf_tensor_release(a->feeds[i]);
    a->feeds[i] = NULL;
  }
}

bool mf_async_done(mf_async *a) { return a && mf_job_done(&a->job); }

mf_code mf_async_wait(mf_async *a, mf_tensor **fetch_values, mf_status *s) {
  mf_status_clear(s);
  if (!a) return mf_status_set(s, MF_INVALID_ARGUMENT, "mf_async_wait: the job is NULL");
  if (a->waited)
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "this asynchronous run was waited for already; its results were handed out then");
  mf_job_wait(&a->job);
  a->waited = true;
  release_feeds(a);
  if (a->job.cancelled)
    mf_status_set(&a->status, MF_CANCELLED, "the session was closed before this asynchronous run started");
  *s = a->status;
  for (int i = 0; i < a->nfetches; i++) {
    if (fetch_values) fetch_values[i] = mf_ok(s) ? a->fetches[i] : NULL;
    if (!fetch_values || !mf_ok(s)) mf_tensor_release(a->fetches[i]);
    a->fetches[i] = NULL;
  }
  return s->code;
}

void mf_async_free(mf_async *a) {
  if (!a) return;
  mf_job_withdraw(&a->job);
  release_feeds(a);
  for (int i = 0; i < a->nfetches; i++) mf_tensor_release(a->fetches[i]);
  mf_free(a->feeds);
  mf_free(a->fetches);
  mf_free(a);
}
