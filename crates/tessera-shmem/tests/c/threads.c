/* Threads: shmem_init_thread(SHMEM_THREAD_MULTIPLE) is granted where every PE's memory
 * is mapped (SERIALIZED is the most a job with unmapped peers gets). Under MULTIPLE,
 * THREADS threads per PE each make their own context and at once put with signal to the
 * next PE, add to a counter on PE 0, wait for their own signals (while the other threads
 * still put), check the data, and ping-pong with their twin thread on the neighbours.
 * Under SERIALIZED the same puts come from the threads one after another.
 * Prints "threads: OK" on PE 0. */
#include <pthread.h>
#include <stdint.h>
#include "check.h"

#define THREADS 4
#define ROUNDS 200

static long inbox[THREADS][ROUNDS];
static uint64_t arrived[THREADS];
static long counter;
static int ping[THREADS];
static int me, n, provided;

static long value(int pe, int t, int r) { return pe * 1000000L + t * 1000L + r; }

/* Thread t: ROUNDS signalling puts to the next PE and adds to PE 0's counter, through
 * its own context. */
static void send(int t)
{
    int r, right = (me + 1) % n;
    shmem_ctx_t ctx;
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0, "shmem_ctx_create in a thread");
    for (r = 0; r < ROUNDS; r++) {
        long v = value(me, t, r);
        shmem_ctx_long_put_signal(ctx, &inbox[t][r], &v, 1, &arrived[t], 1,
                                  SHMEM_SIGNAL_ADD, right);
        shmem_ctx_long_atomic_add(ctx, &counter, 1, 0);
    }
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
}

/* Thread t: every signal from the previous PE's thread t has come, with its data. */
static void receive(int t)
{
    int r, left = (me + n - 1) % n, bad = 0;
    shmem_uint64_wait_until(&arrived[t], SHMEM_CMP_EQ, ROUNDS);
    for (r = 0; r < ROUNDS; r++) bad += inbox[t][r] != value(left, t, r);
    CHECK(bad == 0, "the data of every signalling put from a thread");
}

static void *worker(void *arg)
{
    int t = (int) (intptr_t) arg;
    send(t);
    receive(t);
    /* Twin threads of neighbouring PEs: a put and a wait, while the others still run. */
    shmem_int_atomic_set(&ping[t], 1, (me + 1) % n);
    shmem_int_wait_until(&ping[t], SHMEM_CMP_EQ, 1);
    return NULL;
}

static void *sender(void *arg)
{
    send((int) (intptr_t) arg);
    return NULL;
}

int main(void)
{
    pthread_t threads[THREADS];
    int t, level = -1;
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "shmem_init_thread");
    me = shmem_my_pe();
    n = shmem_n_pes();
    {
        int p, all_mapped = 1;
        for (p = 0; p < n; p++) all_mapped &= shmem_ptr(&counter, p) != NULL;
        CHECK(provided == (all_mapped ? SHMEM_THREAD_MULTIPLE : SHMEM_THREAD_SERIALIZED),
              "MULTIPLE where every PE is mapped, SERIALIZED where one is not");
    }
    shmem_query_thread(&level);
    CHECK(level == provided, "shmem_query_thread says what shmem_init_thread did");
    if (provided == SHMEM_THREAD_MULTIPLE) {
        for (t = 0; t < THREADS; t++)
            CHECK(pthread_create(&threads[t], NULL, worker, (void *) (intptr_t) t) == 0,
                  "pthread_create");
        for (t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    } else {
        /* SERIALIZED: calls from several threads, one thread at a time. */
        for (t = 0; t < THREADS; t++) {
            CHECK(pthread_create(&threads[t], NULL, sender, (void *) (intptr_t) t) == 0,
                  "pthread_create");
            pthread_join(threads[t], NULL);
        }
        for (t = 0; t < THREADS; t++) receive(t);
    }
    shmem_barrier_all();
    if (me == 0) CHECK(counter == (long) n * THREADS * ROUNDS, "every thread's atomic add");
    return report("threads");
}
