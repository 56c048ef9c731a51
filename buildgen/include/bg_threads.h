/* bg_threads.h — the thread pool a model instance owns (part of bg_kernels.h; include that).
 *
 * A `c` host module built with `threads: N` (or run with BUILDGEN_NUM_THREADS=N) creates one
 * pool per model instance at create and joins it at destroy: no global state, so two
 * instances in one process (or two models) never share or fight over threads, and nothing
 * depends on an OpenMP runtime. The caller's thread is one of the pool's N: a pool of N
 * starts N - 1 workers.
 *
 * Work is a range of independent tasks (bg_parallel). Workers take the next task from an
 * atomic counter, so a slow core does not hold the others up; every kernel splits its work
 * so that a task computes its outputs exactly as the single-threaded code would (GEMM tiles
 * on the same MR x NR grid, the same K slices, whole planes or rows), which makes results
 * bit-identical whatever the thread count and whichever thread ran a task.
 *
 * Each worker has a private workspace of the module's largest kernel workspace, allocated at
 * create; the caller's thread uses the workspace the memory planner gave the kernel.
 *
 * Between jobs a worker spins briefly (a model runs its kernels back to back, and waking a
 * sleeping thread costs tens of microseconds), then sleeps on a condition variable, so an
 * idle model costs no CPU.
 *
 * BG_THREADS_OPENMP (with -fopenmp): the same pool, its jobs run by the OpenMP runtime's
 * team instead of threads of its own. The c host is built so when an accelerator of its
 * target threads with OpenMP (oneDNN's PyPI build, libgomp): two runtimes each keeping
 * N - 1 threads busy between jobs (libgomp's team spins after a primitive, this pool's
 * workers spin after a job) put 2N - 1 busy threads on N cores, and a host region then
 * waited for a worker the OS had descheduled: DenseNet-121 took 59 ms on 2 threads that
 * way, 38 ms with the host on one thread. One runtime owns the threads; the tasks, their
 * workspaces and so the results are the same.
 */
#ifndef BG_KERNELS_H
#error "include bg_kernels.h, not bg_threads.h"
#endif
#ifndef BG_THREADS_H
#define BG_THREADS_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef BG_THREADS_OPENMP
#include <omp.h>
#endif

/* Most threads a pool may hold (a guard against a typo in BUILDGEN_NUM_THREADS). */
#define BG_MAX_THREADS 256
/* Busy-wait iterations before a worker (or the caller, waiting for workers) sleeps. */
#define BG_SPIN_ITERATIONS 20000

/* Run task `task` of a job with `ws`, a workspace private to the running thread. */
typedef void (*bg_task_fn)(const void *ctx, int64_t task, void *ws);

typedef struct bg_threadpool bg_threadpool;

typedef struct bg__worker {
    bg_threadpool *pool;
    void *ws;
    pthread_t thread;
} bg__worker;

struct bg_threadpool {
    int threads; /* including the caller's */
    bg__worker *workers; /* threads - 1 of them */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    /* The current job, written by the caller while `generation` is odd. */
    bg_task_fn fn;
    const void *ctx;
    int64_t tasks;
    atomic_llong next;      /* the next task to take */
    atomic_llong finished;  /* tasks of the current job done */
    atomic_int inside;      /* workers checked in to a job and not yet out of it */
    atomic_uint generation; /* even: a job is published; odd: the caller is writing one */
    atomic_int stop;
};

static inline void bg__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#elif defined(__riscv)
    /* Zihintpause's `pause` (fence w,0), a FENCE hint that cores without the extension run
     * as a no-op; spelled with .insn for assemblers that lack the mnemonic. */
    __asm__ __volatile__(".insn i 0x0f, 0, x0, x0, 0x010");
#endif
}

/* Take tasks of the current job until none is left. The thread that finishes the job's last
 * task wakes the caller if it went to sleep waiting. */
static inline void bg__run_tasks(bg_threadpool *pool, int64_t tasks, void *ws)
{
    for (;;) {
        const int64_t t = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (t >= tasks) return;
        pool->fn(pool->ctx, t, ws);
        if (atomic_fetch_add_explicit(&pool->finished, 1, memory_order_acq_rel) + 1 == tasks) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
}

#ifndef BG_THREADS_OPENMP /* the runtime's team runs the jobs there */
/* A published generation other than `seen`: spin a while, then sleep until one comes. */
static unsigned bg__next_job(bg_threadpool *pool, unsigned seen)
{
    unsigned now = atomic_load_explicit(&pool->generation, memory_order_acquire);
    for (int spin = 0; (now == seen || (now & 1u)) && spin < BG_SPIN_ITERATIONS; ++spin) {
        bg__cpu_relax();
        now = atomic_load_explicit(&pool->generation, memory_order_acquire);
    }
    if (now == seen || (now & 1u)) {
        pthread_mutex_lock(&pool->lock);
        while ((now = atomic_load(&pool->generation)) == seen || (now & 1u))
            pthread_cond_wait(&pool->wake, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
    return now;
}

/* A worker checks in to a job before reading it and out when it has no task left; the caller
 * writes the next job only when none is in. A worker that was slow to wake (descheduled,
 * asleep) then costs nothing: the caller waits for the tasks taken, never for a worker to
 * turn up, and a late worker finds the job done or, if it checks in while the caller is
 * writing the next one, backs out (the generation it read is no longer current). */
static void *bg__worker_main(void *arg)
{
    bg__worker *self = (bg__worker *)arg;
    bg_threadpool *pool = self->pool;
    unsigned seen = 0;
    for (;;) {
        const unsigned now = bg__next_job(pool, seen);
        if (atomic_load(&pool->stop)) return NULL;
        atomic_fetch_add(&pool->inside, 1); /* sequentially consistent with the caller's */
        if (atomic_load(&pool->generation) == now) { /* still the job it woke for */
            seen = now;
            bg__run_tasks(pool, pool->tasks, self->ws);
        }
        atomic_fetch_sub_explicit(&pool->inside, 1, memory_order_release);
    }
}
#endif

#ifdef BG_THREADS_OPENMP
/* Nothing to start: the OpenMP team's thread i + 1 runs worker i's tasks, with its workspace. */
static inline int bg__start_worker(bg__worker *w) { (void)w; return 0; }
#else
static inline int bg__start_worker(bg__worker *w)
{
    return pthread_create(&w->thread, NULL, bg__worker_main, w);
}
#endif

/* Threads in the pool (1 without one). */
static inline int bg_threadpool_threads(const bg_threadpool *pool) { return pool ? pool->threads : 1; }

/* Tasks [0, tasks) of fn, on every thread of the pool (the caller's included), returning
 * when all are done. Without a pool, or with one task, the caller runs them in order. */
BG_API void bg_parallel(bg_threadpool *pool, int64_t tasks, bg_task_fn fn, const void *ctx,
                        void *caller_ws)
{
    if (pool == NULL || pool->threads < 2 || tasks < 2) {
        for (int64_t t = 0; t < tasks; ++t) fn(ctx, t, caller_ws);
        return;
    }
#ifdef BG_THREADS_OPENMP
    /* The caller is thread 0 of the team; the others bring their pool workspace. Inside
     * another parallel region (nesting off, as by default) the team is the caller alone. */
#pragma omp parallel num_threads(pool->threads)
    {
        const int id = omp_get_thread_num();
        void *ws = id == 0 ? caller_ws : pool->workers[id - 1].ws;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; ++t) fn(ctx, t, ws);
    }
#else
    /* Close the last job (odd), then wait out workers still checked in to it: they are
     * running, about to find no task left, so this is short. */
    const unsigned g = atomic_load_explicit(&pool->generation, memory_order_relaxed);
    atomic_store(&pool->generation, g + 1u);
    while (atomic_load(&pool->inside) != 0) bg__cpu_relax();
    pool->fn = fn;
    pool->ctx = ctx;
    pool->tasks = tasks;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->finished, 0, memory_order_relaxed);
    pthread_mutex_lock(&pool->lock);
    atomic_store_explicit(&pool->generation, g + 2u, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    bg__run_tasks(pool, tasks, caller_ws);
    /* Wait for the tasks workers took and are still running. */
    for (int spin = 0; spin < BG_SPIN_ITERATIONS; ++spin) {
        if (atomic_load_explicit(&pool->finished, memory_order_acquire) == tasks) return;
        bg__cpu_relax();
    }
    pthread_mutex_lock(&pool->lock);
    while (atomic_load(&pool->finished) != tasks) pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
#endif
}

/* Rows per task when `rows` independent rows are shared among the pool's threads: two
 * blocks per thread, each of at least `grain` rows (so that a task pays for waking a
 * thread); all rows in one block without a pool or when there are too few. */
static inline int64_t bg_split_rows(int64_t rows, int64_t grain, const bg_threadpool *pool)
{
    const int64_t threads = bg_threadpool_threads(pool);
    if (threads < 2 || rows <= grain) return rows;
    const int64_t step = (rows + 2 * threads - 1) / (2 * threads);
    return step < grain ? grain : step;
}

/* How many threads a module built with `threads: configured` runs: BUILDGEN_NUM_THREADS
 * (a positive integer) when set, else `configured`, where 0 means the CPUs this process may
 * run on. -1 after writing why to `error` when the variable is not a thread count. */
BG_API int bg_threads_wanted(int configured, char *error, size_t size)
{
    const char *env = getenv("BUILDGEN_NUM_THREADS");
    if (env != NULL && env[0] != '\0') {
        char *end = NULL;
        const long n = strtol(env, &end, 10);
        if (*end != '\0' || n < 1 || n > BG_MAX_THREADS) {
            snprintf(error, size, "BUILDGEN_NUM_THREADS=%.32s is not a thread count (1 .. %d)",
                     env, BG_MAX_THREADS);
            return -1;
        }
        return (int)n;
    }
    if (configured > 0) return configured < BG_MAX_THREADS ? configured : BG_MAX_THREADS;
#ifdef CPU_COUNT /* glibc with _GNU_SOURCE: the CPUs this process may use (taskset, cgroups) */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set) < BG_MAX_THREADS ? CPU_COUNT(&set) : BG_MAX_THREADS;
#endif
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1) return 1;
    return online < BG_MAX_THREADS ? (int)online : BG_MAX_THREADS;
}

BG_API void bg_threadpool_destroy(bg_threadpool *pool)
{
    if (pool == NULL) return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->stop, 1);
    atomic_fetch_add(&pool->generation, 2u); /* published: every worker wakes and leaves */
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->threads - 1; ++i) {
#ifndef BG_THREADS_OPENMP
        pthread_join(pool->workers[i].thread, NULL);
#endif
        free(pool->workers[i].ws);
    }
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}

/* A pool of `threads` (>= 2), each worker with `ws_bytes` of workspace. NULL after writing
 * why to `error` when memory or threads run out (what was started is joined). Workers block
 * every signal, so the application's handlers run on its own threads. */
BG_API bg_threadpool *bg_threadpool_create(int threads, size_t ws_bytes, char *error, size_t size)
{
    bg_threadpool *pool = (bg_threadpool *)calloc(1, sizeof *pool);
    bg__worker *workers = (bg__worker *)calloc((size_t)threads, sizeof *workers);
    if (pool == NULL || workers == NULL) {
        free(pool);
        free(workers);
        snprintf(error, size, "out of memory for a pool of %d threads", threads);
        return NULL;
    }
    pool->workers = workers;
    pool->threads = 1;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
#ifdef SIG_SETMASK /* POSIX signal masks (not declared in strict ISO C builds) */
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
#endif
    int rc = 0;
    for (int i = 0; i < threads - 1 && rc == 0; ++i) {
        bg__worker *w = &workers[i];
        w->pool = pool;
        w->ws = ws_bytes ? malloc(ws_bytes) : NULL;
        if (ws_bytes && w->ws == NULL) {
            rc = -1;
            snprintf(error, size, "out of memory for %zu bytes of workspace per thread",
                     ws_bytes);
        } else if ((rc = bg__start_worker(w)) != 0) {
            free(w->ws);
            snprintf(error, size, "cannot start thread %d of %d (pthread_create: error %d)",
                     i + 2, threads, rc);
        } else {
            pool->threads += 1;
        }
    }
#ifdef SIG_SETMASK
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
#endif
    if (rc != 0) {
        bg_threadpool_destroy(pool);
        return NULL;
    }
    return pool;
}

#endif /* BG_THREADS_H */
