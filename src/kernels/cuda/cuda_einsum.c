/* einsum on the GPU, composed of ops that have GPU kernels: each operand's private labels
 * are summed, the operands permuted (broadcast labels expanded) to [batch, m, k] and
 * [batch, k, n], multiplied by one batched matmul (cuBLASLt), and the product permuted into
 * the output's label order. One operand: a sum and a permute. A label repeated in one operand
 * (a diagonal) becomes one dim of a strided view whose stride is the sum of its dims'. */
#include "cuda_backend.h"
#include "ops/linalg.h"

#include <string.h>

typedef struct es_operand {
    oar_tensor *t;
    int n, id[OAR_MAX_DIMS];
} es_operand;

static bool has(const int *ids, int n, int id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

/* Sums the labels of x found in neither keep_a nor keep_b. */
static bool sum_private(es_operand *x, const int *keep_a, int na, const int *keep_b, int nb) {
    int dims[OAR_MAX_DIMS], nd = 0, n = 0;
    for (int d = 0; d < x->n; d++) {
        if (has(keep_a, na, x->id[d]) || has(keep_b, nb, x->id[d])) x->id[n++] = x->id[d];
        else dims[nd++] = d;
    }
    if (nd) x->t = oar_sum(x->t, dims, nd, false);
    x->n = n;
    return x->t != NULL;
}

/* x's dims in the order of the label groups g[0], g[1], ..., each label expanded to size,
 * reshaped to one dim per group. */
static oar_tensor *arrange(const es_operand *x, const int (*g)[OAR_MAX_DIMS], const int *gn, int ngroups,
                           const int64_t *size) {
    int perm[OAR_MAX_DIMS], np = 0;
    int64_t full[OAR_MAX_DIMS], merged[4];
    for (int k = 0; k < ngroups; k++) {
        merged[k] = 1;
        for (int i = 0; i < gn[k]; i++) {
            for (int d = 0; d < x->n; d++)
                if (x->id[d] == g[k][i]) perm[np] = d;
            full[np++] = size[g[k][i]];
            merged[k] *= size[g[k][i]];
        }
    }
    oar_tensor *t = oar_expand(oar_permute(x->t, perm, np), full, np);
    return oar_reshape(t, merged, ngroups);
}

static oar_status einsum_compose(oar_tensor *const *in, oar_tensor *y, const char *eq) {
    int lab[2][OAR_MAX_DIMS], out[OAR_MAX_DIMS], n_out;
    int64_t size[OAR_EINSUM_LABEL_IDS];
    oar_status st = oar_einsum_labels(eq, in, lab, out, &n_out, size);
    if (st != OAR_OK) return st;
    int n_ops = in[1] ? 2 : 1;
    es_operand x[2] = {{0}};
    for (int o = 0; o < n_ops; o++) {
        /* one dim per distinct label: repeated labels walk the diagonal */
        oar_tensor *v = oar_tensor_alias(in[o]);
        if (!v) return oar_last_status();
        int n = 0;
        for (int d = 0; d < in[o]->ndim; d++) {
            int at = -1;
            for (int j = 0; j < n; j++)
                if (x[o].id[j] == lab[o][d]) at = j;
            if (at >= 0) {
                v->strides[at] += in[o]->strides[d];
            } else {
                x[o].id[n] = lab[o][d];
                v->shape[n] = in[o]->shape[d];
                v->strides[n++] = in[o]->strides[d];
            }
        }
        v->ndim = n;
        oar_tensor_refresh(v);
        x[o].t = oar_track(v);
        x[o].n = n;
    }
    if (!sum_private(&x[0], out, n_out, n_ops > 1 ? x[1].id : NULL, n_ops > 1 ? x[1].n : 0) ||
        (n_ops > 1 && !sum_private(&x[1], out, n_out, x[0].id, x[0].n)))
        return oar_last_status();
    oar_tensor *z;
    int zid[OAR_MAX_DIMS], nz = 0;
    if (n_ops == 1) {
        z = x[0].t;
        memcpy(zid, x[0].id, sizeof(int) * (size_t)x[0].n);
        nz = x[0].n;
    } else {
        int g[4][OAR_MAX_DIMS], gn[4] = {0}; /* batch, m, k, n */
        for (int i = 0; i < n_out; i++) {
            bool in0 = has(x[0].id, x[0].n, out[i]), in1 = has(x[1].id, x[1].n, out[i]);
            int k = in0 && in1 ? 0 : in0 ? 1 : 3;
            g[k][gn[k]++] = out[i];
        }
        for (int d = 0; d < x[0].n; d++)
            if (!has(out, n_out, x[0].id[d])) g[2][gn[2]++] = x[0].id[d];
        int ga[3][OAR_MAX_DIMS], gb[3][OAR_MAX_DIMS], na[3] = {gn[0], gn[1], gn[2]}, nb[3] = {gn[0], gn[2], gn[3]};
        memcpy(ga[0], g[0], sizeof g[0]), memcpy(ga[1], g[1], sizeof g[1]), memcpy(ga[2], g[2], sizeof g[2]);
        memcpy(gb[0], g[0], sizeof g[0]), memcpy(gb[1], g[2], sizeof g[2]), memcpy(gb[2], g[3], sizeof g[3]);
        /* a label of one operand missing from the other broadcasts: give that operand a unit dim */
        z = oar_matmul(arrange(&x[0], ga, na, 3, size), arrange(&x[1], gb, nb, 3, size));
        int64_t shape[OAR_MAX_DIMS];
        for (int k = 0; k < 4; k++) {
            if (k == 2) continue;
            for (int i = 0; i < gn[k]; i++) {
                shape[nz] = size[g[k][i]];
                zid[nz++] = g[k][i];
            }
        }
        z = z ? oar_reshape(z, shape, nz) : NULL;
    }
    if (!z) return oar_last_status();
    int perm[OAR_MAX_DIMS];
    for (int i = 0; i < n_out; i++)
        for (int d = 0; d < nz; d++)
            if (zid[d] == out[i]) perm[i] = d;
    z = n_out ? oar_permute(z, perm, n_out) : z;
    return z ? oar_tensor_copy_strided(y, z) : oar_last_status();
}

static oar_status cu_einsum(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_scope_begin();
    bool prev = oar_set_grad_enabled(false);
    oar_status st = einsum_compose(in, out[0], a[0].s);
    oar_set_grad_enabled(prev);
    oar_scope_end();
    return st;
}

void oar_cuda_register_einsum(void) {
    oar_cuda_register(OAR_OP_einsum, OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64) | OAR_DTYPE_BIT(OAR_F16) |
                                         OAR_DTYPE_BIT(OAR_BF16),
                      cu_einsum, NULL);
}
