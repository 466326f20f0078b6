/* fuse_conv_act (inference only): a conv2d and the elementwise ops after it become one
 * conv2d_act node (src/ops/fused_conv.c), whose oneDNN kernel applies them as post-ops while
 * the output is written:
 *     relu(conv2d(x, w, b))                 -> conv2d_act(x, w, b, -; act=relu)
 *     relu(add(conv2d(x, w, b), r))         -> conv2d_act(x, w, b, r; act=relu)   (ResNet blocks)
 *     add(conv2d(x, w, b), r)               -> conv2d_act(x, w, b, r; act=none)
 * (add in either order), and on the CPU clip(min=0, max=6) in relu's place (act=relu6:
 * mobilenet_v2's ReLU6, a Clip in ONNX files; CUDA's conv2d_act would run relu6 as a separate
 * clip kernel, so programs for it keep the clip). Each intermediate must have exactly one use (the next op of the
 * pattern), so nothing else reads the values that disappear; r must have the conv output's
 * dtype and shape (no broadcast). The fused node takes the place of the pattern's last node,
 * where r is already defined. Runs after fold_conv_bn, so conv + batch_norm + relu chains
 * fuse too. oneDNN's post-ops round like the unfused ops (the sum is added to the f32
 * accumulator once), but its kernel may order the accumulation differently than the
 * unfused call; tests compare within a tolerance. */
#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct fuser {
    oar_program *p;
    int *uses;
    int *consumer; /* per value: the node reading it when it has exactly one use, else -1 */
} fuser;

static bool same_meta(const oar_value *a, const oar_value *b) {
    return a->meta.dtype == b->meta.dtype && a->meta.ndim == b->meta.ndim && a->dyn_dims == b->dyn_dims &&
           !memcmp(a->meta.shape, b->meta.shape, sizeof(int64_t) * (size_t)a->meta.ndim);
}

/* The single live node reading v in the main block, or -1. */
static int next_of(const fuser *f, int v, oar_op_id op) {
    int c = f->uses[v] == 1 ? f->consumer[v] : -1;
    if (c < 0) return -1;
    const oar_node *n = &f->p->nodes[c];
    return !n->dead && n->op == op && n->block == OAR_MAIN_BLOCK ? c : -1;
}

static int pos_in_block(const oar_block *b, int id) {
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == id) return i;
    return -1;
}

static oar_status try_fuse(fuser *f, int conv_id) {
    oar_program *p = f->p;
    const oar_node *conv = &p->nodes[conv_id];
    if (conv->dead || conv->op != OAR_OP_conv2d || conv->block != OAR_MAIN_BLOCK) return OAR_OK;
    int y = conv->out[0], add = next_of(f, y, OAR_OP_add), res = -1, tail = -1, relu;
    if (add >= 0) {
        const oar_node *a = &p->nodes[add];
        res = a->in[0] == y ? a->in[1] : a->in[0];
        if (res == y || res < 0 || !same_meta(&p->values[res], &p->values[y]) ||
            !same_meta(&p->values[a->out[0]], &p->values[y]))
            add = -1, res = -1;
    }
    int before_relu = add >= 0 ? p->nodes[add].out[0] : y;
    relu = next_of(f, before_relu, OAR_OP_relu);
    const char *act = "relu";
    if (relu < 0 && p->device == OAR_CPU && (relu = next_of(f, before_relu, OAR_OP_clip)) >= 0) {
        const oar_attr *ca = p->nodes[relu].attrs;
        if (ca[0].f == 0.0 && ca[1].f == 6.0) act = "relu6";
        else relu = -1;
    }
    tail = relu >= 0 ? relu : add;
    if (tail < 0) return OAR_OK; /* a lone conv */
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], tail);
    if (pos < 0) return OAR_OK;
    oar_attr attrs[6];
    memcpy(attrs, conv->attrs, sizeof(oar_attr) * 4);
    attrs[4] = oar_attr_str(relu >= 0 ? act : "none");
    attrs[5] = oar_attr_str("nchw");
    int in[4] = {conv->in[0], conv->in[1], conv->in[2], res}, out;
    int old_out = p->nodes[tail].out[0];
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, OAR_OP_conv2d_act, in, 4, attrs, &out) < 0)
        return oar_last_status();
    p->values[out].dyn_dims = p->values[old_out].dyn_dims;
    oar_program_replace_uses(p, old_out, out);
    p->nodes[conv_id].dead = true;
    if (add >= 0) p->nodes[add].dead = true;
    if (relu >= 0) p->nodes[relu].dead = true;
    return OAR_OK;
}

oar_status oar_pass_fuse_conv_act(oar_program *p) {
    int nv = p->n_values, nn = p->n_nodes;
    fuser f = {p, malloc(sizeof(int) * (size_t)(nv + 1)), malloc(sizeof(int) * (size_t)(nv + 1))};
    oar_status st = f.uses && f.consumer ? OAR_OK : oar_error(OAR_ERR_OOM, "fuse_conv_act: out of memory");
    if (st == OAR_OK) {
        oar_program_use_counts(p, f.uses);
        for (int v = 0; v < nv; v++) f.consumer[v] = -1;
        for (int i = 0; i < nn; i++) {
            const oar_node *n = &p->nodes[i];
            if (n->dead) continue;
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] >= 0) f.consumer[n->in[k]] = i;
        }
    }
    for (int i = 0; i < nn && st == OAR_OK; i++) st = try_fuse(&f, i);
    free(f.uses);
    free(f.consumer);
    return st;
}
