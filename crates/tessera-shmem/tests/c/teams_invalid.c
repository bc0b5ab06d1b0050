/* 1.5 §9.4.3: shmem_team_split_strided with an invalid triplet gives SHMEM_TEAM_INVALID
 * and a nonzero return on every PE of the parent. Prints "teams_invalid: OK" on PE 0. */
#include "check.h"

int main(void)
{
    int n, i;
    shmem_init();
    n = shmem_n_pes();
    {
        /* size 0; a start outside the parent; a stride that leaves it; a negative start. */
        int cases[4][3] = {{0, 1, 0}, {n, 1, 1}, {0, n, 2}, {-1, 1, 1}};
        for (i = 0; i < 4; i++) {
            shmem_team_t t = SHMEM_TEAM_WORLD;
            int r = shmem_team_split_strided(SHMEM_TEAM_WORLD, cases[i][0], cases[i][1], cases[i][2], NULL, 0, &t);
            CHECK(r != 0, "an invalid triplet returns nonzero");
            CHECK(t == SHMEM_TEAM_INVALID, "an invalid triplet gives SHMEM_TEAM_INVALID");
        }
    }
    {
        /* A valid split still works afterwards. */
        shmem_team_t t;
        int r = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &t);
        CHECK(r == 0 && t != SHMEM_TEAM_INVALID, "a valid split after invalid ones");
        CHECK(shmem_team_n_pes(t) == n, "its size");
        shmem_team_destroy(t);
    }
    return report("teams_invalid");
}
