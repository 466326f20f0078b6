/* Which f32 GEMM runs a product (gemm_select.c): OpenBLAS, oneDNN's dnnl_sgemm or oar's own
 * AVX2 kernel. The choice is a pure function of the shape, the transposes and the thread
 * count, never of timings, so every run of a program does the same float arithmetic (bitwise
 * reproducible training, checkpoint resume, eager == static). docs/kernels-gemm.md gives the
 * measurements behind the rule. */
#ifndef OAR_GEMM_SELECT_H
#define OAR_GEMM_SELECT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum oar_gemm_backend {
    OAR_GEMM_AUTO, /* the rule decides */
    OAR_GEMM_OPENBLAS,
    OAR_GEMM_DNNL,
    OAR_GEMM_AVX2,   /* oar's kernel, 6x16 AVX2/FMA tiles */
    OAR_GEMM_AVX512, /* oar's kernel, 6x32 AVX-512F tiles: bitwise equal to AVX2 */
    OAR_GEMM_BACKEND_COUNT
} oar_gemm_backend;

/* "auto", "openblas", "dnnl", "avx2", "avx512"; NULL for a value out of range. */
const char *oar_gemm_backend_name(oar_gemm_backend b);
/* The backend with that name, or -1. */
int oar_gemm_backend_from_name(const char *name);
/* Whether this build and CPU have the backend (AUTO always). */
bool oar_gemm_backend_available(oar_gemm_backend b);

/* The rule itself: the backend for an f32 op(A)[m, k]·op(B)[k, n] at nthreads threads. Only
 * returns available backends. */
oar_gemm_backend oar_gemm_rule(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads);
/* What oar_gemm runs: the forced backend if one is set, else the rule's answer, remembered
 * per shape so the rule runs once for each. */
oar_gemm_backend oar_gemm_choose(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads);

/* The same for a product of bf16/f16 matrices (gemm_half.h). oar's kernel (AVX-512 tiles where
 * the CPU has them) widens the operands in its packing; a library needs f32 copies of them and
 * a rounding pass over C. So oar's kernel wherever it runs, except on the narrow and short
 * shapes where its tile is mostly padding (those go to the f32 rule's library, on copies).
 * Where oar's kernel is unavailable (the generic cap), the f32 rule's answer. */
oar_gemm_backend oar_gemm_rule_half(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads);
/* What oar_gemm runs for bf16/f16: a forced backend (oar's kernel only where it takes 16-bit
 * operands), else the rule. */
oar_gemm_backend oar_gemm_choose_half(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads);

/* For tests and benchmarks: every later f32 GEMM uses b (AUTO restores the rule). Returns the
 * previous setting; an unavailable backend is refused (returns -1, nothing changes). Not for
 * use while GEMMs run on other threads. */
int oar_gemm_force_backend(oar_gemm_backend b);

#endif
