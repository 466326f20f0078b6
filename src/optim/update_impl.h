/* The fused update loops, written once for a float type. Included by update_f32.c and
 * update_f64.c with UPD_T (float or double), UPD_SQRT (sqrtf or sqrt), UPD_SUFFIX (f32 or
 * f64) and UPD_AVX2 (1 where the f32 AVX2 loops of update_avx2.c may replace the portable
 * ones); with UPD_LOOPS_ONLY only the loops are defined (update_avx2.c uses them for tails).
 *
 * Each loop does one parameter's whole update per element in one pass, in the order of
 * torch's single-tensor implementation, with torch's scalars rounded to UPD_T as its kernels
 * do (so f32 results agree with torch to a few ulp). Loop-invariant flags are copied to
 * locals so the compiler can unswitch the loops. The fields of oar_optim_ctx per kind:
 *   SGD      a momentum buffer; k1 momentum, k1c 1 - dampening; flag1 momentum on,
 *            flag2 fresh buffer (filled with d_p), flag3 nesterov; lr_neg -lr
 *   Adam(W)  a exp_avg, b exp_avg_sq, c max_exp_avg_sq; k1/k1c beta1, 1 - beta1; k2/k2c beta2,
 *            1 - beta2; scale sqrt(1 - beta2^t); lr_neg -lr / (1 - beta1^t); wd the L2
 *            coefficient (Adam, wd_on), or with flag1 (AdamW) the factor 1 - lr wd; flag2 amsgrad
 *   RMSprop  a square_avg, b grad_avg, c momentum buffer; k1/k1c alpha, 1 - alpha; k2 momentum;
 *            flag1 centered, flag2 momentum > 0; lr_neg -lr
 *   Adagrad  a sum; lr_neg -lr / (1 + (t - 1) lr_decay)
 *   LAMB     a exp_avg, b exp_avg_sq; k1/k1c, k2/k2c as Adam; bc1, bc2 1 - beta^t; block the
 *            reduction block; lr_neg -lr * trust ratio (pass 2)
 * For Adadelta, Adamax, ASGD and Rprop flag1 is maximize (the gradient is negated first).
 *   Adadelta a square_avg, b acc_delta; k1/k1c rho, 1 - rho; lr_neg -lr
 *   Adamax   a exp_avg, b exp_inf; k1/k1c beta1, 1 - beta1; k2 beta2; lr_neg -lr / (1 - beta1^t)
 *   NAdam    a exp_avg, b exp_avg_sq; k1/k1c, k2/k2c as Adam; bc2 1 - beta2^t; lr_neg the
 *            gradient's coefficient -lr (1 - mu) / (1 - mu_product), extra the moment's
 *            -lr mu_next / (1 - mu_product mu_next)
 *   RAdam    a exp_avg, b exp_avg_sq; k1/k1c, k2/k2c as Adam; bc1; lr; flag2 rectified
 *            (rho_t > 5), then scale sqrt(1 - beta2^t) and extra the rectification term
 *   ASGD     a ax; k1 1 - lambd eta, lr_neg -eta (eta, mu: the state before this update);
 *            k2 mu; flag2 mu != 1
 *   Rprop    a prev, b step_size; k1 etaminus, k2 etaplus; k1c, k2c the step size bounds */

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, UPD_SUFFIX) /* name_f32 */

static inline void FN(sgd_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict buf = c->a;
    const UPD_T *restrict g = c->g;
    const UPD_T lr_neg = (UPD_T)c->lr_neg, wd = (UPD_T)c->wd, mom = (UPD_T)c->k1, damp_c = (UPD_T)c->k1c;
    const bool wd_on = c->wd_on, mom_on = c->flag1, fresh = c->flag2, nesterov = c->flag3;
    for (int64_t i = begin; i < end; i++) {
        UPD_T d = g[i];
        if (wd_on) d = d + wd * p[i];
        if (mom_on) {
            UPD_T bi = fresh ? d : buf[i] * mom + damp_c * d;
            buf[i] = bi;
            d = nesterov ? d + mom * bi : bi;
        }
        p[i] = p[i] + lr_neg * d;
    }
}

static inline void FN(adam_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict m = c->a, *restrict v = c->b, *restrict vmax = c->c;
    const UPD_T *restrict g = c->g;
    const UPD_T step_neg = (UPD_T)c->lr_neg, wd = (UPD_T)c->wd, b1 = (UPD_T)c->k1, b1c = (UPD_T)c->k1c;
    const UPD_T b2 = (UPD_T)c->k2, b2c = (UPD_T)c->k2c, eps = (UPD_T)c->eps, bc2_sqrt = (UPD_T)c->scale;
    const bool l2 = c->wd_on, decoupled = c->flag1, amsgrad = c->flag2;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = g[i], pi = p[i];
        if (l2) gi = gi + wd * pi;
        if (decoupled) pi = pi * wd;
        UPD_T mi = m[i] * b1 + b1c * gi;
        UPD_T vi = v[i] * b2 + b2c * gi * gi;
        m[i] = mi;
        v[i] = vi;
        if (amsgrad) {
            UPD_T mx = vmax[i];
            mx = (vi > mx || vi != vi) ? vi : mx; /* torch.maximum: NaN propagates */
            vmax[i] = mx;
            vi = mx;
        }
        UPD_T denom = UPD_SQRT(vi) / bc2_sqrt + eps;
        p[i] = pi + step_neg * mi / denom;
    }
}

static inline void FN(rmsprop_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict sq = c->a, *restrict ga = c->b, *restrict buf = c->c;
    const UPD_T *restrict g = c->g;
    const UPD_T lr_neg = (UPD_T)c->lr_neg, wd = (UPD_T)c->wd, al = (UPD_T)c->k1, alc = (UPD_T)c->k1c;
    const UPD_T mom = (UPD_T)c->k2, eps = (UPD_T)c->eps;
    const bool wd_on = c->wd_on, centered = c->flag1, mom_on = c->flag2;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = g[i];
        if (wd_on) gi = gi + wd * p[i];
        UPD_T si = sq[i] * al + alc * gi * gi;
        sq[i] = si;
        UPD_T avg;
        if (centered) {
            UPD_T gai = ga[i] * al + alc * gi;
            ga[i] = gai;
            avg = UPD_SQRT(si + (UPD_T)-1 * gai * gai);
        } else {
            avg = UPD_SQRT(si);
        }
        avg = avg + eps;
        if (mom_on) {
            UPD_T bi = buf[i] * mom + gi / avg;
            buf[i] = bi;
            p[i] = p[i] + lr_neg * bi;
        } else {
            p[i] = p[i] + lr_neg * gi / avg;
        }
    }
}

static inline void FN(adagrad_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict sum = c->a;
    const UPD_T *restrict g = c->g;
    const UPD_T lr_neg = (UPD_T)c->lr_neg, wd = (UPD_T)c->wd, eps = (UPD_T)c->eps;
    const bool wd_on = c->wd_on;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = g[i];
        if (wd_on) gi = gi + wd * p[i];
        UPD_T si = sum[i] + gi * gi;
        sum[i] = si;
        p[i] = p[i] + lr_neg * gi / (UPD_SQRT(si) + eps);
    }
}

static inline void FN(adadelta_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict sq = c->a, *restrict acc = c->b;
    const UPD_T *restrict g = c->g;
    const UPD_T lr_neg = (UPD_T)c->lr_neg, wd = (UPD_T)c->wd, rho = (UPD_T)c->k1, rho_c = (UPD_T)c->k1c;
    const UPD_T eps = (UPD_T)c->eps;
    const bool wd_on = c->wd_on, maximize = c->flag1;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = maximize ? -g[i] : g[i];
        if (wd_on) gi = gi + wd * p[i];
        UPD_T si = sq[i] * rho + rho_c * gi * gi;
        sq[i] = si;
        UPD_T delta = UPD_SQRT(acc[i] + eps) / UPD_SQRT(si + eps) * gi;
        acc[i] = acc[i] * rho + rho_c * delta * delta;
        p[i] = p[i] + lr_neg * delta;
    }
}

static inline void FN(adamax_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict m = c->a, *restrict inf = c->b;
    const UPD_T *restrict g = c->g;
    const UPD_T step_neg = (UPD_T)c->lr_neg, wd = (UPD_T)c->wd, b1 = (UPD_T)c->k1, b1c = (UPD_T)c->k1c;
    const UPD_T b2 = (UPD_T)c->k2, eps = (UPD_T)c->eps;
    const bool wd_on = c->wd_on, maximize = c->flag1;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = maximize ? -g[i] : g[i];
        if (wd_on) gi = gi + wd * p[i];
        UPD_T mi = m[i] * b1 + b1c * gi;
        m[i] = mi;
        UPD_T decayed = inf[i] * b2, fresh = (gi < 0 ? -gi : gi) + eps;
        UPD_T ui = (decayed > fresh || decayed != decayed) ? decayed : fresh; /* torch.amax: NaN propagates */
        inf[i] = ui;
        p[i] = p[i] + step_neg * mi / ui;
    }
}

static inline void FN(nadam_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict m = c->a, *restrict v = c->b;
    const UPD_T *restrict g = c->g;
    const UPD_T wd = (UPD_T)c->wd, b1 = (UPD_T)c->k1, b1c = (UPD_T)c->k1c, b2 = (UPD_T)c->k2, b2c = (UPD_T)c->k2c;
    const UPD_T bc2 = (UPD_T)c->bc2, eps = (UPD_T)c->eps, cg = (UPD_T)c->lr_neg, cm = (UPD_T)c->extra;
    const bool wd_on = c->wd_on;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = g[i], pi = p[i];
        if (wd_on) gi = gi + wd * pi;
        UPD_T mi = m[i] * b1 + b1c * gi;
        UPD_T vi = v[i] * b2 + b2c * gi * gi;
        m[i] = mi;
        v[i] = vi;
        UPD_T denom = UPD_SQRT(vi / bc2) + eps;
        pi = pi + cg * gi / denom; /* two steps, as torch's two addcdiv_ */
        p[i] = pi + cm * mi / denom;
    }
}

static inline void FN(radam_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict m = c->a, *restrict v = c->b;
    const UPD_T *restrict g = c->g;
    const UPD_T wd = (UPD_T)c->wd, b1 = (UPD_T)c->k1, b1c = (UPD_T)c->k1c, b2 = (UPD_T)c->k2, b2c = (UPD_T)c->k2c;
    const UPD_T bc1 = (UPD_T)c->bc1, lr = (UPD_T)c->lr, eps = (UPD_T)c->eps, bc2_sqrt = (UPD_T)c->scale;
    const UPD_T rect = (UPD_T)c->extra;
    const bool wd_on = c->wd_on, rectified = c->flag2;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = g[i];
        if (wd_on) gi = gi + wd * p[i];
        UPD_T mi = m[i] * b1 + b1c * gi;
        UPD_T vi = v[i] * b2 + b2c * gi * gi;
        m[i] = mi;
        v[i] = vi;
        UPD_T x = mi / bc1 * lr;
        if (rectified) x = x * (bc2_sqrt / (UPD_SQRT(vi) + eps)) * rect;
        p[i] = p[i] - x;
    }
}

static inline void FN(asgd_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict ax = c->a;
    const UPD_T *restrict g = c->g;
    const UPD_T wd = (UPD_T)c->wd, decay = (UPD_T)c->k1, eta_neg = (UPD_T)c->lr_neg, mu = (UPD_T)c->k2;
    const bool wd_on = c->wd_on, maximize = c->flag1, averaging = c->flag2;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = maximize ? -g[i] : g[i], pi = p[i];
        if (wd_on) gi = gi + wd * pi;
        pi = pi * decay;
        pi = pi + eta_neg * gi;
        p[i] = pi;
        ax[i] = averaging ? ax[i] + (pi - ax[i]) * mu : pi;
    }
}

/* sign(x) as torch's: 0 for 0 and NaN */
#define UPD_SIGN(x) ((UPD_T)((x) > 0) - (UPD_T)((x) < 0))

static inline void FN(rprop_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p, *restrict prev = c->a, *restrict ss = c->b;
    const UPD_T *restrict g = c->g;
    const UPD_T etaminus = (UPD_T)c->k1, etaplus = (UPD_T)c->k2, lo = (UPD_T)c->k1c, hi = (UPD_T)c->k2c;
    const bool maximize = c->flag1;
    for (int64_t i = begin; i < end; i++) {
        UPD_T gi = maximize ? -g[i] : g[i];
        UPD_T s = UPD_SIGN(gi * prev[i]);
        UPD_T f = s > 0 ? etaplus : s < 0 ? etaminus : (UPD_T)1;
        UPD_T si = ss[i] * f;
        si = si < lo ? lo : si; /* clamp as torch's min(max(x, lo), hi): NaN stays */
        si = si > hi ? hi : si;
        ss[i] = si;
        if (s < 0) gi = 0; /* a sign change: no step now, and none remembered */
        p[i] = p[i] + (UPD_T)-1 * UPD_SIGN(gi) * si;
        prev[i] = gi;
    }
}
#undef UPD_SIGN

/* LAMB's update direction u = (m / bc1) / (sqrt(v / bc2) + eps) + wd p. */
#define LAMB_U(mi, vi, pi) ((mi) / bc1 / (UPD_SQRT((vi) / bc2) + eps) + wd * (pi))

/* LAMB pass 1, over blocks of c->block elements: the moments, and the squared norms of p and
 * u per block, summed in double in 8 lanes (element i of a block in lane i % 8) combined as
 * oar_optim_sum8 does, which the AVX2 loop reproduces exactly. */
static inline void FN(lamb_moments_range)(void *ctx, int64_t block_begin, int64_t block_end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict m = c->a, *restrict v = c->b;
    const UPD_T *restrict p = c->p, *restrict g = c->g;
    const UPD_T b1 = (UPD_T)c->k1, b1c = (UPD_T)c->k1c, b2 = (UPD_T)c->k2, b2c = (UPD_T)c->k2c;
    const UPD_T bc1 = (UPD_T)c->bc1, bc2 = (UPD_T)c->bc2, eps = (UPD_T)c->eps, wd = (UPD_T)c->wd;
    for (int64_t blk = block_begin; blk < block_end; blk++) {
        int64_t start = blk * c->block, end = start + c->block < c->n ? start + c->block : c->n;
        double sp[8] = {0}, su[8] = {0};
        for (int64_t i = start; i < end; i++) {
            UPD_T gi = g[i];
            UPD_T mi = m[i] * b1 + b1c * gi;
            UPD_T vi = v[i] * b2 + b2c * gi * gi;
            m[i] = mi;
            v[i] = vi;
            UPD_T u = LAMB_U(mi, vi, p[i]);
            sp[(i - start) & 7] += (double)p[i] * (double)p[i];
            su[(i - start) & 7] += (double)u * (double)u;
        }
        c->sum_p2[blk] = oar_optim_sum8(sp);
        c->sum_u2[blk] = oar_optim_sum8(su);
    }
}

/* LAMB pass 2: p += lr_neg * u, u recomputed from the moments. */
static inline void FN(lamb_apply_range)(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    UPD_T *restrict p = c->p;
    const UPD_T *restrict m = c->a, *restrict v = c->b;
    const UPD_T bc1 = (UPD_T)c->bc1, bc2 = (UPD_T)c->bc2, eps = (UPD_T)c->eps, wd = (UPD_T)c->wd;
    const UPD_T step = (UPD_T)c->lr_neg;
    for (int64_t i = begin; i < end; i++) {
        UPD_T pi = p[i];
        p[i] = pi + step * LAMB_U(m[i], v[i], pi);
    }
}

#ifndef UPD_LOOPS_ONLY
#if UPD_AVX2
#define PICK(name) (oar_optim_use_avx2() ? oar_optim_##name##_f32_avx2 : FN(name##_range))
#else
#define PICK(name) FN(name##_range)
#endif

void FN(oar_optim_plan)(const oar_optim_update *u, oar_optim_plan *pl, double *sums) {
    const oar_optim_opts *o = u->o;
    pl->run = NULL; /* every kind sets it */
    pl->moments = NULL;
    pl->n_blocks = 0;
    /* written in place, field by field: building a local and copying it costs more than the
     * loop itself for the small parameters of a tiny model */
    oar_optim_ctx *c = &pl->c;
    memset(c, 0, sizeof *c);
    c->p = u->p;
    c->g = u->g;
    c->n = u->n;
    c->wd = o->weight_decay;
    c->wd_on = o->weight_decay != 0;
    c->eps = o->eps;
    double t = (double)u->t;
    switch (o->kind) {
    case OAR_OPTIM_SGD:
        c->a = u->s[OAR_SLOT_MOMENTUM_BUFFER];
        c->lr_neg = -o->lr;
        c->k1 = o->momentum;
        c->k1c = 1 - o->dampening;
        c->flag1 = o->momentum != 0;
        c->flag2 = u->fresh_momentum;
        c->flag3 = o->nesterov;
        pl->run = PICK(sgd);
        break;
    case OAR_OPTIM_ADAM:
    case OAR_OPTIM_ADAMW:
        c->a = u->s[OAR_SLOT_EXP_AVG];
        c->b = u->s[OAR_SLOT_EXP_AVG_SQ];
        c->c = u->s[OAR_SLOT_MAX_EXP_AVG_SQ];
        c->k1 = o->beta1, c->k1c = 1 - o->beta1;
        c->k2 = o->beta2, c->k2c = 1 - o->beta2;
        c->lr_neg = -(o->lr / (1 - pow(o->beta1, t)));
        c->scale = sqrt(1 - pow(o->beta2, t));
        c->flag2 = o->amsgrad;
        if (o->kind == OAR_OPTIM_ADAMW) {
            c->wd_on = false;
            c->flag1 = true; /* torch multiplies even when weight_decay is 0 (by exactly 1) */
            c->wd = 1 - o->lr * o->weight_decay;
        }
        pl->run = PICK(adam);
        break;
    case OAR_OPTIM_RMSPROP:
        c->a = u->s[OAR_SLOT_SQUARE_AVG];
        c->b = u->s[OAR_SLOT_GRAD_AVG];
        c->c = u->s[OAR_SLOT_MOMENTUM_BUFFER];
        c->lr_neg = -o->lr;
        c->k1 = o->alpha, c->k1c = 1 - o->alpha;
        c->k2 = o->momentum;
        c->flag1 = o->centered;
        c->flag2 = o->momentum > 0;
        pl->run = PICK(rmsprop);
        break;
    case OAR_OPTIM_ADAGRAD:
        c->a = u->s[OAR_SLOT_SUM];
        c->lr_neg = -(o->lr / (1 + (t - 1) * o->lr_decay));
        pl->run = PICK(adagrad);
        break;
    case OAR_OPTIM_LAMB:
        c->a = u->s[OAR_SLOT_EXP_AVG];
        c->b = u->s[OAR_SLOT_EXP_AVG_SQ];
        c->k1 = o->beta1, c->k1c = 1 - o->beta1;
        c->k2 = o->beta2, c->k2c = 1 - o->beta2;
        c->bc1 = 1 - pow(o->beta1, t);
        c->bc2 = 1 - pow(o->beta2, t);
        c->block = oar_optim_block_size(u->n);
        c->sum_p2 = sums;
        c->sum_u2 = sums + OAR_OPTIM_MAX_BLOCKS;
        pl->n_blocks = (u->n + c->block - 1) / c->block;
        pl->moments = PICK(lamb_moments);
        pl->run = PICK(lamb_apply);
        break;
    case OAR_OPTIM_ADADELTA:
        c->a = u->s[OAR_SLOT_SQUARE_AVG];
        c->b = u->s[OAR_SLOT_ACC_DELTA];
        c->k1 = o->rho, c->k1c = 1 - o->rho;
        c->lr_neg = -o->lr;
        c->flag1 = o->maximize;
        pl->run = PICK(adadelta);
        break;
    case OAR_OPTIM_ADAMAX:
        c->a = u->s[OAR_SLOT_EXP_AVG];
        c->b = u->s[OAR_SLOT_EXP_INF];
        c->k1 = o->beta1, c->k1c = 1 - o->beta1, c->k2 = o->beta2;
        c->lr_neg = -(o->lr / (1 - pow(o->beta1, t)));
        c->flag1 = o->maximize;
        pl->run = FN(adamax_range);
        break;
    case OAR_OPTIM_NADAM: {
        c->a = u->s[OAR_SLOT_EXP_AVG];
        c->b = u->s[OAR_SLOT_EXP_AVG_SQ];
        c->k1 = o->beta1, c->k1c = 1 - o->beta1;
        c->k2 = o->beta2, c->k2c = 1 - o->beta2;
        c->bc2 = 1 - pow(o->beta2, t);
        double mu = o->beta1 * (1. - 0.5 * pow(0.96, t * o->momentum_decay));
        double mu_next = o->beta1 * (1. - 0.5 * pow(0.96, (t + 1) * o->momentum_decay));
        float prod_next = u->mu_product * (float)mu * (float)mu_next; /* f32 tensor arithmetic, as torch */
        c->lr_neg = -o->lr * (1. - mu) / (1. - (double)u->mu_product);
        c->extra = -o->lr * mu_next / (1. - (double)prod_next);
        pl->run = PICK(nadam);
        break;
    }
    case OAR_OPTIM_RADAM: {
        c->a = u->s[OAR_SLOT_EXP_AVG];
        c->b = u->s[OAR_SLOT_EXP_AVG_SQ];
        c->k1 = o->beta1, c->k1c = 1 - o->beta1;
        c->k2 = o->beta2, c->k2c = 1 - o->beta2;
        c->bc1 = 1 - pow(o->beta1, t);
        double bc2 = 1 - pow(o->beta2, t);
        double rho_inf = 2 / (1 - o->beta2) - 1;
        double rho_t = rho_inf - 2 * t * pow(o->beta2, t) / bc2;
        c->lr = o->lr;
        c->flag2 = rho_t > 5.;
        if (c->flag2) {
            c->scale = sqrt(bc2);
            c->extra = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        }
        pl->run = PICK(radam);
        break;
    }
    case OAR_OPTIM_ASGD: {
        c->a = u->s[OAR_SLOT_AX];
        double eta = *(const float *)u->s[OAR_SLOT_ETA], mu = *(const float *)u->s[OAR_SLOT_MU];
        c->k1 = 1 - o->lambd * eta;
        c->lr_neg = -eta;
        c->k2 = mu;
        c->flag1 = o->maximize;
        c->flag2 = mu != 1;
        pl->run = FN(asgd_range);
        break;
    }
    case OAR_OPTIM_RPROP:
        c->a = u->s[OAR_SLOT_PREV];
        c->b = u->s[OAR_SLOT_STEP_SIZE];
        c->k1 = o->etaminus, c->k2 = o->etaplus;
        c->k1c = o->step_size_min, c->k2c = o->step_size_max;
        c->flag1 = o->maximize;
        pl->run = FN(rprop_range);
        break;
    }
}

void FN(oar_optim_update)(const oar_optim_update *u) {
    oar_optim_plan pl;
    double sums[2 * OAR_OPTIM_MAX_BLOCKS];
    FN(oar_optim_plan)(u, &pl, sums);
    if (pl.moments) {
        oar_parallel_for(pl.n_blocks, 1, pl.moments, &pl.c);
        oar_optim_lamb_trust(&pl, u->o->lr);
    }
    oar_parallel_for(u->n, OAR_OPTIM_GRAIN, pl.run, &pl.c);
}

#undef PICK
#endif /* UPD_LOOPS_ONLY */

#undef LAMB_U
#undef FN
#undef CAT
#undef CAT_
#undef UPD_T
#undef UPD_SQRT
#undef UPD_SUFFIX
#undef UPD_AVX2
