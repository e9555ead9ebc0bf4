/* comm.c — the MPI job of the process: initialization, ranks, the deadline
 * of collectives, shutdown. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "mpi/comm.h"
#include "mpi/moonflow_mpi.h"

#include "core/status.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t collective_lock = PTHREAD_MUTEX_INITIALIZER;
/* The job's state: set under init_lock (timed_out under collective_lock);
 * the ops read it without. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool initialized, finished, timed_out;
static int world_rank = -1, world_size = -1, node_rank = -1, node_size = -1;
static double timeout_seconds = 300;
static char timeout_message[512];

/* The communication thread and its jobs, under queue_lock: the queue (run
 * first in first out), the jobs submitted and not yet taken, the log of the
 * last LOG_LEN collectives it ran. `changed` is signalled when a job is
 * queued or done and when stopping. */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static pthread_t thread;
static bool thread_started, stopping, running;
static comm_job *queue_head, *queue_tail, *outstanding;
static int64_t last_ticket;
enum { LOG_LEN = 64 };
static mf_mpi_collective log_ring[LOG_LEN];
static int64_t log_count;

double mf_mpi_clock(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *communicate(void *unused) {
  (void)unused;
  pthread_mutex_lock(&queue_lock);
  for (;;) {
    while (!queue_head && !stopping) pthread_cond_wait(&changed, &queue_lock);
    comm_job *job = queue_head;
    if (!job) break;
    if (!(queue_head = job->next_queued)) queue_tail = NULL;
    running = true;
    pthread_mutex_unlock(&queue_lock);
    job->started = mf_mpi_clock();
    pthread_mutex_lock(&collective_lock);
    job->run(job);
    pthread_mutex_unlock(&collective_lock);
    job->finished = mf_mpi_clock();
    pthread_mutex_lock(&queue_lock);
    log_ring[log_count++ % LOG_LEN] = (mf_mpi_collective){job->ticket, job->bytes, job->tensors, job->submitted,
                                                          job->started, job->finished};
    running = false;
    job->done = true;
    pthread_cond_broadcast(&changed);
  }
  pthread_mutex_unlock(&queue_lock);
  return NULL;
}

mf_code comm_submit(comm_job *job, const char *who, mf_status *s) {
  pthread_mutex_lock(&queue_lock);
  if (!thread_started && pthread_create(&thread, NULL, communicate, NULL) != 0) {
    pthread_mutex_unlock(&queue_lock);
    return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: cannot start the MPI communication thread", who);
  }
  thread_started = true;
  job->ticket = ++last_ticket;
  job->done = false;
  job->submitted = mf_mpi_clock();
  job->next_queued = NULL;
  if (queue_tail) queue_tail->next_queued = job;
  else queue_head = job;
  queue_tail = job;
  job->next_outstanding = outstanding;
  outstanding = job;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&queue_lock);
  return MF_OK;
}

comm_job *comm_take(int64_t ticket) {
  pthread_mutex_lock(&queue_lock);
  comm_job **at = &outstanding;
  while (*at && (*at)->ticket != ticket) at = &(*at)->next_outstanding;
  comm_job *job = *at;
  if (job) {
    *at = job->next_outstanding;
    while (!job->done) pthread_cond_wait(&changed, &queue_lock);
  }
  pthread_mutex_unlock(&queue_lock);
  return job;
}

int mf_mpi_recent_collectives(mf_mpi_collective *out, int n) {
  pthread_mutex_lock(&queue_lock);
  int64_t have = log_count < LOG_LEN ? log_count : LOG_LEN;
  if (n > have) n = (int)have;
  if (n < 0) n = 0;
  for (int i = 0; i < n; i++) out[i] = log_ring[(log_count - n + i) % LOG_LEN];
  pthread_mutex_unlock(&queue_lock);
  return n;
}

/* Runs the queue to its end, stops the thread and frees the jobs nobody took
 * (their runs failed before waiting). */
static void stop_thread(void) {
  pthread_mutex_lock(&queue_lock);
  bool started = thread_started;
  stopping = true;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&queue_lock);
  if (started) pthread_join(thread, NULL);
  while (outstanding) {
    comm_job *job = outstanding;
    outstanding = job->next_outstanding;
    job->free(job);
  }
}

void comm_lock(void) {
  pthread_mutex_lock(&queue_lock);
  while (queue_head || running) pthread_cond_wait(&changed, &queue_lock);
  pthread_mutex_unlock(&queue_lock);
  pthread_mutex_lock(&collective_lock);
}
void comm_unlock(void) { pthread_mutex_unlock(&collective_lock); }
MPI_Comm comm_world(void) { return MPI_COMM_WORLD; }

mf_code comm_check(int rc, const char *who, const char *what, mf_status *s) {
  if (rc == MPI_SUCCESS) return MF_OK;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  text[len] = '\0';
  return mf_status_set(s, MF_INTERNAL, "%s: %s failed in MPI: %s", who, what, text);
}

mf_code comm_ready(const char *who, mf_status *s) {
  if (!initialized || finished)
    return mf_status_set(s, MF_FAILED_PRECONDITION, "%s: MPI is not %s: call mpi.init() first (mf_mpi_init)", who,
                         finished ? "running any more (mpi.shutdown() ended it)" : "initialized");
  if (timed_out)
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "%s: MPI is unusable in this process since an earlier collective timed out (%s)", who,
                         timeout_message);
  return MF_OK;
}

/* Polls without sleeping for the first SPIN_POLLS tests (small collectives
 * between processes of one machine finish in microseconds), then sleeps
 * POLL_SLEEP_NS between tests so a long wait does not take a core. */
enum { SPIN_POLLS = 20000, POLL_SLEEP_NS = 20000 };

mf_code comm_wait(MPI_Request *req, const char *who, const char *what, mf_status *s) {
  double deadline = timeout_seconds > 0 ? MPI_Wtime() + timeout_seconds : INFINITY;
  for (long polls = 0;; polls++) {
    int done = 0;
    if (comm_check(MPI_Test(req, &done, MPI_STATUS_IGNORE), who, what, s)) return s->code;
    if (done) return MF_OK;
    if (polls < SPIN_POLLS) continue;
    if (MPI_Wtime() > deadline) {
      timed_out = true;
      snprintf(timeout_message, sizeof timeout_message,
               "%s waited %g s for %s and not every rank of %d joined: a rank died, stopped, or ran other MPI ops "
               "(every rank must run the same MPI ops in the same order)",
               who, timeout_seconds, what, world_size);
      return mf_status_set(s, MF_UNKNOWN, "%s: timed out after %g s waiting for %s: not every rank of %d joined "
                           "(a rank died, stopped, or ran other MPI ops: every rank must run the same MPI ops in "
                           "the same order); MPI is unusable in this process now and the job ends at its exit "
                           "(mpi.init{timeout=} sets the deadline)",
                           who, timeout_seconds, what, world_size);
    }
    nanosleep(&(struct timespec){0, POLL_SLEEP_NS}, NULL);
  }
}

static void shutdown_at_exit(void) { mf_mpi_shutdown(); }

static mf_code start_job(mf_status *s) {
  int ready = 0, provided = 0;
  if (MPI_Initialized(&ready) == MPI_SUCCESS && !ready) {
    if (comm_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), "mpi.init", "MPI_Init_thread", s))
      return s->code;
  } else if (MPI_Query_thread(&provided) != MPI_SUCCESS) {
    provided = MPI_THREAD_SINGLE;
  }
  /* The collective lock serializes the process's MPI calls, which SERIALIZED allows. */
  if (provided < MPI_THREAD_SERIALIZED)
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "mpi.init: this MPI gives thread level %d; moonflow needs MPI_THREAD_SERIALIZED or more",
                         provided);
  MPI_Comm node;
  if (comm_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "mpi.init", "MPI_Comm_set_errhandler", s) ||
      comm_check(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "mpi.init", "MPI_Comm_rank", s) ||
      comm_check(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "mpi.init", "MPI_Comm_size", s) ||
      comm_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node),
                 "mpi.init", "MPI_Comm_split_type", s))
    return s->code;
  mf_code code = comm_check(MPI_Comm_rank(node, &node_rank), "mpi.init", "MPI_Comm_rank", s);
  if (!code) code = comm_check(MPI_Comm_size(node, &node_size), "mpi.init", "MPI_Comm_size", s);
  MPI_Comm_free(&node);
  return code;
}

mf_code mf_mpi_init(mf_status *s) {
  pthread_mutex_lock(&init_lock);
  mf_code code = MF_OK;
  if (finished) {
    code = mf_status_set(s, MF_FAILED_PRECONDITION, "mpi.init: MPI was shut down in this process and cannot restart");
  } else if (!initialized) {
    const char *env = getenv("MOONFLOW_MPI_TIMEOUT");
    char *end = NULL;
    double t = env ? strtod(env, &end) : 0;
    if (env && (end == env || *end != '\0' || t != t))
      code = mf_status_set(s, MF_INVALID_ARGUMENT, "mpi.init: MOONFLOW_MPI_TIMEOUT='%s' is no number of seconds", env);
    else if (env)
      timeout_seconds = t;
    if (!code) code = mf_registry_add(&mf_mpi_ops, MF_VERSION, s);
    if (!code) code = start_job(s);
    if (!code) {
      initialized = true;
      atexit(shutdown_at_exit);
    }
  }
  pthread_mutex_unlock(&init_lock);
  return code;
}

bool mf_mpi_initialized(void) { return initialized && !finished; }
int mf_mpi_rank(void) { return world_rank; }
int mf_mpi_size(void) { return world_size; }
int mf_mpi_local_rank(void) { return node_rank; }
int mf_mpi_local_size(void) { return node_size; }
void mf_mpi_set_timeout(double seconds) { timeout_seconds = seconds; }
double mf_mpi_timeout(void) { return timeout_seconds; }

mf_code mf_mpi_barrier(mf_status *s) {
  comm_lock();
  MPI_Request req;
  mf_code code = comm_ready("mpi.barrier", s);
  if (!code) code = comm_check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "mpi.barrier", "MPI_Ibarrier", s);
  if (!code) code = comm_wait(&req, "mpi.barrier", "the barrier", s);
  comm_unlock();
  return code;
}

void mf_mpi_shutdown(void) {
  pthread_mutex_lock(&init_lock);
  if (initialized && !finished) {
    stop_thread();
    finished = true;
    /* A collective that timed out is still pending: MPI_Finalize would wait
     * for it forever. Aborting makes mpirun end the other ranks too. */
    if (timed_out) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }
  pthread_mutex_unlock(&init_lock);
}
