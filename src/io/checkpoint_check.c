/* Checking a checkpoint against a module and an optimizer before anything is changed: the
 * metadata, every "model.<path>" tensor against the module's parameters and buffers (missing,
 * unexpected, shape or dtype differences), and every "optim.<index>.<slot>" tensor against
 * the slots the optimizer's options use for that parameter. */
#include "io/checkpoint.h"
#include "nn/module.h"
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>

static void describe(const oar_tensor *t, oar_dtype dt, const int64_t *shape, int ndim, char *buf, size_t size) {
    char sh[160];
    oar_format_shape(t ? t->shape : shape, t ? t->ndim : ndim, sh, sizeof sh);
    snprintf(buf, size, "%s %s", oar_dtype_name(t ? t->dtype : dt), sh);
}

static bool same_layout(const oar_tensor *a, oar_dtype dt, const int64_t *shape, int ndim) {
    return a->dtype == dt && a->ndim == ndim && !memcmp(a->shape, shape, sizeof(int64_t) * (size_t)ndim);
}

static void check_meta(oar_tensor_dict *d, oar_ckpt_meta *meta, oar_ckpt_problems *p) {
    const char *fmt = oar_dict_meta(d, OAR_CKPT_K_FORMAT), *ver = oar_dict_meta(d, OAR_CKPT_K_VERSION);
    if (!fmt || strcmp(fmt, OAR_CKPT_FORMAT) != 0)
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "not an oar checkpoint (metadata '%s' is %s%.40s%s, expected '%s')",
                         OAR_CKPT_K_FORMAT, fmt ? "'" : "absent", fmt ? fmt : "", fmt ? "'" : "", OAR_CKPT_FORMAT);
    else if (!ver || strcmp(ver, OAR_CKPT_VERSION) != 0)
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "checkpoint format version '%.20s' is not one this oar reads (%s)",
                         ver ? ver : "(absent)", OAR_CKPT_VERSION);
    if (!oar_ckpt_parse_i64(oar_dict_meta(d, OAR_CKPT_K_STEP), &meta->step))
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "metadata '%s' is absent or not an integer", OAR_CKPT_K_STEP);
    if (!oar_ckpt_parse_u64(oar_dict_meta(d, OAR_CKPT_K_SEED), &meta->rng.seed) ||
        !oar_ckpt_parse_u64(oar_dict_meta(d, OAR_CKPT_K_OFFSET), &meta->rng.offset))
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "metadata '%s' or '%s' is absent or not an unsigned integer",
                         OAR_CKPT_K_SEED, OAR_CKPT_K_OFFSET);
    meta->has_optim = oar_dict_meta(d, OAR_CKPT_K_OPTIM) != NULL;
}

typedef struct named {
    const char *name;
    oar_tensor *t;
} named;

static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

static oar_status check_module(oar_tensor_dict *d, oar_module *m, oar_ckpt_problems *p) {
    int np = oar_module_num_parameters(m), nb = oar_module_num_buffers(m), n = np + nb;
    named *all = malloc(sizeof(named) * (size_t)(n ? n : 1));
    if (!all) return oar_error(OAR_ERR_OOM, "checkpoint_load: out of memory listing %d module tensors", n);
    for (int i = 0; i < n; i++)
        all[i].t = i < np ? oar_module_parameter(m, i, &all[i].name) : oar_module_buffer(m, i - np, &all[i].name);
    char key[600], a[200], b[200];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "model.%s", all[i].name);
        oar_tensor *f = oar_dict_get(d, key);
        if (!f) {
            oar_ckpt_problem(p, OAR_CKPT_MISSING, "missing %s", key);
        } else if (!same_layout(f, all[i].t->dtype, all[i].t->shape, all[i].t->ndim)) {
            describe(f, 0, NULL, 0, a, sizeof a);
            describe(all[i].t, 0, NULL, 0, b, sizeof b);
            oar_ckpt_problem(p, OAR_CKPT_MISMATCH, "%s is %s in the file, %s in the module", key, a, b);
        } else if (!all[i].t->storage) {
            oar_ckpt_problem(p, OAR_CKPT_OTHER, "%s is symbolic in the module (no data to load into)", key);
        }
    }
    qsort(all, (size_t)n, sizeof *all, cmp_named);
    for (int i = 0; i < d->n; i++) {
        const char *name = d->names[i];
        if (!strncmp(name, "model.", 6)) {
            named k = {name + 6, NULL};
            if (!bsearch(&k, all, (size_t)n, sizeof *all, cmp_named))
                oar_ckpt_problem(p, OAR_CKPT_UNEXPECTED, "unexpected %.300s", name);
        } else if (strncmp(name, "optim.", 6) != 0) {
            oar_ckpt_problem(p, OAR_CKPT_UNEXPECTED, "unexpected %.300s (neither model. nor optim.)", name);
        }
    }
    free(all);
    return OAR_OK;
}

/* "<index>.<slot>" in canonical form, with a slot the parameter's options use. */
static bool parse_state_name(const oar_optimizer *o, const char *s, int *param, int *slot) {
    char *end = NULL;
    if (*s < '0' || *s > '9') return false;
    long i = strtol(s, &end, 10);
    if (*end != '.' || i < 0 || i >= o->n_params) return false;
    for (int k = 0; k < OAR_SLOT_COUNT; k++) {
        char canon[64];
        snprintf(canon, sizeof canon, "%ld.%s", i, oar_slot_names[k]);
        if (!strcmp(canon, s) && oar_optim_slot_used(o->groups[o->params[i].group], (oar_slot)k)) {
            *param = (int)i;
            *slot = k;
            return true;
        }
    }
    return false;
}

static oar_status check_optimizer_state(oar_tensor_dict *d, oar_optimizer *o, oar_ckpt_problems *p) {
    unsigned *in_file = calloc((size_t)(o->n_params ? o->n_params : 1), sizeof(unsigned));
    if (!in_file) return oar_error(OAR_ERR_OOM, "checkpoint_load: out of memory checking optimizer state");
    char a[200], b[200];
    for (int i = 0; i < d->n; i++) {
        const char *name = d->names[i];
        if (strncmp(name, "optim.", 6) != 0) continue;
        int pi, s;
        if (!parse_state_name(o, name + 6, &pi, &s)) {
            oar_ckpt_problem(p, OAR_CKPT_UNEXPECTED, "unexpected %.300s (this %s over %d parameters has no such state)",
                             name, oar_ckpt_optim_name(o->kind), o->n_params);
            continue;
        }
        in_file[pi] |= 1u << s;
        const oar_tensor *par = o->params[pi].t, *f = d->tensors[i];
        bool step = s == OAR_SLOT_STEP;
        oar_dtype want_dt = oar_optim_slot_dtype(s, par->dtype);
        int want_nd = oar_slot_is_scalar(s) ? 0 : par->ndim;
        if (!same_layout(f, want_dt, par->shape, want_nd)) {
            describe(f, 0, NULL, 0, a, sizeof a);
            describe(NULL, want_dt, par->shape, want_nd, b, sizeof b);
            oar_ckpt_problem(p, OAR_CKPT_MISMATCH, "%s is %s in the file, %s expected", name, a, b);
        } else if (step && *(const int64_t *)oar_tensor_ptr(f) < 0) {
            oar_ckpt_problem(p, OAR_CKPT_OTHER, "%s is negative", name);
        }
    }
    /* A parameter's slots are all present or all absent. Absent means "before its first
     * update": loading resets the state the optimizer has, as torch's load_state_dict does. */
    for (int i = 0; i < o->n_params; i++) {
        const oar_optim_opts *opts = o->groups[o->params[i].group];
        for (int s = 0; s < OAR_SLOT_COUNT && in_file[i]; s++)
            if (oar_optim_slot_used(opts, (oar_slot)s) && !(in_file[i] & (1u << s)))
                oar_ckpt_problem(p, OAR_CKPT_MISSING, "missing optim.%d.%s", i, oar_slot_names[s]);
    }
    free(in_file);
    return OAR_OK;
}

static oar_status check_optimizer(oar_tensor_dict *d, oar_optimizer *o, oar_ckpt_meta *meta, oar_ckpt_problems *p) {
    if (!meta->has_optim) {
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "the file has no optimizer state but an optimizer was given (pass NULL "
                                            "to load only the module)");
        return OAR_OK;
    }
    const char *kind = oar_dict_meta(d, OAR_CKPT_K_OPTIM);
    if (strcmp(kind, oar_ckpt_optim_name(o->kind)) != 0) {
        oar_ckpt_problem(p, OAR_CKPT_MISMATCH, "optimizer: %.40s in the file, %s given", kind,
                         oar_ckpt_optim_name(o->kind));
        return OAR_OK;
    }
    int64_t nparams = -1;
    if (!oar_ckpt_parse_i64(oar_dict_meta(d, OAR_CKPT_K_OSTEPS), &meta->optim_steps) || meta->optim_steps < 0)
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "metadata '%s' is absent or not a count", OAR_CKPT_K_OSTEPS);
    if (!oar_ckpt_parse_i64(oar_dict_meta(d, OAR_CKPT_K_OPARAMS), &nparams) || nparams != o->n_params) {
        oar_ckpt_problem(p, OAR_CKPT_MISMATCH, "optimizer: %.40s parameters in the file, %d given",
                         oar_dict_meta(d, OAR_CKPT_K_OPARAMS) ? oar_dict_meta(d, OAR_CKPT_K_OPARAMS) : "(absent)",
                         o->n_params);
        return OAR_OK;
    }
    return check_optimizer_state(d, o, p);
}

oar_status oar_ckpt_check(oar_tensor_dict *d, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                          oar_ckpt_meta *meta, oar_ckpt_problems *p) {
    memset(meta, 0, sizeof *meta);
    check_meta(d, meta, p);
    oar_status st = check_module(d, m, p);
    if (st == OAR_OK && o) st = check_optimizer(d, o, meta, p);
    if (st == OAR_OK && s) oar_ckpt_sched_check(d, s, meta, p);
    return st;
}
