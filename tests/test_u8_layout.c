/* oar_u8_nchw_to_nhwc (src/kernels/cpu/u8_layout.c), which qconv_dnnl uses to lay its input
 * out: every byte lands where the NHWC formula puts it, inside a frame that keeps its bytes,
 * for channel counts around the 16-channel blocks and planes around the 16-pixel blocks. */
#include "test_util.h"

#include "kernels/cpu/u8_layout.h"

#include <stdint.h>

static void check(int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad) {
    const int64_t hp = h + 2 * pad, wp = w + 2 * pad, row = wp * c, image = hp * row;
    size_t sn = (size_t)(n * c * h * w), dn = (size_t)(n * image);
    uint8_t *src = malloc(sn ? sn : 1), *dst = malloc(dn ? dn : 1);
    for (size_t i = 0; i < sn; i++) src[i] = (uint8_t)(i * 131 + 7);
    memset(dst, 0xA5, dn);
    oar_u8_nchw_to_nhwc(src, n, c, h, w, dst + pad * row + pad * c, row, image);
    int64_t bad = 0;
    for (int64_t b = 0; b < n; b++)
        for (int64_t y = 0; y < hp; y++)
            for (int64_t x = 0; x < wp; x++)
                for (int64_t ch = 0; ch < c; ch++) {
                    bool inside = y >= pad && y < pad + h && x >= pad && x < pad + w;
                    uint8_t want = inside ? src[((b * c + ch) * h + (y - pad)) * w + (x - pad)] : 0xA5;
                    bad += dst[b * image + y * row + x * c + ch] != want;
                }
    CHECK(bad == 0);
    if (bad)
        fprintf(stderr, "  n %lld c %lld h %lld w %lld pad %lld: %lld wrong bytes\n", (long long)n, (long long)c,
                (long long)h, (long long)w, (long long)pad, (long long)bad);
    free(src);
    free(dst);
}

int main(void) {
    const int64_t cs[] = {1, 3, 15, 16, 17, 32, 35, 64};
    const int64_t planes[][2] = {{1, 1}, {7, 7}, {4, 4}, {3, 6}, {5, 9}, {14, 14}, {28, 28}, {2, 33}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (size_t j = 0; j < sizeof planes / sizeof planes[0]; j++)
            for (int64_t pad = 0; pad <= 2; pad += 2) check(i % 2 ? 3 : 2, cs[i], planes[j][0], planes[j][1], pad);
    return test_summary("test_u8_layout");
}
