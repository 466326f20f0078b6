/* NCHW bytes into NHWC rows. oneDNN's reorder did this for qconv_dnnl at about 4 GB/s, 15% of
 * ResNet-20's int8 inference (docs/quant.md); here blocks of 16 channels x 16 pixels are
 * transposed in SSE2 registers, the pixels taken along the whole plane (H * W contiguous
 * bytes) so only a plane's last block is short. */
#include "kernels/cpu/u8_layout.h"

#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>

/* Four rounds of interleaving 16 rows of 16 bytes: out[k] is column bitrev4(k) of the input. */
static inline void interleave16(__m128i r[16]) {
    __m128i t[16];
    for (int i = 0; i < 8; i++) t[i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]), t[i + 8] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    for (int i = 0; i < 8; i++) r[i] = _mm_unpacklo_epi16(t[2 * i], t[2 * i + 1]), r[i + 8] = _mm_unpackhi_epi16(t[2 * i], t[2 * i + 1]);
    for (int i = 0; i < 8; i++) t[i] = _mm_unpacklo_epi32(r[2 * i], r[2 * i + 1]), t[i + 8] = _mm_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    for (int i = 0; i < 8; i++) r[i] = _mm_unpacklo_epi64(t[2 * i], t[2 * i + 1]), r[i + 8] = _mm_unpackhi_epi64(t[2 * i], t[2 * i + 1]);
}

static const int BITREV4[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

/* Channels [c0, c0 + cn) (cn <= 16) of one image's planes into its pixels. */
static void block_rows(const uint8_t *planes, int64_t c, int64_t c0, int cn, int64_t h, int64_t w, uint8_t *dst,
                       int64_t dst_row) {
    const int64_t hw = h * w;
    int64_t y = 0, x = 0; /* the pixel p0 of the block */
    for (int64_t p0 = 0; p0 < hw; p0 += 16) {
        const int pn = hw - p0 < 16 ? (int)(hw - p0) : 16;
        __m128i r[16];
        for (int i = 0; i < 16; i++) {
            const uint8_t *s = planes + (c0 + i) * hw + p0;
            if (i >= cn) {
                r[i] = _mm_setzero_si128();
            } else if (pn == 16) {
                r[i] = _mm_loadu_si128((const __m128i *)s);
            } else { /* a plane's short last block: never read past it */
                uint8_t tmp[16] = {0};
                memcpy(tmp, s, (size_t)pn);
                r[i] = _mm_loadu_si128((const __m128i *)tmp);
            }
        }
        interleave16(r);
        for (int p = 0; p < pn; p++) {
            const int k = BITREV4[p]; /* bit reversal is its own inverse: vector k holds pixel p */
            int64_t py = y, px = x + p;
            while (px >= w) px -= w, py++;
            uint8_t *d = dst + py * dst_row + px * c + c0;
            /* with fewer than 16 channels in all, a full store spills into pixels to its right
             * that are stored after it (pixels go in order), never past the row's last one */
            if (cn == 16 || (c < 16 && (w - 1 - px) * c >= 16 - cn)) {
                _mm_storeu_si128((__m128i *)d, r[k]);
            } else {
                uint8_t tmp[16];
                _mm_storeu_si128((__m128i *)tmp, r[k]);
                memcpy(d, tmp, (size_t)cn);
            }
        }
        for (x += 16; x >= w && y < h; x -= w) y++;
    }
}

void oar_u8_nchw_to_nhwc(const uint8_t *src, int64_t n, int64_t c, int64_t h, int64_t w, uint8_t *dst,
                         int64_t dst_row, int64_t dst_image) {
    if (c == 1) { /* the same bytes: rows copied into the frame */
        for (int64_t b = 0; b < n; b++)
            for (int64_t y = 0; y < h; y++) memcpy(dst + b * dst_image + y * dst_row, src + (b * h + y) * w, (size_t)w);
        return;
    }
    for (int64_t b = 0; b < n; b++)
        for (int64_t c0 = 0; c0 < c; c0 += 16)
            block_rows(src + b * c * h * w, c, c0, c - c0 < 16 ? (int)(c - c0) : 16, h, w, dst + b * dst_image,
                       dst_row);
}

#else

void oar_u8_nchw_to_nhwc(const uint8_t *src, int64_t n, int64_t c, int64_t h, int64_t w, uint8_t *dst,
                         int64_t dst_row, int64_t dst_image) {
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t y = 0; y < h; y++)
                for (int64_t x = 0; x < w; x++)
                    dst[b * dst_image + y * dst_row + x * c + ch] = src[((b * c + ch) * h + y) * w + x];
}

#endif
