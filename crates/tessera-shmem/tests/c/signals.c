/* Put-with-signal (OpenSHMEM 1.5) against values computed here: every PE's signalling
 * puts with SHMEM_SIGNAL_ADD racing into PE 0's one signal (each PE's data must be there
 * once the sum is), SET handing a token round a ring, the _nbi, sized, untyped and context
 * forms, signal_fetch and signal_wait_until on a global and on a heap signal. Prints
 * "signals: OK" on PE 0. */
#include "check.h"


#define ROUNDS 50
#define LEN 16
static uint64_t sig;
static long data[64][LEN];

int main(void)
{
    int me, n, round, i;
    uint64_t *hsig;
    int *ring;
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    hsig = shmem_calloc(1, sizeof(uint64_t));
    ring = shmem_malloc(LEN * sizeof(int));
    /* ADD: every PE's puts into PE 0's rows, each signalling by adding 1. */
    for (round = 0; round < ROUNDS; round++) {
        long mine[LEN];
        for (i = 0; i < LEN; i++) mine[i] = 1000L * round + 10 * me + i;
        if (round % 2 == 0)
            shmem_long_put_signal(data[me], mine, LEN, &sig, 1, SHMEM_SIGNAL_ADD, 0);
        else
            shmem_putmem_signal_nbi(data[me], mine, sizeof mine, &sig, 1, SHMEM_SIGNAL_ADD, 0);
        if (me == 0) {
            uint64_t got = shmem_signal_wait_until(&sig, SHMEM_CMP_GE, (uint64_t) (round + 1) * n);
            CHECK(got >= (uint64_t) (round + 1) * n, "signal_wait_until returns the value");
        }
        shmem_barrier_all();
        if (me == 0) {
            int pe;
            CHECK(shmem_signal_fetch(&sig) == (uint64_t) (round + 1) * n, "signal_fetch after ADD");
            for (pe = 0; pe < n; pe++)
                for (i = 0; i < LEN; i++)
                    CHECK(data[pe][i] == 1000L * round + 10 * pe + i, "data before its signal");
        }
        shmem_barrier_all();
    }
    /* SET: a token round the ring, each hop a sized or context signalling put of its data. */
    for (round = 1; round <= ROUNDS; round++) {
        int next = (me + 1) % n, v[LEN];
        uint64_t want = (uint64_t) round * n + (uint64_t) me;
        if (!(me == 0 && round == 1)) {
            uint64_t expect = want - 1; /* what the previous PE on the ring set */
            shmem_uint64_wait_until(hsig, SHMEM_CMP_EQ, expect);
            for (i = 0; i < LEN; i++) CHECK(ring[i] == (int) expect + i, "ring data before its signal");
        }
        for (i = 0; i < LEN; i++) v[i] = (int) want + i;
        if (round % 2 == 0)
            shmem_put32_signal(ring, v, LEN, hsig, want, SHMEM_SIGNAL_SET, next);
        else
            shmem_ctx_int_put_signal(SHMEM_CTX_DEFAULT, ring, v, LEN, hsig, want, SHMEM_SIGNAL_SET, next);
    }
    shmem_barrier_all();
    shmem_free(ring);
    shmem_free(hsig);
    return report("signals");
}
