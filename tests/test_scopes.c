/* Leaks and unbalanced scopes (issue 13, defect 4):
 *   - an oar_scope_end with no scope open is ignored and warned about, once;
 *   - scopes nested 1000 deep (a begin without its end at every step) are warned about, once;
 *   - a module's forward runs in a scope oar opens: its temporaries are released even when its
 *     author opened none and it is called outside any scope, its outputs survive, and a scope
 *     it leaves open is closed (and warned about) without unbalancing the caller's. */
#include "test_util.h"

static char warnings[8][512];
static int n_warnings;

static void on_warning(const char *msg, void *user) {
    (void)user;
    if (n_warnings < 8) snprintf(warnings[n_warnings], sizeof warnings[0], "%s", msg);
    n_warnings++;
}

static int64_t bytes_now(void) { return oar_memory_stats_get(OAR_CPU).current_bytes; }

static void test_extra_end(void) {
    n_warnings = 0;
    oar_scope_begin();
    oar_scope_end();
    CHECK(n_warnings == 0);
    oar_scope_end(); /* one too many */
    oar_scope_end();
    CHECK(n_warnings == 1);
    CHECK(strstr(warnings[0], "oar_scope_end without a matching oar_scope_begin") != NULL);
    /* still usable afterwards */
    oar_scope_begin();
    oar_tensor *t = oar_ones((int64_t[]){8}, 1, OAR_F32);
    oar_scope_end();
    CHECK(oar_numel(t) == -1); /* released by the scope */
}

static void test_deep_nesting(void) {
    n_warnings = 0;
    for (int i = 0; i < 1200; i++) oar_scope_begin();
    CHECK(n_warnings == 1);
    CHECK(strstr(warnings[0], "nested 1000 deep") != NULL);
    for (int i = 0; i < 1200; i++) oar_scope_end();
    CHECK(n_warnings == 1);
}

/* ---- module forwards written without a scope */
static oar_status careless_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)self, (void)n_in, (void)n_out;
    oar_tensor *sq = oar_mul(in[0], in[0]);           /* temporaries: never released here */
    oar_tensor *h = oar_add(sq, oar_exp(in[0]));
    out[0] = oar_relu(oar_mul_scalar(h, 0.5));
    return out[0] ? OAR_OK : oar_last_status();
}
static const oar_module_ops careless_ops = {"Careless", careless_forward, NULL, NULL};

static oar_status open_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)self, (void)n_in, (void)n_out;
    oar_scope_begin(); /* never ended */
    oar_tensor *h = oar_mul(in[0], in[0]);
    out[0] = oar_keep(oar_add(h, in[0]));
    return OAR_OK;
}
static const oar_module_ops open_ops = {"LeavesScopeOpen", open_forward, NULL, NULL};

static oar_status extra_end_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)self, (void)n_in, (void)n_out;
    out[0] = oar_mul(in[0], in[0]);
    oar_scope_end(); /* ends the scope oar runs this forward in */
    return OAR_OK;
}
static const oar_module_ops extra_end_ops = {"EndsTooMuch", extra_end_forward, NULL, NULL};

static oar_status identity_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)self, (void)n_in, (void)n_out;
    out[0] = oar_retain(in[0]);
    return OAR_OK;
}
static const oar_module_ops identity_ops = {"Identity", identity_forward, NULL, NULL};

static void test_forward_scoped(void) {
    oar_tensor *x = oar_full((int64_t[]){1000}, 1, 0.5, OAR_F32);
    oar_module *m = oar_module_new(&careless_ops, NULL);
    /* outside any scope: only the output is the caller's */
    int64_t before = bytes_now();
    oar_tensor *probe = oar_zeros_like(x);
    int64_t one = bytes_now() - before; /* one tensor like x, as the allocator counts it */
    oar_release(probe);
    oar_tensor *y = oar_forward(m, x);
    CHECK(y != NULL);
    CHECK_NEAR(t_at(y, 0), 0.5 * (0.25 + exp(0.5)), 1e-6);
    CHECK(bytes_now() - before == one);
    oar_release(y);
    CHECK(bytes_now() == before);
    /* with gradients: the graph keeps what backward needs, the rest goes */
    oar_set_requires_grad(x, true);
    before = bytes_now();
    for (int i = 0; i < 50; i++) {
        oar_tensor *z = oar_forward(m, x);
        oar_tensor *s = oar_sum(z, NULL, 0, false);
        CHECK(oar_backward(s, NULL, false) == OAR_OK);
        oar_release(s);
        oar_release(z);
        oar_zero_grad(x);
    }
    CHECK(bytes_now() == before);
    /* inside a scope: the output belongs to it */
    oar_scope_begin();
    oar_tensor *w = oar_forward(m, x);
    CHECK(oar_numel(w) == 1000);
    oar_scope_end();
    CHECK(oar_numel(w) == -1);
    CHECK(bytes_now() == before);
    oar_module_free(m);

    /* a forward that leaves a scope open: closed after it, warned once, caller's scopes intact */
    n_warnings = 0;
    m = oar_module_new(&open_ops, NULL);
    oar_scope_begin();
    oar_tensor *a = oar_forward(m, x), *b = oar_forward(m, x);
    CHECK(a && b && t_at(a, 0) == 0.75);
    CHECK(n_warnings == 1 && strstr(warnings[0], "left an oar_scope_begin without its oar_scope_end"));
    oar_scope_end(); /* the caller's own scope: releases a and b */
    CHECK(oar_numel(a) == -1 && oar_numel(b) == -1);
    oar_scope_end(); /* no scope left: warned as unbalanced, proving the stack was restored */
    CHECK(bytes_now() == before);
    oar_module_free(m);

    /* a forward with one oar_scope_end too many: warned, no crash, the caller's scope intact;
     * its output went with the scope it ended, and says so when used */
    n_warnings = 0;
    m = oar_module_new(&extra_end_ops, NULL);
    oar_scope_begin();
    oar_clear_error();
    CHECK(oar_forward(m, x) == NULL);
    CHECK(strstr(oar_last_error(), "EndsTooMuch: forward output 0 was released when the scope that owned it ended"));
    CHECK(n_warnings == 1 && strstr(warnings[0], "called oar_scope_end once more than oar_scope_begin"));
    n_warnings = 0;
    oar_scope_end(); /* the caller's scope is still there: no unbalanced warning */
    CHECK(n_warnings == 0);
    CHECK(bytes_now() == before);
    oar_module_free(m);

    /* a forward returning its input: the input stays the caller's */
    m = oar_module_new(&identity_ops, NULL);
    oar_scope_begin();
    oar_tensor *in = oar_ones((int64_t[]){3}, 1, OAR_F32);
    oar_tensor *out = oar_forward(m, in);
    CHECK(out == in && oar_numel(in) == 3);
    oar_release(out); /* the forward's new reference (it is the scope's entry that goes) */
    oar_scope_end();
    CHECK(oar_numel(in) == 3);
    oar_release(in);
    oar_module_free(m);
    oar_release(x);
}

int main(void) {
    oar_set_warning_handler(on_warning, NULL);
    test_extra_end();
    test_deep_nesting();
    test_forward_scoped();
    oar_set_warning_handler(NULL, NULL);
    return test_summary("test_scopes");
}
