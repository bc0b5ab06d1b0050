/* 1.5 §9.3 (memory management): shmem_align to large powers of two, and requests the
 * symmetric heap cannot meet return NULL on every PE (shmem_realloc keeping the old
 * block). Prints "memory: OK" on PE 0. */
#include "check.h"
#include <stdint.h>

int main(void)
{
    size_t a;
    shmem_init();
    for (a = 8; a <= ((size_t) 1 << 22); a <<= 1) {
        char *p = shmem_align(a, 100);
        CHECK(p != NULL, "shmem_align returns a block");
        CHECK(((uintptr_t) p & (a - 1)) == 0, "shmem_align's alignment");
        /* Symmetric: the block is remotely accessible at the same address. */
        CHECK(shmem_addr_accessible(p, (shmem_my_pe() + 1) % shmem_n_pes()), "aligned block is symmetric");
        p[0] = 1;
        shmem_free(p);
    }
    CHECK(shmem_malloc((size_t) 1 << 60) == NULL, "shmem_malloc beyond the heap");
    CHECK(shmem_calloc((size_t) 1 << 40, (size_t) 1 << 40) == NULL, "shmem_calloc overflowing");
    CHECK(shmem_align(4096, (size_t) 1 << 60) == NULL, "shmem_align beyond the heap");
    {
        long *kept = shmem_malloc(4 * sizeof(long));
        CHECK(kept != NULL, "shmem_malloc");
        kept[3] = 42;
        CHECK(shmem_realloc(kept, (size_t) 1 << 60) == NULL, "shmem_realloc beyond the heap");
        CHECK(kept[3] == 42, "shmem_realloc failing keeps the old block");
        shmem_free(kept);
    }
    /* The heap still works after the refusals. */
    {
        int *p = shmem_malloc(sizeof(int));
        CHECK(p != NULL, "shmem_malloc after refusals");
        shmem_free(p);
    }
    return report("memory");
}
