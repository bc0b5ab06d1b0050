//! The fixed parts of `shmem.h`: its top and bottom, and the prototypes of the routines
//! written by hand in the crate.

/// Prototypes of the routines written by hand in the crate.
pub(crate) const UNTYPED: &[&str] = &[
    // Library setup, exit, query.
    "void shmem_init(void)",
    "void shmem_finalize(void)",
    "int shmem_init_thread(int requested, int *provided)",
    "void shmem_query_thread(int *provided)",
    "int shmem_my_pe(void)",
    "int shmem_n_pes(void)",
    "void shmem_global_exit(int status)",
    "int shmem_pe_accessible(int pe)",
    "int shmem_addr_accessible(const void *addr, int pe)",
    "void *shmem_ptr(const void *dest, int pe)",
    "void shmem_info_get_version(int *major, int *minor)",
    "void shmem_info_get_name(char *name)",
    "void start_pes(int npes)",
    "int _my_pe(void)",
    "int _num_pes(void)",
    // Memory management.
    "void *shmem_malloc(size_t size)",
    "void *shmem_malloc_with_hints(size_t size, long hints)",
    "void shmem_free(void *ptr)",
    "void *shmem_realloc(void *ptr, size_t size)",
    "void *shmem_align(size_t alignment, size_t size)",
    "void *shmem_calloc(size_t count, size_t size)",
    "void *shmalloc(size_t size)",
    "void shfree(void *ptr)",
    "void *shrealloc(void *ptr, size_t size)",
    "void *shmemalign(size_t alignment, size_t size)",
    // Teams (1.5).
    "int shmem_team_my_pe(shmem_team_t team)",
    "int shmem_team_n_pes(shmem_team_t team)",
    "int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config)",
    "int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team)",
    "int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size, const shmem_team_config_t *config, long config_mask, shmem_team_t *new_team)",
    "int shmem_team_split_2d(shmem_team_t parent_team, int xrange, const shmem_team_config_t *xaxis_config, long xaxis_mask, shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config, long yaxis_mask, shmem_team_t *yaxis_team)",
    "void shmem_team_destroy(shmem_team_t team)",
    "int shmem_team_sync(shmem_team_t team)",
    "void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe)",
    // Contexts (1.5).
    "int shmem_ctx_create(long options, shmem_ctx_t *ctx)",
    "int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx)",
    "void shmem_ctx_destroy(shmem_ctx_t ctx)",
    "int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)",
    // Memory ordering.
    "void shmem_fence(void)",
    "void shmem_quiet(void)",
    "void shmem_ctx_fence(shmem_ctx_t ctx)",
    "void shmem_ctx_quiet(shmem_ctx_t ctx)",
    // Signals (1.5).
    "uint64_t shmem_signal_fetch(const uint64_t *sig_addr)",
    "uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)",
    // Profiling (1.5): accepted, no profiling library attached.
    "void shmem_pcontrol(const int level, ...)",
    // Locks.
    "void shmem_set_lock(long *lock)",
    "void shmem_clear_lock(long *lock)",
    "int shmem_test_lock(long *lock)",
    // Deprecated generic point-to-point on long.
    "void shmem_wait(long *ivar, long cmp_value)",
    "void shmem_wait_until(long *ivar, int cmp, long cmp_value)",
    // Deprecated generic swap on long.
    "long shmem_swap(long *target, long value, int pe)",
    // Collectives over active sets (1.4), and the world barriers.
    "void shmem_barrier_all(void)",
    "void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_sync_all(void)",
    "void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_broadcast32(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_broadcast64(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_collect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_collect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_fcollect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_fcollect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoall32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoall64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoalls32(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoalls64(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    // Cache management: no-ops (coherent memory).
    "void shmem_clear_cache_inv(void)",
    "void shmem_set_cache_inv(void)",
    "void shmem_clear_cache_line_inv(void *dest)",
    "void shmem_set_cache_line_inv(void *dest)",
    "void shmem_udcflush(void)",
    "void shmem_udcflush_line(void *dest)",
];

pub(crate) const HEADER_TOP: &str = r#"/* shmem.h: OpenSHMEM 1.5 for C and C++ on the Tessera runtime.
 *
 * Generated by crates/tessera-shmem/build/ from the specification's type tables; do not
 * edit. Written from the OpenSHMEM 1.5 specification. */
#ifndef TESSERA_SHMEM_H
#define TESSERA_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "Tessera"
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

/* Work arrays of the active-set collectives. Tessera's collectives keep their own state,
 * so pSync and pWrk are accepted and left alone; the sizes keep programs that declare them
 * correct. */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_SYNC_SIZE 4
#define SHMEM_BCAST_SYNC_SIZE 4
#define SHMEM_BARRIER_SYNC_SIZE 4
#define SHMEM_REDUCE_SYNC_SIZE 4
#define SHMEM_COLLECT_SYNC_SIZE 4
#define SHMEM_ALLTOALL_SYNC_SIZE 4
#define SHMEM_ALLTOALLS_SYNC_SIZE 4
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

/* Complex element types of the sum and product reductions. */
#ifdef __cplusplus
__extension__ typedef __complex__ float tessera_complexf;
__extension__ typedef __complex__ double tessera_complexd;
#else
typedef float _Complex tessera_complexf;
typedef double _Complex tessera_complexd;
#endif

/* Teams (1.5). A handle is a number, never dereferenced: the predefined teams have fixed
 * ones, SHMEM_TEAM_INVALID is null, and a destroyed team's handle is never reused. */
typedef struct tessera_shmem_team *shmem_team_t;
#define SHMEM_TEAM_INVALID ((shmem_team_t) 0)
#define SHMEM_TEAM_WORLD ((shmem_team_t) (uintptr_t) 1)
#define SHMEM_TEAM_SHARED ((shmem_team_t) (uintptr_t) 2)
typedef struct {
    int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS 1L

/* Contexts (1.5), numbered as teams are. */
typedef struct tessera_shmem_ctx *shmem_ctx_t;
#define SHMEM_CTX_INVALID ((shmem_ctx_t) 0)
#define SHMEM_CTX_DEFAULT ((shmem_ctx_t) (uintptr_t) 1)
#define SHMEM_CTX_SERIALIZED 1L
#define SHMEM_CTX_PRIVATE 2L
#define SHMEM_CTX_NOSTORE 4L

/* Put-with-signal operations (1.5). */
#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* What this header provides, in the names the Python bindings shmem4py test for: they
 * recognise a few implementations by name and, for any other, would replace these 1.5
 * families with stand-ins of their own. */
#define PySHMEM_HAVE_shmem_malloc_with_hints 1
#define PySHMEM_HAVE_shmem_team_t 1
#define PySHMEM_HAVE_SHMEM_CTX_INVALID 1
#define PySHMEM_HAVE_shmem_amo_nbi 1
#define PySHMEM_HAVE_shmem_put_signal 1
#define PySHMEM_HAVE_shmem_signal_fetch 1
#define PySHMEM_HAVE_shmem_signal_wait_until 1
#define PySHMEM_HAVE_shmem_broadcast 1
#define PySHMEM_HAVE_shmem_collect 1
#define PySHMEM_HAVE_shmem_fcollect 1
#define PySHMEM_HAVE_shmem_alltoall 1
#define PySHMEM_HAVE_shmem_alltoalls 1
#define PySHMEM_HAVE_shmem_broadcastmem 1
#define PySHMEM_HAVE_shmem_collectmem 1
#define PySHMEM_HAVE_shmem_fcollectmem 1
#define PySHMEM_HAVE_shmem_alltoallmem 1
#define PySHMEM_HAVE_shmem_alltoallsmem 1
#define PySHMEM_HAVE_shmem_reduce 1
#define PySHMEM_HAVE_shmem_wait_test_many 1
#define PySHMEM_HAVE_shmem_pcontrol 1

#ifdef __cplusplus
extern "C" {
#endif

"#;

/// The end of the functions' `extern "C"` block (the C11 generic selections and the C++
/// overloads follow it).
/// The top of `pshmem.h`, the profiling interface: every routine under a `pshmem_` name.
pub(crate) const PHEADER_TOP: &str = r#"/* pshmem.h: the OpenSHMEM 1.5 profiling interface (section 10) of Tessera's library.
 * Every routine of shmem.h also has the name pshmem_NAME. A tool wraps a routine by
 * defining shmem_NAME itself and calling pshmem_NAME: the library's shmem_ names give way
 * to the tool's (in libsma.a they are weak; with libsma.so the definition found first,
 * the tool's when it is linked or preloaded first, is the one every call reaches).
 * shmem_pcontrol is one of them, so a tool that defines it receives the levels. */
#ifndef TESSERA_PSHMEM_H
#define TESSERA_PSHMEM_H
#include <shmem.h>
#ifdef __cplusplus
extern "C" {
#endif
"#;

/// The bottom of `pshmem.h`.
pub(crate) const PHEADER_BOTTOM: &str = r#"#ifdef __cplusplus
}
#endif
#endif /* TESSERA_PSHMEM_H */
"#;

pub(crate) const HEADER_FUNCTIONS_END: &str = r#"
#ifdef __cplusplus
}
#endif
"#;

pub(crate) const HEADER_BOTTOM: &str = r#"
#endif /* TESSERA_SHMEM_H */
"#;
