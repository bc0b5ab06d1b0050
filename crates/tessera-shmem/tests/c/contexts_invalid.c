/* 1.5 §9.4 and §9.5.4: SHMEM_CTX_INVALID is a no-op for shmem_ctx_quiet,
 * shmem_ctx_fence and shmem_ctx_destroy. Prints "contexts_invalid: OK" on PE 0. */
#include "check.h"

int main(void)
{
    shmem_ctx_t ctx = SHMEM_CTX_INVALID;
    shmem_team_t t = SHMEM_TEAM_WORLD;
    shmem_init();
    shmem_ctx_quiet(SHMEM_CTX_INVALID);
    shmem_ctx_fence(SHMEM_CTX_INVALID);
    shmem_ctx_destroy(SHMEM_CTX_INVALID);
    CHECK(shmem_ctx_get_team(ctx, &t) != 0, "shmem_ctx_get_team on SHMEM_CTX_INVALID fails");
    CHECK(t == SHMEM_TEAM_INVALID, "... and gives SHMEM_TEAM_INVALID");
    return report("contexts_invalid");
}
