/* The optimizer_update_multi op: the optimizer_update of several parameters of one kind as
 * one op, made by the fuse_all_optimizer_ops pass (src/graph/passes/fuse_optimizer.c) so a
 * compiled step runs all its updates as one instruction and one thread-pool dispatch.
 *
 * Inputs. Op definitions mark the inputs written in place with a 32-bit mask, so everything
 * the op writes sits in inputs 0..31: per parameter in order, param, hyper, then the state
 * slots the `slots` attribute lists (bit s: oar_slot s), in oar_slot order; the entries after
 * the last parameter are NULL. Inputs 32 on are the gradients, one per parameter, in the same
 * order: n_in = 32 + parameters. Attributes: kind (as optimizer_update), slots.
 *
 * Results are those of the optimizer_update calls one after another: each parameter's loop
 * is the same (optim/update_impl.h), and no two parameters share memory (inference checks
 * what it can see, the pass checks the program). Every parameter's hyperparameters are
 * checked before anything is written. The reference runs the updates one by one; the fused
 * kernel (src/kernels/cpu/optim_multi.c) runs them in one dispatch split by total elements. */
#include "ops/op.h"
#include "optim/optim.h"

#include <stdio.h>
#include <string.h>

#define NAME "optimizer_update_multi"
#define N_KINDS (OAR_OPTIM_RPROP + 1)

void oar_optim_multi_single(oar_tensor *const *in, int n_in, int64_t slots, int i, oar_tensor *one[3 + OAR_SLOT_COUNT]) {
    int g = oar_optim_multi_group(slots), at = i * g + 2;
    one[0] = in[i * g];
    one[1] = in[OAR_OPTIM_MULTI_STATE + i];
    one[2] = in[i * g + 1];
    for (int s = 0; s < OAR_SLOT_COUNT; s++) one[3 + s] = (slots >> s) & 1 ? in[at++] : NULL;
    (void)n_in;
}

static bool overlap(const oar_tensor *a, const oar_tensor *b) {
    return a && b && a->storage && a->storage == b->storage;
}

static oar_status multi_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)out;
    int64_t kind = a[0].i, slots = a[1].i;
    if (kind < 0 || kind >= N_KINDS)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME,
                        "expected kind in [0, %d] (OAR_OPTIM_SGD to OAR_OPTIM_RPROP), got %lld", N_KINDS - 1,
                        (long long)kind);
    if (slots < 0 || slots >= (1 << OAR_SLOT_COUNT))
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected slots to be a mask of the %d state slots, got %lld",
                        OAR_SLOT_COUNT, (long long)slots);
    int n = n_in - OAR_OPTIM_MULTI_STATE, g = oar_optim_multi_group(slots);
    if (n < 1)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected %d state inputs then one gradient per parameter, got %d "
                        "inputs", OAR_OPTIM_MULTI_STATE, n_in);
    if (n * g > OAR_OPTIM_MULTI_STATE)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected at most %d parameters with %d state inputs each, got %d "
                        "gradients", OAR_OPTIM_MULTI_STATE / g, g, n);
    for (int k = 0; k < OAR_OPTIM_MULTI_STATE; k++)
        if ((k < n * g) != (in[k] != NULL))
            return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected input %d to be %s (%d parameters of %d state inputs), "
                            "got %s", k, k < n * g ? "a tensor" : "absent", n, g, in[k] ? "a tensor" : "none");
    oar_attr kind_attr = oar_attr_int(kind);
    for (int i = 0; i < n; i++) {
        oar_tensor *one[3 + OAR_SLOT_COUNT];
        oar_optim_multi_single(in, n_in, slots, i, one);
        oar_meta m[1];
        int n1 = 1;
        oar_status st = oar_opdef_optimizer_update.infer(one, 3 + OAR_SLOT_COUNT, &kind_attr, m, &n1);
        if (st != OAR_OK) {
            oar_error_prefix(NAME ": parameter %d", i);
            return st;
        }
    }
    /* updates one after another see each other's writes; in one pass they must not share memory */
    for (int k = 0; k < n * g; k++)
        for (int j = 0; j < k; j++)
            if (overlap(in[k], in[j]))
                return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected state inputs in distinct memory, got inputs %d and "
                                "%d sharing a buffer", j, k);
    *n_out = 0;
    return OAR_OK;
}

oar_status oar_optim_multi_read(oar_tensor *const *in, int n_in, oar_optim_kind kind, int64_t slots, oar_optim_opts *o,
                                oar_optim_update *u) {
    int n = n_in - OAR_OPTIM_MULTI_STATE;
    const double *prev = NULL;
    for (int i = 0; i < n; i++) {
        oar_tensor *one[3 + OAR_SLOT_COUNT];
        oar_optim_multi_single(in, n_in, slots, i, one);
        /* parameters of one group hold the same options: those checked for the previous
         * parameter (the same kind and slots) hold for this one */
        const double *h = (const double *)oar_tensor_ptr(one[2]);
        if (prev && !memcmp(h, prev, sizeof(double) * OAR_HYPER_FRESH_MOMENTUM) &&
            !memcmp(h + OAR_HYPER_MAXIMIZE, prev + OAR_HYPER_MAXIMIZE,
                    sizeof(double) * (OAR_HYPER_COUNT - OAR_HYPER_MAXIMIZE))) {
            oar_optim_update_fill(one, u[i - 1].o, &u[i]);
            continue;
        }
        prev = h;
        oar_status st = oar_optim_update_read(kind, one, &o[i], &u[i]);
        if (st != OAR_OK) {
            oar_error_prefix(NAME ": parameter %d", i);
            return st;
        }
    }
    return OAR_OK;
}

void oar_optim_multi_commit(oar_tensor *const *in, int n_in, int64_t slots, const oar_optim_update *u) {
    int g = oar_optim_multi_group(slots);
    for (int i = 0; i < n_in - OAR_OPTIM_MULTI_STATE; i++) {
        oar_tensor *one[3] = {in[i * g], NULL, in[i * g + 1]}; /* what commit reads: param and hyper */
        oar_optim_update_commit(&u[i], one);
    }
}

/* The updates one by one, as the optimizer_update calls they replace. */
static oar_status multi_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx;
    (void)out;
    (void)n_out;
    oar_optim_opts o[OAR_OPTIM_MULTI_MAX];
    oar_optim_update u[OAR_OPTIM_MULTI_MAX];
    oar_status st = oar_optim_multi_read(in, n_in, (oar_optim_kind)a[0].i, a[1].i, o, u);
    if (st != OAR_OK) return st;
    for (int i = 0; i < n_in - OAR_OPTIM_MULTI_STATE; i++) {
        if (in[i * oar_optim_multi_group(a[1].i)]->dtype == OAR_F32) oar_optim_update_f32(&u[i]);
        else oar_optim_update_f64(&u[i]);
    }
    oar_optim_multi_commit(in, n_in, a[1].i, u);
    return OAR_OK;
}

const oar_op_def oar_opdef_optimizer_update_multi = {
    .name = NAME, .n_inputs = -1, .n_outputs = 0, .key_input = 0,
    .n_attrs = 2, .attrs = {{"kind", OAR_ATTR_INT}, {"slots", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .optional_inputs = 0xffffffffu,  /* the state region's tail */
    .mutated_inputs = 0xffffffffu,   /* the state region: params, hypers, slots */
    /* hypers and step counts stay on the host (as optimizer_update's); their positions depend
     * on the slots attribute, so the whole state region may be on the host and the kernels
     * check which tensor is where (the CUDA one refuses a param or slot on the host) */
    .host_inputs = 0xffffffffu,
    .infer = multi_infer, .reference = multi_ref,
};
