/* Active-set collectives (OpenSHMEM 1.4 style) against values computed here: barriers,
 * broadcast, collect, fcollect, alltoall, alltoalls over the whole job and over a strided
 * set, into heap and global destinations. Prints "collectives: OK" on PE 0. */
#include <shmem.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, what) do { if (!(cond)) { failures++; \
    fprintf(stderr, "PE %d: %s failed (line %d)\n", shmem_my_pe(), what, __LINE__); } } while (0)

static long psync[SHMEM_BCAST_SYNC_SIZE];
static long g_dest[64];
static long g_src[64];

/* Members of the active set (start, 2^logstride, size) in order. */
static int member(int pe, int start, int logstride, int size)
{
    int stride = 1 << logstride;
    if (pe < start || (pe - start) % stride != 0 || (pe - start) / stride >= size) return -1;
    return (pe - start) / stride;
}

static void run_set(int start, int logstride, int size)
{
    int me = shmem_my_pe(), idx = member(me, start, logstride, size), i, j;
    long *h = shmem_malloc(64 * sizeof(long));
    int *h32 = shmem_malloc(64 * sizeof(int));
    if (idx < 0) {
        shmem_barrier_all();
        shmem_free(h32);
        shmem_free(h);
        return;
    }
    for (i = 0; i < 64; i++) { g_src[i] = 1000 * me + i; h[i] = -1; g_dest[i] = -1; h32[i] = -1; }
    shmem_barrier(start, logstride, size, psync);
    /* broadcast64 from the set's last member into the heap */
    shmem_broadcast64(h, g_src, 4, size - 1, start, logstride, size, psync);
    if (idx != size - 1) {
        int root = start + (size - 1) * (1 << logstride);
        for (i = 0; i < 4; i++) CHECK(h[i] == 1000 * root + i, "broadcast64");
    } else {
        CHECK(h[0] == -1, "broadcast64 leaves the root's dest alone");
    }
    shmem_barrier(start, logstride, size, psync);
    /* fcollect64: 2 elements each, into a global */
    shmem_fcollect64(g_dest, g_src, 2, start, logstride, size, psync);
    for (j = 0; j < size; j++) {
        int pe = start + j * (1 << logstride);
        for (i = 0; i < 2; i++) CHECK(g_dest[2 * j + i] == 1000 * pe + i, "fcollect64");
    }
    shmem_barrier(start, logstride, size, psync);
    /* collect64: member j contributes j+1 elements */
    shmem_collect64(h, g_src, (size_t) idx + 1, start, logstride, size, psync);
    {
        int at = 0;
        for (j = 0; j < size; j++) {
            int pe = start + j * (1 << logstride);
            for (i = 0; i <= j; i++) CHECK(h[at++] == 1000 * pe + i, "collect64");
        }
    }
    shmem_barrier(start, logstride, size, psync);
    /* alltoall32: block j (2 ints) to member j */
    {
        static int a_src[64];
        for (j = 0; j < size; j++) for (i = 0; i < 2; i++) a_src[2 * j + i] = 100 * me + 10 * j + i;
        shmem_barrier(start, logstride, size, psync);
        shmem_alltoall32(h32, a_src, 2, start, logstride, size, psync);
        for (j = 0; j < size; j++) {
            int pe = start + j * (1 << logstride);
            for (i = 0; i < 2; i++) CHECK(h32[2 * j + i] == 100 * pe + 10 * idx + i, "alltoall32");
        }
    }
    shmem_barrier(start, logstride, size, psync);
    /* alltoalls64: one element per member, source stride 2, destination stride 3 */
    for (j = 0; j < size; j++) g_src[2 * j] = 10 * me + j;
    shmem_barrier(start, logstride, size, psync);
    shmem_alltoalls64(h, g_src, 3, 2, 1, start, logstride, size, psync);
    for (j = 0; j < size; j++) {
        int pe = start + j * (1 << logstride);
        CHECK(h[3 * j] == 10 * pe + idx, "alltoalls64");
    }
    shmem_barrier(start, logstride, size, psync);
    shmem_sync(start, logstride, size, psync);
    shmem_barrier_all();
    shmem_free(h32);
    shmem_free(h);
}

int main(void)
{
    int n, i;
    static int total, w[4];
    static long s[SHMEM_REDUCE_SYNC_SIZE];
    shmem_init();
    n = shmem_n_pes();
    for (i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++) psync[i] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
    run_set(0, 0, n);                 /* everybody */
    run_set(0, 1, (n + 1) / 2);       /* even PEs */
    if (n > 1) run_set(1, 0, n - 1);  /* all but PE 0 */
    else shmem_barrier_all(), shmem_barrier_all(), shmem_barrier_all();
    shmem_sync_all();
    shmem_int_sum_to_all(&total, &failures, 1, 0, 0, n, w, s);
    if (shmem_my_pe() == 0) printf(total ? "collectives: %d checks failed\n" : "collectives: OK\n", total);
    shmem_finalize();
    return total != 0;
}
