/* The x86 max_pool2d_nhwc kernels (src/kernels/cpu/pool_nhwc_x86.c) give the reference's bits
 * on every path the ISA cap leaves (native: AVX-512 and AVX2; avx2: AVX2; generic: none, the
 * reference against itself): one max per tap with a NaN mask, a window holding a NaN redone by
 * the reference's rule. The op sweep compares within a tolerance; this compares bytes, on
 *  - squeezenet's pooling shape (3x3, stride 2, ceil_mode) at 64 channels, random values;
 *  - ties of +0 and -0 (the first of equal values wins: the bits tell which);
 *  - quiet NaNs of different payloads (the last NaN of a window wins) and infinities, at 35
 *    channels (AVX-512's masked block, AVX2's scalar tail), with padding and dilation. */
#include "test_util.h"

#include "kernels/cpu/cpu_kernels.h"
#include "ops/op.h"
#include "tensor/tensor.h"

#include <stdint.h>

static uint32_t g_state = 12345;
static uint32_t next_u32(void) {
    g_state = g_state * 1664525u + 1013904223u;
    return g_state >> 8;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

enum { VALUES_RANDOM, VALUES_ZEROS, VALUES_NANS };

static void fill(oar_tensor *x, int kind) {
    float *p = (float *)oar_tensor_ptr(x);
    for (int64_t i = 0; i < x->numel; i++) {
        uint32_t r = next_u32();
        float v = (float)(r % 2001) / 100.0f - 10.0f;
        if (kind == VALUES_ZEROS) v = (r & 1) ? -0.0f : 0.0f;
        if (kind == VALUES_NANS) {
            uint32_t k = r % 20;
            if (k == 0) v = bits_float(0x7fc00000u | (r & 0x3fffffu)); /* quiet NaNs, payloads differ */
            else if (k == 1) v = bits_float(0xffc00001u + (r & 0xffu));
            else if (k == 2) v = INFINITY;
            else if (k == 3) v = -INFINITY;
        }
        p[i] = v;
    }
}

/* Every registered fast kernel that supports x (under the cap) against the reference, bytes. */
static int check_case(const int64_t *xs, const int64_t *k, const int64_t *s, const int64_t *pad, const int64_t *d,
                      int ceil_mode, int kind) {
    oar_tensor *x = oar_empty(xs, 4, OAR_F32);
    fill(x, kind);
    oar_attr a[5] = {oar_attr_ints(k, 2), oar_attr_ints(s, 2), oar_attr_ints(pad, 2), oar_attr_ints(d, 2),
                     oar_attr_int(ceil_mode)};
    oar_meta m;
    int n_out = 1;
    CHECK(oar_op_infer(OAR_OP_max_pool2d_nhwc, &x, 1, a, &m, &n_out) == OAR_OK);
    const oar_kernel_entry *ks;
    int nk = oar_op_kernels(OAR_OP_max_pool2d_nhwc, &ks), ran = 0;
    const oar_kernel_entry *ref = NULL;
    for (int i = 0; i < nk; i++)
        if (!strcmp(ks[i].impl, "reference")) ref = &ks[i];
    CHECK(ref != NULL);
    oar_tensor *want = oar_empty(m.shape, m.ndim, OAR_F32);
    CHECK(oar_op_run_kernel(OAR_OP_max_pool2d_nhwc, ref, &x, 1, &want, 1, a) == OAR_OK);
    for (int i = 0; i < nk; i++) {
        if (&ks[i] == ref || ks[i].device != OAR_CPU || !(ks[i].dtypes & OAR_DTYPE_BIT(OAR_F32))) continue;
        oar_tensor *got = oar_full(m.shape, m.ndim, 99.0, OAR_F32);
        if (ks[i].supports && !ks[i].supports(&x, 1, &got, 1, a)) continue;
        CHECK(oar_op_run_kernel(OAR_OP_max_pool2d_nhwc, &ks[i], &x, 1, &got, 1, a) == OAR_OK);
        bool same = t_same_bits(got, want);
        if (!same) fprintf(stderr, "max_pool2d_nhwc %s: bits differ from the reference (values kind %d)\n", ks[i].impl, kind);
        CHECK(same);
        ran++;
    }
    return ran;
}

int main(void) {
    oar_scope_begin();
    int ran = 0;
    for (int threads = 1; threads <= 2; threads++) {
        CHECK(oar_set_num_threads(threads) == OAR_OK);
        for (int kind = VALUES_RANDOM; kind <= VALUES_NANS; kind++) {
            ran += check_case((int64_t[]){2, 23, 23, 64}, (int64_t[]){3, 3}, (int64_t[]){2, 2}, (int64_t[]){0, 0},
                              (int64_t[]){1, 1}, 1, kind);
            ran += check_case((int64_t[]){1, 9, 8, 35}, (int64_t[]){3, 2}, (int64_t[]){1, 3}, (int64_t[]){1, 1},
                              (int64_t[]){2, 3}, 0, kind);
            ran += check_case((int64_t[]){3, 6, 7, 19}, (int64_t[]){2, 2}, (int64_t[]){1, 1}, (int64_t[]){0, 0},
                              (int64_t[]){1, 1}, 1, kind);
        }
    }
    /* the kernels the cap leaves ran: two at native AVX-512, one at avx2, none at generic */
    const char *cap = getenv("OAR_CPU_ISA");
    printf("max_pool2d_nhwc: %d fast-kernel runs compared bit for bit (cap %s)\n", ran, cap ? cap : "native");
    if (oar_cpu_has_avx2()) CHECK(ran > 0);
    oar_scope_end();
    return test_summary("test_pool_nhwc");
}
