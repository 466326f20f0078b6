/* The row cut of conv_rows.h. */
#include "kernels/cpu/conv_rows.h"

bool oar_conv_rows_split(int64_t h, int64_t k, int64_t s, int64_t pt, int64_t d, int64_t oh, int64_t parts,
                         oar_conv_rows *out) {
    if (h < 1 || k < 1 || s < 1 || d < 1 || pt < 0 || oh < 1 || parts < 1 || parts > oh) return false;
    int64_t q = oh / parts, r = oh % parts, o = 0;
    for (int64_t i = 0; i < parts; i++) {
        int64_t n = q + (i < r);
        int64_t lo = o * s - pt, hi = (o + n - 1) * s - pt + (k - 1) * d; /* rows read, padding included */
        /* the part's input runs on to the end of its last row's stride (rows no tap reads, fewer
         * than s): a strided 1x1 part then has in_h = out_h * s like the whole, which oneDNN's
         * AVX2 1x1 kernel wants (else another kernel, other bits: conv_dnnl does not split) */
        int64_t end = (o + n) * s - pt - 1 > hi ? (o + n) * s - pt - 1 : hi;
        int64_t a = lo > 0 ? lo : 0, b = end < h - 1 ? end : h - 1;
        if ((hi < h - 1 ? hi : h - 1) < a) return false;
        out[i] = (oar_conv_rows){.out0 = o, .out_h = n, .in0 = a, .in_h = b - a + 1, .pad_t = a - lo,
                                 .pad_b = hi > b ? hi - b : 0};
        o += n;
    }
    return true;
}
