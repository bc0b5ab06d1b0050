/* 1.5's deprecated C11 generic AMO names (shmem_finc, _fadd, _cswap, _swap, _add, _inc,
 * _fetch, _set), dispatching on the argument's type, and shmem_sync in both forms.
 * Prints "c11_deprecated: OK" on PE 0. */
#include "check.h"

static int i_pair[2];
static long l_val;
static long long ll_val;
static float f_val;
static double d_val;
static long psync[SHMEM_SYNC_SIZE];

int main(void)
{
    int me, n, right, k;
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    right = (me + 1) % n;
    for (k = 0; k < SHMEM_SYNC_SIZE; k++) psync[k] = SHMEM_SYNC_VALUE;
    i_pair[0] = 5; i_pair[1] = 77; l_val = 3; ll_val = 10; f_val = 1.5f; d_val = 2.5;
    shmem_barrier_all();
    /* swap on an int writes an int: the neighbouring int is untouched. */
    CHECK(shmem_swap(&i_pair[0], 9, right) == 5, "shmem_swap(int)");
    CHECK(shmem_finc(&l_val, right) == 3, "shmem_finc(long)");
    CHECK(shmem_fadd(&ll_val, 5LL, right) == 10, "shmem_fadd(long long)");
    CHECK(shmem_swap(&f_val, 4.5f, right) == 1.5f, "shmem_swap(float)");
    CHECK(shmem_fetch(&d_val, right) == 2.5, "shmem_fetch(double)");
    shmem_sync(SHMEM_TEAM_WORLD);
    CHECK(i_pair[0] == 9 && i_pair[1] == 77, "shmem_swap wrote one int");
    CHECK(l_val == 4 && ll_val == 15 && f_val == 4.5f, "fetching AMOs' effects");
    shmem_barrier_all();
    shmem_add(&l_val, 10L, right);
    shmem_inc(&ll_val, right);
    shmem_set(&d_val, 8.0, right);
    shmem_quiet();
    shmem_sync(0, 0, n, psync);
    CHECK(shmem_cswap(&i_pair[0], 9, 11, right) == 9, "shmem_cswap(int)");
    shmem_barrier_all();
    CHECK(l_val == 14 && ll_val == 16 && d_val == 8.0 && i_pair[0] == 11, "non-fetching AMOs' effects");
    return report("c11_deprecated");
}
