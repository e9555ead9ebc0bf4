/* worker.c — one thread running jobs first in first out (see worker.h). */
#include "exec/worker.h"
#include "core/memory.h"
#include "core/status.h"

#include <pthread.h>
#include <string.h>

struct mf_worker {
  pthread_mutex_t mu;
  pthread_cond_t work;    /* the thread waits here for jobs or stop */
  pthread_cond_t idle;    /* waiters: a job finished */
  pthread_t thread;
  mf_job *head, *tail;    /* queued jobs, oldest first */
  mf_job *running;        /* on the worker's thread, or on a waiter's (mf_job_wait) */
  bool waiter_runs;       /* running is on thread `waiter` */
  pthread_t waiter;
  bool stop;
};

static void mark_done(mf_job *j) {
  j->state = MF_JOB_DONE;
  atomic_store_explicit(&j->done, true, memory_order_release);
}

static void *worker_main(void *arg) {
  mf_worker *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    /* A job a waiter runs itself (mf_job_wait) holds the queue back until it ends. */
    while ((!w->head || w->running) && !w->stop) pthread_cond_wait(&w->work, &w->mu);
    if (!w->head) break;  /* stop, and nothing left (mf_worker_free cancels the queue first) */
    mf_job *j = w->head;
    w->head = j->next;
    if (!w->head) w->tail = NULL;
    j->next = NULL;
    j->state = MF_JOB_RUNNING;
    w->running = j;
    pthread_mutex_unlock(&w->mu);
    j->run(j);
    pthread_mutex_lock(&w->mu);
    /* j->worker stays: a waiter that saw done == false reads it unlocked. */
    mark_done(j);
    w->running = NULL;
    pthread_cond_broadcast(&w->idle);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

mf_worker *mf_worker_start(mf_status *s) {
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

void mf_worker_submit(mf_worker *w, mf_job *j) {
  atomic_init(&j->done, false);
  j->worker = w;
  j->next = NULL;
  pthread_mutex_lock(&w->mu);
  j->state = MF_JOB_QUEUED;
  if (w->tail) w->tail->next = j;
  else w->head = j;
  w->tail = j;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
}

/* Whether the calling thread is running w's current job (under w->mu). */
static bool runs_job(const mf_worker *w) {
  pthread_t self = pthread_self();
  return pthread_equal(self, w->thread) || (w->waiter_runs && pthread_equal(self, w->waiter));
}

bool mf_job_done(const mf_job *j) { return atomic_load_explicit(&j->done, memory_order_acquire); }

/* A job next in line that the worker has not started is run here: waiting
 * for the worker's thread to be scheduled would only add a thread switch
 * (on a busy machine, many times the job). The worker takes no other job
 * meanwhile, so the jobs still run one at a time, first in first out. */
void mf_job_wait(mf_job *j) {
  if (mf_job_done(j)) return;
  mf_worker *w = j->worker;  /* not done: the worker still exists */
  pthread_mutex_lock(&w->mu);
  if (j->state == MF_JOB_QUEUED && w->head == j && !w->running && !pthread_equal(pthread_self(), w->thread)) {
    w->head = j->next;
    if (!w->head) w->tail = NULL;
    j->next = NULL;
    j->state = MF_JOB_RUNNING;
    w->running = j;
    w->waiter_runs = true;
    w->waiter = pthread_self();
    pthread_mutex_unlock(&w->mu);
    j->run(j);
    pthread_mutex_lock(&w->mu);
    mark_done(j);
    w->running = NULL;
    w->waiter_runs = false;
    pthread_cond_broadcast(&w->idle);
    if (w->head) pthread_cond_signal(&w->work);
  }
  while (j->state != MF_JOB_DONE) pthread_cond_wait(&w->idle, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

void mf_job_withdraw(mf_job *j) {
  if (mf_job_done(j)) return;
  mf_worker *w = j->worker;
  pthread_mutex_lock(&w->mu);
  if (j->state == MF_JOB_QUEUED) {  /* not started: take it off the queue */
    mf_job *prev = NULL;
    for (mf_job *q = w->head; q; prev = q, q = q->next)
      if (q == j) {
        if (prev) prev->next = j->next;
        else w->head = j->next;
        if (w->tail == j) w->tail = prev;
        break;
      }
    mark_done(j);
    pthread_cond_broadcast(&w->idle);  /* a drain may be waiting for the queue to empty */
  }
  while (j->state != MF_JOB_DONE) pthread_cond_wait(&w->idle, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

void mf_worker_drain(mf_worker *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  if (!runs_job(w))
    while (w->head || w->running) pthread_cond_wait(&w->idle, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

void mf_worker_free(mf_worker *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  for (mf_job *j = w->head, *next; j; j = next) {
    next = j->next;
    j->next = NULL;
    j->cancelled = true;
    j->worker = NULL;
    mark_done(j);
  }
  w->head = w->tail = NULL;
  w->stop = true;
  pthread_cond_signal(&w->work);
  while (w->running) pthread_cond_wait(&w->idle, &w->mu);  /* a waiter's, or the thread's */
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->idle);
  pthread_cond_destroy(&w->work);
  pthread_mutex_destroy(&w->mu);
  mf_free(w);
}
