/* fused_elementwise(inputs...; code0..code3): a chain or tree of elementwise ops run as one op,
 * made by the fuse_elementwise pass (src/graph/passes/fuse_elementwise.c). The program format is
 * in fused_ew.h.
 *
 * The op means exactly "run the listed ops one after another": every instruction rounds to the
 * dtype, as the unfused ops' outputs do. So the reference kernel composes the listed ops' own
 * reference kernels (one definition of each op's math), on inputs broadcast to the output
 * shape, and the gradient rule recomputes the chain with public op calls and applies each op's
 * own gradient rule in reverse: eager, graph and double backward see the unfused chain. */
#include "ops/fused_ew.h"

#include <stdio.h>
#include <string.h>

/* opcode -> (op, approximate, arity) */
static const oar_few_info g_info[] = {
    {OAR_FEW_ADD, OAR_OP_add, -1, 2},
    {OAR_FEW_SUB, OAR_OP_sub, -1, 2},
    {OAR_FEW_MUL, OAR_OP_mul, -1, 2},
    {OAR_FEW_DIV, OAR_OP_div, -1, 2},
    {OAR_FEW_NEG, OAR_OP_neg, -1, 1},
    {OAR_FEW_RELU, OAR_OP_relu, -1, 1},
    {OAR_FEW_SIGMOID, OAR_OP_sigmoid, -1, 1},
    {OAR_FEW_TANH, OAR_OP_tanh, -1, 1},
    {OAR_FEW_EXP, OAR_OP_exp, -1, 1},
    {OAR_FEW_LOG, OAR_OP_log, -1, 1},
    {OAR_FEW_SQRT, OAR_OP_sqrt, -1, 1},
    {OAR_FEW_SQUARE, OAR_OP_square, -1, 1},
    {OAR_FEW_ABS, OAR_OP_abs, -1, 1},
    {OAR_FEW_SILU, OAR_OP_silu, -1, 1},
    {OAR_FEW_GELU, OAR_OP_gelu, 0, 1},
    {OAR_FEW_GELU_TANH, OAR_OP_gelu, 1, 1},
    {OAR_FEW_RELU_BACKWARD, OAR_OP_relu_backward, -1, 2},
    {OAR_FEW_GELU_BACKWARD, OAR_OP_gelu_backward, 0, 2},
    {OAR_FEW_GELU_TANH_BACKWARD, OAR_OP_gelu_backward, 1, 2},
};
#define N_INFO ((int)(sizeof g_info / sizeof g_info[0]))

const oar_few_info *oar_few_info_of(int opcode) {
    for (int i = 0; i < N_INFO; i++)
        if (g_info[i].opcode == opcode) return &g_info[i];
    return NULL;
}

int oar_few_opcode_for(oar_op_id op, const oar_attr *a) {
    for (int i = 0; i < N_INFO; i++) {
        if (g_info[i].op != op) continue;
        if (g_info[i].approximate < 0 || (a && a[0].kind == OAR_ATTR_INT && a[0].i == g_info[i].approximate))
            return g_info[i].opcode;
    }
    return 0;
}

/* The attributes an instruction's op gets (approximate, when it has one). */
static void instr_attrs(const oar_few_info *f, oar_attr *a) {
    memset(a, 0, sizeof(oar_attr) * 2);
    if (f->approximate >= 0) a[0] = oar_attr_int(f->approximate);
}

#define FEW "fused_elementwise"

oar_status oar_few_decode(const oar_attr *attrs, int n_in, oar_few_instr *code, int *n_code) {
    int n = 0;
    bool ended = false;
    for (int k = 0; k < OAR_FEW_CODE_ATTRS; k++) {
        const oar_attr *a = &attrs[k];
        if (a->kind != OAR_ATTR_INTS)
            return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected code%d to be a list of ints, got attribute kind %d", k,
                             (int)a->kind);
        if (a->n > 0 && ended)
            return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected code%d empty after a code attribute with fewer "
                                                  "than %d words, got %d words", k, OAR_ATTR_MAX_INTS, a->n);
        if (a->n < OAR_ATTR_MAX_INTS) ended = true;
        for (int j = 0; j < a->n; j++, n++) {
            int64_t w = a->ints[j];
            int reg = n_in + n;
            const oar_few_info *f = w >= 0 && w < 1000000 ? oar_few_info_of((int)(w / 10000)) : NULL;
            if (!f)
                return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected instruction %d as opcode*10000 + a*100 + b "
                                                      "with a known opcode, got %lld", n, (long long)w);
            int ra = (int)(w / 100 % 100), rb = (int)(w % 100);
            if (ra >= reg || (f->arity == 2 && rb >= reg))
                return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected instruction %d to read registers below %d "
                                                      "(%d inputs, then one per instruction), got %d and %d",
                                 n, reg, n_in, ra, rb);
            if (f->arity == 1 && rb != 0)
                return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected operand b == 0 for the unary instruction %d, "
                                                      "got %lld", n, (long long)w);
            code[n] = (oar_few_instr){f->opcode, ra, f->arity == 2 ? rb : 0};
        }
    }
    if (n == 0) return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected at least one instruction, got none");
    if (n_in + n > OAR_FEW_MAX_REGS)
        return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected at most %d registers (inputs + instructions), got %d",
                         OAR_FEW_MAX_REGS, n_in + n);
    *n_code = n;
    return OAR_OK;
}

oar_status oar_few_encode(const oar_few_instr *code, int n_code, int n_in, oar_attr *attrs) {
    if (n_code < 1 || n_code > OAR_FEW_MAX_CODE || n_in < 1 || n_in > OAR_FEW_MAX_INPUTS ||
        n_in + n_code > OAR_FEW_MAX_REGS)
        return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected 1..%d instructions over 1..%d inputs (at most %d "
                                              "registers), got %d instructions and %d inputs",
                         OAR_FEW_MAX_CODE, OAR_FEW_MAX_INPUTS, OAR_FEW_MAX_REGS, n_code, n_in);
    for (int k = 0; k < OAR_FEW_CODE_ATTRS; k++) {
        int64_t w[OAR_ATTR_MAX_INTS];
        int m = 0;
        for (int j = k * OAR_ATTR_MAX_INTS; j < n_code && m < OAR_ATTR_MAX_INTS; j++, m++)
            w[m] = (int64_t)code[j].opcode * 10000 + code[j].a * 100 + code[j].b;
        attrs[k] = oar_attr_ints(w, m);
    }
    return OAR_OK;
}

static oar_status few_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    if (n_in > OAR_FEW_MAX_INPUTS)
        return oar_error(OAR_ERR_INVALID_ARG, FEW ": expected at most %d inputs, got %d", OAR_FEW_MAX_INPUTS, n_in);
    oar_status st = oar_check_float(FEW, in[0], "input 0");
    if (st == OAR_OK) st = oar_check_same_dtype(FEW, in, n_in);
    oar_few_instr code[OAR_FEW_MAX_CODE];
    int n_code;
    if (st == OAR_OK) st = oar_few_decode(a, n_in, code, &n_code);
    if (st != OAR_OK) return st;
    *n_out = 1;
    return oar_infer_broadcast(FEW, in, n_in, in[0]->dtype, out);
}

/* ---- reference: the ops' own reference kernels, one after another, on contiguous copies of
 * the inputs broadcast to the output shape (the op is strided: inputs may have any layout) */
static oar_tensor *broadcast_copy(const oar_tensor *x, const oar_tensor *y) {
    oar_tensor *t = oar_tensor_new(x->dtype, y->shape, y->ndim);
    if (!t || t->numel == 0) return t;
    oar_tensor *ops[2] = {t, (oar_tensor *)x};
    oar_iter it;
    oar_iter_init(&it, t->shape, t->ndim, ops, 2);
    size_t es = oar_dtypes[x->dtype].size;
    do memcpy(it.ptr[0], it.ptr[1], es); while (oar_iter_next(&it));
    return t;
}

static oar_status few_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)n_out;
    oar_few_instr code[OAR_FEW_MAX_CODE];
    int n_code;
    oar_status st = oar_few_decode(a, n_in, code, &n_code);
    if (st != OAR_OK) return st;
    oar_tensor *reg[OAR_FEW_MAX_REGS] = {0};
    int last_use[OAR_FEW_MAX_REGS];
    for (int r = 0; r < n_in + n_code; r++) last_use[r] = -1;
    for (int k = 0; k < n_code; k++) {
        last_use[code[k].a] = k;
        if (oar_few_info_of(code[k].opcode)->arity == 2) last_use[code[k].b] = k;
    }
    for (int i = 0; i < n_in && st == OAR_OK; i++)
        if (!(reg[i] = broadcast_copy(in[i], out[0]))) st = OAR_ERR_OOM;
    for (int k = 0; k < n_code && st == OAR_OK; k++) {
        const oar_few_info *f = oar_few_info_of(code[k].opcode);
        int r = n_in + k;
        oar_tensor *y = k == n_code - 1 ? out[0] : oar_tensor_new(out[0]->dtype, out[0]->shape, out[0]->ndim);
        if (!y) {
            st = OAR_ERR_OOM;
            break;
        }
        reg[r] = y;
        if (k == n_code - 1) oar_retain(y); /* released with the registers below */
        oar_tensor *ops[2] = {reg[code[k].a], reg[code[k].b]};
        oar_attr ia[2];
        instr_attrs(f, ia);
        if (y->numel) st = oar_op_table[f->op]->reference(ctx, ops, f->arity, &y, 1, ia);
        for (int o = 0; o < f->arity; o++) { /* drop operands this was the last reader of */
            int ro = o ? code[k].b : code[k].a;
            if (last_use[ro] == k && reg[ro]) {
                oar_tensor_unref(reg[ro]);
                reg[ro] = NULL;
            }
        }
    }
    for (int r = 0; r < n_in + n_code; r++) oar_tensor_unref(reg[r]);
    return st;
}

/* ---- gradient: recompute with public ops, then each op's own rule in reverse */
static oar_tensor *call_instr(const oar_few_info *f, oar_tensor *x, oar_tensor *y) {
    oar_attr ia[2];
    instr_attrs(f, ia);
    oar_tensor *ops[2] = {x, y};
    if (f->op == OAR_OP_relu_backward || f->op == OAR_OP_gelu_backward) {
        /* these take one shape; the fused op broadcasts like the binary ops */
        int64_t shape[OAR_MAX_DIMS];
        int nd;
        if (!oar_broadcast_shapes(x->shape, x->ndim, y->shape, y->ndim, shape, &nd)) {
            oar_error(OAR_ERR_SHAPE, FEW ": operands of %s do not broadcast", oar_op_table[f->op]->name);
            return NULL;
        }
        ops[0] = oar_expand(x, shape, nd);
        ops[1] = oar_expand(y, shape, nd);
        if (!ops[0] || !ops[1]) return NULL;
    }
    return oar_op_call1(f->op, ops, f->arity, ia);
}

static oar_tensor *accumulate(oar_tensor *acc, oar_tensor *g) {
    if (!g) return acc;
    return acc ? oar_add(acc, g) : g;
}

static oar_status few_grad(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    oar_few_instr code[OAR_FEW_MAX_CODE];
    int n_code, n_in = g->n_in;
    oar_status st = oar_few_decode(g->attrs, n_in, code, &n_code);
    if (st != OAR_OK) return st;
    oar_tensor *reg[OAR_FEW_MAX_REGS] = {0}, *grad[OAR_FEW_MAX_REGS] = {0};
    bool needs[OAR_FEW_MAX_REGS];
    for (int i = 0; i < n_in; i++) {
        reg[i] = g->in[i];
        needs[i] = g->needs[i];
    }
    for (int k = 0; k < n_code; k++) {
        const oar_few_info *f = oar_few_info_of(code[k].opcode);
        int r = n_in + k;
        needs[r] = needs[code[k].a] || (f->arity == 2 && needs[code[k].b]);
        if (!(reg[r] = call_instr(f, reg[code[k].a], reg[code[k].b]))) return oar_last_status();
    }
    oar_tensor *y = reg[n_in + n_code - 1], *go = g->gout[0];
    /* the result of the chain may be smaller than the broadcast of all inputs */
    if (y->ndim != go->ndim || memcmp(y->shape, go->shape, sizeof(int64_t) * (size_t)y->ndim))
        go = oar_sum_to_shape(go, y->shape, y->ndim);
    grad[n_in + n_code - 1] = go;
    for (int k = n_code - 1; k >= 0; k--) {
        int r = n_in + k;
        if (!grad[r] || !needs[r]) continue;
        const oar_few_info *f = oar_few_info_of(code[k].opcode);
        int opr[2] = {code[k].a, code[k].b};
        oar_tensor *ins[2] = {reg[opr[0]], reg[opr[1]]}, *outs[1] = {reg[r]}, *gouts[1] = {grad[r]};
        oar_tensor *gins[2] = {NULL, NULL};
        bool nd[2] = {needs[opr[0]], f->arity == 2 && needs[opr[1]]};
        oar_attr ia[2];
        instr_attrs(f, ia);
        oar_grad_ctx gc = {.attrs = ia, .in = ins, .n_in = f->arity, .out = outs, .n_out = 1,
                           .gout = gouts, .needs = nd, .gin = gins};
        if ((st = oar_op_table[f->op]->grad(&gc)) != OAR_OK) return st;
        for (int o = 0; o < f->arity; o++) {
            if (!nd[o] || !gins[o]) continue;
            oar_tensor *gi = gins[o];
            const oar_tensor *x = reg[opr[o]];
            if (gi->ndim != x->ndim || memcmp(gi->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
                gi = oar_sum_to_shape(gi, x->shape, x->ndim); /* through the expand of call_instr */
            if (!(grad[opr[o]] = accumulate(grad[opr[o]], gi))) return oar_last_status();
        }
    }
    for (int i = 0; i < n_in; i++)
        if (g->needs[i]) g->gin[i] = grad[i];
    return OAR_OK;
}

const oar_op_def oar_opdef_fused_elementwise = {
    .name = FEW, .n_inputs = -1, .n_outputs = 1, .n_attrs = OAR_FEW_CODE_ATTRS,
    .attrs = {{"code0", OAR_ATTR_INTS}, {"code1", OAR_ATTR_INTS}, {"code2", OAR_ATTR_INTS}, {"code3", OAR_ATTR_INTS}},
    /* strided: a broadcast (expanded) or transposed input is read in place, never copied */
    .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | OAR_OPF_INPLACE_OK, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = few_infer, .reference = few_ref, .grad = few_grad,
};
