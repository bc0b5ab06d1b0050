/* check.h: what every test of this suite shares: CHECK counts and reports a failed check,
 * and report() sums the failures over all PEs, prints "NAME: OK" (or the count) on PE 0,
 * finalises, and gives main's exit status. */
#ifndef TESSERA_SUITE_CHECK_H
#define TESSERA_SUITE_CHECK_H
#include <shmem.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, what) do { if (!(cond)) { failures++; \
    fprintf(stderr, "PE %d: %s failed (line %d)\n", shmem_my_pe(), what, __LINE__); } } while (0)

static int report(const char *name)
{
    static int all, mine;
    mine = failures;
    shmem_int_sum_reduce(SHMEM_TEAM_WORLD, &all, &mine, 1);
    if (shmem_my_pe() == 0) {
        if (all == 0) printf("%s: OK\n", name);
        else printf("%s: %d checks failed\n", name, all);
    }
    shmem_finalize();
    return all != 0;
}
#endif
