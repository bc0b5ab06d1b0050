/* shmem_bench.c: OpenSHMEM micro-benchmarks, for any implementation (built with its
 * oshcc, run with its oshrun). PE 0 prints one line per figure:
 *   NAME BYTES VALUE UNIT
 * Latencies are per call, best of 5 batches; bandwidths in MB/s (10^6 bytes/s), with
 * memcpy of the same size measured in the same run. Heap and global targets both.
 * Used by scripts/shmem-bench.sh (docs/PERFORMANCE.md, "OpenSHMEM"). */
#include <shmem.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAXBYTES (4 << 20)
static long g_words[1024];
static long g_flag;
static char g_buf[64 << 10];
static long psync[SHMEM_BCAST_SYNC_SIZE];
static long pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + (1 << 17)];

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

int main(void)
{
    int me, n, i, peer;
    long *h_words, *h_flag;
    char *h_buf, *dst, *src;
    long bytes;
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    peer = (me + 1) % n;
    for (i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++) psync[i] = SHMEM_SYNC_VALUE;
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
        TIME_ALL("sum_to_all", 8, 20000, shmem_long_sum_to_all(&out, &one, 1, 0, 0, n, pwrk, psync));
    }
    {
        long count = (1 << 20) / sizeof(long);
        TIME_ALL("sum_to_all", 1 << 20, 200,
                 shmem_long_sum_to_all((long *) dst, (long *) src, (int) count, 0, 0, n, pwrk, psync));
    }
    TIME_ALL("alltoall64", 8, 20000, shmem_alltoall64(dst, src, 1, 0, 0, n, psync));
    TIME_ALL("alltoall64", 8192, 2000, shmem_alltoall64(dst, src, 1024, 0, 0, n, psync));
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
