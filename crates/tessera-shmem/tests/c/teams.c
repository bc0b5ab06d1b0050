/* Teams (OpenSHMEM 1.5) against values computed here: the predefined teams, strided splits
 * (every second PE, a split that skips PE 0, a one-PE split, one that leaves PEs out),
 * 2-D splits (rows and columns, xrange larger than the team), translation, configuration,
 * team_sync, team_ptr, contexts made from a team (team-relative PE numbers) and destroy.
 * Prints "teams: OK" on PE 0. */
#include "check.h"


static long slot[8];

static void strided(int start, int stride, int size)
{
    int me = shmem_my_pe(), i;
    shmem_team_t t;
    shmem_team_config_t conf = { 3 };
    int in = me >= start && (me - start) % stride == 0 && (me - start) / stride < size;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, start, stride, size, &conf,
                                   SHMEM_TEAM_NUM_CONTEXTS, &t) == 0, "split_strided returns 0");
    if (!in) {
        CHECK(t == SHMEM_TEAM_INVALID, "a PE left out gets SHMEM_TEAM_INVALID");
        CHECK(shmem_team_my_pe(t) == -1 && shmem_team_n_pes(t) == -1, "queries on SHMEM_TEAM_INVALID");
        return;
    }
    CHECK(shmem_team_n_pes(t) == size, "team_n_pes");
    CHECK(shmem_team_my_pe(t) == (me - start) / stride, "team_my_pe");
    {
        shmem_team_config_t got = { -1 };
        CHECK(shmem_team_get_config(t, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0 && got.num_contexts == 3,
              "team_get_config");
    }
    for (i = 0; i < size; i++) {
        CHECK(shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD) == start + i * stride, "translate to world");
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, start + i * stride, t) == i, "translate from world");
    }
    if (start > 0) CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 0, t) == -1, "translate a PE not in the team");
    CHECK(shmem_team_sync(t) == 0, "team_sync");
    /* A context on the team numbers PEs as the team does: put to team PE (my + 1) % size. */
    {
        shmem_ctx_t ctx;
        shmem_team_t back;
        int tme = shmem_team_my_pe(t), right = (tme + 1) % size;
        long v = 100 + tme;
        CHECK(shmem_team_create_ctx(t, SHMEM_CTX_PRIVATE, &ctx) == 0, "team_create_ctx");
        CHECK(shmem_ctx_get_team(ctx, &back) == 0 && back == t, "ctx_get_team");
        slot[0] = -1;
        shmem_team_sync(t);
        shmem_ctx_long_put(ctx, &slot[0], &v, 1, right);
        shmem_ctx_quiet(ctx);
        shmem_team_sync(t);
        CHECK(slot[0] == 100 + (tme + size - 1) % size, "a team context's put lands on the team's PE");
        CHECK(shmem_team_ptr(t, &slot[0], tme) == (void *) &slot[0], "team_ptr to myself");
        CHECK(shmem_ctx_long_g(ctx, &slot[0], right) == 100 + tme, "a team context's g");
        shmem_team_sync(t); /* before anyone resets slot for the next split */
        shmem_ctx_destroy(ctx);
    }
    shmem_team_destroy(t);
}

static void two_d(int xrange)
{
    int me = shmem_my_pe(), n = shmem_n_pes(), x = xrange < n ? xrange : n;
    shmem_team_t xt, yt;
    CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, xrange, NULL, 0, &xt, NULL, 0, &yt) == 0, "split_2d");
    {
        int row = me / x, rowlen = (row + 1) * x <= n ? x : n - row * x;
        int col = me % x, collen = (n - col + x - 1) / x;
        CHECK(shmem_team_n_pes(xt) == rowlen && shmem_team_my_pe(xt) == col, "split_2d row team");
        CHECK(shmem_team_n_pes(yt) == collen && shmem_team_my_pe(yt) == row, "split_2d column team");
        CHECK(shmem_team_translate_pe(yt, 0, SHMEM_TEAM_WORLD) == col, "split_2d column's first PE");
    }
    shmem_team_sync(xt);
    shmem_team_sync(yt);
    shmem_team_destroy(xt);
    shmem_team_destroy(yt);
}

int main(void)
{
    int me, n;
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    CHECK(shmem_team_my_pe(SHMEM_TEAM_WORLD) == me && shmem_team_n_pes(SHMEM_TEAM_WORLD) == n, "world queries");
    /* On one host every PE shares memory with every other. */
    {
        /* SHMEM_TEAM_SHARED is exactly the PEs whose memory this PE reaches by shmem_ptr
         * (every PE on shared memory; the PEs of this host across hosts). */
        static long probe;
        int p, shared = 0, bad = 0;
        for (p = 0; p < n; p++) {
            int in_team = shmem_team_translate_pe(SHMEM_TEAM_WORLD, p, SHMEM_TEAM_SHARED) >= 0;
            bad += in_team != (shmem_ptr(&probe, p) != NULL);
            shared += in_team;
        }
        CHECK(!bad && shmem_team_n_pes(SHMEM_TEAM_SHARED) == shared
              && shmem_team_my_pe(SHMEM_TEAM_SHARED)
                 == shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, SHMEM_TEAM_SHARED),
              "SHMEM_TEAM_SHARED is the PEs shmem_ptr reaches");
        {
            static int one = 1, count;
            shmem_int_sum_reduce(SHMEM_TEAM_SHARED, &count, &one, 1);
            CHECK(count == shared, "a reduction on SHMEM_TEAM_SHARED");
        }
    }
    CHECK(SHMEM_TEAM_WORLD != SHMEM_TEAM_SHARED && SHMEM_TEAM_INVALID == NULL, "distinct handles");
    strided(0, 1, n);
    strided(0, 2, (n + 1) / 2);
    if (n > 1) strided(1, 1, n - 1);
    if (n > 2) strided(1, 2, n / 2);
    strided(n - 1, 1, 1);
    two_d(2);
    two_d(n + 3);
    /* Split and destroy many times: handles are never reused, nothing accumulates. */
    {
        int i;
        for (i = 0; i < 200; i++) {
            shmem_team_t t;
            shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &t);
            shmem_team_sync(t);
            shmem_team_destroy(t);
        }
    }
    return report("teams");
}
