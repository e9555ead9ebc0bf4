/* threadpool.c — a pool of threads for parallel loops. A loop is a job on the
 * caller's stack: its chunks are taken with one atomic counter, by the pool's
 * threads (woken when the job is posted) and by the caller, who then waits
 * until the last chunk is done. Jobs of several callers queue up; a thread
 * takes chunks of the oldest job that has some left. */
#include "exec/threadpool.h"
#include "core/memory.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct loop_job {
  void (*fn)(void *arg, int64_t begin, int64_t end);
  void *arg;
  int64_t n, chunk, chunks;
  atomic_llong next;     /* the next chunk to take */
  atomic_llong done;     /* chunks finished */
  int users;             /* pool threads working on it (under the pool's lock): it lives on
                            its caller's stack, so the caller waits for them to leave */
  struct loop_job *next_job;
} loop_job;

struct mf_threadpool {
  int size;
  pthread_t *threads;
  int started;
  pthread_mutex_t lock;
  pthread_cond_t work;   /* a job was posted, or stop */
  pthread_cond_t finished; /* a job's last chunk is done */
  loop_job *jobs;        /* jobs with chunks left, oldest first */
  bool stop;
};

/* Takes and runs chunks of job until none is left. */
static void run_chunks(loop_job *job) {
  for (;;) {
    int64_t c = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
    if (c >= job->chunks) return;
    int64_t begin = c * job->chunk, end = begin + job->chunk < job->n ? begin + job->chunk : job->n;
    job->fn(job->arg, begin, end);
    atomic_fetch_add_explicit(&job->done, 1, memory_order_release);
  }
}

/* Removes job from the queue if it is still there (its chunks are all taken). */
static void unqueue(mf_threadpool *tp, loop_job *job) {
  for (loop_job **p = &tp->jobs; *p; p = &(*p)->next_job)
    if (*p == job) {
      *p = job->next_job;
      return;
    }
}

static void *worker_main(void *arg) {
  mf_threadpool *tp = arg;
  pthread_mutex_lock(&tp->lock);
  for (;;) {
    while (!tp->stop && !tp->jobs) pthread_cond_wait(&tp->work, &tp->lock);
    if (tp->stop) break;
    loop_job *job = tp->jobs;
    if (atomic_load_explicit(&job->next, memory_order_relaxed) >= job->chunks) {
      unqueue(tp, job);
      continue;
    }
    job->users++;
    pthread_mutex_unlock(&tp->lock);
    run_chunks(job);
    pthread_mutex_lock(&tp->lock);
    unqueue(tp, job);
    job->users--;
    pthread_cond_broadcast(&tp->finished);
  }
  pthread_mutex_unlock(&tp->lock);
  return NULL;
}

mf_threadpool *mf_threadpool_new(int n) {
  mf_threadpool *tp = mf_calloc(1, sizeof *tp);
  if (!tp) return NULL;
  tp->size = n < 1 ? 1 : n;
  pthread_mutex_init(&tp->lock, NULL);
  pthread_cond_init(&tp->work, NULL);
  pthread_cond_init(&tp->finished, NULL);
  if (tp->size > 1 && !(tp->threads = mf_calloc((size_t)tp->size - 1, sizeof *tp->threads))) {
    mf_threadpool_free(tp);
    return NULL;
  }
  for (int i = 0; i < tp->size - 1; i++) {
    if (pthread_create(&tp->threads[i], NULL, worker_main, tp) != 0) {
      mf_threadpool_free(tp);
      return NULL;
    }
    tp->started++;
  }
  return tp;
}

void mf_threadpool_free(mf_threadpool *tp) {
  if (!tp) return;
  pthread_mutex_lock(&tp->lock);
  tp->stop = true;
  pthread_cond_broadcast(&tp->work);
  pthread_mutex_unlock(&tp->lock);
  for (int i = 0; i < tp->started; i++) pthread_join(tp->threads[i], NULL);
  pthread_cond_destroy(&tp->work);
  pthread_cond_destroy(&tp->finished);
  pthread_mutex_destroy(&tp->lock);
  mf_free(tp->threads);
  mf_free(tp);
}

int mf_threadpool_size(const mf_threadpool *tp) { return tp ? tp->size : 1; }

void mf_threadpool_for(mf_threadpool *tp, int64_t n, int64_t grain, void (*fn)(void *arg, int64_t begin, int64_t end),
                       void *arg) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int size = mf_threadpool_size(tp);
  /* A few chunks per thread evens out threads that start late. */
  int64_t chunk = (n + 4 * size - 1) / (4 * size);
  if (chunk < grain) chunk = grain;
  if (size == 1 || chunk >= n) {
    fn(arg, 0, n);
    return;
  }
  loop_job job = {.fn = fn, .arg = arg, .n = n, .chunk = chunk, .chunks = (n + chunk - 1) / chunk};
  atomic_init(&job.next, 0);
  atomic_init(&job.done, 0);
  pthread_mutex_lock(&tp->lock);
  loop_job **tail = &tp->jobs;
  while (*tail) tail = &(*tail)->next_job;
  *tail = &job;
  pthread_cond_broadcast(&tp->work);
  pthread_mutex_unlock(&tp->lock);
  run_chunks(&job);
  pthread_mutex_lock(&tp->lock);
  unqueue(tp, &job);
  while (job.users > 0 || atomic_load_explicit(&job.done, memory_order_acquire) < job.chunks)
    pthread_cond_wait(&tp->finished, &tp->lock);
  pthread_mutex_unlock(&tp->lock);
}
