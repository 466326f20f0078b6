/* The oneDNN conv kernels' own parts (src/kernels/cpu/conv_dnnl*.c):
 *  - the channels-innermost to NCHW transpose is exact on every layout it accepts (tails of
 *    pixels included), for f32 and 16-bit (bf16) elements, and so is the way back; the layout
 *    check declines what it cannot do;
 *  - convs whose outputs go through it agree with the reference kernels, at 1 thread and at
 *    2 (the batch split in uneven parts, so two primitives), for conv2d and both backward ops;
 *  - the forward convs run as backward-data ones (flip_rule) agree with the reference;
 *  - a backward op takes the dy the other one converted just before it, and only then. */
#include "test_util.h"

#include "kernels/cpu/bf16_native.h"
#include "kernels/cpu/conv_dnnl.h"
#include "kernels/cpu/conv_dnnl_layout.h"
#include "kernels/cpu/dnnl_engine.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/op.h"
#include "tensor/tensor.h"

#ifdef OAR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

/* Element (n, c, p) of l's layout, by the formula the header gives. */
static int64_t at(const oar_chan_layout *l, int64_t n, int64_t c, int64_t p) {
    return n * l->n_stride + (c / l->block) * l->block_stride + c % l->block + p * l->pixel_stride;
}

static void check_to_plain(int64_t block, int64_t n, int64_t c, int64_t pixels) {
    oar_chan_layout l = {.n = n, .c = c, .pixels = pixels, .n_stride = c * pixels, .block = block,
                         .block_stride = block == 1 ? 1 : pixels * block, .pixel_stride = block == 1 ? c : block};
    size_t count = (size_t)(n * c * pixels);
    float *src = calloc(count, sizeof(float)), *plain = malloc(sizeof(float) * count);
    for (size_t i = 0; i < count; i++) src[i] = (float)i + 0.5f; /* all distinct, exact in f32 */
    oar_chan_to_plain(&l, src, plain);
    int64_t bad = 0;
    for (int64_t in = 0; in < n; in++)
        for (int64_t ic = 0; ic < c; ic++)
            for (int64_t p = 0; p < pixels; p++) bad += plain[(in * c + ic) * pixels + p] != src[at(&l, in, ic, p)];
    CHECK(bad == 0);
    if (bad) fprintf(stderr, "  block %lld, %lldx%lldx%lld\n", (long long)block, (long long)n, (long long)c, (long long)pixels);
    free(src);
    free(plain);
}

/* The same for 16-bit elements (bf16), and back: plain into the layout gives the source again. */
static void check_roundtrip16(int64_t block, int64_t n, int64_t c, int64_t pixels) {
    oar_chan_layout l = {.n = n, .c = c, .pixels = pixels, .n_stride = c * pixels, .block = block,
                         .block_stride = block == 1 ? 1 : pixels * block, .pixel_stride = block == 1 ? c : block,
                         .esize = 2};
    size_t count = (size_t)(n * c * pixels);
    uint16_t *src = calloc(count, 2), *plain = malloc(2 * count), *back = malloc(2 * count);
    for (size_t i = 0; i < count; i++) src[i] = (uint16_t)(i * 40503u + 7u); /* distinct below 2^16 */
    oar_chan_to_plain(&l, src, plain);
    int64_t bad = 0;
    for (int64_t in = 0; in < n; in++)
        for (int64_t ic = 0; ic < c; ic++)
            for (int64_t p = 0; p < pixels; p++) bad += plain[(in * c + ic) * pixels + p] != src[at(&l, in, ic, p)];
    memset(back, 0xFF, 2 * count);
    oar_plain_to_chan(&l, plain, back);
    bad += memcmp(back, src, 2 * count) != 0;
    CHECK(bad == 0);
    if (bad) fprintf(stderr, "  16-bit block %lld, %lldx%lldx%lld\n", (long long)block, (long long)n, (long long)c,
                     (long long)pixels);
    free(src);
    free(plain);
    free(back);
}

/* f32 back into the layout */
static void check_from_plain(int64_t block, int64_t n, int64_t c, int64_t pixels) {
    oar_chan_layout l = {.n = n, .c = c, .pixels = pixels, .n_stride = c * pixels, .block = block,
                         .block_stride = block == 1 ? 1 : pixels * block, .pixel_stride = block == 1 ? c : block};
    size_t count = (size_t)(n * c * pixels);
    float *src = calloc(count, sizeof(float)), *plain = malloc(sizeof(float) * count), *back = malloc(sizeof(float) * count);
    for (size_t i = 0; i < count; i++) src[i] = (float)i + 0.25f;
    oar_chan_to_plain(&l, src, plain);
    memset(back, 0, sizeof(float) * count);
    oar_plain_to_chan(&l, plain, back);
    CHECK(memcmp(back, src, sizeof(float) * count) == 0);
    free(src);
    free(plain);
    free(back);
}

static void test_transposes(void) {
#if defined(__x86_64__)
    if (!oar_cpu_has_avx2()) return; /* the layout check declines everything there */
#endif
    const int64_t pixels[] = {1, 7, 8, 25, 64, 21}; /* below, at and past the 8-pixel tiles */
    for (size_t i = 0; i < sizeof pixels / sizeof pixels[0]; i++) {
        check_to_plain(1, 2, 8, pixels[i]);  /* NHWC */
        check_to_plain(1, 3, 48, pixels[i]);
        check_to_plain(8, 2, 24, pixels[i]); /* nChw8c */
        check_to_plain(16, 2, 16, pixels[i]); /* nChw16c: one block */
        check_to_plain(16, 3, 32, pixels[i]);
        check_from_plain(1, 3, 48, pixels[i]);
        check_from_plain(16, 3, 32, pixels[i]);
        check_roundtrip16(1, 2, 8, pixels[i]);
        check_roundtrip16(1, 3, 48, pixels[i]);
        check_roundtrip16(8, 2, 24, pixels[i]);
        check_roundtrip16(16, 3, 32, pixels[i]);
    }
}

#ifdef OAR_HAVE_ONEDNN
static bool layout_of_tag(int64_t c, int64_t h, int64_t w, dnnl_format_tag_t tag, oar_chan_layout *l) {
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {2, c, h, w};
    if (dnnl_memory_desc_init_by_tag(&md, 4, d, dnnl_f32, tag) != dnnl_success) return false;
    return oar_chan_layout_of(&md, l);
}

static void test_layout_check(void) {
#if defined(__x86_64__)
    if (!oar_cpu_has_avx2()) return;
#endif
    oar_chan_layout l;
    CHECK(layout_of_tag(16, 5, 3, dnnl_nhwc, &l) && l.block == 1 && l.pixel_stride == 16 && l.pixels == 15 &&
          l.n_stride == 16 * 15);
    CHECK(layout_of_tag(32, 4, 4, dnnl_nChw16c, &l) && l.block == 16 && l.pixel_stride == 16 &&
          l.block_stride == 16 * 16);
    CHECK(layout_of_tag(24, 3, 3, dnnl_nChw8c, &l) && l.block == 8 && l.c == 24);
    CHECK(!layout_of_tag(16, 4, 4, dnnl_nchw, &l));    /* channels apart */
    CHECK(!layout_of_tag(12, 4, 4, dnnl_nhwc, &l));    /* not a multiple of 8 */
    CHECK(!layout_of_tag(20, 4, 4, dnnl_nChw16c, &l)); /* padded to 32 */
    CHECK(!layout_of_tag(16, 4, 4, dnnl_nChw4c, &l));  /* runs of 4 */
    dnnl_memory_desc_t md;
    CHECK(dnnl_memory_desc_init_by_tag(&md, 4, (dnnl_dims_t){2, 16, 4, 4}, dnnl_bf16, dnnl_nhwc) == dnnl_success &&
          oar_chan_layout_of(&md, &l) && l.esize == 2 && l.pixel_stride == 16);
    CHECK(dnnl_memory_desc_init_by_tag(&md, 4, (dnnl_dims_t){2, 16, 4, 4}, dnnl_f16, dnnl_nhwc) == dnnl_success &&
          !oar_chan_layout_of(&md, &l)); /* f16: not handled */
}
#endif

static const oar_kernel_entry *kernel(oar_op_id op, const char *impl) {
    const oar_kernel_entry *k;
    int n = oar_op_kernels(op, &k);
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].impl, impl)) return &k[i];
    return NULL;
}

/* max |a - b| <= 1e-4 * max(1, max |b|): the kernels sum the 144 products of each output (or
 * batch * 1024 of each weight gradient) in other orders; f32 rounding of such sums stays
 * ~1e-6 relative, while a misplaced part or image is off by O(1). */
static bool near_ref(oar_tensor *a, oar_tensor *b) {
    int64_t n = oar_numel(b);
    const float *x = (const float *)oar_tensor_ptr(a), *y = (const float *)oar_tensor_ptr(b);
    double scale = 1, err = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(y[i]));
    for (int64_t i = 0; i < n; i++) err = fmax(err, fabs((double)x[i] - y[i]));
    return err <= 1e-4 * scale;
}

/* 37 images of 16 channels 32x32 (NHWC-like outputs) at 1 and 2 threads. */
static void test_against_reference(int threads) {
    const oar_kernel_entry *fast[3] = {kernel(OAR_OP_conv2d, "onednn"), kernel(OAR_OP_conv2d_grad_input, "onednn"),
                                       kernel(OAR_OP_conv2d_grad_weight, "onednn")};
    const oar_kernel_entry *ref[3] = {kernel(OAR_OP_conv2d, "reference"),
                                      kernel(OAR_OP_conv2d_grad_input, "reference"),
                                      kernel(OAR_OP_conv2d_grad_weight, "reference")};
    if (!fast[0] || !fast[1] || !fast[2]) return; /* a build without oneDNN */
    CHECK(ref[0] && ref[1] && ref[2]);
    if (!ref[0] || !ref[1] || !ref[2]) return;
    int before = oar_get_num_threads();
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    oar_scope_begin();
    oar_manual_seed(11);
    const int64_t xs[4] = {37, 16, 32, 32}, ws[4] = {24, 16, 3, 3}, ys[4] = {37, 24, 32, 32};
    oar_tensor *x = oar_randn(xs, 4, OAR_F32), *w = oar_randn(ws, 4, OAR_F32), *b = oar_randn(ws, 1, OAR_F32);
    oar_tensor *gy = oar_randn(ys, 4, OAR_F32);
    oar_attr spdg[4] = {oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_ints((int64_t[]){1, 1}, 2),
                        oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1)};
    oar_attr gi[5] = {oar_attr_ints(xs, 4), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_attr gw[5] = {oar_attr_ints(ws, 4), spdg[0], spdg[1], spdg[2], spdg[3]};
    struct {
        oar_op_id op;
        oar_tensor *in[3];
        int n_in;
        const int64_t *out_shape;
        const oar_attr *attrs;
    } calls[3] = {{OAR_OP_conv2d, {x, w, b}, 3, ys, spdg}, {OAR_OP_conv2d_grad_input, {gy, w}, 2, xs, gi},
                  {OAR_OP_conv2d_grad_weight, {x, gy}, 2, ws, gw}};
    for (int i = 0; i < 3; i++) {
        oar_tensor *got = oar_empty(calls[i].out_shape, 4, OAR_F32), *want = oar_empty(calls[i].out_shape, 4, OAR_F32);
        CHECK(fast[i]->supports == NULL ||
              fast[i]->supports(calls[i].in, calls[i].n_in, (oar_tensor *[]){got}, 1, calls[i].attrs));
        CHECK(oar_op_run_kernel(calls[i].op, fast[i], calls[i].in, calls[i].n_in, &got, 1, calls[i].attrs) == OAR_OK);
        CHECK(oar_op_run_kernel(calls[i].op, ref[i], calls[i].in, calls[i].n_in, &want, 1, calls[i].attrs) == OAR_OK);
        CHECK(near_ref(got, want));
        /* the same call again: same bits (nothing carried over from the first) */
        oar_tensor *again = oar_empty(calls[i].out_shape, 4, OAR_F32);
        CHECK(oar_op_run_kernel(calls[i].op, fast[i], calls[i].in, calls[i].n_in, &again, 1, calls[i].attrs) == OAR_OK);
        CHECK(t_same_bits(again, got));
    }
    oar_scope_end();
    oar_set_num_threads(before);
}

/* conv2d_act on NHWC activations (the conv_nhwc pass's layout) with a residual and ReLU: equal
 * to the reference; and from AVX2 up oneDNN runs it on the NHWC data itself. With format "any"
 * AVX2 picked nChw8c and converted both ways around every conv (docs/cpu-isa.md). */
static void test_nhwc_direct(void) {
    const oar_kernel_entry *fast = kernel(OAR_OP_conv2d_act, "onednn"), *ref = kernel(OAR_OP_conv2d_act, "reference");
    if (!fast) return;
    CHECK(ref != NULL);
    oar_scope_begin();
    oar_manual_seed(5);
    const int64_t xs[4] = {5, 12, 12, 16}, ws[4] = {32, 16, 3, 3}, ys[4] = {5, 12, 12, 32};
    oar_tensor *x = oar_randn(xs, 4, OAR_F32), *w = oar_randn(ws, 4, OAR_F32), *b = oar_randn(ws, 1, OAR_F32);
    oar_tensor *r = oar_randn(ys, 4, OAR_F32), *got = oar_empty(ys, 4, OAR_F32), *want = oar_empty(ys, 4, OAR_F32);
    oar_attr a[6] = {oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_ints((int64_t[]){1, 1}, 2),
                     oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1), oar_attr_str("relu"), oar_attr_str("nhwc")};
    oar_tensor *in[4] = {x, w, b, r};
    int converts = oar_dnnl_conv_act_converts(in, got, a);
    CHECK(converts >= 0);
    if (oar_dnnl_isa() >= OAR_CPU_ISA_AVX2) CHECK(converts == 0);
    CHECK(oar_op_run_kernel(OAR_OP_conv2d_act, fast, in, 4, &got, 1, a) == OAR_OK);
    CHECK(ref && oar_op_run_kernel(OAR_OP_conv2d_act, ref, in, 4, &want, 1, a) == OAR_OK);
    CHECK(near_ref(got, want));
    oar_scope_end();
}

/* conv2d run by oneDNN's backward-data primitive on the transposed problem (conv_dnnl.c's
 * flip_rule: at oneDNN's AVX2 level, output of at most 16 channels and 32 columns, input of at
 * least 8 channels, or a 3 x 3 conv of 32-128 channels in and out at its measured widths;
 * stride 1, no bias): taken where the rule says, equal to the reference (a
 * weight misplaced by the flip or the transpose is off by O(1)), the same bits at 1 and 2
 * threads (a batch of 5: parts of 3 and 2 images) and with weights packed once (tracked
 * storage) or flipped in the call (untracked), and declined where the rule declines. */
typedef struct flip_case {
    int64_t n, ci, co, h, w, kh, kw, ph, pw, stride;
    bool bias, flips; /* flips: at oneDNN's AVX2 level */
} flip_case;

static void test_flipped_forward(void) {
    const oar_kernel_entry *fast = kernel(OAR_OP_conv2d, "onednn"), *ref = kernel(OAR_OP_conv2d, "reference");
    if (!fast) return;
    CHECK(ref != NULL);
    static const flip_case cases[] = {
        {5, 16, 16, 32, 32, 3, 3, 1, 1, 1, false, true},  /* ResNet-20's first stage */
        {5, 8, 8, 12, 20, 3, 5, 0, 2, 1, false, true},    /* pads 0 and k - 1 */
        {5, 12, 16, 9, 9, 3, 3, 0, 0, 1, false, true},    /* no padding: the flipped pads are 2 */
        {5, 16, 8, 10, 31, 5, 3, 2, 1, 1, false, true},   /* 5 x 3, 29 columns */
        {5, 64, 16, 8, 8, 3, 3, 1, 1, 1, false, true},
        {5, 3, 16, 16, 16, 3, 3, 1, 1, 1, false, false},  /* a stem: 3 input channels */
        {5, 16, 32, 16, 16, 3, 3, 1, 1, 1, false, false}, /* 32 output channels from 16 */
        {5, 32, 32, 16, 16, 3, 3, 1, 1, 1, false, true},  /* 32 -> 32 (ResNet-20's second stage) */
        {5, 64, 64, 8, 8, 3, 3, 1, 1, 1, false, true},    /* 64 -> 64 (its third) */
        {3, 96, 96, 7, 5, 3, 3, 0, 1, 1, false, true},    /* 96, pads 0 and 1 */
        {5, 32, 32, 32, 32, 3, 3, 1, 1, 1, false, false}, /* 32 -> 32 on 32 columns */
        {5, 128, 128, 8, 16, 3, 3, 1, 1, 1, false, false}, /* 128 on 16 columns */
        {5, 40, 40, 8, 8, 3, 3, 1, 1, 1, false, false},   /* 40 channels */
        {5, 32, 32, 8, 8, 5, 5, 2, 2, 1, false, false},   /* 5 x 5 with 32 channels */
        {5, 16, 16, 8, 40, 3, 3, 1, 1, 1, false, false},  /* 40 columns */
        {5, 16, 16, 16, 16, 3, 3, 1, 1, 1, true, false},  /* bias */
        {5, 16, 16, 16, 16, 3, 3, 1, 1, 2, false, false}, /* stride 2 */
    };
    int before = oar_get_num_threads();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const flip_case *fc = &cases[c];
        oar_scope_begin();
        oar_manual_seed(17 + (uint64_t)c);
        int64_t oh = (fc->h + 2 * fc->ph - fc->kh) / fc->stride + 1, ow = (fc->w + 2 * fc->pw - fc->kw) / fc->stride + 1;
        const int64_t xs[4] = {fc->n, fc->ci, fc->h, fc->w}, ws[4] = {fc->co, fc->ci, fc->kh, fc->kw},
                      ys[4] = {fc->n, fc->co, oh, ow};
        oar_tensor *x = oar_randn(xs, 4, OAR_F32), *w = oar_randn(ws, 4, OAR_F32);
        oar_tensor *b = fc->bias ? oar_randn(ws, 1, OAR_F32) : NULL;
        oar_attr a[4] = {oar_attr_ints((int64_t[]){fc->stride, fc->stride}, 2), oar_attr_ints((int64_t[]){fc->ph, fc->pw}, 2),
                         oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1)};
        oar_tensor *in[3] = {x, w, b}, *want = oar_empty(ys, 4, OAR_F32), *got[2] = {NULL, NULL};
        CHECK(oar_op_run_kernel(OAR_OP_conv2d, ref, in, 3, &want, 1, a) == OAR_OK);
        for (int t = 0; t < 2; t++) {
            CHECK(oar_set_num_threads(t + 1) == OAR_OK);
            /* the second run on untracked weights (a program's arena): flipped per call, not packed once */
            if (t == 1) w->storage->uid = 0;
            got[t] = oar_empty(ys, 4, OAR_F32);
            int flipped = oar_dnnl_conv_flipped(in, got[t], a);
            bool want_flip = fc->flips && oar_dnnl_isa() == OAR_CPU_ISA_AVX2;
            if (flipped != (int)want_flip)
                fprintf(stderr, "flip case %zu: flipped %d, expected %d\n", c, flipped, (int)want_flip);
            CHECK(flipped == (int)want_flip);
            CHECK(oar_op_run_kernel(OAR_OP_conv2d, fast, in, 3, &got[t], 1, a) == OAR_OK);
            if (!near_ref(got[t], want)) fprintf(stderr, "flip case %zu at %d threads: off the reference\n", c, t + 1);
            CHECK(near_ref(got[t], want));
        }
        CHECK(t_same_bits(got[0], got[1]));
        oar_scope_end();
    }
    oar_set_num_threads(before);
}

/* The dy one backward conv converted, taken by the other one when it runs next (conv_dnnl_memo.h):
 * taken for grad_input then grad_weight and the other way round, with the bits of a run that
 * converts itself; not taken when another kernel ran in between (here one that rewrote dy), when
 * dy's storage changed version without a kernel, or by the same op again. From oneDNN's AVX2
 * level up, where these primitives convert dy (16 channels: nChw8c, nChw16c). */
static void test_dy_kept(int threads) {
    const oar_kernel_entry *gi = kernel(OAR_OP_conv2d_grad_input, "onednn"),
                           *gw = kernel(OAR_OP_conv2d_grad_weight, "onednn"),
                           *gw_ref = kernel(OAR_OP_conv2d_grad_weight, "reference");
    if (!gi || !gw || !oar_dnnl_usable()) return;
    CHECK(gw_ref != NULL);
    int before = oar_get_num_threads();
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    oar_scope_begin();
    oar_manual_seed(23);
    const int64_t xs[4] = {5, 16, 12, 12}, ws[4] = {16, 16, 3, 3};
    oar_tensor *x = oar_randn(xs, 4, OAR_F32), *w = oar_randn(ws, 4, OAR_F32), *dy = oar_randn(xs, 4, OAR_F32);
    oar_attr c[4] = {oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_ints((int64_t[]){1, 1}, 2),
                     oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1)};
    oar_attr ai[5] = {oar_attr_ints(xs, 4), c[0], c[1], c[2], c[3]}, aw[5] = {oar_attr_ints(ws, 4), c[0], c[1], c[2], c[3]};
    const bool converts = oar_dnnl_isa() >= OAR_CPU_ISA_AVX2;
#define RUN_GI(o) CHECK(oar_op_run_kernel(OAR_OP_conv2d_grad_input, gi, (oar_tensor *[]){dy, w}, 2, &(o), 1, ai) == OAR_OK)
#define RUN_GW(o) CHECK(oar_op_run_kernel(OAR_OP_conv2d_grad_weight, gw, (oar_tensor *[]){x, dy}, 2, &(o), 1, aw) == OAR_OK)
    oar_tensor *dx[3], *dw[4], *other = oar_empty(xs, 4, OAR_F32), *want = oar_empty(ws, 4, OAR_F32);
    for (int i = 0; i < 3; i++) dx[i] = oar_empty(xs, 4, OAR_F32);
    for (int i = 0; i < 4; i++) dw[i] = oar_empty(ws, 4, OAR_F32);
    /* converted by each op itself: another kernel call between them */
    RUN_GI(dx[0]);
    CHECK(oar_op_run_kernel(OAR_OP_conv2d_grad_input, gi, (oar_tensor *[]){x, w}, 2, &other, 1, ai) == OAR_OK);
    int64_t taken = oar_dnnl_dy_taken();
    RUN_GW(dw[0]);
    CHECK(oar_dnnl_dy_taken() == taken);
    /* grad_input then grad_weight, and grad_weight then grad_input: taken, the same bits */
    RUN_GI(dx[1]);
    RUN_GW(dw[1]);
    CHECK(oar_dnnl_dy_taken() == taken + converts);
    RUN_GW(dw[2]);
    RUN_GI(dx[2]);
    CHECK(oar_dnnl_dy_taken() == taken + 2 * converts);
    CHECK(t_same_bits(dw[1], dw[0]) && t_same_bits(dw[2], dw[0]));
    CHECK(t_same_bits(dx[1], dx[0]) && t_same_bits(dx[2], dx[0]));
    /* the same op twice: not taken */
    RUN_GI(dx[1]);
    RUN_GI(dx[1]);
    CHECK(oar_dnnl_dy_taken() == taken + 2 * converts);
    /* dy rewritten in place by a kernel in between (negated): not taken, the new dy's gradient */
    RUN_GI(dx[1]);
    const oar_kernel_entry *neg = oar_select_kernel(OAR_OP_neg, &dy, 1, &dy, 1, NULL);
    CHECK(neg != NULL && oar_op_run_kernel(OAR_OP_neg, neg, &dy, 1, &dy, 1, NULL) == OAR_OK);
    RUN_GW(dw[3]);
    CHECK(oar_dnnl_dy_taken() == taken + 2 * converts);
    CHECK(oar_op_run_kernel(OAR_OP_conv2d_grad_weight, gw_ref, (oar_tensor *[]){x, dy}, 2, &want, 1, aw) == OAR_OK);
    CHECK(near_ref(dw[3], want));
    /* dy's storage at a new version, written without a kernel: not taken */
    RUN_GI(dx[1]);
    float *d = (float *)oar_tensor_ptr(dy);
    for (int64_t i = 0; i < dy->numel; i++) d[i] *= 0.5f;
    dy->storage->version++;
    RUN_GW(dw[3]);
    CHECK(oar_dnnl_dy_taken() == taken + 2 * converts);
    CHECK(oar_op_run_kernel(OAR_OP_conv2d_grad_weight, gw_ref, (oar_tensor *[]){x, dy}, 2, &want, 1, aw) == OAR_OK);
    CHECK(near_ref(dw[3], want));
#undef RUN_GI
#undef RUN_GW
    oar_scope_end();
    oar_set_num_threads(before);
}

/* A forward NHWC conv (conv2d_act, the imported CNNs' convs) of a batch smaller than the thread
 * count runs as row parts on the threads: the output bits are those of the 1-thread run (one
 * primitive per image), at 2 and 3 threads (3: a middle part without padding) and with a batch
 * of 2 at 3 threads (two parts per image). The shapes are resnet18's, mobilenet_v2's and
 * squeezenet1_1's convs at batch 1 (stems, strided, depthwise, 1x1, 7x7 maps) and others
 * (dilation, 5x5, no bias, heights that do not divide, bf16 where the CPU computes it). */
typedef struct rows_case {
    int64_t n, h, w, c, oc, kh, kw, s, p, d, g;
    bool bias, res;
    const char *act;
    bool bf16; /* on CPUs that compute bf16 natively, else skipped */
} rows_case;

static void run_nhwc(const rows_case *rc, oar_tensor *const *in, const oar_attr *a, int threads, oar_tensor **out,
                     int *rows) {
    bool bf16 = oar_dtype_of(in[0]) == OAR_BF16;
    const oar_kernel_entry *fast = kernel(OAR_OP_conv2d_act, bf16 ? OAR_IMPL_BF16_NATIVE : "onednn");
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    int64_t oh = (rc->h + 2 * rc->p - (rc->kh - 1) * rc->d - 1) / rc->s + 1;
    int64_t ow = (rc->w + 2 * rc->p - (rc->kw - 1) * rc->d - 1) / rc->s + 1;
    *out = oar_empty((int64_t[]){rc->n, oh, ow, rc->oc}, 4, oar_dtype_of(in[0]));
    *rows = oar_dnnl_conv_act_rows(in, *out, a);
    CHECK(oar_op_run_kernel(OAR_OP_conv2d_act, fast, in, 4, out, 1, a) == OAR_OK);
}

static void test_rows_bitwise(void) {
    const oar_kernel_entry *fast = kernel(OAR_OP_conv2d_act, "onednn"), *ref = kernel(OAR_OP_conv2d_act, "reference");
    if (!fast) return;
    static const rows_case cases[] = {
        {1, 224, 224, 3, 64, 7, 7, 2, 3, 1, 1, true, false, "relu"},     /* resnet18 stem */
        {1, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, true, true, "relu"},       /* resnet18 block */
        {1, 56, 56, 64, 128, 3, 3, 2, 1, 1, 1, true, false, "relu"},     /* resnet18 downsampling */
        {1, 56, 56, 64, 128, 1, 1, 2, 0, 1, 1, true, false, "none"},     /* its shortcut */
        {1, 7, 7, 512, 512, 3, 3, 1, 1, 1, 1, true, true, "relu"},       /* resnet18 last stage */
        {1, 224, 224, 3, 32, 3, 3, 2, 1, 1, 1, true, false, "relu6"},    /* mobilenet_v2 stem */
        {1, 56, 56, 144, 144, 3, 3, 1, 1, 1, 144, true, false, "relu6"}, /* depthwise */
        {1, 112, 112, 96, 96, 3, 3, 2, 1, 1, 96, true, false, "relu6"},  /* depthwise, stride 2 */
        {1, 112, 112, 32, 16, 1, 1, 1, 0, 1, 1, true, false, "none"},    /* 1x1 projection */
        {1, 14, 14, 64, 384, 1, 1, 1, 0, 1, 1, true, false, "relu6"},    /* 1x1 expansion */
        {1, 7, 7, 160, 960, 1, 1, 1, 0, 1, 1, true, false, "relu6"},     /* 1x1 on a 7x7 map */
        {1, 224, 224, 3, 64, 3, 3, 2, 0, 1, 1, true, false, "relu"},     /* squeezenet1_1 stem */
        {1, 55, 55, 128, 16, 1, 1, 1, 0, 1, 1, true, false, "relu"},     /* fire squeeze */
        {1, 55, 55, 16, 64, 3, 3, 1, 1, 1, 1, true, false, "relu"},      /* fire expand */
        {1, 13, 13, 512, 1000, 1, 1, 1, 0, 1, 1, true, false, "relu"},   /* classifier conv */
        {1, 17, 19, 24, 40, 3, 3, 1, 2, 2, 1, true, true, "relu"},       /* dilated */
        {1, 13, 9, 16, 24, 5, 5, 1, 2, 1, 1, false, false, "none"},      /* 5x5, no bias */
        {2, 23, 21, 32, 48, 3, 3, 1, 1, 1, 1, true, true, "relu6"},      /* a batch of 2 at 3 threads */
        {1, 28, 28, 64, 64, 3, 3, 1, 1, 1, 1, true, true, "relu", true},   /* bf16 */
        {1, 29, 29, 96, 96, 3, 3, 2, 1, 1, 96, true, false, "relu6", true}, /* bf16 depthwise */
    };
    int before = oar_get_num_threads();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const rows_case *rc = &cases[i];
        oar_scope_begin();
        oar_manual_seed(40 + (uint64_t)i);
        int64_t oh = (rc->h + 2 * rc->p - (rc->kh - 1) * rc->d - 1) / rc->s + 1;
        int64_t ow = (rc->w + 2 * rc->p - (rc->kw - 1) * rc->d - 1) / rc->s + 1;
        if (rc->bf16 && !oar_cpu_bf16_native()) continue;
        oar_dtype dt = rc->bf16 ? OAR_BF16 : OAR_F32;
        oar_tensor *x = oar_cast(oar_randn((int64_t[]){rc->n, rc->h, rc->w, rc->c}, 4, OAR_F32), dt);
        oar_tensor *w = oar_cast(oar_randn((int64_t[]){rc->oc, rc->c / rc->g, rc->kh, rc->kw}, 4, OAR_F32), dt);
        oar_tensor *b = rc->bias ? oar_cast(oar_randn((int64_t[]){rc->oc}, 1, OAR_F32), dt) : NULL;
        oar_tensor *r = rc->res ? oar_cast(oar_randn((int64_t[]){rc->n, oh, ow, rc->oc}, 4, OAR_F32), dt) : NULL;
        oar_attr a[6] = {oar_attr_ints((int64_t[]){rc->s, rc->s}, 2), oar_attr_ints((int64_t[]){rc->p, rc->p}, 2),
                         oar_attr_ints((int64_t[]){rc->d, rc->d}, 2), oar_attr_int(rc->g), oar_attr_str(rc->act),
                         oar_attr_str("nhwc")};
        oar_tensor *in[4] = {x, w, b, r}, *one, *two, *three;
        int rows1, rows2, rows3;
        run_nhwc(rc, in, a, 1, &one, &rows1);
        run_nhwc(rc, in, a, rc->n == 1 ? 2 : 3, &two, &rows2);
        run_nhwc(rc, in, a, 3 * (int)rc->n, &three, &rows3);
        CHECK(rows1 == 1);
        /* cut wherever oneDNN runs its AVX2 or AVX-512 kernels (they take every part with the
         * whole's code); below, the parts may run other code than the whole, and then the call
         * is not cut */
        if (oar_dnnl_isa() >= OAR_CPU_ISA_AVX2) CHECK(rows2 == 2 && rows3 == 3);
        CHECK(rows2 == 1 || rows2 == 2);
        CHECK(t_same_bits(one, two));
        CHECK(t_same_bits(one, three));
        if (rows2 != 2 || !t_same_bits(one, two) || !t_same_bits(one, three))
            fprintf(stderr, "  case %zu: rows %d %d %d\n", i, rows1, rows2, rows3);
        /* and right: the reference where it is quick (under ~30 MFLOP) */
        if (ref && !rc->bf16 && rc->n * oh * ow * rc->oc * (rc->c / rc->g) * rc->kh * rc->kw < 15000000) {
            oar_tensor *want = oar_empty((int64_t[]){rc->n, oh, ow, rc->oc}, 4, OAR_F32);
            CHECK(oar_op_run_kernel(OAR_OP_conv2d_act, ref, in, 4, &want, 1, a) == OAR_OK);
            CHECK(near_ref(three, want));
        }
        oar_scope_end();
    }
    oar_set_num_threads(before);
}

int main(void) {
    test_transposes();
#ifdef OAR_HAVE_ONEDNN
    test_layout_check();
#endif
    test_against_reference(1);
    test_against_reference(2);
    test_nhwc_direct();
    test_flipped_forward();
    test_dy_kept(1);
    test_dy_kept(2);
    test_rows_bitwise();
    return test_summary("test_conv_dnnl");
}
