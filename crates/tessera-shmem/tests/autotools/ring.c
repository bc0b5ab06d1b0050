/* Part of the autotools check: a token goes around the ring of PEs ten times through a
 * global variable; exit 0 when it came back with every PE's stamps. */
#include <shmem.h>
#include <stdio.h>

void pass_token(long *slot, long value);

static long slot = -1;

int main(void)
{
    int me, n, lap;
    long token = 0;
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    shmem_barrier_all();
    for (lap = 0; lap < 10; lap++) {
        if (me != 0 || lap > 0) {
            shmem_long_wait_until(&slot, SHMEM_CMP_NE, -1);
            token = slot;
            slot = -1;
        }
        pass_token(&slot, token + 1);
    }
    if (me == 0) {
        shmem_long_wait_until(&slot, SHMEM_CMP_NE, -1);
        token = slot;
        printf("ring: token %ld after 10 laps of %d PEs\n", token, n);
    }
    shmem_barrier_all();
    shmem_finalize();
    return me == 0 && token != 10L * n;
}
