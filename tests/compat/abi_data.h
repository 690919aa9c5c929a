/* Test data of the NCCL ABI tests: element codecs written here (the test does
 * not trust the library's conversions), reduction inputs whose results are
 * exact in every datatype for up to ABI_MAX_RANKS ranks, byte patterns for
 * the data-movement collectives, and buffers with guard zones. */
#ifndef LANES_TESTS_COMPAT_ABI_DATA_H_
#define LANES_TESTS_COMPAT_ABI_DATA_H_

#include <nccl.h>
#include <stddef.h>

/* The reductions the tests ask for (PREMUL: ncclRedOpCreatePreMulSum, scalar 2). */
typedef enum { ABI_SUM, ABI_PROD, ABI_MAX, ABI_MIN, ABI_AVG, ABI_PREMUL } abi_red_t;
#define ABI_PREMUL_SCALAR 2.0

size_t abi_type_size(ncclDataType_t t);
const char* abi_type_name(ncclDataType_t t);
const char* abi_red_name(abi_red_t r);
int abi_type_is_float(ncclDataType_t t);
/* The built-in op of r (ABI_PREMUL has none: create it). */
ncclRedOp_t abi_builtin_op(abi_red_t r);

/* Element i of a buffer of t, as double / from double (rounded to nearest). */
double abi_load(ncclDataType_t t, const void* base, size_t i);
void abi_store(ncclDataType_t t, void* base, size_t i, double v);

/* Input of `rank` at logical index i for reduction r; salt varies the data. */
double abi_red_input(ncclDataType_t t, abi_red_t r, int rank, int nranks, size_t i, unsigned salt);
/* Fills count elements at base with rank's inputs for indices first.. */
void abi_fill_red(ncclDataType_t t, abi_red_t r, int rank, int nranks, void* base, size_t count,
                  size_t first, unsigned salt);
/* The exact result at index i over the ranks members[0..nmembers) (*sumabs:
 * the sum of |inputs|). Members may be the parent ranks of a split or shrunk
 * communicator, each having filled its buffer with
 * abi_fill_red(..., parent rank, nmembers, ...). */
double abi_red_expected_over(ncclDataType_t t, abi_red_t r, const int* members, int nmembers,
                             size_t i, unsigned salt, double* sumabs);
/* Checks count elements at base against the result for indices first.. (over
 * ranks 0..nranks-1, or members for the _over form);
 * NULL when right, else a description (static buffer) of the first mismatch. */
const char* abi_check_red(ncclDataType_t t, abi_red_t r, int nranks, const void* base, size_t count,
                          size_t first, unsigned salt);
const char* abi_check_red_over(ncclDataType_t t, abi_red_t r, const int* members, int nmembers,
                               const void* base, size_t count, size_t first, unsigned salt);

/* Byte patterns for data movement: what `src` sends to `dst`. */
void abi_fill_pattern(void* base, size_t bytes, int src, int dst, unsigned salt);
/* NULL when right, else a description (static buffer). */
const char* abi_check_pattern(const void* base, size_t bytes, int src, int dst, unsigned salt);

/* Heap buffer with 64-byte guard zones; contents start as 0xA5. */
void* abi_alloc(size_t bytes);
void abi_free(void* p, size_t bytes);
/* NULL when both guards are intact, else which one was overwritten. */
const char* abi_check_guards(const void* p, size_t bytes);
/* NULL when every byte is 0xA5 (untouched), else where it is not. */
const char* abi_check_untouched(const void* p, size_t bytes);

#endif /* LANES_TESTS_COMPAT_ABI_DATA_H_ */
