/* The public op table (include/oar/ops.h): schemas read at run time and calls by attribute
 * name agree with the typed C functions, and every misuse is an error naming the op. */
#include "test_util.h"

#include "ops/op.h" /* oar_attr_default: each default parses as its kind */

static void test_table(void) {
    int n = oar_op_count();
    CHECK(n > 50);
    int conv = oar_op_find("conv2d");
    CHECK(conv >= 0);
    CHECK(oar_op_find("no_such_op") == -1);
    for (int i = 0; i < n; i++) { /* every id has a schema whose name finds it again */
        oar_op_schema s;
        CHECK(oar_op_schema_get(i, &s) == OAR_OK);
        CHECK(s.name && oar_op_find(s.name) == i);
        for (int a = 0; a < s.n_attrs; a++) {
            CHECK(oar_op_attr_name(i, a) != NULL);
            CHECK(oar_op_attr_kind_of(i, a) >= OAR_OP_ATTR_INT && oar_op_attr_kind_of(i, a) <= OAR_OP_ATTR_DTYPE);
        }
    }
    oar_op_schema s;
    CHECK(oar_op_schema_get(conv, &s) == OAR_OK);
    CHECK(strcmp(s.name, "conv2d") == 0 && s.n_inputs == 3 && s.n_outputs == 1 && s.n_visible == 1);
    CHECK(s.optional_inputs == (1u << 2) && s.differentiable && !(s.flags & OAR_OP_NONDIFF));
    CHECK(s.n_attrs == 4 && strcmp(oar_op_attr_name(conv, 0), "stride") == 0);
    CHECK(oar_op_attr_kind_of(conv, 0) == OAR_OP_ATTR_INTS);

    int drop = oar_op_find("dropout");
    CHECK(oar_op_schema_get(drop, &s) == OAR_OK && s.n_visible == 1 && (s.flags & OAR_OP_RANDOM));
    int eq = oar_op_find("eq");
    CHECK(oar_op_schema_get(eq, &s) == OAR_OK && (s.flags & OAR_OP_NONDIFF) && !s.differentiable);
    int split = oar_op_find("split");
    CHECK(oar_op_schema_get(split, &s) == OAR_OK && s.n_outputs == -1 && s.n_visible == -1);
    int bn = oar_op_find("batch_norm");
    CHECK(oar_op_schema_get(bn, &s) == OAR_OK && s.mutated_inputs != 0);

    CHECK_ERR(oar_op_schema_get(n, &s), "expected an op id in [0,");
    CHECK_ERR(oar_op_attr_name(conv, 9), "conv2d has 4 attributes, got index 9");
    CHECK(oar_op_attr_kind_of(-1, 0) == 0);
}

static void test_call(void) {
    int64_t shape[] = {2, 3};
    oar_manual_seed(3);
    oar_tensor *x = oar_randn(shape, 2, OAR_F32);
    oar_set_requires_grad(x, true);

    /* sum over dim 1 by name, any attribute order; an INT where a list is expected is refused */
    int sum = oar_op_find("sum");
    int64_t dims[] = {1};
    oar_op_attr_value a[] = {{.name = "keepdim", .kind = OAR_OP_ATTR_INT, .i = 0},
                             {.name = "dims", .kind = OAR_OP_ATTR_INTS, .ints = dims, .n_ints = 1}};
    oar_tensor *out[4];
    int n = 4;
    CHECK(oar_op_call_named(sum, &x, 1, a, 2, out, &n) == OAR_OK);
    CHECK(n == 1);
    int d1 = 1;
    oar_tensor *want = oar_sum(x, &d1, 1, false);
    CHECK(t_same_bits(out[0], want));
    CHECK(oar_requires_grad(out[0]) && !oar_is_leaf(out[0])); /* recorded by autograd */
    CHECK(oar_backward(oar_sum(out[0], NULL, 0, false), NULL, false) == OAR_OK);
    CHECK(oar_grad_get(x) && t_at(oar_grad_get(x), 5) == 1.0);
    oar_release(out[0]);
    oar_release(want);

    /* FLOAT given as INT is converted; dropout's hidden mask is not returned */
    int drop = oar_op_find("dropout");
    oar_op_attr_value da[] = {{.name = "p", .kind = OAR_OP_ATTR_INT, .i = 0}, {.name = "training", .kind = OAR_OP_ATTR_INT, .i = 1}};
    n = 4;
    CHECK(oar_op_call_named(drop, &x, 1, da, 2, out, &n) == OAR_OK && n == 1);
    CHECK(t_same_bits(out[0], x));
    oar_release(out[0]);

    /* split returns as many outputs as inference decides */
    int split = oar_op_find("split");
    oar_op_attr_value sa[] = {{.name = "dim", .kind = OAR_OP_ATTR_INT, .i = 1},
                              {.name = "split_size", .kind = OAR_OP_ATTR_INT, .i = 2}};
    n = 4;
    CHECK(oar_op_call_named(split, &x, 1, sa, 2, out, &n) == OAR_OK && n == 2);
    CHECK(n == 2 && oar_size(out[0], 1) == 2 && oar_size(out[1], 1) == 1);
    for (int i = 0; i < n; i++) oar_release(out[i]);
    n = 1;
    CHECK_ERR(oar_op_call_named(split, &x, 1, sa, 2, out, &n), "split: produced 2 outputs but room was given for 1");

    /* optional inputs: linear without a bias */
    int64_t ws[] = {4, 3};
    oar_tensor *w = oar_randn(ws, 2, OAR_F32);
    oar_tensor *lin_in[] = {x, w, NULL};
    n = 1;
    CHECK(oar_op_call_named(oar_op_find("linear"), lin_in, 3, NULL, 0, out, &n) == OAR_OK);
    want = oar_linear(x, w, NULL);
    CHECK(t_same_bits(out[0], want));
    oar_release(out[0]);
    oar_release(want);

    /* errors name the op, what was expected and what was received */
    n = 4;
    CHECK_ERR(oar_op_call_named(sum, &x, 1, a, 1, out, &n), "sum: missing attribute 'dims'; every attribute without a default must be given: dims: ints, keepdim: int = false");
    oar_op_attr_value bad[] = {{.name = "dimz", .kind = OAR_OP_ATTR_INT}};
    CHECK_ERR(oar_op_call_named(sum, &x, 1, bad, 1, out, &n), "sum: unknown attribute 'dimz'; its attributes are: dims: ints, keepdim: int = false");
    oar_op_attr_value wrong[] = {{.name = "dims", .kind = OAR_OP_ATTR_FLOAT, .f = 1.5}, a[0]};
    CHECK_ERR(oar_op_call_named(sum, &x, 1, wrong, 2, out, &n), "sum: expected attribute 'dims' of kind ints, got float");
    oar_op_attr_value twice[] = {a[0], a[0]};
    CHECK_ERR(oar_op_call_named(sum, &x, 1, twice, 2, out, &n), "sum: attribute 'keepdim' given twice");
    oar_op_attr_value frac[] = {{.name = "dim", .kind = OAR_OP_ATTR_FLOAT, .f = 0.5}};
    CHECK_ERR(oar_op_call_named(oar_op_find("softmax"), &x, 1, frac, 1, out, &n), "softmax: expected attribute 'dim' of kind int, got float");
    oar_op_attr_value longs[] = {{.name = "dims", .kind = OAR_OP_ATTR_INTS, .ints = dims, .n_ints = 17}, a[0]};
    CHECK_ERR(oar_op_call_named(sum, &x, 1, longs, 2, out, &n), "sum: expected attribute 'dims' to hold 0 to 16 integers, got 17");
    CHECK_ERR(oar_op_call_named(oar_op_find("add"), &x, 1, NULL, 0, out, &n), "add: expected 2 inputs, got 1");
    CHECK_ERR(oar_op_call_named(oar_op_find("cond"), &x, 1, NULL, 0, out, &n), "cond: control flow is made by oar_cond");
    CHECK_ERR(oar_op_call_named(-3, &x, 1, NULL, 0, out, &n), "oar_op_call_named: expected an op id");
    oar_tensor *y = oar_randn(ws, 2, OAR_F32);
    oar_tensor *mm[] = {x, y};
    CHECK_ERR(oar_op_call_named(oar_op_find("matmul"), mm, 2, NULL, 0, out, &n), "matmul: expected");
    oar_release(y);
    oar_tensor *freed = oar_randn(ws, 2, OAR_F32);
    oar_release(freed);
    CHECK(oar_op_call_named(oar_op_find("neg"), &freed, 1, NULL, 0, out, &n) == OAR_ERR_STATE);
    oar_release(w);
    oar_release(x);
}

/* Attribute defaults: every one the table gives parses as its kind, a call by name fills the
 * attributes left out with them, and the C functions agree. */
static void test_defaults(void) {
    int n = oar_op_count(), with_defaults = 0;
    for (int i = 0; i < n; i++) {
        oar_op_schema s;
        CHECK(oar_op_schema_get(i, &s) == OAR_OK);
        for (int a = 0; a < s.n_attrs; a++) {
            if (!oar_op_attr_default(i, a)) continue;
            with_defaults++;
            oar_attr v = {0};
            if (oar_attr_default(oar_op_table[i], a, &v) != OAR_OK || (int)v.kind != (int)oar_op_attr_kind_of(i, a))
                printf("  %s.%s: default '%s' does not read as its kind: %s\n", s.name, oar_op_attr_name(i, a),
                       oar_op_attr_default(i, a), oar_last_error());
            CHECK(v.kind == (oar_attr_kind)oar_op_attr_kind_of(i, a));
        }
    }
    CHECK(with_defaults >= 20);
    int ln = oar_op_find("layer_norm"), gs = oar_op_find("grid_sample"), nms = oar_op_find("nms");
    CHECK(strcmp(oar_op_attr_default(ln, 1), "1e-05") == 0);
    CHECK(oar_op_attr_default(ln, 0) == NULL && oar_last_status() == OAR_OK); /* required, not an error */
    CHECK(strcmp(oar_op_attr_default(gs, 0), "bilinear") == 0 && strcmp(oar_op_attr_default(gs, 2), "false") == 0);
    CHECK(oar_op_attr_default(nms, 0) == NULL);
    CHECK(oar_op_attr_default(ln, 2) == NULL && oar_last_status() == OAR_ERR_INVALID_ARG);
    CHECK(strstr(oar_last_error(), "oar_op_attr_default: layer_norm has 2 attributes, got index 2") != NULL);

    int64_t xs[] = {2, 3, 4, 5};
    oar_tensor *x = oar_randn(xs, 4, OAR_F32), *out[2];
    oar_tensor *lin[] = {x, NULL, NULL};
    oar_op_attr_value nd[] = {{.name = "normalized_ndim", .kind = OAR_OP_ATTR_INT, .i = 2}};
    int k = 1;
    CHECK(oar_op_call_named(ln, lin, 3, nd, 1, out, &k) == OAR_OK);
    oar_tensor *want = oar_layer_norm(x, 2, NULL, NULL, 1e-5);
    CHECK(want && t_same_bits(out[0], want));
    oar_release(out[0]);
    /* grid_sample by name with every attribute left out: bilinear, zeros, align_corners false */
    int64_t gsz[] = {2, 3, 3, 2};
    oar_tensor *grid = oar_rand(gsz, 4, OAR_F32);
    oar_tensor *gin[] = {x, grid};
    k = 1;
    CHECK(oar_op_call_named(gs, gin, 2, NULL, 0, out, &k) == OAR_OK);
    oar_tensor *gwant = oar_grid_sample(x, grid, "bilinear", "zeros", false);
    CHECK(gwant && t_same_bits(out[0], gwant));
    oar_release(out[0]);
    CHECK_ERR(oar_op_call_named(nms, gin, 2, NULL, 0, out, &k), "nms: missing attribute 'iou_threshold'; every attribute "
              "without a default must be given: iou_threshold: float");
    oar_release(grid);
    oar_release(x);
}

int main(void) {
    test_table();
    oar_scope_begin();
    test_defaults();
    oar_scope_end();
    oar_scope_begin(); /* releases the temporaries the checks make (oar_sum(...) chains) */
    test_call();
    oar_scope_end();
    printf("test_op_api: %d passed, %d failed\n", t_passed, t_failed);
    return t_failed ? 1 : 0;
}
