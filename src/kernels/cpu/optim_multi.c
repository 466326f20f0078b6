/* optimizer_update_multi in one thread-pool dispatch: every parameter's update is planned
 * (its loop and context, optim/update_impl.h), then one parallel loop runs over the elements of
 * all parameters end to end, each chunk calling the loops of the parameters it overlaps. LAMB
 * adds one dispatch over all parameters' norm blocks first. Each element gets the arithmetic
 * of the one-parameter loop (the AVX2 loops give the portable loops' bits whatever the split),
 * so results equal the reference's, which runs the updates one by one. */
#include "kernels/cpu/cpu_kernels.h"
#include "optim/optim.h"

typedef struct multi_job {
    oar_optim_plan *plan;
    int n;
    int64_t start[OAR_OPTIM_MULTI_MAX + 1]; /* per parameter: its first element (or block) overall */
    bool blocks;                            /* LAMB's first pass: ranges of norm blocks */
} multi_job;

static void multi_range(void *ctx, int64_t begin, int64_t end) {
    const multi_job *j = ctx;
    int i = 0;
    while (i < j->n && j->start[i + 1] <= begin) i++;
    for (; i < j->n && j->start[i] < end; i++) {
        int64_t lo = begin > j->start[i] ? begin : j->start[i], hi = end < j->start[i + 1] ? end : j->start[i + 1];
        if (lo >= hi) continue;
        oar_optim_plan *pl = &j->plan[i];
        if (j->blocks) pl->moments(&pl->c, lo - j->start[i], hi - j->start[i]);
        else pl->run(&pl->c, lo - j->start[i], hi - j->start[i]);
    }
}

static oar_status multi_fused(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx;
    (void)out;
    (void)n_out;
    oar_optim_opts o[OAR_OPTIM_MULTI_MAX];
    oar_optim_update u[OAR_OPTIM_MULTI_MAX];
    oar_optim_plan plan[OAR_OPTIM_MULTI_MAX];
    oar_status st = oar_optim_multi_read(in, n_in, (oar_optim_kind)a[0].i, a[1].i, o, u);
    if (st != OAR_OK) return st;
    multi_job j = {.plan = plan, .n = n_in - OAR_OPTIM_MULTI_STATE};
    int g = oar_optim_multi_group(a[1].i);
    double sums[a[0].i == OAR_OPTIM_LAMB ? OAR_OPTIM_MULTI_MAX * 2 * OAR_OPTIM_MAX_BLOCKS : 1]; /* LAMB's norms */
    for (int i = 0; i < j.n; i++) {
        double *si = a[0].i == OAR_OPTIM_LAMB ? sums + i * 2 * OAR_OPTIM_MAX_BLOCKS : NULL;
        if (in[i * g]->dtype == OAR_F32) oar_optim_plan_f32(&u[i], &plan[i], si);
        else oar_optim_plan_f64(&u[i], &plan[i], si);
    }
    if (a[0].i == OAR_OPTIM_LAMB) {
        j.blocks = true;
        for (int i = 0; i < j.n; i++) j.start[i + 1] = j.start[i] + plan[i].n_blocks;
        oar_parallel_for(j.start[j.n], 1, multi_range, &j);
        for (int i = 0; i < j.n; i++) oar_optim_lamb_trust(&plan[i], u[i].o->lr);
        j.blocks = false;
    }
    for (int i = 0; i < j.n; i++) j.start[i + 1] = j.start[i] + u[i].n;
    oar_parallel_for(j.start[j.n], OAR_OPTIM_GRAIN, multi_range, &j);
    oar_optim_multi_commit(in, n_in, a[1].i, u);
    return OAR_OK;
}

void oar_cpu_register_optim_multi(void) {
    oar_register_kernel(OAR_OP_optimizer_update_multi,
                        (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
                                           .impl = "fused", .priority = 10, .fn = multi_fused});
}
