/* Part of the autotools check: pass a token to the right neighbour. */
#include <shmem.h>

void pass_token(long *slot, long value)
{
    int right = (shmem_my_pe() + 1) % shmem_n_pes();
    shmem_long_p(slot, value, right);
}
