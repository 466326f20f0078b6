/* Fast masked_fill for the common layout: x already has the output's shape and is contiguous,
 * and the mask broadcasts only along leading dims (an attention mask [T, T] over scores
 * [B, heads, T, T]). The output is then `outer` repetitions of the mask's block:
 * y[o * block + i] = mask[i] ? value : x[o * block + i]. The mask block is first gathered into
 * contiguous bytes (it may be a strided slice, e.g. of a longer causal mask). Any dtype: the
 * value is stored once in the dtype and elements move as 1, 2, 4 or 8 byte words; 4-byte
 * words (f32, i32) use AVX2 blends. The reference kernel stays the oracle. */
#include "kernels/cpu/cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define MF_SIMD 1
#include <immintrin.h>
#endif

typedef struct mf_job {
    const char *x;
    char *y;
    const uint8_t *mask; /* block bytes, 0 or 1 */
    int64_t block, numel;
    size_t es;
    uint64_t fill; /* the value's bits in the low es bytes */
} mf_job;

#define MF_CHUNK ((int64_t)16384) /* elements per task */

#ifdef MF_SIMD
__attribute__((target("avx2"))) static void mf_run32(const uint32_t *x, uint32_t *y, const uint8_t *m, int64_t n,
                                                    uint32_t fill) {
    const __m256i f = _mm256_set1_epi32((int)fill), zero = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i mk = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(m + i)));
        __m256i sel = _mm256_cmpgt_epi32(mk, zero);
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_blendv_epi8(v, f, sel));
    }
    for (; i < n; i++) y[i] = m[i] ? fill : x[i];
}
#endif

/* Elements [b, e) of the output, e - b within one block or spanning several. */
static void mf_span(const mf_job *j, int64_t b, int64_t e) {
    while (b < e) {
        int64_t in_block = b % j->block, n = j->block - in_block;
        if (n > e - b) n = e - b;
        const uint8_t *m = j->mask + in_block;
        switch (j->es) {
        case 4: {
            const uint32_t *x = (const uint32_t *)j->x + b;
            uint32_t *y = (uint32_t *)j->y + b, f = (uint32_t)j->fill;
#ifdef MF_SIMD
            if (oar_cpu_has_avx2()) {
                mf_run32(x, y, m, n, f);
                break;
            }
#endif
            for (int64_t i = 0; i < n; i++) y[i] = m[i] ? f : x[i];
            break;
        }
        case 8: {
            const uint64_t *x = (const uint64_t *)j->x + b;
            uint64_t *y = (uint64_t *)j->y + b, f = j->fill;
            for (int64_t i = 0; i < n; i++) y[i] = m[i] ? f : x[i];
            break;
        }
        case 2: {
            const uint16_t *x = (const uint16_t *)j->x + b;
            uint16_t *y = (uint16_t *)j->y + b, f = (uint16_t)j->fill;
            for (int64_t i = 0; i < n; i++) y[i] = m[i] ? f : x[i];
            break;
        }
        default: {
            const uint8_t *x = (const uint8_t *)j->x + b;
            uint8_t *y = (uint8_t *)j->y + b, f = (uint8_t)j->fill;
            for (int64_t i = 0; i < n; i++) y[i] = m[i] ? f : x[i];
            break;
        }
        }
        b += n;
    }
}

static void mf_chunks(void *ctx, int64_t b, int64_t e) {
    const mf_job *j = ctx;
    int64_t lo = b * MF_CHUNK, hi = e * MF_CHUNK < j->numel ? e * MF_CHUNK : j->numel;
    mf_span(j, lo, hi);
}

/* The mask's dims after its leading 1s must be the output's trailing dims. */
static int mask_first_dim(const oar_tensor *mask) {
    int k = 0;
    while (k < mask->ndim && mask->shape[k] == 1) k++;
    return k;
}

static bool masked_fill_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *attrs) {
    (void)n_in; (void)n_out; (void)attrs;
    const oar_tensor *x = in[0], *mask = in[1], *y = out[0];
    size_t es = oar_dtypes[y->dtype].size;
    if (!x->contiguous || x->ndim != y->ndim || (es != 1 && es != 2 && es != 4 && es != 8)) return false;
    for (int d = 0; d < y->ndim; d++)
        if (x->shape[d] != y->shape[d]) return false;
    int k = mask_first_dim(mask), mdims = mask->ndim - k;
    if (mdims > y->ndim) return false;
    for (int d = 0; d < mdims; d++)
        if (mask->shape[k + d] != y->shape[y->ndim - mdims + d]) return false;
    return true;
}

/* Gathers the mask's block (dims k.. of any strides) into contiguous bytes. */
static void gather_mask(const oar_tensor *mask, int k, uint8_t *dst, int64_t block) {
    const uint8_t *src = (const uint8_t *)oar_tensor_ptr(mask);
    if (mask->contiguous) {
        for (int64_t i = 0; i < block; i++) dst[i] = src[i] != 0;
        return;
    }
    int64_t idx[OAR_MAX_DIMS] = {0};
    int nd = mask->ndim - k;
    for (int64_t i = 0; i < block; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * mask->strides[k + d];
        dst[i] = src[off] != 0;
        for (int d = nd - 1; d >= 0 && ++idx[d] == mask->shape[k + d]; d--) idx[d] = 0;
    }
}

static oar_status masked_fill_fast(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    const oar_tensor *mask = in[1];
    if (y->numel == 0) return OAR_OK;
    int k = mask_first_dim(mask);
    int64_t block = 1;
    for (int d = k; d < mask->ndim; d++) block *= mask->shape[d];
    uint8_t *m = malloc((size_t)block);
    if (!m) return oar_error(OAR_ERR_OOM, "masked_fill: out of memory for a mask of %lld bytes", (long long)block);
    gather_mask(mask, k, m, block);
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    mf_job j = {.x = oar_tensor_ptr(in[0]), .y = oar_tensor_ptr(y), .mask = m, .block = block, .numel = y->numel,
                .es = tr->size};
    tr->store(&j.fill, a[0].f); /* little endian: the low bytes hold the value */
    int64_t chunks = (y->numel + MF_CHUNK - 1) / MF_CHUNK;
    if (ctx->nthreads > 1 && chunks > 1) oar_parallel_for(chunks, 1, mf_chunks, &j);
    else mf_chunks(&j, 0, chunks);
    free(m);
    return OAR_OK;
}

void oar_cpu_register_masked_fill(void) {
    oar_register_kernel(OAR_OP_masked_fill, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_BASE_DTYPES,
                                                               .impl = "block", .priority = 10,
                                                               .fn = masked_fill_fast,
                                                               .supports = masked_fill_supports});
}
