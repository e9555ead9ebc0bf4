/* async.c — asynchronous runs of callables on a per-session worker thread.
 *
 * A session's worker (started by its first mf_callable_run_async) runs the
 * session's jobs one at a time, first in first out, so a plan — and the
 * session state its ops share (variables, RNG counters, function plans) — is
 * never used by two threads at once: the session's other entry points wait
 * for the queue to empty first (mf_worker_drain, called by session.c). Nothing
 * here is global: the worker, its queue and its lock belong to the session.
 *
 * A job is owned by its caller. The worker touches a job only between taking
 * it off the queue and marking it done, both under the worker's lock, so the
 * caller may free a done job at any time, even after the session is gone
 * (closing a session marks every job done: queued ones cancelled). Feed values
 * are retained by the job and released by whoever waits for or frees it (the
 * caller's thread), never by the worker: a wrapped value's release callback
 * may belong to the caller's runtime. */
#include "internal.h"

#include <pthread.h>
#include <string.h>

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct mf_async {
  mf_worker *worker;      /* NULL once done: the job needs nothing of the session then */
  mf_callable *callable;
  int state;              /* JOB_*, under worker->mu while the worker exists */
  atomic_bool done;       /* state == JOB_DONE, readable without the lock */
  bool waited;
  mf_async *next;         /* queue link */
  int nfeeds, nfetches;
  mf_tensor **feeds;      /* retained */
  mf_tensor **fetches;    /* results not yet handed out */
  mf_status status;
};

struct mf_worker {
  pthread_mutex_t mu;
  pthread_cond_t work;    /* the thread waits here for jobs or stop */
  pthread_cond_t idle;    /* waiters: a job finished */
  pthread_t thread;
  mf_async *head, *tail;  /* queued jobs, oldest first */
  mf_async *running;
  bool stop;
};

static void *worker_main(void *arg) {
  mf_worker *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->head && !w->stop) pthread_cond_wait(&w->work, &w->mu);
    if (!w->head) break;  /* stop, and nothing left (mf_worker_free cancels the queue first) */
    mf_async *a = w->head;
    w->head = a->next;
    if (!w->head) w->tail = NULL;
    a->next = NULL;
    a->state = JOB_RUNNING;
    w->running = a;
    pthread_mutex_unlock(&w->mu);
    mf_callable_run_now(a->callable, a->feeds, a->fetches, &a->status);
    pthread_mutex_lock(&w->mu);
    /* a->worker stays: a waiter that saw done == false reads it unlocked.
     * Only the owner's thread clears it (mf_worker_free). */
    a->state = JOB_DONE;
    atomic_store_explicit(&a->done, true, memory_order_release);
    w->running = NULL;
    pthread_cond_broadcast(&w->idle);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static mf_worker *worker_start(mf_status *s) {
  mf_worker *w = mf_calloc(1, sizeof *w);
  if (!w) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory starting a session's worker thread");
    return NULL;
  }
  int err = pthread_mutex_init(&w->mu, NULL);
  bool mu = err == 0, work = false, idle = false;
  if (!err) work = (err = pthread_cond_init(&w->work, NULL)) == 0;
  if (!err) idle = (err = pthread_cond_init(&w->idle, NULL)) == 0;
  if (!err) err = pthread_create(&w->thread, NULL, worker_main, w);
  if (err) {
    if (idle) pthread_cond_destroy(&w->idle);
    if (work) pthread_cond_destroy(&w->work);
    if (mu) pthread_mutex_destroy(&w->mu);
    mf_free(w);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "cannot start a worker thread for asynchronous runs (%s)",
                  strerror(err));
    return NULL;
  }
  return w;
}

static bool on_worker(const mf_worker *w) { return pthread_equal(pthread_self(), w->thread); }

void mf_worker_drain(mf_worker *w) {
  /* The worker's own runs (a host callback there) must not wait for themselves. */
  if (!w || on_worker(w)) return;
  pthread_mutex_lock(&w->mu);
  while (w->head || w->running) pthread_cond_wait(&w->idle, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

void mf_worker_free(mf_worker *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  for (mf_async *a = w->head, *next; a; a = next) {
    next = a->next;
    a->next = NULL;
    mf_status_set(&a->status, MF_CANCELLED,
                  "the session was closed before this asynchronous run started");
    a->state = JOB_DONE;
    a->worker = NULL;
    atomic_store_explicit(&a->done, true, memory_order_release);
  }
  w->head = w->tail = NULL;
  w->stop = true;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);  /* it finishes the running job first */
  pthread_cond_destroy(&w->idle);
  pthread_cond_destroy(&w->work);
  pthread_mutex_destroy(&w->mu);
  mf_free(w);
}

mf_async *mf_callable_run_async(mf_callable *c, mf_tensor *const *feed_values, mf_status *s) {
  mf_status_clear(s);
  if (!c) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "mf_callable_run_async: the callable is NULL");
    return NULL;
  }
  mf_session *sess = mf_callable_session(c);
  if (mf_session_is_closed(sess)) {
    mf_status_set(s, MF_FAILED_PRECONDITION,
                  "Attempted to use a closed Session: create a new tf.Session to run again");
    return NULL;
  }
  int nfeeds = mf_callable_num_feeds(c), nfetches = mf_callable_num_fetches(c);
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
  mf_worker **slot = mf_session_worker(sess);
  if (!*slot && !(*slot = worker_start(s))) {
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
  atomic_init(&a->done, false);
  mf_worker *w = *slot;
  a->worker = w;
  pthread_mutex_lock(&w->mu);
  a->state = JOB_QUEUED;
  if (w->tail) w->tail->next = a;
  else w->head = a;
  w->tail = a;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
  return a;
}

/* Blocks until a is done. */
static void wait_done(mf_async *a) {
  if (atomic_load_explicit(&a->done, memory_order_acquire)) return;
  mf_worker *w = a->worker;  /* not done: the session, and so its worker, still exists */
  pthread_mutex_lock(&w->mu);
  while (a->state != JOB_DONE) pthread_cond_wait(&w->idle, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

static void release_feeds(mf_async *a) {
  for (int i = 0; i < a->nfeeds; i++) {
    mf_tensor_release(a->feeds[i]);
    a->feeds[i] = NULL;
  }
}

bool mf_async_done(mf_async *a) { return a && atomic_load_explicit(&a->done, memory_order_acquire); }

mf_code mf_async_wait(mf_async *a, mf_tensor **fetch_values, mf_status *s) {
  mf_status_clear(s);
  if (!a) return mf_status_set(s, MF_INVALID_ARGUMENT, "mf_async_wait: the job is NULL");
  if (a->waited)
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "this asynchronous run was waited for already; its results were handed out then");
  wait_done(a);
  a->waited = true;
  release_feeds(a);
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
  if (!atomic_load_explicit(&a->done, memory_order_acquire)) {
    mf_worker *w = a->worker;
    pthread_mutex_lock(&w->mu);
    if (a->state == JOB_QUEUED) {  /* not started: take it off the queue */
      mf_async *prev = NULL;
      for (mf_async *q = w->head; q; prev = q, q = q->next)
        if (q == a) {
          if (prev) prev->next = a->next;
          else w->head = a->next;
          if (w->tail == a) w->tail = prev;
          break;
        }
      a->state = JOB_DONE;
      pthread_cond_broadcast(&w->idle);  /* a drain may be waiting for the queue to empty */
    }
    while (a->state != JOB_DONE) pthread_cond_wait(&w->idle, &w->mu);
    pthread_mutex_unlock(&w->mu);
  }
  release_feeds(a);
  for (int i = 0; i < a->nfetches; i++) mf_tensor_release(a->fetches[i]);
  mf_free(a->feeds);
  mf_free(a->fetches);
  mf_free(a);
}
