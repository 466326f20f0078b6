/* qmax_pool2d's 2x2 windows with stride 2 (LeNet's, most CNNs'), no padding or dilation, on
 * 128-bit vectors: 8 outputs from 16 bytes of each of the two input rows (vertical max, then
 * the max of each byte pair as 16-bit lanes, packed back to bytes), 4 outputs from 8 bytes for
 * rows of 4 to 7 outputs; a row's last chunk overlaps the one before rather than running past
 * the row (max is idempotent). s8 data is flipped to u8 by 0x80 and back, so bytes compare
 * as the values order. The reference's loop over strided bytes was a seventh of LeNet's int8
 * time. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant.h"

#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

typedef struct qmax2 {
    const uint8_t *x;
    uint8_t *y;
    int64_t h, w, oh, ow;
    uint8_t flip;
} qmax2;

/* max of byte pairs (2i, 2i + 1) of v, in the low bytes of the result */
AVX2 static inline __m128i pair_max(__m128i v) {
    __m128i lo = _mm_and_si128(v, _mm_set1_epi16(0xff)), hi = _mm_srli_epi16(v, 8);
    __m128i m = _mm_max_epi16(lo, hi);
    return _mm_packus_epi16(m, m);
}

AVX2 static void rows(const qmax2 *j, const uint8_t *r0, const uint8_t *r1, uint8_t *d) {
    const __m128i f = _mm_set1_epi8((char)j->flip);
    int64_t ow = j->ow;
    if (ow >= 8) {
        for (int64_t ox = 0;; ox += 8) {
            if (ox > ow - 8) ox = ow - 8; /* the last chunk overlaps */
            __m128i a = _mm_loadu_si128((const __m128i *)(r0 + 2 * ox)), b = _mm_loadu_si128((const __m128i *)(r1 + 2 * ox));
            __m128i m = pair_max(_mm_max_epu8(_mm_xor_si128(a, f), _mm_xor_si128(b, f)));
            _mm_storel_epi64((__m128i *)(d + ox), _mm_xor_si128(m, f));
            if (ox == ow - 8) break;
        }
    } else if (ow >= 4) {
        for (int64_t ox = 0;; ox += 4) {
            if (ox > ow - 4) ox = ow - 4;
            __m128i a = _mm_loadl_epi64((const __m128i *)(r0 + 2 * ox)), b = _mm_loadl_epi64((const __m128i *)(r1 + 2 * ox));
            __m128i m = _mm_xor_si128(pair_max(_mm_max_epu8(_mm_xor_si128(a, f), _mm_xor_si128(b, f))), f);
            int32_t v = _mm_cvtsi128_si32(m);
            memcpy(d + ox, &v, 4);
            if (ox == ow - 4) break;
        }
    } else {
        for (int64_t ox = 0; ox < ow; ox++) {
            uint8_t a = r0[2 * ox] ^ j->flip, b = r0[2 * ox + 1] ^ j->flip, c = r1[2 * ox] ^ j->flip,
                    e = r1[2 * ox + 1] ^ j->flip;
            uint8_t m0 = a > b ? a : b, m1 = c > e ? c : e;
            d[ox] = (uint8_t)((m0 > m1 ? m0 : m1) ^ j->flip);
        }
    }
}

static void planes(void *ctx, int64_t b, int64_t e) {
    const qmax2 *j = ctx;
    for (int64_t i = b; i < e; i++)
        for (int64_t oy = 0; oy < j->oh; oy++) {
            const uint8_t *r0 = j->x + (i * j->h + 2 * oy) * j->w;
            rows(j, r0, r0 + j->w, j->y + (i * j->oh + oy) * j->ow);
        }
}

static oar_status qmax2_run(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out, (void)a;
    const oar_tensor *x = in[0], *y = out[0];
    int nd = x->ndim;
    qmax2 j = {.x = (const uint8_t *)oar_tensor_ptr(x), .y = (uint8_t *)oar_tensor_ptr(y), .h = x->shape[nd - 2],
               .w = x->shape[nd - 1], .oh = y->shape[nd - 2], .ow = y->shape[nd - 1],
               .flip = x->dtype == OAR_I8 ? 0x80 : 0};
    int64_t n = j.h > 0 && j.w > 0 ? x->numel / (j.h * j.w) : 0;
    if (n && j.oh && j.ow) oar_parallel_for(n, 1 + 8192 / (j.oh * j.ow * 4 + 1), planes, &j);
    return OAR_OK;
}

/* 2x2 windows, stride 2, no padding or dilation, every window inside the input; contiguous */
static bool supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)n_out;
    const oar_tensor *x = in[0], *y = out[0];
    int nd = x->ndim;
    for (int i = 0; i < 2; i++)
        if (a[0].ints[i] != 2 || a[1].ints[i] != 2 || a[2].ints[i] != 0 || a[3].ints[i] != 1) return false;
    return oar_cpu_has_avx2() && x->contiguous && y->contiguous && nd >= 2 &&
           2 * y->shape[nd - 2] <= x->shape[nd - 2] && 2 * y->shape[nd - 1] <= x->shape[nd - 1];
}

void oar_cpu_register_qmax_pool(void) {
    oar_register_kernel(OAR_OP_qmax_pool2d, (oar_kernel_entry){.device = OAR_CPU,
                                                               .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                               .impl = "avx2-2x2", .priority = 10, .fn = qmax2_run,
                                                               .supports = supports});
}
#else
void oar_cpu_register_qmax_pool(void) {}
#endif
