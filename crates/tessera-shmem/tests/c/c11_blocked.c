/* OpenSHMEM 1.6's blocked strided transfers (shmem_ibput, shmem_ibget: typed, sized,
 * context and generic forms) and team prefix sums (shmem_TYPE_sum_inscan, _exscan).
 * Prints "c11_blocked: OK" on PE 0. */
#include "check.h"

#define BS 3
#define NB 4
static int dest_i[7 * NB];
static int src_i[5 * NB];
static double dest_d[4 * NB];
static long scan_l[5], out_l[5];
static double scan_d[2], out_d[2];

int main(void)
{
    int me, n, right, i, j;
    shmem_ctx_t ctx;
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    right = (me + 1) % n;
    for (i = 0; i < 5 * NB; i++) src_i[i] = 1000 * me + i;
    shmem_barrier_all();
    /* Block i of BS ints from src_i + 5i to dest_i + 7i on the right neighbour. */
    shmem_int_ibput(dest_i, src_i, 7, 5, BS, NB, right);
    shmem_barrier_all();
    {
        int left = (me + n - 1) % n;
        for (i = 0; i < NB; i++)
            for (j = 0; j < 7; j++) {
                int want = j < BS ? 1000 * left + 5 * i + j : 0;
                CHECK(dest_i[7 * i + j] == want, "shmem_int_ibput");
            }
    }
    /* The generic and context forms, and a get back. */
    {
        int back[2 * NB];
        CHECK(shmem_ctx_create(0, &ctx) == 0, "shmem_ctx_create");
        shmem_ibget(ctx, back, src_i, 2, 5, 2, NB, right);
        for (i = 0; i < NB; i++)
            for (j = 0; j < 2; j++)
                CHECK(back[2 * i + j] == 1000 * right + 5 * i + j, "shmem_ctx ibget (generic)");
        shmem_ctx_destroy(ctx);
        shmem_ibget32(back, src_i, 1, 5, 1, NB, right);
        for (i = 0; i < NB; i++) CHECK(back[i] == 1000 * right + 5 * i, "shmem_ibget32");
    }
    {
        double d[2 * NB];
        for (i = 0; i < 2 * NB; i++) d[i] = me + 0.5 * i;
        shmem_ibput(dest_d, d, 4, 2, 2, NB, right);
        shmem_barrier_all();
        for (i = 0; i < NB; i++)
            for (j = 0; j < 2; j++)
                CHECK(dest_d[4 * i + j] == ((me + n - 1) % n) + 0.5 * (2 * i + j), "shmem_ibput(double)");
    }
    /* Prefix sums: PE p contributes p + k. */
    for (i = 0; i < 5; i++) scan_l[i] = me + i;
    shmem_long_sum_inscan(SHMEM_TEAM_WORLD, out_l, scan_l, 5);
    for (i = 0; i < 5; i++) CHECK(out_l[i] == (long) me * (me + 1) / 2 + (long) i * (me + 1), "shmem_long_sum_inscan");
    shmem_long_sum_exscan(SHMEM_TEAM_WORLD, out_l, scan_l, 5);
    for (i = 0; i < 5; i++)
        CHECK(out_l[i] == (me == 0 ? 0 : (long) (me - 1) * me / 2 + (long) i * me), "shmem_long_sum_exscan");
    scan_d[0] = 0.5; scan_d[1] = me;
    shmem_sum_inscan(SHMEM_TEAM_WORLD, out_d, scan_d, 2);
    CHECK(out_d[0] == 0.5 * (me + 1) && out_d[1] == me * (me + 1) / 2.0, "shmem_sum_inscan (generic, double)");
    /* In place. */
    shmem_long_sum_inscan(SHMEM_TEAM_WORLD, scan_l, scan_l, 5);
    CHECK(scan_l[0] == (long) me * (me + 1) / 2, "in-place scan");
    return report("c11_blocked");
}
