/* Reductions on long double, which Rust has no type for: acc[i] = acc[i] op other[i].
 * Operations: 0 max, 1 min, 2 sum, 3 product. Part of tessera-shmem (see build.rs). */
#include <stddef.h>

void tessera_longdouble_reduce(int op, long double *acc, const long double *other, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        switch (op) {
        case 0: if (other[i] > acc[i]) acc[i] = other[i]; break;
        case 1: if (other[i] < acc[i]) acc[i] = other[i]; break;
        case 2: acc[i] += other[i]; break;
        default: acc[i] *= other[i]; break;
        }
    }
}
