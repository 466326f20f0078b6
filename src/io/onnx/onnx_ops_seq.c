/* ONNX sequences and optionals (docs/onnx.md "Sequences and optionals"), and SequenceMap. A
 * sequence is a list of the trace's tensors on the importer's side (ox_seq, onnx_internal.h): its
 * length and positions are known when the program is compiled, so SequenceInsert/At/Erase/Length
 * are list operations and only ConcatFromSequence and SplitToSequence give tensor ops
 * (concat/stack, slices); SequenceMap runs its body once per element (unrolled). An
 * optional holding an element is that element; an empty one is an ox_seq marked none. */
#include "io/onnx/onnx_ops.h"

#include <stdio.h>
#include <string.h>

/* Input k as a sequence (not an optional, not a tensor); NULL with the error set. */
static ox_seq *seq_in(ox_ctx *c, int k) {
    ox_seq *q = k < c->n_in ? c->sin[k] : NULL;
    if (q && !q->none) return q;
    const char *got = q ? "an optional with no element" : OX_IN(c, k) ? "a tensor" : "nothing";
    ox_fail(c, OAR_ERR_FORMAT, "input %d must be a sequence of tensors, got %s", k, got);
    return NULL;
}

/* A known position input (int32/int64 scalar) made non-negative against [-lo_n, hi_n]; def when
 * absent; -1 with the error set. */
static int64_t position(ox_ctx *c, int k, int64_t def, int n, bool at_end_ok) {
    if (!OX_IN(c, k)) return def;
    oar_tensor *p = c->in[k];
    if (p->dtype != OAR_I64 && p->dtype != OAR_I32)
        return ox_fail(c, OAR_ERR_DTYPE, "the position must be int32 or int64, got %s", oar_dtype_name(p->dtype)),
               -1;
    if (p->numel != 1 || p->ndim > 1)
        return ox_fail(c, OAR_ERR_SHAPE, "the position must be a scalar, got %lld elements in %d dims",
                       (long long)p->numel, p->ndim), -1;
    int64_t v;
    if (ox_known_ints(c, k, &v, 1) != 1) return -1;
    int64_t hi = at_end_ok ? n : n - 1;
    if (v < -n || v > hi)
        return ox_fail(c, OAR_ERR_INVALID_ARG, "position %lld is out of range for a sequence of %d tensors; "
                                               "expected [%d, %lld]", (long long)v, n, -n, (long long)hi), -1;
    return v < 0 ? v + n : v;
}

static oar_status check_dtype(ox_ctx *c, const ox_seq *q, const oar_tensor *x, const char *what) {
    if (q->dtype == OAR_DTYPE_COUNT || x->dtype == q->dtype) return OAR_OK;
    return ox_fail(c, OAR_ERR_DTYPE, "%s is %s, the sequence's elements are %s; a sequence's tensors share one dtype",
                   what, oar_dtype_name(x->dtype), oar_dtype_name(q->dtype));
}

static oar_status set_seq(ox_ctx *c, ox_seq *q) {
    if (!q) return oar_last_status();
    if (c->n_out < 1) return ox_fail(c, OAR_ERR_FORMAT, "expected an output, got none");
    c->sout[0] = q;
    return OAR_OK;
}

oar_status ox_SequenceEmpty(ox_ctx *c) {
    oar_dtype dt = OAR_F32;
    const Onnx__AttributeProto *a = ox_attr(c, "dtype");
    if (a && !ox_dtype_from_onnx((int32_t)a->i, &dt))
        return ox_unsupported(c, "dtype %s; oar supports float, double, float16, bfloat16, int8, uint8, int32, int64 "
                                 "and bool", ox_onnx_type_name((int32_t)a->i));
    return set_seq(c, ox_seq_new(c->env, dt, 0));
}

oar_status ox_SequenceConstruct(ox_ctx *c) {
    if (c->n_in < 1) return ox_fail(c, OAR_ERR_FORMAT, "expected at least one input tensor, got none");
    for (int k = 0; k < c->n_in; k++)
        if (!c->in[k])
            return ox_fail(c, OAR_ERR_FORMAT, "input %d must be a tensor, got %s", k,
                           c->sin[k] ? "a sequence or optional" : "nothing (\"\")");
    ox_seq *q = ox_seq_new(c->env, c->in[0]->dtype, c->n_in);
    if (!q) return oar_last_status();
    for (int k = 0; k < c->n_in; k++) {
        char what[32];
        snprintf(what, sizeof what, "input %d", k);
        oar_status st = check_dtype(c, q, c->in[k], what);
        if (st != OAR_OK) return st;
        q->items[k] = c->in[k];
    }
    return set_seq(c, q);
}

oar_status ox_SequenceAt(ox_ctx *c) {
    ox_seq *q = seq_in(c, 0);
    if (!q) return oar_last_status();
    if (!OX_IN(c, 1)) return ox_fail(c, OAR_ERR_FORMAT, "expected a position input, got none");
    int64_t i = position(c, 1, 0, q->n, false);
    return i < 0 ? oar_last_status() : ox_set(c, 0, q->items[i]);
}

oar_status ox_SequenceInsert(ox_ctx *c) {
    ox_seq *q = seq_in(c, 0);
    oar_tensor *x = OX_IN(c, 1);
    if (!q) return oar_last_status();
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "input 1 must be the tensor to insert, got %s",
                           c->n_in > 1 && c->sin[1] ? "a sequence or optional" : "nothing");
    oar_status st = check_dtype(c, q, x, "the tensor inserted");
    if (st != OAR_OK) return st;
    int64_t at = position(c, 2, q->n, q->n, true);
    if (at < 0) return oar_last_status();
    ox_seq *r = ox_seq_new(c->env, x->dtype, q->n + 1);
    if (!r) return oar_last_status();
    for (int i = 0, j = 0; i <= q->n; i++) r->items[i] = i == at ? x : q->items[j++];
    return set_seq(c, r);
}

oar_status ox_SequenceErase(ox_ctx *c) {
    ox_seq *q = seq_in(c, 0);
    if (!q) return oar_last_status();
    if (q->n == 0) return ox_fail(c, OAR_ERR_INVALID_ARG, "the sequence is empty; there is nothing to erase");
    int64_t at = position(c, 1, q->n - 1, q->n, false);
    if (at < 0) return oar_last_status();
    ox_seq *r = ox_seq_new(c->env, q->dtype, q->n - 1);
    if (!r) return oar_last_status();
    for (int i = 0, j = 0; i < q->n; i++)
        if (i != at) r->items[j++] = q->items[i];
    return set_seq(c, r);
}

/* A scalar made now (the trace paused), a constant of the running trace. */
static oar_tensor *const_scalar(double v, oar_dtype dt) {
    uint64_t t = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *x = oar_scalar(v, dt);
    oar_active_trace = t;
    return ox_as_constant(x);
}

oar_status ox_SequenceLength(ox_ctx *c) {
    ox_seq *q = seq_in(c, 0);
    return q ? ox_set(c, 0, const_scalar(q->n, OAR_I64)) : oar_last_status();
}

oar_status ox_ConcatFromSequence(ox_ctx *c) {
    ox_seq *q = seq_in(c, 0);
    if (!q) return oar_last_status();
    const Onnx__AttributeProto *a = ox_attr(c, "axis");
    if (!a) return ox_fail(c, OAR_ERR_FORMAT, "the attribute axis is required and missing");
    int64_t new_axis = ox_attr_int(c, "new_axis", 0);
    if (new_axis != 0 && new_axis != 1)
        return ox_fail(c, OAR_ERR_INVALID_ARG, "new_axis is %lld; expected 0 or 1", (long long)new_axis);
    if (q->n == 0)
        return ox_fail(c, OAR_ERR_SHAPE, "the sequence is empty; ConcatFromSequence needs at least one tensor");
    int rank = q->items[0]->ndim + (int)new_axis;
    if (!new_axis && rank == 0) return ox_fail(c, OAR_ERR_SHAPE, "the tensors are scalars; concatenating needs rank >= 1 "
                                                                 "(or new_axis = 1)");
    int axis = ox_axis(c, a->i, rank, "axis");
    if (axis < 0) return oar_last_status();
    for (int i = 1; i < q->n; i++) {
        const oar_tensor *x = q->items[i], *x0 = q->items[0];
        bool ok = x->ndim == x0->ndim;
        for (int d = 0; ok && d < x->ndim; d++) ok = x->shape[d] == x0->shape[d] || (!new_axis && d == axis);
        if (!ok)
            return ox_fail(c, OAR_ERR_SHAPE, "tensor %d's shape does not match tensor 0's (rank %d vs %d); %s", i,
                           x->ndim, x0->ndim, new_axis ? "stacking needs equal shapes"
                                                       : "concatenating needs equal sizes except along axis");
    }
    return ox_set(c, 0, new_axis ? oar_stack(q->items, q->n, axis) : oar_concat(q->items, q->n, axis));
}

oar_status ox_SplitToSequence(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *s = OX_IN(c, 1);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "input 0 must be a tensor, got %s", c->sin[0] ? "a sequence" : "nothing");
    if (x->ndim == 0) return ox_fail(c, OAR_ERR_SHAPE, "the input is a scalar; there is no axis to split");
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    int64_t keepdims = ox_attr_int(c, "keepdims", 1), size = x->shape[axis];
    int64_t sizes[OX_MAX_NODE_IO * 4];
    const int max = (int)(sizeof sizes / sizeof *sizes);
    int n = 0;
    if (!s) { /* pieces of 1, squeezed unless keepdims */
        if (size > max) return ox_unsupported(c, "%lld pieces; oar keeps at most %d", (long long)size, max);
        for (; n < size; n++) sizes[n] = 1;
    } else if (s->ndim == 0) { /* pieces of that size, the last smaller */
        int64_t each;
        if (ox_known_ints(c, 1, &each, 1) != 1) return oar_last_status();
        if (each <= 0) return ox_fail(c, OAR_ERR_INVALID_ARG, "split is %lld; expected a size > 0", (long long)each);
        if ((size + each - 1) / each > max)
            return ox_unsupported(c, "%lld pieces; oar keeps at most %d", (long long)((size + each - 1) / each), max);
        for (int64_t at = 0; at < size; at += each) sizes[n++] = at + each <= size ? each : size - at;
    } else {
        if ((n = ox_known_ints(c, 1, sizes, max)) < 0) return oar_last_status();
        int64_t sum = 0;
        for (int k = 0; k < n; k++) {
            if (sizes[k] < 0)
                return ox_fail(c, OAR_ERR_INVALID_ARG, "split[%d] is %lld; expected sizes >= 0", k, (long long)sizes[k]);
            sum += sizes[k];
        }
        if (sum != size)
            return ox_fail(c, OAR_ERR_SHAPE, "split sums to %lld; dim %d has %lld", (long long)sum, axis,
                           (long long)size);
    }
    ox_seq *q = ox_seq_new(c->env, x->dtype, n);
    if (!q) return oar_last_status();
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        oar_tensor *y = oar_slice(x, axis, at, at + sizes[k], 1);
        if (y && !s && !keepdims) y = oar_squeeze(y, axis);
        if (!y) return oar_last_status();
        q->items[k] = y;
        at += sizes[k];
    }
    return set_seq(c, q);
}

/* SequenceMap: the body runs once per element of the input sequence (unrolled: the length is
 * known), reading element i of each sequence input and the tensor inputs whole; its outputs, one
 * tensor each per run, make the output sequences. */
oar_status ox_SequenceMap(ox_ctx *c) {
    ox_seq *q = seq_in(c, 0);
    if (!q) return oar_last_status();
    const ox_graph *body = c->node->sub[0];
    for (int k = 1; k < c->n_in; k++) {
        if (!c->in[k] && (!c->sin[k] || c->sin[k]->none))
            return ox_fail(c, OAR_ERR_FORMAT, "input %d must be a tensor or a sequence, got %s", k,
                           c->sin[k] ? "an optional with no element" : "nothing (\"\")");
        if (c->sin[k] && c->sin[k]->n != q->n)
            return ox_fail(c, OAR_ERR_SHAPE, "input %d is a sequence of %d tensors, input 0 of %d; the sequences "
                                             "must have one length", k, c->sin[k]->n, q->n);
    }
    ox_seq *outs[OX_MAX_NODE_IO];
    for (int j = 0; j < c->n_out; j++)
        if (!(outs[j] = ox_seq_new(c->env, body->out[j].dtype, q->n))) return oar_last_status();
    for (int i = 0; i < q->n; i++) {
        for (int k = 0; k < c->n_in; k++) {
            int v = body->in[k].value;
            c->vals[v] = c->sin[k] ? c->sin[k]->items[i] : c->in[k];
            c->env->sq[v] = NULL;
        }
        oar_status st = ox_run_graph(c->m, body, c->env);
        if (st != OAR_OK) return st;
        for (int j = 0; j < c->n_out; j++) {
            oar_tensor *y = c->vals[body->out[j].value];
            if (!y || c->env->sq[body->out[j].value])
                return ox_fail(c, OAR_ERR_DTYPE, "the body's output %d ('%s') is not a tensor; SequenceMap's body "
                                                 "gives one tensor per output", j, body->out[j].name);
            char what[64];
            snprintf(what, sizeof what, "the body's output %d", j);
            oar_status st2 = check_dtype(c, outs[j], y, what);
            if (st2 != OAR_OK) return st2;
            outs[j]->dtype = y->dtype;
            outs[j]->items[i] = y;
        }
    }
    for (int j = 0; j < c->n_out; j++) c->sout[j] = outs[j];
    return OAR_OK;
}

/* ---- optionals */

/* The optional type an Optional node's `type` attribute names: of a sequence or of a tensor. */
static oar_status optional_type(ox_ctx *c, bool *of_seq, oar_dtype *dt) {
    const Onnx__AttributeProto *a = ox_attr(c, "type");
    const Onnx__TypeProto *tp = a ? a->tp : NULL;
    if (!tp) return ox_fail(c, OAR_ERR_FORMAT, "without an input the attribute type is required (the empty "
                                               "optional's type); it is missing");
    *of_seq = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    if (*of_seq) tp = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return ox_unsupported(c, "the type attribute is not a tensor or sequence of tensors type");
    *dt = OAR_DTYPE_COUNT;
    if (tp->tensor_type->has_elem_type && !ox_dtype_from_onnx(tp->tensor_type->elem_type, dt))
        return ox_unsupported(c, "the type attribute's dtype is %s", ox_onnx_type_name(tp->tensor_type->elem_type));
    return OAR_OK;
}

oar_status ox_Optional(ox_ctx *c) {
    if (c->n_out < 1) return ox_fail(c, OAR_ERR_FORMAT, "expected an output, got none");
    if (OX_IN(c, 0)) return ox_set(c, 0, c->in[0]);
    if (c->n_in > 0 && c->sin[0]) {
        if (c->sin[0]->none) return ox_fail(c, OAR_ERR_FORMAT, "the input is an optional; Optional takes a tensor or "
                                                               "a sequence");
        return set_seq(c, c->sin[0]);
    }
    bool of_seq = false;
    oar_dtype dt = OAR_DTYPE_COUNT;
    oar_status st = optional_type(c, &of_seq, &dt);
    if (st != OAR_OK) return st;
    ox_seq *q = ox_seq_new(c->env, dt, 0);
    if (!q) return oar_last_status();
    q->none = true;
    q->of_seq = of_seq;
    return set_seq(c, q);
}

oar_status ox_OptionalHasElement(ox_ctx *c) {
    bool has = OX_IN(c, 0) || (c->n_in > 0 && c->sin[0] && !c->sin[0]->none);
    if (c->opset < 18 && c->n_in < 1)
        return ox_fail(c, OAR_ERR_FORMAT, "expected an input (optional only from opset 18), got none");
    return ox_set(c, 0, const_scalar(has, OAR_BOOL));
}

oar_status ox_OptionalGetElement(ox_ctx *c) {
    if (OX_IN(c, 0)) return ox_set(c, 0, c->in[0]);
    ox_seq *q = c->n_in > 0 ? c->sin[0] : NULL;
    if (!q) return ox_fail(c, OAR_ERR_FORMAT, "expected an input, got none");
    if (q->none)
        return ox_fail(c, OAR_ERR_INVALID_ARG, "the optional has no element (test it with OptionalHasElement first)");
    return set_seq(c, q);
}
