/* bf16 convolutions on CPUs without native bf16 (conv_dnnl.c, key io16): bf16 storage around
 * oneDNN's f32 primitives, the activations widened and rounded inside the layout conversions.
 *   - where oneDNN's f32 kernel runs and the CPU (or the cap) has no native bf16, the bf16 calls
 *     run this kernel, not via-f32;
 *   - conv2d (bias or not), conv2d_act (relu, bias), conv2d_grad_input and conv2d_grad_weight
 *     give the bits of the f32 op on widened inputs, rounded (what via-f32 gives), for channel
 *     counts our transposes take (16, 32, 64) and ones they do not (3: an f32 copy), planes with
 *     vector tails (9x9), stride 2, groups, batches that split unevenly over the pool.
 * Run natively (native bf16 where the CPU has it: only the impl is reported) and capped at
 * avx2 (ctest's _avx2), where the kernel is checked. */
#include "kernels/cpu/bf16_native.h"
#include "ops/op.h"
#include "test_util.h"

#include <string.h>

typedef struct ccase {
    int64_t x[4], w[4];
    int64_t stride, pad, groups;
    bool bias;
} ccase;

static const char *impl_of(oar_op_id op, oar_tensor *const *in, int n_in, oar_tensor *out, const oar_attr *a) {
    const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, &out, 1, a);
    oar_clear_error();
    return k ? k->impl : "none";
}

static oar_tensor *randn_bf16(const int64_t *shape, int nd) {
    return oar_cast(oar_randn(shape, nd, OAR_F32), OAR_BF16);
}

/* op on the bf16 inputs and on their f32 copies, the latter rounded: same bits when the
 * storage kernel runs. Returns the number of differing results (0 or 1). */
static int compare(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *a, int *storage_runs,
                   bool expect_storage) {
    oar_tensor *wide[4] = {0};
    for (int i = 0; i < n_in; i++) wide[i] = in[i] ? oar_cast(in[i], OAR_F32) : NULL;
    oar_tensor *y = oar_op_call1(op, in, n_in, a), *yf = oar_op_call1(op, wide, n_in, a);
    CHECK(y && yf);
    if (!y || !yf) return 1;
    const char *impl = impl_of(op, in, n_in, y, a);
    bool storage = strcmp(impl, OAR_IMPL_BF16_STORAGE) == 0;
    *storage_runs += storage;
    if (expect_storage && !storage) {
        fprintf(stderr, "%s: expected the %s kernel, got %s\n", oar_op_table[op]->name, OAR_IMPL_BF16_STORAGE, impl);
        return 1;
    }
    return storage && !t_same_bits(y, oar_cast(yf, OAR_BF16));
}

static void check_case(const ccase *c) {
    oar_scope_begin();
    const int64_t co = c->w[0];
    oar_tensor *x = randn_bf16(c->x, 4), *w = randn_bf16(c->w, 4), *b = c->bias ? randn_bf16(&co, 1) : NULL;
    int64_t s[2] = {c->stride, c->stride}, p[2] = {c->pad, c->pad}, d[2] = {1, 1};
    oar_attr conv[6] = {oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(d, 2), oar_attr_int(c->groups),
                        oar_attr_str("relu"), oar_attr_str("nchw")};
    /* expected: oneDNN runs f32 here and the CPU computes no bf16 itself */
    oar_tensor *xf = oar_cast(x, OAR_F32), *wf = oar_cast(w, OAR_F32);
    oar_tensor *yf = oar_op_call1(OAR_OP_conv2d, (oar_tensor *[]){xf, wf, NULL}, 3, conv);
    CHECK(yf != NULL);
    bool expect = yf && !oar_cpu_bf16_native() &&
                  !strcmp(impl_of(OAR_OP_conv2d, (oar_tensor *[]){xf, wf, NULL}, 3, yf, conv), "onednn");
    int diffs = 0, runs = 0;
    diffs += compare(OAR_OP_conv2d, (oar_tensor *[]){x, w, b}, 3, conv, &runs, expect);
    diffs += compare(OAR_OP_conv2d_act, (oar_tensor *[]){x, w, b, NULL}, 4, conv, &runs, expect);
    oar_tensor *gy = yf ? randn_bf16(yf->shape, 4) : NULL;
    oar_attr gi[5] = {oar_attr_ints(c->x, 4), conv[0], conv[1], conv[2], conv[3]};
    oar_attr gw[5] = {oar_attr_ints(c->w, 4), conv[0], conv[1], conv[2], conv[3]};
    if (gy) {
        diffs += compare(OAR_OP_conv2d_grad_input, (oar_tensor *[]){gy, w}, 2, gi, &runs, expect);
        /* oneDNN's weight gradient is off in deterministic mode: then neither kernel is it */
        diffs += compare(OAR_OP_conv2d_grad_weight, (oar_tensor *[]){x, gy}, 2, gw, &runs,
                         expect && !oar_get_deterministic());
    }
    CHECK(diffs == 0);
    printf("  x [%lld, %lld, %lld, %lld], w [%lld, %lld, %lld, %lld], stride %lld, groups %lld%s: %d of 4 calls on "
           "the storage kernel (expected %s), %d differences\n",
           (long long)c->x[0], (long long)c->x[1], (long long)c->x[2], (long long)c->x[3], (long long)c->w[0],
           (long long)c->w[1], (long long)c->w[2], (long long)c->w[3], (long long)c->stride, (long long)c->groups,
           c->bias ? ", bias" : "", runs, expect ? "all" : "none", diffs);
    oar_scope_end();
}

int main(void) {
    oar_manual_seed(3);
    printf("isa %s, native bf16 %s\n", oar_cpu_isa_name(oar_get_cpu_isa()), oar_cpu_bf16_native() ? "yes" : "no");
    const ccase cases[] = {
        {{4, 16, 9, 9}, {16, 16, 3, 3}, 1, 1, 1, false},  /* our transposes both ways, pixel tails */
        {{3, 3, 10, 10}, {16, 3, 3, 3}, 1, 1, 1, true},   /* 3 channels in: an f32 copy of x */
        {{5, 32, 8, 8}, {64, 32, 1, 1}, 2, 0, 1, false},  /* the downsampling shortcut, an odd batch */
        {{2, 16, 7, 7}, {16, 8, 3, 3}, 1, 1, 2, true},    /* groups */
        {{32, 16, 32, 32}, {16, 16, 3, 3}, 1, 1, 1, false}, /* resnet20's first stage */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    return test_summary("test_amp_conv_storage");
}
