/* The C11 type-generic interface (compiled as C11): shmem_put/get/p/g with and without a
 * context, the AMOs, put_signal, team broadcast and reductions, and multi-valued waits,
 * on several element types, against values computed here. Prints "c11_generic: OK". */
#include "check.h"

static double d[4];
static long l[4];
static unsigned int u[4];
static float f;
static int flags[8];
static uint64_t sig;

int main(void)
{
    int me, n, right, left, i;
    shmem_ctx_t ctx;
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    right = (me + 1) % n;
    left = (me + n - 1) % n;
    {
        double ds[4] = { me + 0.5, me + 1.5, me + 2.5, me + 3.5 };
        long ls[4] = { 10L * me, 10L * me + 1, 10L * me + 2, 10L * me + 3 };
        shmem_put(d, ds, 4, right);
        CHECK(shmem_ctx_create(0, &ctx) == 0, "ctx_create");
        shmem_put(ctx, l, ls, 4, right);
        shmem_ctx_quiet(ctx);
    }
    shmem_barrier_all();
    CHECK(d[3] == left + 3.5 && l[2] == 10L * left + 2, "generic put, with and without a context");
    {
        double got[4];
        shmem_get(got, d, 4, right);
        CHECK(got[0] == me + 0.5, "generic get");
    }
    shmem_p(&f, (float) me, right);
    shmem_p(ctx, &u[0], (unsigned int) me + 7u, right);
    shmem_barrier_all();
    CHECK(f == (float) left && u[0] == (unsigned int) left + 7u, "generic p");
    CHECK(shmem_g(&u[0], right) == (unsigned int) me + 7u && shmem_g(ctx, &f, right) == (float) me, "generic g");
    shmem_barrier_all();
    /* AMOs */
    shmem_atomic_add(&l[3], 1L, 0);
    (void) shmem_atomic_fetch_add(ctx, &u[1], 2u, 0);
    shmem_barrier_all();
    if (me == 0) CHECK(l[3] == 10L * left + 3 + n && u[1] == 2u * (unsigned) n, "generic AMOs");
    {
        unsigned int before;
        shmem_barrier_all();
        shmem_atomic_fetch_nbi(&before, &u[1], 0);
        shmem_quiet();
        CHECK(before == 2u * (unsigned) n, "generic fetch_nbi");
    }
    shmem_barrier_all();
    /* put_signal and a multi-valued wait on the signal array */
    shmem_put_signal(&l[0], &l[1], 1, &sig, 1, SHMEM_SIGNAL_ADD, 0);
    if (me == 0) {
        uint64_t s = shmem_signal_wait_until(&sig, SHMEM_CMP_EQ, (uint64_t) n);
        CHECK(s == (uint64_t) n, "generic put_signal");
    }
    shmem_atomic_set(&flags[me], 1, 0);
    if (me == 0) {
        size_t k = shmem_wait_until_any(flags, n, NULL, SHMEM_CMP_EQ, 1);
        CHECK(k < (size_t) n, "generic wait_until_any");
        shmem_wait_until_all(flags, n, NULL, SHMEM_CMP_EQ, 1);
    }
    shmem_barrier_all();
    /* Team collectives */
    {
        static long src[2], dst[2], all[2 * 64];
        static double x, sum;
        src[0] = me; src[1] = -me;
        x = me + 1.0;
        shmem_barrier_all();
        CHECK(shmem_broadcast(SHMEM_TEAM_WORLD, dst, src, 2, n - 1) == 0 && dst[1] == -(n - 1), "generic broadcast");
        CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, &sum, &x, 1) == 0 && sum == n * (n + 1) / 2.0, "generic sum_reduce");
        CHECK(shmem_fcollect(SHMEM_TEAM_WORLD, all, src, 2) == 0, "generic fcollect");
        for (i = 0; i < n; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == -i, "generic fcollect's blocks");
    }
    shmem_ctx_destroy(ctx);
    return report("c11_generic");
}
