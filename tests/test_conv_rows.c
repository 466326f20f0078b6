/* The row cut of a convolution (src/kernels/cpu/conv_rows.c): every part, run as a convolution
 * of its own over the input rows it was given with its own padding, gives exactly the whole
 * convolution's rows; the parts tile the output; impossible cuts are refused. Checked on a 1-D
 * convolution of small integers (exact) over strides, dilations, paddings and part counts. */
#include "test_util.h"

#include "kernels/cpu/conv_rows.h"

/* out[o] = sum_ky x[o * s - pt + ky * d] * (ky + 1) for o < oh, rows outside [0, h) being zero. */
static void conv1d(const int64_t *x, int64_t h, int64_t k, int64_t s, int64_t pt, int64_t d, int64_t oh,
                   int64_t *out) {
    for (int64_t o = 0; o < oh; o++) {
        int64_t acc = 0;
        for (int64_t ky = 0; ky < k; ky++) {
            int64_t i = o * s - pt + ky * d;
            if (i >= 0 && i < h) acc += x[i] * (ky + 1);
        }
        out[o] = acc;
    }
}

/* One geometry cut every possible way; returns the number of failed checks. */
static int check_geometry(int64_t h, int64_t k, int64_t s, int64_t pt, int64_t pb, int64_t d) {
    int64_t oh = (h + pt + pb - (k - 1) * d - 1) / s + 1;
    if (oh < 1) return 0;
    int64_t x[256], whole[256], part[256];
    for (int64_t i = 0; i < h; i++) x[i] = 3 * i + 1;
    conv1d(x, h, k, s, pt, d, oh, whole);
    int bad = 0;
    for (int64_t parts = 1; parts <= oh && parts <= 16; parts++) {
        oar_conv_rows c[16];
        if (!oar_conv_rows_split(h, k, s, pt, d, oh, parts, c)) {
            /* refused only when a part would lie wholly in the padding */
            bool all_pad = false;
            for (int64_t o = 0; o < oh; o++) {
                bool reads = false;
                for (int64_t ky = 0; ky < k; ky++) reads |= o * s - pt + ky * d >= 0 && o * s - pt + ky * d < h;
                all_pad |= !reads;
            }
            bad += !all_pad;
            continue;
        }
        int64_t next = 0;
        for (int64_t i = 0; i < parts; i++) {
            bad += c[i].out0 != next || c[i].out_h != oh / parts + (i < oh % parts);
            bad += c[i].in0 < 0 || c[i].in_h < 1 || c[i].in0 + c[i].in_h > h || c[i].pad_t < 0 || c[i].pad_b < 0;
            /* oneDNN's output size for the part's rows and padding */
            bad += (c[i].in_h + c[i].pad_t + c[i].pad_b - (k - 1) * d - 1) / s + 1 != c[i].out_h;
            conv1d(x + c[i].in0, c[i].in_h, k, s, c[i].pad_t, d, c[i].out_h, part);
            for (int64_t o = 0; o < c[i].out_h; o++) bad += part[o] != whole[c[i].out0 + o];
            next += c[i].out_h;
        }
        bad += next != oh;
    }
    if (bad) fprintf(stderr, "  h %lld k %lld s %lld pads %lld %lld d %lld\n", (long long)h, (long long)k, (long long)s,
                     (long long)pt, (long long)pb, (long long)d);
    return bad;
}

static void test_cuts(void) {
    int bad = 0;
    for (int64_t h = 1; h <= 20; h++)
        for (int64_t k = 1; k <= 7; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int64_t d = 1; d <= 2; d++)
                    for (int64_t pt = 0; pt <= 4; pt++)
                        for (int64_t pb = pt > 0 ? pt - 1 : 0; pb <= pt + 1; pb++) bad += check_geometry(h, k, s, pt, pb, d);
    /* the models' shapes: resnet18's stem (224, 7x7, stride 2, pad 3), a stride-2 3x3, 7x7 maps */
    bad += check_geometry(224, 7, 2, 3, 3, 1) + check_geometry(56, 3, 2, 1, 1, 1) + check_geometry(7, 3, 1, 1, 1, 1);
    CHECK(bad == 0);
}

static void test_refusals(void) {
    oar_conv_rows c[8];
    CHECK(!oar_conv_rows_split(10, 3, 1, 1, 1, 10, 0, c));  /* no parts */
    CHECK(!oar_conv_rows_split(10, 3, 1, 1, 1, 4, 5, c));   /* more parts than rows */
    CHECK(!oar_conv_rows_split(0, 3, 1, 1, 1, 4, 2, c));    /* empty input */
    CHECK(!oar_conv_rows_split(10, 3, 0, 1, 1, 4, 2, c));   /* stride 0 */
    CHECK(!oar_conv_rows_split(10, 3, 1, -1, 1, 4, 2, c));  /* negative padding */
    /* one input row padded by 5 on each side (9 output rows): output row 0 reads only padding, so
     * a cut into single rows is refused; halves each read the row */
    oar_conv_rows many[9];
    CHECK(!oar_conv_rows_split(1, 3, 1, 5, 1, 9, 9, many));
    CHECK(oar_conv_rows_split(1, 3, 1, 5, 1, 9, 2, c) && c[0].in_h == 1 && c[0].pad_t == 5 && c[0].pad_b == 1 &&
          c[1].in_h == 1 && c[1].pad_t == 0 && c[1].pad_b == 5);
}

int main(void) {
    test_cuts();
    test_refusals();
    return test_summary("test_conv_rows");
}
