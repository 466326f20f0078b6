/* Channels-innermost to NCHW conversion for the oneDNN conv kernels: see conv_dnnl_layout.h. */
#include "kernels/cpu/conv_dnnl_layout.h"

#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#ifdef OAR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

bool oar_chan_layout_of(const void *dnnl_md, oar_chan_layout *l) {
#if defined(__x86_64__)
    const dnnl_memory_desc_t *md = dnnl_md;
    const int nd = md->ndims; /* 4 (NCHW), or 5 (NCDHW: a pixel is a (d, h, w) point) */
    if (!oar_cpu_has_avx2() || (nd != 4 && nd != 5) || (md->data_type != dnnl_f32 && md->data_type != dnnl_bf16) ||
        md->format_kind != dnnl_blocked || md->offset0 != 0)
        return false;
    for (int i = 0; i < nd; i++)
        if (md->padded_dims[i] != md->dims[i] || md->padded_offsets[i] != 0) return false;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    memset(l, 0, sizeof *l);
    l->n = md->dims[0], l->c = md->dims[1], l->pixels = 1;
    for (int i = 2; i < nd; i++) l->pixels *= md->dims[i];
    l->n_stride = b->strides[0], l->block_stride = b->strides[1], l->pixel_stride = b->strides[nd - 1];
    l->esize = md->data_type == dnnl_bf16 ? 2 : 4;
    if (b->inner_nblks == 0) { /* NHWC-like: channels adjacent */
        if (b->strides[1] != 1) return false;
        l->block = 1;
    } else if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 && b->inner_blks[0] % 8 == 0) {
        l->block = b->inner_blks[0];
    } else {
        return false;
    }
    /* pixels of a row follow each other's at pixel_stride, rows each other's, and planes too */
    int64_t next = b->strides[nd - 1];
    for (int i = nd - 1; i >= 2; next *= md->dims[i], i--)
        if (md->dims[i] > 1 && b->strides[i] != next) return false;
    return l->c % 8 == 0 && l->pixels >= 1 && l->n >= 1;
#else
    (void)dnnl_md, (void)l;
    return false;
#endif
}
#endif

/* Offset of channel c's element of pixel 0 of image 0. */
static inline int64_t chan_off(const oar_chan_layout *l, int64_t c) {
    return (c / l->block) * l->block_stride + c % l->block;
}

/* Pixels p0.. of image n, channels g..g + 7, one element at a time (the tails); to_plain says
 * which way. */
static void tail_copy(const oar_chan_layout *l, const void *src, void *dst, int64_t n, int64_t g, int64_t p0,
                      bool to_plain) {
    const size_t es = l->esize == 2 ? 2 : 4, pes = l->plain_bf16 ? 2 : es;
    char *chan = (char *)(to_plain ? src : dst) + (size_t)(n * l->n_stride + chan_off(l, g)) * es;
    char *plain = (char *)(to_plain ? dst : src) + (size_t)((n * l->c + g) * l->pixels) * pes;
    for (int64_t p = p0; p < l->pixels; p++)
        for (int c = 0; c < 8; c++) {
            char *a = plain + (size_t)(c * l->pixels + p) * pes, *b = chan + (size_t)(p * l->pixel_stride + c) * es;
            if (l->plain_bf16) {
                float f;
                uint16_t h;
                if (to_plain) memcpy(&f, b, 4), h = oar_f32_to_bf16(f), memcpy(a, &h, 2);
                else memcpy(&h, a, 2), f = oar_bf16_to_f32(h), memcpy(b, &f, 4);
            } else if (to_plain) {
                memcpy(a, b, es);
            } else {
                memcpy(b, a, es);
            }
        }
}

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/nn_half.h"

#define OAR_AVX2_ONLY __attribute__((target("avx2,fma,f16c")))

/* nn_transpose8 (nn_half.h) for 8 rows of 8 16-bit values. */
static inline OAR_AVX2_ONLY void transpose8x16(__m128i r[8]) {
    __m128i a[8], b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0-3 (h 0) and 4-7 (h 1): columns in pairs */
        b[4 * h + 0] = _mm_unpacklo_epi32(a[4 * h + 0], a[4 * h + 2]);
        b[4 * h + 1] = _mm_unpackhi_epi32(a[4 * h + 0], a[4 * h + 2]);
        b[4 * h + 2] = _mm_unpacklo_epi32(a[4 * h + 1], a[4 * h + 3]);
        b[4 * h + 3] = _mm_unpackhi_epi32(a[4 * h + 1], a[4 * h + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[2 * i] = _mm_unpacklo_epi64(b[i], b[4 + i]);
        r[2 * i + 1] = _mm_unpackhi_epi64(b[i], b[4 + i]);
    }
}

/* 8 channels x 8 pixels between the layouts: rows of the source tile become rows of the other */
static OAR_AVX2_ONLY void convert(const oar_chan_layout *l, const void *src, void *dst, bool to_plain) {
    const int64_t P = l->pixels, ps = l->pixel_stride;
    const bool h = l->esize == 2;
    for (int64_t n = 0; n < l->n; n++)
        for (int64_t g = 0; g < l->c; g += 8) {
            const int64_t co = n * l->n_stride + chan_off(l, g), po = (n * l->c + g) * P;
            int64_t p = 0;
            for (; p + 8 <= P; p += 8) {
                /* to_plain: row k = pixel p + k of the channel layout, written as channel k of plain */
                if (h) {
                    const uint16_t *s = (const uint16_t *)src;
                    uint16_t *d = (uint16_t *)dst;
                    __m128i r[8];
                    for (int k = 0; k < 8; k++)
                        r[k] = _mm_loadu_si128((const __m128i *)(s + (to_plain ? co + (p + k) * ps : po + k * P + p)));
                    transpose8x16(r);
                    for (int k = 0; k < 8; k++)
                        _mm_storeu_si128((__m128i *)(d + (to_plain ? po + k * P + p : co + (p + k) * ps)), r[k]);
                } else if (l->plain_bf16) { /* f32 channel layout, bf16 plain: converted in registers */
                    __m256 r[8];
                    if (to_plain) {
                        for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps((const float *)src + co + (p + k) * ps);
                        nn_transpose8(r);
                        for (int k = 0; k < 8; k++) nn_st(dst, po + k * P + p, r[k], NN_BF16);
                    } else {
                        for (int k = 0; k < 8; k++) r[k] = nn_ld(src, po + k * P + p, NN_BF16);
                        nn_transpose8(r);
                        for (int k = 0; k < 8; k++) _mm256_storeu_ps((float *)dst + co + (p + k) * ps, r[k]);
                    }
                } else {
                    const float *s = (const float *)src;
                    float *d = (float *)dst;
                    __m256 r[8];
                    for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(s + (to_plain ? co + (p + k) * ps : po + k * P + p));
                    nn_transpose8(r);
                    for (int k = 0; k < 8; k++) _mm256_storeu_ps(d + (to_plain ? po + k * P + p : co + (p + k) * ps), r[k]);
                }
            }
            tail_copy(l, src, dst, n, g, p, to_plain);
        }
}

void oar_chan_to_plain(const oar_chan_layout *l, const void *src, void *plain) { convert(l, src, plain, true); }
void oar_plain_to_chan(const oar_chan_layout *l, const void *plain, void *dst) { convert(l, plain, dst, false); }

#else
/* Elsewhere oar_chan_layout_of declines every layout; this stays correct for any caller. */
void oar_chan_to_plain(const oar_chan_layout *l, const void *src, void *plain) {
    for (int64_t n = 0; n < l->n; n++)
        for (int64_t g = 0; g < l->c; g += 8) tail_copy(l, src, plain, n, g, 0, true);
}
void oar_plain_to_chan(const oar_chan_layout *l, const void *plain, void *dst) {
    for (int64_t n = 0; n < l->n; n++)
        for (int64_t g = 0; g < l->c; g += 8) tail_copy(l, plain, dst, n, g, 0, false);
}

#endif
