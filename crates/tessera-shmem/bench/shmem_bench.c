/* shmem_bench.c: OpenSHMEM micro-benchmarks, for any implementation (built with its
 * oshcc, run with its oshrun). PE 0 prints one line per figure:
 *   NAME BYTES VALUE UNIT
 * Latencies are per call, best of 5 batches; bandwidths in MB/s (10^6 bytes/s), with
 * memcpy of the same size measured in the same run. Heap and global targets both.
 * The 1.4 section, which every implementation runs: put and get latency 8 B to 1 MiB
 * (a blocking get; a put followed by shmem_quiet), atomics, and the active-set
 * collectives (barrier, broadcast, reduction, alltoall) over alternating pSync arrays.
 * The 1.5 section, compiled where shmem.h says 1.5 or later: put-with-signal against
 * put + fence + atomic set, and team collectives on SHMEM_TEAM_WORLD and on a team split
 * from it.
 * With the argument `threads` the program asks for SHMEM_THREAD_MULTIPLE and measures
 * puts through contexts from 1 and 2 threads of PE 0 (per put, over all threads).
 * With the arguments `count OP N` it makes N calls of operation OP and nothing else, so
 * that scripts/shmem-instructions.sh can count the instructions per call under callgrind.
 * Used by scripts/shmem-bench.sh (docs/PERFORMANCE.md, "OpenSHMEM"). */
#include <pthread.h>
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXBYTES (4 << 20)
#define SPEC_1_5 (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5)
static long g_words[1024];
static long g_flag;
static char g_buf[64 << 10];
/* Two of each, used in turns: 1.4 lets consecutive collectives on one active set reuse a
 * pSync (and pWrk) only after a barrier, or when they alternate between two arrays. */
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
#define SYNC_WORDS MAX2(MAX2(SHMEM_BARRIER_SYNC_SIZE, SHMEM_BCAST_SYNC_SIZE), \
                        MAX2(SHMEM_REDUCE_SYNC_SIZE, SHMEM_ALLTOALL_SYNC_SIZE))
static long psync[2][SYNC_WORDS];
static long pwrk[2][SHMEM_REDUCE_MIN_WRKDATA_SIZE + (1 << 17)];
static int pwrk_int[2][SHMEM_REDUCE_MIN_WRKDATA_SIZE];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void report(const char *name, long bytes, double value, const char *unit)
{
    if (shmem_my_pe() == 0) printf("%-24s %9ld %12.3f %s\n", name, bytes, value, unit);
}

/* Best of 5 batches of `iters` calls of `body` on PE 0, others idle in a barrier. */
#define TIME_PE0(name, bytes, iters, body) do { \
    double best = 1e30; int b_, i_; \
    for (b_ = 0; b_ < 5; b_++) { \
        shmem_barrier_all(); \
        if (me == 0) { double t0 = now(); for (i_ = 0; i_ < (iters); i_++) { body; } \
            double t = (now() - t0) / (iters); if (t < best) best = t; } \
    } \
    shmem_barrier_all(); \
    report(name, bytes, best * 1e9, "ns"); } while (0)

/* Best of 5 batches of a collective every PE calls. */
#define TIME_ALL(name, bytes, iters, body) do { \
    double best = 1e30; int b_, i_; \
    for (b_ = 0; b_ < 5; b_++) { \
        shmem_barrier_all(); \
        double t0 = now(); for (i_ = 0; i_ < (iters); i_++) { body; } \
        double t = (now() - t0) / (iters); if (t < best) best = t; \
    } \
    report(name, bytes, best * 1e9, "ns"); } while (0)

/* Puts through a context of its own from each of `nthreads` threads of PE 0. */
#define CTX_PUTS 200000
static long *ctx_words;
static int ctx_peer;
static void *ctx_putter(void *arg)
{
    shmem_ctx_t ctx;
    long i, base = (long) (intptr_t) arg * 512;
    if (shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) != 0) return NULL;
    for (i = 0; i < CTX_PUTS; i++) shmem_ctx_long_p(ctx, &ctx_words[base + (i & 511)], i, ctx_peer);
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
    return NULL;
}

static void threads_bench(int me, int n)
{
    int nthreads, t, b;
    pthread_t th[2];
    ctx_words = shmem_malloc(1024 * sizeof(long));
    ctx_peer = (me + 1) % n;
    for (nthreads = 1; nthreads <= 2; nthreads++) {
        double best = 1e30;
        char name[64];
        for (b = 0; b < 5; b++) {
            shmem_barrier_all();
            if (me == 0) {
                double t0 = now();
                for (t = 0; t < nthreads; t++)
                    pthread_create(&th[t], NULL, ctx_putter, (void *) (intptr_t) t);
                for (t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
                double per = (now() - t0) / ((double) CTX_PUTS * nthreads);
                if (per < best) best = per;
            }
        }
        shmem_barrier_all();
        snprintf(name, sizeof name, "ctx_put8_%dthread%s", nthreads, nthreads > 1 ? "s" : "");
        report(name, 8, best * 1e9, "ns");
    }
    shmem_free(ctx_words);
}

/* `count OP N`: N calls of OP (every PE), nothing timed. Returns 0 for an unknown OP. */
static int count_calls(const char *op, long calls)
{
    static long word, one = 1, out, outs[1024], ones[1024];
    static uint64_t sig;
    long i;
    for (i = 0; i < 1024; i++) ones[i] = 1;
    int npes = shmem_n_pes(), peer = (shmem_my_pe() + 1) % npes;
#if SPEC_1_5
    shmem_team_t split;
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, shmem_n_pes(), NULL, 0, &split);
#endif
    shmem_barrier_all();
#define COUNT(name, body) else if (strcmp(op, name) == 0) for (i = 0; i < calls; i++) { body; }
    if (0) {}
    COUNT("put8", shmem_long_p(&word, i, peer))
    COUNT("get8", out += shmem_long_g(&word, peer))
    COUNT("fetch_add8", out += shmem_long_atomic_fetch_add(&word, 1, peer))
    COUNT("barrier_all", shmem_barrier_all())
    COUNT("sum_to_all", shmem_long_sum_to_all(&out, &one, 1, 0, 0, npes, pwrk[i & 1], psync[i & 1]))
    COUNT("broadcast32", shmem_broadcast32(&word, &one, 1, 0, 0, 0, npes, psync[i & 1]))
    COUNT("fcollect64", shmem_fcollect64(outs, &one, 1, 0, 0, npes, psync[i & 1]))
#if SPEC_1_5
    COUNT("put_signal8", shmem_long_put_signal(&word, &one, 1, &sig, i, SHMEM_SIGNAL_SET, peer))
    COUNT("put_fence_set8", (shmem_long_put(&word, &one, 1, peer), shmem_fence(),
                             shmem_uint64_atomic_set(&sig, i, peer)))
    COUNT("team_sum_world", shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &out, &one, 1))
    COUNT("team_sum_split", shmem_long_sum_reduce(split, &out, &one, 1))
    /* One element to and from each PE: a source and a destination of n_pes elements. */
    COUNT("team_alltoall_world", shmem_long_alltoall(SHMEM_TEAM_WORLD, outs, ones, 1))
#endif
    else return 0;
#undef COUNT
#if SPEC_1_5
    shmem_team_destroy(split);
#endif
    (void) sig;
    return 1;
}

int main(int argc, char **argv)
{
    int me, n, i, peer, provided;
    long *h_words, *h_flag;
    uint64_t *h_sig;
    char *h_buf, *dst, *src;
    long bytes;
#if SPEC_1_5
    shmem_team_t split;
#endif
    if (argc > 1 && strcmp(argv[1], "threads") == 0) {
        shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
        me = shmem_my_pe();
        n = shmem_n_pes();
        if (me == 0) printf("# shmem_bench threads: %d PEs, thread level %d\n", n, provided);
        if (provided == SHMEM_THREAD_MULTIPLE) threads_bench(me, n);
        shmem_finalize();
        return 0;
    }
    if (argc > 3 && strcmp(argv[1], "count") == 0) {
        shmem_init();
        if (!count_calls(argv[2], atol(argv[3]))) {
            fprintf(stderr, "shmem_bench: no operation %s to count\n", argv[2]);
            shmem_global_exit(2);
        }
        shmem_finalize();
        return 0;
    }
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    peer = (me + 1) % n;
    for (i = 0; i < SYNC_WORDS; i++) psync[0][i] = psync[1][i] = SHMEM_SYNC_VALUE;
    h_words = shmem_malloc(1024 * sizeof(long));
    h_flag = shmem_malloc(sizeof(long));
    h_buf = shmem_malloc(MAXBYTES);
    src = shmem_malloc(MAXBYTES);
    dst = shmem_malloc(MAXBYTES);
    memset(src, 1, MAXBYTES);
    memset(h_buf, 0, MAXBYTES);
    *h_flag = 0;
    g_flag = 0;
    shmem_barrier_all();
    if (me == 0) printf("# shmem_bench: %d PEs\n", n);

    TIME_PE0("put8_heap", 8, 200000, shmem_long_p(&h_words[i_ & 1023], i_, peer));
    TIME_PE0("put8_global", 8, 200000, shmem_long_p(&g_words[i_ & 1023], i_, peer));
    TIME_PE0("get8_heap", 8, 200000, (void) shmem_long_g(&h_words[i_ & 1023], peer));
    TIME_PE0("get8_global", 8, 200000, (void) shmem_long_g(&g_words[i_ & 1023], peer));
    TIME_PE0("fetch_add8_heap", 8, 100000, (void) shmem_long_atomic_fetch_add(&h_words[0], 1, peer));
    TIME_PE0("fetch_add8_global", 8, 100000, (void) shmem_long_atomic_fetch_add(&g_words[0], 1, peer));
    TIME_PE0("fetch8", 8, 100000, (void) shmem_long_atomic_fetch(&h_words[0], peer));
    TIME_PE0("swap8", 8, 100000, (void) shmem_long_atomic_swap(&h_words[0], i_, peer));
    TIME_PE0("compare_swap8", 8, 100000, (void) shmem_long_atomic_compare_swap(&h_words[0], i_, i_ + 1, peer));
    TIME_PE0("add8_quiet", 8, 100000, (shmem_long_atomic_add(&h_words[0], 1, peer), shmem_quiet()));
    /* Latency by size: a put is complete at shmem_quiet, a get when it returns. */
    for (i = 0; i < 7; i++) {
        static const long sizes[7] = {8, 64, 512, 4096, 32768, 262144, 1 << 20};
        long iters = sizes[i] < 65536 ? 20000 : 1000;
        bytes = sizes[i];
        TIME_PE0("put_latency", bytes, iters, (shmem_putmem(h_buf, src, bytes, peer), shmem_quiet()));
        TIME_PE0("get_latency", bytes, iters, shmem_getmem(dst, h_buf, bytes, peer));
    }

    for (bytes = 8; bytes <= MAXBYTES; bytes *= 8) {
        long iters = bytes < 65536 ? 20000 : (bytes < (1 << 20) ? 2000 : 200);
        double best = 1e30, mbest = 1e30;
        int b;
        char name[64];
        for (b = 0; b < 5; b++) {
            shmem_barrier_all();
            if (me == 0) {
                double t0 = now();
                for (i = 0; i < iters; i++) shmem_putmem(h_buf, src, bytes, peer);
                shmem_quiet();
                double t = (now() - t0) / iters;
                if (t < best) best = t;
                t0 = now();
                for (i = 0; i < iters; i++) { memcpy(dst, src, bytes); __asm__ __volatile__("" ::: "memory"); }
                t = (now() - t0) / iters;
                if (t < mbest) mbest = t;
            }
        }
        shmem_barrier_all();
        snprintf(name, sizeof name, "putmem_bw");
        report(name, bytes, bytes / best / 1e6, "MB/s");
        report("memcpy_bw", bytes, bytes / mbest / 1e6, "MB/s");
    }
    if (n >= 2) {
        /* wait_until wake-up: a ping-pong between PE 0 and PE 1, half a round trip. */
        double best = 1e30;
        int b;
        for (b = 0; b < 5; b++) {
            long round;
            *h_flag = 0;
            shmem_barrier_all();
            double t0 = now();
            for (round = 1; round <= 20000; round++) {
                if (me == 0) {
                    shmem_long_p(h_flag, round, 1);
                    shmem_long_wait_until(h_flag, SHMEM_CMP_EQ, -round);
                } else if (me == 1) {
                    shmem_long_wait_until(h_flag, SHMEM_CMP_EQ, round);
                    shmem_long_p(h_flag, -round, 0);
                }
            }
            double t = (now() - t0) / 20000 / 2;
            if (t < best) best = t;
        }
        shmem_barrier_all();
        report("wait_until_wakeup", 8, best * 1e9, "ns");
    }
    TIME_ALL("barrier_all", 0, 20000, shmem_barrier_all());
    {
        static long one, out;
        TIME_ALL("sum_to_all", 8, 20000, shmem_long_sum_to_all(&out, &one, 1, 0, 0, n, pwrk[i_ & 1], psync[i_ & 1]));
    }
    {
        long count = (1 << 20) / sizeof(long);
        TIME_ALL("sum_to_all", 1 << 20, 200,
                 shmem_long_sum_to_all((long *) dst, (long *) src, (int) count, 0, 0, n, pwrk[i_ & 1], psync[i_ & 1]));
    }
    TIME_ALL("alltoall64", 8, 20000, shmem_alltoall64(dst, src, 1, 0, 0, n, psync[i_ & 1]));
    TIME_ALL("alltoall64", 8192, 2000, shmem_alltoall64(dst, src, 1024, 0, 0, n, psync[i_ & 1]));
    /* The active-set forms, pSync arrays in turns. */
    shmem_barrier_all();
    TIME_ALL("barrier", 0, 20000, shmem_barrier(0, 0, n, psync[i_ & 1]));
    shmem_barrier_all();
    TIME_ALL("broadcast32", 4, 20000, shmem_broadcast32(dst, src, 1, 0, 0, 0, n, psync[i_ & 1]));
    TIME_ALL("broadcast64", 131072, 1000, shmem_broadcast64(dst, src, 131072 / 8, 0, 0, 0, n, psync[i_ & 1]));
    TIME_ALL("int_sum_to_all", 4, 20000,
             shmem_int_sum_to_all((int *) dst, (int *) src, 1, 0, 0, n, pwrk_int[i_ & 1], psync[i_ & 1]));

#if SPEC_1_5
    /* 1.5: put-with-signal against what a 1.4 program writes instead. */
    h_sig = shmem_malloc(sizeof(uint64_t));
    *h_sig = 0;
    shmem_barrier_all();
    TIME_PE0("put_signal8", 8, 200000,
             shmem_long_put_signal(&h_words[i_ & 1023], &h_words[0], 1, h_sig, i_, SHMEM_SIGNAL_SET, peer));
    TIME_PE0("put_fence_set8", 8, 200000,
             (shmem_long_put(&h_words[i_ & 1023], &h_words[0], 1, peer), shmem_fence(),
              shmem_uint64_atomic_set(h_sig, i_, peer)));
    if (n >= 2) {
        /* Half a ping-pong where each side waits on the signal: with put-with-signal, and
         * with put + fence + atomic set. */
        int form, b;
        for (form = 0; form < 2; form++) {
            double best = 1e30;
            for (b = 0; b < 5; b++) {
                uint64_t round;
                *h_sig = 0;
                shmem_barrier_all();
                double t0 = now();
                for (round = 1; round <= 20000; round++) {
                    int to = me == 0 ? 1 : 0;
                    if (me > 1) break;
                    if (me == 1) shmem_uint64_wait_until(h_sig, SHMEM_CMP_EQ, 2 * round - 1);
                    if (form == 0) {
                        shmem_long_put_signal(&h_words[round & 1023], &h_words[0], 1, h_sig,
                                              2 * round - (me == 0), SHMEM_SIGNAL_SET, to);
                    } else {
                        shmem_long_put(&h_words[round & 1023], &h_words[0], 1, to);
                        shmem_fence();
                        shmem_uint64_atomic_set(h_sig, 2 * round - (me == 0), to);
                    }
                    if (me == 0) shmem_uint64_wait_until(h_sig, SHMEM_CMP_EQ, 2 * round);
                }
                double t = (now() - t0) / 20000 / 2;
                if (t < best) best = t;
            }
            shmem_barrier_all();
            report(form == 0 ? "signal_pingpong" : "put_fence_set_pingpong", 8, best * 1e9, "ns");
        }
    }

    /* 1.5 team collectives, on the world team and on a team split from it (every PE). */
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &split);
    {
        static long one, out;
        long count = (1 << 20) / sizeof(long);
        TIME_ALL("team_sum_world", 8, 20000, shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &out, &one, 1));
        TIME_ALL("team_sum_split", 8, 20000, shmem_long_sum_reduce(split, &out, &one, 1));
        TIME_ALL("team_sum_world", 1 << 20, 200,
                 shmem_long_sum_reduce(SHMEM_TEAM_WORLD, (long *) dst, (long *) src, count));
        TIME_ALL("team_sum_split", 1 << 20, 200,
                 shmem_long_sum_reduce(split, (long *) dst, (long *) src, count));
        TIME_ALL("team_alltoall_world", 8, 20000, shmem_long_alltoall(SHMEM_TEAM_WORLD, (long *) dst, (long *) src, 1));
        TIME_ALL("team_alltoall_split", 8, 20000, shmem_long_alltoall(split, (long *) dst, (long *) src, 1));
        TIME_ALL("team_alltoall_world", 8192, 2000, shmem_long_alltoall(SHMEM_TEAM_WORLD, (long *) dst, (long *) src, 1024));
        TIME_ALL("team_alltoall_split", 8192, 2000, shmem_long_alltoall(split, (long *) dst, (long *) src, 1024));
    }
    shmem_team_destroy(split);
    shmem_free(h_sig);
#else
    (void) h_sig;
#endif
    (void) g_buf;
    shmem_barrier_all();
    shmem_free(dst);
    shmem_free(src);
    shmem_free(h_buf);
    shmem_free(h_flag);
    shmem_free(h_words);
    shmem_finalize();
    return 0;
}
