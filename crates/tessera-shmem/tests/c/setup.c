/* Setup and query, the symmetric heap, shmem_ptr, locks, fence/quiet, and the 1.0 names.
 * Prints "setup: OK" on PE 0. */
#include <shmem.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond, what) do { if (!(cond)) { failures++; \
    fprintf(stderr, "PE %d: %s failed (line %d)\n", shmem_my_pe(), what, __LINE__); } } while (0)

static long lock;
static long counter;
static int global_int = 7;

int main(void)
{
    int provided = -1, major = 0, minor = 0, me, n, i;
    char name[SHMEM_MAX_NAME_LEN];
    static int total, w[4];
    static long s[SHMEM_REDUCE_SYNC_SIZE];
    CHECK(shmem_init_thread(SHMEM_THREAD_SINGLE, &provided) == 0, "shmem_init_thread");
    CHECK(provided == SHMEM_THREAD_SINGLE, "provided thread level");
    shmem_query_thread(&provided);
    CHECK(provided == SHMEM_THREAD_SINGLE, "shmem_query_thread");
    me = shmem_my_pe(); n = shmem_n_pes();
    CHECK(me == _my_pe() && n == _num_pes(), "1.0 names");
    shmem_info_get_version(&major, &minor);
    CHECK(major == SHMEM_MAJOR_VERSION && minor == SHMEM_MINOR_VERSION, "version");
    shmem_info_get_name(name);
    CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0, "vendor name");
    CHECK(shmem_pe_accessible(n - 1) && !shmem_pe_accessible(n), "shmem_pe_accessible");
    CHECK(global_int == 7, "a global's initial value survives shmem_init");
    CHECK(shmem_addr_accessible(&global_int, 0), "a global is accessible");
    {
        int local = 0;
        CHECK(!shmem_addr_accessible(&local, 0), "the stack is not symmetric");
    }
    /* Heap: calloc zeroes, realloc keeps, align aligns, free frees. */
    {
        long *z = shmem_calloc(100, sizeof(long));
        int ok = 1;
        for (i = 0; i < 100; i++) ok &= z[i] == 0;
        CHECK(ok, "shmem_calloc zeroes");
        for (i = 0; i < 100; i++) z[i] = i;
        z = shmem_realloc(z, 200 * sizeof(long));
        ok = 1;
        for (i = 0; i < 100; i++) ok &= z[i] == i;
        CHECK(ok, "shmem_realloc keeps the contents");
        {
            void *a = shmem_align(4096, 100);
            CHECK(((unsigned long) a) % 4096 == 0, "shmem_align");
            shmem_free(a);
        }
        CHECK(shmem_malloc(0) == NULL, "shmem_malloc(0)");
        {
            void *old = shmalloc(64);
            CHECK(old != NULL, "shmalloc");
            shfree(old);
        }
        shmem_free(z);
    }
    /* shmem_ptr: a plain pointer to a peer's object where this process maps it (every PE
     * of a host under oshrun's default conduit), NULL where it does not (another host). */
    {
        int *peer = shmem_ptr(&global_int, (me + 1) % n), *mine = shmem_ptr(&global_int, me);
        CHECK(mine == &global_int, "shmem_ptr to this PE's own object");
        shmem_barrier_all();
        if (peer) *peer = 100 + me;
        else shmem_int_p(&global_int, 100 + me, (me + 1) % n);
        shmem_barrier_all();
        CHECK(global_int == 100 + (me + n - 1) % n, "a store through shmem_ptr");
    }
    /* Locks: a non-atomic increment under the lock never loses an update. */
    counter = 0;
    shmem_barrier_all();
    for (i = 0; i < 50; i++) {
        long v;
        shmem_set_lock(&lock);
        v = shmem_long_g(&counter, 0);
        shmem_long_p(&counter, v + 1, 0);
        shmem_quiet();
        shmem_clear_lock(&lock);
    }
    shmem_barrier_all();
    if (me == 0) CHECK(counter == 50L * n, "shmem_set_lock excludes");
    if (me == 0) {
        CHECK(shmem_test_lock(&lock) == 0, "shmem_test_lock takes a free lock");
        CHECK(shmem_test_lock(&lock) == 1, "shmem_test_lock sees it held");
        shmem_clear_lock(&lock);
    }
    shmem_barrier_all();
    /* fence orders puts to a PE; quiet completes them. */
    {
        static long flag, data;
        flag = 0; data = 0;
        shmem_barrier_all();
        shmem_long_p(&data, 42, (me + 1) % n);
        shmem_fence();
        shmem_long_p(&flag, 1, (me + 1) % n);
        shmem_long_wait_until(&flag, SHMEM_CMP_EQ, 1);
        CHECK(data == 42, "data put before a fence is there when the flag is");
    }
    shmem_clear_cache_inv();
    shmem_udcflush();
    shmem_barrier_all();
    shmem_int_sum_to_all(&total, &failures, 1, 0, 0, n, w, s);
    if (me == 0) printf(total ? "setup: %d checks failed\n" : "setup: OK\n", total);
    shmem_finalize();
    return total != 0;
}
