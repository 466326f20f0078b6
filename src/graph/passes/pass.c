/* The pass table and the driver: passes run in table order, each followed by the verifier
 * (so a pass that breaks the program is named at once) and by compaction of killed nodes.
 * A build strategy switches passes by name on top of the table's defaults. */
#include "graph/passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const oar_pass_info g_passes[] = {
    {"dead_code", "removes nodes whose results are never used and that have no effects", true, false,
     oar_pass_dead_code},
    {"cse", "merges nodes of one block that compute the same op on the same inputs", true, false,
     oar_pass_cse},
    {"constant_folding", "computes nodes whose inputs are all constants once, at compile time", true,
     false, oar_pass_constant_folding},
    {"amp_casts", "removes casts that change no value: to a value's own dtype, or a round trip through a "
     "wider type (bf16 -> f32 -> bf16)", true, false, oar_pass_amp_casts},
    {"fold_conv_bn", "folds an inference-mode batch_norm into the conv2d before it (weights recomputed when "
     "parameters change)", true, true, oar_pass_fold_conv_bn},
    {"fuse_conv_act", "fuses conv2d with a following relu (or clip to [0, 6] on the CPU) and/or residual add into conv2d_act (oneDNN post-ops)",
     true, true, oar_pass_fuse_conv_act},
    {"fuse_quant", "keeps int8 layers' activations in int8: ReLU and requantization into qconv2d/qlinear "
     "epilogues, quantize moved above max pooling and reshapes", true, true, oar_pass_fuse_quant},
    {"conv_nhwc", "runs convolutions on NHWC activations (oneDNN's layout) so chains of convs skip conversions; a channel concat read by a 1x1 conv (or max pooled first) is split into the convs",
     true, true, oar_pass_conv_nhwc, true},
    {"quant_nhwc", "runs int8 convolutions (qconv2d on oneDNN) on NHWC u8/i8 and f32 activations, with quantize, max "
     "pooling and residuals in between, so oneDNN's NHWC sums need no transposes (the same bits)", true, true,
     oar_pass_quant_nhwc, true},
    {"fuse_qadd", "puts an int8 residual addition (qadd of u8/i8 codes) into the epilogue of the NHWC int8 convolution "
     "that makes one of its operands (the same bits, no pass over the conv's codes)", true, true, oar_pass_fuse_qadd,
     true},
    {"fuse_attention", "matmul, scale, mask, softmax, matmul (and their traced backward) become fused_attention "
     "(and attention_backward)", true, false, oar_pass_fuse_attention},
    {"fuse_linear_act", "runs linear followed by relu or gelu as one linear_act node (the activation applied "
     "right after the GEMM)", true, false, oar_pass_fuse_linear_act},
    {"fuse_bn_act", "batch_norm (+ residual add) + relu become batch_norm_act, and relu_backward + "
     "batch_norm_backward batch_norm_act_backward (before fuse_elementwise takes add + relu)", true, false,
     oar_pass_fuse_bn_act},
    {"fuse_add_layer_norm", "a residual add feeding layer_norm becomes add_layer_norm; layer_norm_backward whose dx is "
     "added to a residual gradient becomes layer_norm_backward_add", true, false, oar_pass_fuse_add_layer_norm},
    {"fuse_elementwise", "runs trees of f32 elementwise nodes whose intermediates nothing else reads as one "
     "fused_elementwise node", true, false, oar_pass_fuse_elementwise},
    {"fuse_all_optimizer_ops", "merges a step's optimizer_update nodes into optimizer_update_multi nodes (one "
     "dispatch)", true, false, oar_pass_fuse_all_optimizer_ops},
    {"bucket_allreduce", "groups a data-parallel step's gradient allreduces into buckets started as soon as their "
     "last gradient is made and waited for just before their first reader (overlap with backward)", true, false,
     oar_pass_bucket_allreduce},
    {"inplace", "lets elementwise nodes write into their input's buffer when nothing else reads it",
     true, false, oar_pass_inplace},
};

#define N_PASSES ((int)(sizeof g_passes / sizeof g_passes[0]))
_Static_assert(sizeof g_passes / sizeof g_passes[0] <= 64, "a build strategy holds 64 passes");

int oar_pass_count(void) { return N_PASSES; }

const oar_pass_info *oar_pass_at(int i) { return i >= 0 && i < N_PASSES ? &g_passes[i] : NULL; }

int oar_pass_find(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < N_PASSES; i++)
        if (strcmp(g_passes[i].name, name) == 0) return i;
    return -1;
}

const char *oar_pass_name(int i) { return i >= 0 && i < N_PASSES ? g_passes[i].name : NULL; }

const char *oar_pass_summary(int i) { return i >= 0 && i < N_PASSES ? g_passes[i].summary : NULL; }

static uint64_t default_mask(void) {
    uint64_t m = 0;
    for (int i = 0; i < N_PASSES; i++)
        if (g_passes[i].default_on) m |= 1ull << i;
    return m;
}

uint64_t oar_build_strategy_mask(const oar_build_strategy *s) {
    uint64_t all = N_PASSES >= 64 ? ~0ull : (1ull << N_PASSES) - 1;
    if (!s) return default_mask();
    return ((default_mask() | s->enable) & ~s->disable) & all;
}

oar_status oar_build_strategy_set(oar_build_strategy *s, const char *pass, bool on) {
    if (!s) return oar_error(OAR_ERR_INVALID_ARG, "oar_build_strategy_set: expected a strategy, got NULL");
    int i = oar_pass_find(pass);
    if (i < 0) {
        char known[512];
        size_t n = 0;
        known[0] = '\0';
        for (int k = 0; k < N_PASSES && n < sizeof known; k++)
            n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", k ? ", " : "", g_passes[k].name);
        return oar_error(OAR_ERR_INVALID_ARG, "oar_build_strategy_set: expected a pass name (%s), got '%s'",
                         known, pass ? pass : "(null)");
    }
    uint64_t bit = 1ull << i;
    if (on) {
        s->enable |= bit;
        s->disable &= ~bit;
    } else {
        s->disable |= bit;
        s->enable &= ~bit;
    }
    return OAR_OK;
}

oar_status oar_passes_run(oar_program *p, uint64_t mask, bool training) {
    if (!p) return oar_error(OAR_ERR_INVALID_ARG, "passes: expected a program, got NULL");
    for (int i = 0; i < N_PASSES; i++) {
        const oar_pass_info *pi = &g_passes[i];
        if (!((mask >> i) & 1u)) continue;
        if (training && pi->inference_only) continue;
        if (p->device != OAR_CPU && pi->cpu_only) continue;
        oar_status st = pi->run(p);
        if (st == OAR_OK) st = oar_program_verify(p);
        if (st != OAR_OK) {
            oar_error_prefix("pass %s", pi->name);
            return st;
        }
        oar_program_compact(p);
    }
    return OAR_OK;
}

/* Walks blocks in execution order (a node's sub-blocks before its outputs are defined), so a
 * view's input has its root before the view does. */
static void view_roots(const oar_program *p, int b, int *root, int depth) {
    if (depth > 64) return;
    const oar_block *bl = &p->blocks[b];
    for (int i = 0; i < bl->n_nodes; i++) {
        const oar_node *n = &p->nodes[bl->nodes[i]];
        if (n->dead) continue;
        for (int k = 0; k < n->n_blocks; k++) view_roots(p, n->blocks[k], root, depth + 1);
        bool view = (oar_op_table[n->op]->flags & OAR_OPF_VIEW) != 0;
        if ((view || n->inplace) && n->n_in > 0 && n->in[0] >= 0)
            for (int o = 0; o < n->n_out && (view || o == 0); o++) root[n->out[o]] = root[n->in[0]];
    }
}

int *oar_pass_value_roots(const oar_program *p) {
    int *root = malloc(sizeof(int) * ((size_t)p->n_values + 1));
    if (!root) {
        oar_error(OAR_ERR_OOM, "passes: out of memory");
        return NULL;
    }
    for (int v = 0; v < p->n_values; v++) root[v] = v;
    view_roots(p, OAR_MAIN_BLOCK, root, 0);
    return root;
}

bool *oar_pass_mutable_roots(const oar_program *p, const int *root) {
    bool *mut = calloc((size_t)p->n_values + 1, 1);
    if (!mut) {
        oar_error(OAR_ERR_OOM, "passes: out of memory");
        return NULL;
    }
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        uint32_t m = oar_node_mutated_inputs(n);
        if (n->dead || !m) continue;
        for (int k = 0; k < n->n_in && k < 32; k++)
            if (((m >> k) & 1u) && n->in[k] >= 0) mut[root[n->in[k]]] = true;
    }
    return mut;
}

bool *oar_pass_mutable_values(const oar_program *p) {
    int *root = oar_pass_value_roots(p);
    bool *mut_root = root ? oar_pass_mutable_roots(p, root) : NULL;
    bool *mut = mut_root ? calloc((size_t)p->n_values + 1, 1) : NULL;
    if (mut)
        for (int v = 0; v < p->n_values; v++) mut[v] = mut_root[root[v]];
    else if (mut_root)
        oar_error(OAR_ERR_OOM, "passes: out of memory");
    free(root);
    free(mut_root);
    return mut;
}
