/* Multi-valued waits and tests (OpenSHMEM 1.5) against values computed here: every PE
 * sets one flag on every other; wait_until_all/any/some and their _vector forms, with
 * status arrays that skip entries; the test forms before and after; and fairness of
 * wait_until_any when every flag is ready. Prints "waits: OK" on PE 0. */
#include "check.h"
#include <stdint.h>


#define MAXPE 64
static long flags[MAXPE];
static int iflags[MAXPE];

int main(void)
{
    int me, n, pe;
    size_t idx[MAXPE], k, i;
    int status[MAXPE];
    long want[MAXPE];
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    for (pe = 0; pe < n; pe++) { status[pe] = 0; want[pe] = 10 + pe; }
    /* Nothing set yet: tests fail, and a test over entries all skipped succeeds at once. */
    CHECK(!shmem_long_test_all(flags, n, NULL, SHMEM_CMP_EQ, 1), "test_all before");
    CHECK(shmem_long_test_any(flags, n, NULL, SHMEM_CMP_EQ, 1) == SIZE_MAX, "test_any before");
    CHECK(shmem_long_test_some(flags, n, idx, NULL, SHMEM_CMP_EQ, 1) == 0, "test_some before");
    for (pe = 0; pe < n; pe++) status[pe] = 1;
    CHECK(shmem_long_test_all(flags, n, status, SHMEM_CMP_EQ, 1), "test_all with every entry skipped");
    CHECK(shmem_long_wait_until_any(flags, n, status, SHMEM_CMP_EQ, 1) == SIZE_MAX, "wait_until_any with every entry skipped");
    CHECK(shmem_long_wait_until_some(flags, n, idx, status, SHMEM_CMP_EQ, 1) == 0, "wait_until_some with every entry skipped");
    for (pe = 0; pe < n; pe++) status[pe] = 0;
    shmem_barrier_all();
    /* Every PE sets flags[me] = 1 on every PE. */
    for (pe = 0; pe < n; pe++) shmem_long_atomic_set(&flags[me], 1, pe);
    shmem_long_wait_until_all(flags, n, NULL, SHMEM_CMP_EQ, 1);
    CHECK(shmem_long_test_all(flags, n, NULL, SHMEM_CMP_EQ, 1), "test_all after");
    k = shmem_long_wait_until_some(flags, n, idx, NULL, SHMEM_CMP_EQ, 1);
    CHECK(k == (size_t) n, "wait_until_some finds every flag");
    for (i = 0; i < k; i++) CHECK(idx[i] == i, "wait_until_some's indices in order");
    /* Fairness: with every flag ready, wait_until_any does not always answer the same. */
    {
        int seen[MAXPE] = {0}, distinct = 0;
        for (i = 0; i < (size_t) (4 * n); i++) {
            size_t j = shmem_long_wait_until_any(flags, n, NULL, SHMEM_CMP_EQ, 1);
            CHECK(j < (size_t) n, "wait_until_any's index");
            if (j < (size_t) n && !seen[j]++) distinct++;
        }
        CHECK(distinct == n, "wait_until_any visits every ready flag");
    }
    shmem_barrier_all();
    /* Vector forms: PE p sets iflags[me] on p to 10 + me; skip my own entry. */
    status[me] = 1;
    for (pe = 0; pe < n; pe++) {
        int v = 10 + me;
        if (pe != me) shmem_int_p(&iflags[me], v, pe);
    }
    {
        int wanti[MAXPE];
        for (pe = 0; pe < n; pe++) wanti[pe] = (int) want[pe];
        shmem_int_wait_until_all_vector(iflags, n, status, SHMEM_CMP_EQ, wanti);
        CHECK(shmem_int_test_all_vector(iflags, n, status, SHMEM_CMP_EQ, wanti), "test_all_vector");
        if (n > 1) {
            size_t j = shmem_int_wait_until_any_vector(iflags, n, status, SHMEM_CMP_EQ, wanti);
            CHECK(j < (size_t) n && (int) j != me, "wait_until_any_vector skips my entry");
            k = shmem_int_test_some_vector(iflags, n, idx, status, SHMEM_CMP_EQ, wanti);
            CHECK(k == (size_t) (n - 1), "test_some_vector counts every other PE");
            CHECK(shmem_int_test_any_vector(iflags, n, status, SHMEM_CMP_EQ, wanti) != SIZE_MAX, "test_any_vector");
            k = shmem_int_wait_until_some_vector(iflags, n, idx, status, SHMEM_CMP_GE, wanti);
            CHECK(k == (size_t) (n - 1), "wait_until_some_vector");
        }
        CHECK(iflags[me] == 0, "my own entry untouched");
    }
    shmem_barrier_all();
    return report("waits");
}
