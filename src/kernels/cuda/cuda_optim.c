/* CUDA kernels of the optimizer ops (src/optim/update_op.c, update_multi_op.c, norm_op.c):
 * optimizer_update, optimizer_update_multi and vector_norm; f32 and f64 parameters. The hyper
 * tensor and the step count stay in host memory (the ops' host_inputs): they are read and
 * written here on the host, exactly as the CPU path does (oar_optim_update_read / _commit),
 * and the per-step scalars are computed by the CPU's own plan (oar_optim_plan_f32/f64), so
 * both devices use the same values; only the element loops run on the GPU. In a CUDA graph
 * (ctx->params, op.h) the kernels read those scalars from a device copy the executor refreshes
 * before each replay, so the update records with the rest of the step. */
#include "cuda_backend.h"
#include "launch_optim.h"
#include "optim/optim.h"

#define F32_F64 (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))
#define IN_HYPER 2
#define IN_SLOT0 3

static int cu_kind(oar_optim_kind k) {
    switch (k) {
    case OAR_OPTIM_SGD: return OAR_CU_OPT_SGD;
    case OAR_OPTIM_ADAM:
    case OAR_OPTIM_ADAMW: return OAR_CU_OPT_ADAM;
    case OAR_OPTIM_RMSPROP: return OAR_CU_OPT_RMSPROP;
    case OAR_OPTIM_ADAGRAD: return OAR_CU_OPT_ADAGRAD;
    case OAR_OPTIM_LAMB: return OAR_CU_OPT_LAMB;
    default: return -1; /* the CPU-only kinds (Adadelta to Rprop): refused by the supports functions */
    }
}

/* The scalars and pointers of one parameter's loops (u from oar_optim_update_read), computed by
 * the CPU's own plan. */
static oar_cu_optim plan_of(oar_dtype dt, const oar_optim_update *u) {
    oar_optim_plan pl;
    double sums[2 * OAR_OPTIM_MAX_BLOCKS]; /* the CPU plan points LAMB's sums here; unused */
    if (dt == OAR_F32) oar_optim_plan_f32(u, &pl, sums);
    else oar_optim_plan_f64(u, &pl, sums);
    const oar_optim_ctx *c = &pl.c;
    return (oar_cu_optim){
        .kind = cu_kind(u->o->kind), .dtype = (int)dt, .n = u->n, .p = c->p, .g = c->g, .a = c->a, .b = c->b,
        .c = c->c,
        .v = {.lr_neg = c->lr_neg, .wd = c->wd, .k1 = c->k1, .k1c = c->k1c, .k2 = c->k2, .k2c = c->k2c,
              .eps = c->eps, .scale = c->scale, .bc1 = c->bc1, .bc2 = c->bc2, .lr = u->o->lr, .wd_on = c->wd_on,
              .flag1 = c->flag1, .flag2 = c->flag2, .flag3 = c->flag3},
    };
}

_Static_assert(sizeof(oar_cu_optim_vals) <= OAR_KPARAMS_PER_INPUT, "a parameter's scalars fit its input's share");

/* A graph run's values: each parameter's scalars, which PREPARE writes and LAUNCH reads. */
static oar_status check_params(const oar_kparams *kp, const char *name, int n) {
    size_t need = sizeof(oar_cu_optim_vals) * (size_t)n;
    if (need <= kp->cap) return OAR_OK;
    return oar_error(OAR_ERR_INTERNAL, "%s: a graph run's values take %zu bytes for %d parameters, the executor "
                                       "gave %zu; this is a bug in the executor",
                     name, need, n, kp->cap);
}

/* One run of n parameters' updates (u[i] of dtype dt[i]). A plain call launches with the
 * scalars as arguments and commits the step on the host; a graph's PREPARE only computes the
 * scalars into the executor's host buffer (the host side: the caller commits); its LAUNCH
 * records kernels reading them from the device copy. */
static oar_status run_updates(const oar_kctx *ctx, const char *name, const oar_optim_update *u,
                              const oar_dtype *dt, int n) {
    oar_kparams *kp = ctx->params;
    if (kp && check_params(kp, name, n) != OAR_OK) return oar_last_status();
    if (kp && kp->phase == OAR_KPARAMS_PREPARE) {
        oar_cu_optim_vals *hv = kp->host;
        for (int i = 0; i < n; i++) hv[i] = plan_of(dt[i], &u[i]).v;
        kp->used = sizeof(oar_cu_optim_vals) * (size_t)n;
        return OAR_OK;
    }
    bool lamb = u[0].o->kind == OAR_OPTIM_LAMB;
    size_t sb = oar_cu_optim_scratch_bytes();
    void *scratch = lamb ? oar_cuda_scratch(sb) : NULL;
    if (lamb && !scratch) return oar_last_status();
    oar_status st = OAR_OK;
    for (int i = 0; i < n && st == OAR_OK; i++) { /* scratch reuse is stream-ordered */
        oar_cu_optim q = plan_of(dt[i], &u[i]);
        if (kp) q.v_dev = (const oar_cu_optim_vals *)kp->dev + i;
        st = oar_cuda_status((cudaError_t)oar_cu_optim_update(&q, scratch, oar_cuda_stream_of(ctx)), name);
    }
    if (scratch) oar_cuda_scratch_free(scratch, sb);
    return st;
}

static oar_status cu_optimizer_update(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out;
    oar_optim_opts o;
    oar_optim_update u;
    oar_status st = oar_optim_update_read((oar_optim_kind)a[0].i, in, &o, &u);
    if (st != OAR_OK) return st;
    oar_dtype dt = in[0]->dtype;
    st = run_updates(ctx, "optimizer_update", &u, &dt, 1);
    if (st == OAR_OK && (!ctx->params || ctx->params->phase == OAR_KPARAMS_PREPARE)) oar_optim_update_commit(&u, in);
    return st;
}

static oar_status cu_optimizer_update_multi(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                            oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)out; (void)n_out;
    oar_optim_opts o[OAR_OPTIM_MULTI_MAX];
    oar_optim_update u[OAR_OPTIM_MULTI_MAX];
    oar_dtype dt[OAR_OPTIM_MULTI_MAX];
    oar_optim_kind kind = (oar_optim_kind)a[0].i;
    oar_status st = oar_optim_multi_read(in, n_in, kind, a[1].i, o, u);
    if (st != OAR_OK) return st;
    int g = oar_optim_multi_group(a[1].i), n = n_in - OAR_OPTIM_MULTI_STATE;
    for (int i = 0; i < n; i++) dt[i] = in[i * g]->dtype;
    st = run_updates(ctx, "optimizer_update_multi", u, dt, n);
    if (st == OAR_OK && (!ctx->params || ctx->params->phase == OAR_KPARAMS_PREPARE))
        oar_optim_multi_commit(in, n_in, a[1].i, u);
    return st;
}

static oar_status cu_vector_norm(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    size_t sb = oar_cu_optim_scratch_bytes();
    void *scratch = oar_cuda_scratch(sb);
    if (!scratch) return oar_last_status();
    int e = oar_cu_vector_norm((int)x->dtype, x->numel ? oar_tensor_ptr(x) : NULL, x->numel, a[0].f,
                               (double *)oar_tensor_ptr(out[0]), scratch, oar_cuda_stream_of(ctx));
    oar_cuda_scratch_free(scratch, sb);
    return oar_cuda_status((cudaError_t)e, "vector_norm");
}

/* ---- supports: param, grad and the state slots on the GPU; hyper and step on the host. */
static bool one_on_devices(oar_tensor *const *one) {
    for (int i = 0; i < 3 + OAR_SLOT_COUNT; i++) {
        const oar_tensor *t = one[i];
        if (!t) continue;
        bool host = i == IN_HYPER || (i >= IN_SLOT0 && oar_slot_is_scalar(i - IN_SLOT0));
        if (t->device != (host ? OAR_CPU : OAR_CUDA)) return false;
    }
    return true;
}
static bool sup_update(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out;
    return !oar_optim_kind_cpu_only((oar_optim_kind)a[0].i) && one_on_devices(in);
}
static bool sup_update_multi(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)out; (void)n_out;
    int n = n_in - OAR_OPTIM_MULTI_STATE;
    if (n < 1 || n > OAR_OPTIM_MULTI_MAX || oar_optim_kind_cpu_only((oar_optim_kind)a[0].i)) return false;
    for (int i = 0; i < n; i++) {
        oar_tensor *one[3 + OAR_SLOT_COUNT];
        oar_optim_multi_single(in, n_in, a[1].i, i, one);
        if (!one[0] || !one[1] || !one[2] || !one_on_devices(one)) return false;
    }
    return true;
}
static bool sup_norm(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)a;
    return n_out == 1 && out[0]->dtype == OAR_F64 && out[0]->device == OAR_CUDA;
}

void oar_cuda_register_optim(void) {
    oar_cuda_register_graphed(OAR_OP_optimizer_update, F32_F64, cu_optimizer_update, sup_update);
    oar_cuda_register_graphed(OAR_OP_optimizer_update_multi, F32_F64, cu_optimizer_update_multi, sup_update_multi);
    oar_cuda_register(OAR_OP_vector_norm, F32_F64, cu_vector_norm, sup_norm);
}
