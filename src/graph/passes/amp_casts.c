/* amp_casts: removes casts that change no value. Autocast inserts casts op by op, so a program
 * can hold round trips a narrower value makes through a wider type and back
 *     cast(cast(v: bf16, f32), bf16)  -> v        (also f16 -> f32 -> f16, any float -> f64 -> it)
 * and casts to the dtype a value already has. Widening a float is exact, so each such pair is
 * the identity and the program keeps eager's bits; the inner cast stays for its other readers
 * (dead_code drops it when none is left). Narrowing pairs (f32 -> bf16 -> f32) round, so they
 * are kept. */
#include "graph/passes/passes.h"

#include <stdlib.h>

/* Whether every value of dtype a is exactly representable in b. */
static bool widens_exactly(oar_dtype a, oar_dtype b) {
    if (a == b || b == OAR_F64) return oar_dtype_is_float(a) || a == OAR_I8 || a == OAR_U8 || a == OAR_I32;
    if (b == OAR_F32) return a == OAR_F16 || a == OAR_BF16 || a == OAR_I8 || a == OAR_U8;
    return false;
}

oar_status oar_pass_amp_casts(oar_program *p) {
    bool *mutable = oar_pass_mutable_values(p); /* memory written in place: keep its casts (copies) */
    if (!mutable) return oar_error(OAR_ERR_OOM, "amp_casts: out of memory");
    int removed = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        oar_node *n = &p->nodes[i];
        if (n->dead || n->op != OAR_OP_cast) continue;
        int src = n->in[0];
        oar_dtype to = (oar_dtype)n->attrs[0].i;
        int keep = -1;
        if (p->values[src].meta.dtype == to) {
            keep = src; /* a cast to the value's own dtype */
        } else {
            /* src made by a widening cast of a value of dtype `to` */
            for (int j = 0; j < p->n_nodes && keep < 0; j++) {
                const oar_node *m = &p->nodes[j];
                if (m->dead || m->op != OAR_OP_cast || m->out[0] != src || m->block != n->block) continue;
                int v = m->in[0];
                if (p->values[v].meta.dtype == to && widens_exactly(to, p->values[src].meta.dtype)) keep = v;
            }
        }
        if (keep < 0 || mutable[keep] || mutable[n->out[0]]) continue;
        oar_program_replace_uses(p, n->out[0], keep);
        n->dead = true;
        removed++;
    }
    free(mutable);
    /* the inner casts nothing reads any more */
    return removed ? oar_pass_dead_code(p) : OAR_OK;
}
