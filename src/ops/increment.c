/* increment(t): t += 1 in place, no outputs. Integer tensors only (counters such as BatchNorm's
 * num_batches_tracked); the input must be contiguous because it is written where it lives,
 * never in a copy. The op is effectful (mutated_inputs), so passes keep every call and never
 * merge two of them. One scalar in practice: the reference kernel is the only kernel. */
#include "ops/increment.h"

#include "ops/op.h"

static oar_status increment_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    (void)a;
    (void)out;
    const oar_tensor *t = in[0];
    if (!(OAR_INT_DTYPES & OAR_DTYPE_BIT(t->dtype)))
        return OAR_FAIL(OAR_ERR_DTYPE, "increment", "expected an integer tensor (i8, u8, i32 or i64), got %s",
                        oar_dtype_name(t->dtype));
    if (!t->contiguous)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, "increment", "expected a contiguous tensor (it is updated in place), "
                                                          "got a strided view");
    *n_out = 0;
    return OAR_OK;
}

static oar_status increment_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)ctx;
    (void)n_in;
    (void)out;
    (void)n_out;
    (void)a;
    oar_tensor *t = in[0];
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    char *p = oar_tensor_ptr(t);
    for (int64_t i = 0; i < t->numel; i++) {
        char *e = p + i * (int64_t)tr->size;
        /* through u64 so the largest value wraps instead of overflowing a signed int */
        tr->store_i64(e, (int64_t)((uint64_t)tr->load_i64(e) + 1u));
    }
    t->storage->version++; /* an in-place write: autograd and the executor see it */
    return OAR_OK;
}

const oar_op_def oar_opdef_increment = {
    .name = "increment", .n_inputs = 1, .n_outputs = 0,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_INT_DTYPES,
    .unsaved_inputs = 0x1, .mutated_inputs = 0x1,
    .infer = increment_infer, .reference = increment_ref,
};

oar_status oar_increment_(oar_tensor *t) {
    oar_tensor *in[1] = {t}, *out[1];
    int n_out = 1;
    return oar_op_call(OAR_OP_increment, in, 1, NULL, out, &n_out);
}
