/* The optimizer_update op: one parameter's whole update (every kind), in place, as one
 * registered op, so the same call runs eagerly and is recorded by the tracer of the static
 * graph. It lives with the optimizers (it runs their fused loops, update_impl.h) and is listed
 * in src/ops/optim.def, so the ops layer does not depend on this one.
 *
 * Inputs: 0 param, 1 grad, 2 hyper (f64 [OAR_HYPER_COUNT]: the group's options and SGD's
 * fresh-buffer flag, see optim.h), then the state slots in oar_slot order: 3 step (i64 scalar),
 * 4 momentum_buffer, 5 exp_avg, 6 exp_avg_sq, 7 max_exp_avg_sq, 8 square_avg, 9 grad_avg,
 * 10 sum, 11 acc_delta, 12 exp_inf, 13 mu_product, 14 eta, 15 mu, 16 ax, 17 prev, 18 step_size;
 * a slot the kind never uses must be NULL. Attribute: kind. No outputs. The kernel writes param
 * and the slots, increments step, updates the scalar slots and clears the hyper's fresh flag
 * once it has filled SGD's buffer; everything that changes between steps is read from these tensors when
 * the kernel runs, nothing from the host. */
#include "ops/op.h"
#include "optim/optim.h"

#include <math.h>
#include <string.h>

#define NAME "optimizer_update"
#define IN_PARAM 0
#define IN_GRAD 1
#define IN_HYPER 2
#define IN_SLOT0 3
#define N_IN (IN_SLOT0 + OAR_SLOT_COUNT)
#define N_KINDS (OAR_OPTIM_RPROP + 1)

/* Slots a kind may use under some options, and those it always uses. */
static bool kind_may_use(oar_optim_kind k, int s) {
    switch (k) {
    case OAR_OPTIM_SGD: return s == OAR_SLOT_MOMENTUM_BUFFER;
    case OAR_OPTIM_ADAM:
    case OAR_OPTIM_ADAMW:
        return s == OAR_SLOT_STEP || s == OAR_SLOT_EXP_AVG || s == OAR_SLOT_EXP_AVG_SQ || s == OAR_SLOT_MAX_EXP_AVG_SQ;
    case OAR_OPTIM_RMSPROP:
        return s == OAR_SLOT_STEP || s == OAR_SLOT_SQUARE_AVG || s == OAR_SLOT_GRAD_AVG ||
               s == OAR_SLOT_MOMENTUM_BUFFER;
    case OAR_OPTIM_ADAGRAD: return s == OAR_SLOT_STEP || s == OAR_SLOT_SUM;
    case OAR_OPTIM_LAMB: return s == OAR_SLOT_STEP || s == OAR_SLOT_EXP_AVG || s == OAR_SLOT_EXP_AVG_SQ;
    default: return oar_optim_kind_slot(k, (oar_slot)s);
    }
    return false;
}

static bool kind_needs(oar_optim_kind k, int s) {
    if (k == OAR_OPTIM_SGD || s == OAR_SLOT_MAX_EXP_AVG_SQ || s == OAR_SLOT_GRAD_AVG || s == OAR_SLOT_MOMENTUM_BUFFER)
        return false;
    return kind_may_use(k, s);
}

static void shape_str(const oar_tensor *t, char *buf, size_t size) { oar_format_shape(t->shape, t->ndim, buf, size); }

static oar_status update_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    (void)out;
    int64_t kind = a[0].i;
    if (kind < 0 || kind >= N_KINDS)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME,
                        "expected kind in [0, %d] (OAR_OPTIM_SGD to OAR_OPTIM_RPROP), got %lld", N_KINDS - 1,
                        (long long)kind);
    const char *who = oar_optim_kind_name((oar_optim_kind)kind);
    const oar_tensor *p = in[IN_PARAM], *g = in[IN_GRAD], *h = in[IN_HYPER];
    char want[160], got[160];
    if (p->dtype != OAR_F32 && p->dtype != OAR_F64)
        return OAR_FAIL(OAR_ERR_DTYPE, NAME, "expected param to be f32 or f64, got %s", oar_dtype_name(p->dtype));
    if (!p->contiguous)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected param to be contiguous (it is updated in place), got a "
                                                   "strided view");
    if (g->dtype != p->dtype)
        return OAR_FAIL(OAR_ERR_DTYPE, NAME, "expected grad to be %s like param, got %s", oar_dtype_name(p->dtype),
                        oar_dtype_name(g->dtype));
    if (g->ndim != p->ndim || memcmp(g->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim)) {
        shape_str(p, want, sizeof want);
        shape_str(g, got, sizeof got);
        return OAR_FAIL(OAR_ERR_SHAPE, NAME, "expected grad of param's shape %s, got %s", want, got);
    }
    if (h->dtype != OAR_F64 || h->ndim != 1 || h->shape[0] != OAR_HYPER_COUNT) {
        shape_str(h, got, sizeof got);
        return OAR_FAIL(OAR_ERR_SHAPE, NAME, "expected hyper to be f64 [%d] (the group's options), got %s %s",
                        OAR_HYPER_COUNT, oar_dtype_name(h->dtype), got);
    }
    if (!h->contiguous)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected hyper to be contiguous (its fresh flag is updated in "
                                                   "place), got a strided view");
    for (int s = 0; s < OAR_SLOT_COUNT; s++) {
        const oar_tensor *t = in[IN_SLOT0 + s];
        if (!t) {
            if (kind_needs((oar_optim_kind)kind, s))
                return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected the %s state (input %d) for %s, got none", oar_slot_names[s],
                                IN_SLOT0 + s, who);
            continue;
        }
        if (!kind_may_use((oar_optim_kind)kind, s)) {
            shape_str(t, got, sizeof got);
            return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected no %s state (input %d): %s does not use it, got %s %s",
                            oar_slot_names[s], IN_SLOT0 + s, who, oar_dtype_name(t->dtype), got);
        }
        bool is_step = oar_slot_is_scalar(s);
        oar_dtype dt = oar_optim_slot_dtype(s, p->dtype);
        int nd = is_step ? 0 : p->ndim;
        if (t->dtype != dt || t->ndim != nd || memcmp(t->shape, p->shape, sizeof(int64_t) * (size_t)nd)) {
            shape_str(p, want, sizeof want);
            shape_str(t, got, sizeof got);
            return OAR_FAIL(t->dtype != dt ? OAR_ERR_DTYPE : OAR_ERR_SHAPE, NAME,
                            "expected the %s state to be %s %s%s, got %s %s", oar_slot_names[s], oar_dtype_name(dt),
                            is_step ? "[]" : want,
                            s == OAR_SLOT_STEP ? " (a step count)" : is_step ? " (a scalar)" : " like param",
                            oar_dtype_name(t->dtype), got);
        }
        if (!t->contiguous)
            return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected the %s state to be contiguous (it is updated in "
                                                       "place), got a strided view", oar_slot_names[s]);
    }
    *n_out = 0;
    return OAR_OK;
}

/* Options that need a slot the call did not pass (a program traced with other options); the
 * slots every use of a kind needs were checked by inference. */
static oar_status check_slots(const oar_optim_opts *o, oar_tensor *const *in) {
    int s = -1;
    switch (o->kind) {
    case OAR_OPTIM_SGD: s = o->momentum != 0 ? OAR_SLOT_MOMENTUM_BUFFER : -1; break;
    case OAR_OPTIM_ADAM:
    case OAR_OPTIM_ADAMW: s = o->amsgrad ? OAR_SLOT_MAX_EXP_AVG_SQ : -1; break;
    case OAR_OPTIM_RMSPROP:
        s = o->momentum > 0 && !in[IN_SLOT0 + OAR_SLOT_MOMENTUM_BUFFER] ? OAR_SLOT_MOMENTUM_BUFFER
            : o->centered                                                 ? OAR_SLOT_GRAD_AVG
                                                                          : -1;
        break;
    default: break;
    }
    if (s < 0 || in[IN_SLOT0 + s]) return OAR_OK;
    return OAR_FAIL(OAR_ERR_STATE, NAME, "the options now need the %s state, which this call (or the compiled "
                                         "program, traced with other options) does not have; trace again after "
                                         "changing momentum, amsgrad or centered", oar_slot_names[s]);
}

oar_status oar_optim_update_read(oar_optim_kind kind, oar_tensor *const *in, oar_optim_opts *o, oar_optim_update *u) {
    const double *h = (const double *)oar_tensor_ptr(in[IN_HYPER]);
    if (h[OAR_HYPER_KIND] != (double)kind)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected hyperparameters for %s, got kind %g", oar_optim_kind_name(kind),
                        h[OAR_HYPER_KIND]);
    oar_optim_read_hyper(h, kind, o);
    oar_status st = oar_optim_check(o, false);
    if (st == OAR_OK) st = check_slots(o, in);
    if (st != OAR_OK) {
        if (st == OAR_ERR_INVALID_ARG) oar_error_prefix(NAME);
        return st;
    }
    oar_optim_update_fill(in, o, u);
    return OAR_OK;
}

void oar_optim_update_fill(oar_tensor *const *in, const oar_optim_opts *o, oar_optim_update *u) {
    oar_tensor *p = in[IN_PARAM];
    const double *h = (const double *)oar_tensor_ptr(in[IN_HYPER]);
    bool skip = h[OAR_HYPER_SKIP] != 0;
    bool fresh = !skip && o->kind == OAR_OPTIM_SGD && h[OAR_HYPER_FRESH_MOMENTUM] != 0 &&
                 in[IN_SLOT0 + OAR_SLOT_MOMENTUM_BUFFER];
    *u = (oar_optim_update){.o = o, .n = skip ? 0 : p->numel, .p = oar_tensor_ptr(p), .g = oar_tensor_ptr(in[IN_GRAD]),
                            .fresh_momentum = fresh, .skip = skip};
    for (int s = 0; s < OAR_SLOT_COUNT; s++) u->s[s] = in[IN_SLOT0 + s] ? oar_tensor_ptr(in[IN_SLOT0 + s]) : NULL;
    if (u->s[OAR_SLOT_STEP]) u->t = *(int64_t *)u->s[OAR_SLOT_STEP] + 1; /* stored by _commit */
    if (skip) return;
    double t = (double)u->t;
    if (o->kind == OAR_OPTIM_NADAM) { /* torch: mu_product *= mu, an f32 tensor times a float */
        double mu = o->beta1 * (1. - 0.5 * pow(0.96, t * o->momentum_decay));
        u->mu_product = *(const float *)u->s[OAR_SLOT_MU_PRODUCT] * (float)mu;
    } else if (o->kind == OAR_OPTIM_ASGD) { /* the values the next update uses */
        u->eta = (float)(o->lr / pow(1 + o->lambd * o->lr * t, o->alpha));
        u->mu = (float)(1 / fmax(1, t - o->t0));
    }
}

void oar_optim_update_commit(const oar_optim_update *u, oar_tensor *const *in) {
    if (u->skip) { /* a step a loss scaler skipped in-program: nothing moved */
        ((double *)oar_tensor_ptr(in[IN_HYPER]))[OAR_HYPER_SKIP] = 0;
        return;
    }
    if (u->s[OAR_SLOT_STEP]) *(int64_t *)u->s[OAR_SLOT_STEP] = u->t;
    if (u->o->kind == OAR_OPTIM_NADAM) *(float *)u->s[OAR_SLOT_MU_PRODUCT] = u->mu_product;
    if (u->o->kind == OAR_OPTIM_ASGD) *(float *)u->s[OAR_SLOT_ETA] = u->eta, *(float *)u->s[OAR_SLOT_MU] = u->mu;
    if (u->fresh_momentum) ((double *)oar_tensor_ptr(in[IN_HYPER]))[OAR_HYPER_FRESH_MOMENTUM] = 0;
    in[IN_PARAM]->storage->version++; /* an in-place write, as torch's param.add_ */
}

void oar_optim_lamb_trust(oar_optim_plan *pl, double lr) {
    double np = 0, nu = 0;
    for (int64_t k = 0; k < pl->n_blocks; k++) np += pl->c.sum_p2[k], nu += pl->c.sum_u2[k];
    np = sqrt(np), nu = sqrt(nu);
    double trust = np > 0 && nu > 0 ? np / nu : 1.0;
    pl->c.lr_neg = -lr * trust;
}

static oar_status update_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx;
    (void)n_in;
    (void)out;
    (void)n_out;
    oar_optim_opts o;
    oar_optim_update u;
    oar_status st = oar_optim_update_read((oar_optim_kind)a[0].i, in, &o, &u);
    if (st != OAR_OK) return st;
    if (in[IN_PARAM]->dtype == OAR_F32) oar_optim_update_f32(&u);
    else oar_optim_update_f64(&u);
    oar_optim_update_commit(&u, in);
    return OAR_OK;
}

const oar_op_def oar_opdef_optimizer_update = {
    .name = NAME, .n_inputs = N_IN, .n_outputs = 0, .key_input = IN_PARAM,
    .n_attrs = 1, .attrs = {{"kind", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .optional_inputs = ((1u << OAR_SLOT_COUNT) - 1) << IN_SLOT0,
    /* param, the hyper (its fresh flag) and every slot */
    .mutated_inputs = (1u << IN_PARAM) | (1u << IN_HYPER) | (((1u << OAR_SLOT_COUNT) - 1) << IN_SLOT0),
    /* the hyper tensor and the step count are read and written by the launching code on the
     * host, whatever device param is on */
    .host_inputs = (1u << IN_HYPER) | (1u << (IN_SLOT0 + OAR_SLOT_STEP)) | (1u << (IN_SLOT0 + OAR_SLOT_MU_PRODUCT)) |
                   (1u << (IN_SLOT0 + OAR_SLOT_ETA)) | (1u << (IN_SLOT0 + OAR_SLOT_MU)),
    .infer = update_infer, .reference = update_ref,
};

oar_status oar_optim_update_call(oar_optim_kind kind, oar_tensor *param, oar_tensor *grad, oar_tensor *hyper,
                                 oar_tensor *const slot[OAR_SLOT_COUNT]) {
    static const oar_attr kinds[N_KINDS] = {
        {.kind = OAR_ATTR_INT, .i = 0}, {.kind = OAR_ATTR_INT, .i = 1},  {.kind = OAR_ATTR_INT, .i = 2},
        {.kind = OAR_ATTR_INT, .i = 3}, {.kind = OAR_ATTR_INT, .i = 4},  {.kind = OAR_ATTR_INT, .i = 5},
        {.kind = OAR_ATTR_INT, .i = 6}, {.kind = OAR_ATTR_INT, .i = 7},  {.kind = OAR_ATTR_INT, .i = 8},
        {.kind = OAR_ATTR_INT, .i = 9}, {.kind = OAR_ATTR_INT, .i = 10}, {.kind = OAR_ATTR_INT, .i = 11}};
    if ((unsigned)kind >= N_KINDS)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME,
                        "expected kind in [0, %d] (OAR_OPTIM_SGD to OAR_OPTIM_RPROP), got %d", N_KINDS - 1, (int)kind);
    oar_tensor *in[N_IN] = {param, grad, hyper};
    for (int s = 0; s < OAR_SLOT_COUNT; s++) in[IN_SLOT0 + s] = slot[s];
    oar_tensor *out[1];
    int n_out = 1;
    return oar_op_call(OAR_OP_optimizer_update, in, N_IN, &kinds[kind], out, &n_out);
}

/* ---- the hyper tensor's layout */
void oar_optim_write_hyper(double *h, const oar_optim_opts *g) {
    h[OAR_HYPER_KIND] = (double)g->kind;
    h[OAR_HYPER_LR] = g->lr;
    h[OAR_HYPER_MOMENTUM] = g->momentum;
    h[OAR_HYPER_DAMPENING] = g->dampening;
    h[OAR_HYPER_NESTEROV] = g->nesterov;
    h[OAR_HYPER_WEIGHT_DECAY] = g->weight_decay;
    h[OAR_HYPER_BETA1] = g->beta1;
    h[OAR_HYPER_BETA2] = g->beta2;
    h[OAR_HYPER_EPS] = g->eps;
    h[OAR_HYPER_AMSGRAD] = g->amsgrad;
    h[OAR_HYPER_ALPHA] = g->alpha;
    h[OAR_HYPER_CENTERED] = g->centered;
    h[OAR_HYPER_LR_DECAY] = g->lr_decay;
    h[OAR_HYPER_INITIAL_ACCUMULATOR] = g->initial_accumulator;
    h[OAR_HYPER_MAXIMIZE] = g->maximize;
    h[OAR_HYPER_RHO] = g->rho;
    h[OAR_HYPER_MOMENTUM_DECAY] = g->momentum_decay;
    h[OAR_HYPER_LAMBD] = g->lambd;
    h[OAR_HYPER_T0] = g->t0;
    h[OAR_HYPER_ETAMINUS] = g->etaminus;
    h[OAR_HYPER_ETAPLUS] = g->etaplus;
    h[OAR_HYPER_STEP_SIZE_MIN] = g->step_size_min;
    h[OAR_HYPER_STEP_SIZE_MAX] = g->step_size_max;
}

void oar_optim_read_hyper(const double *h, oar_optim_kind kind, oar_optim_opts *o) {
    *o = (oar_optim_opts){
        .kind = kind,
        .lr = h[OAR_HYPER_LR],
        .momentum = h[OAR_HYPER_MOMENTUM],
        .dampening = h[OAR_HYPER_DAMPENING],
        .nesterov = h[OAR_HYPER_NESTEROV] != 0,
        .weight_decay = h[OAR_HYPER_WEIGHT_DECAY],
        .beta1 = h[OAR_HYPER_BETA1],
        .beta2 = h[OAR_HYPER_BETA2],
        .eps = h[OAR_HYPER_EPS],
        .amsgrad = h[OAR_HYPER_AMSGRAD] != 0,
        .alpha = h[OAR_HYPER_ALPHA],
        .centered = h[OAR_HYPER_CENTERED] != 0,
        .lr_decay = h[OAR_HYPER_LR_DECAY],
        .initial_accumulator = h[OAR_HYPER_INITIAL_ACCUMULATOR],
        .maximize = h[OAR_HYPER_MAXIMIZE] != 0,
        .rho = h[OAR_HYPER_RHO],
        .momentum_decay = h[OAR_HYPER_MOMENTUM_DECAY],
        .lambd = h[OAR_HYPER_LAMBD],
        .t0 = h[OAR_HYPER_T0],
        .etaminus = h[OAR_HYPER_ETAMINUS],
        .etaplus = h[OAR_HYPER_ETAPLUS],
        .step_size_min = h[OAR_HYPER_STEP_SIZE_MIN],
        .step_size_max = h[OAR_HYPER_STEP_SIZE_MAX],
        .explicit_values = true,
    };
}
