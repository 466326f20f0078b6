/* custom_function: the node of a front end's custom autograd function (torch.autograd.Function).
 * Its output is a view of y, the value the front end computed; its gradient calls the front end's
 * backward. Input 1 is a 0-d i64 handle naming the function in a registry: the handle's storage
 * owns the registry entry, so the entry lives exactly as long as some node or program holds the
 * handle, and a handle tensor made any other way (random inputs) names nothing and is refused. */
#include "ops/op.h"

#include <pthread.h>
#include <string.h>
#include <stdlib.h>

#define CF "custom_function"
#define N_BUCKETS 256

typedef struct custom_entry {
    int64_t id;
    int output, n_inputs;
    oar_meta *inputs; /* their shapes and dtypes: the node does not keep the inputs themselves */
    oar_custom_backward backward;
    void (*release)(void *);
    void *user;
    struct custom_entry *next;
} custom_entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static custom_entry *g_buckets[N_BUCKETS];
static int64_t g_next_id = 1;

static custom_entry *registry_find(int64_t id) {
    pthread_mutex_lock(&g_lock);
    custom_entry *e = g_buckets[(uint64_t)id % N_BUCKETS];
    while (e && e->id != id) e = e->next;
    pthread_mutex_unlock(&g_lock);
    return e;
}

/* The handle storage's deleter: unlinks the entry, then lets the front end release its state. */
static void handle_free(void *data, void *ctx) {
    custom_entry *e = ctx;
    pthread_mutex_lock(&g_lock);
    for (custom_entry **p = &g_buckets[(uint64_t)e->id % N_BUCKETS]; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    if (e->release) e->release(e->user);
    free(e->inputs);
    free(e);
    free(data);
}

static oar_status cf_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)a;
    if (n_in < 2 || !in[1] || in[1]->dtype != OAR_I64 || in[1]->ndim != 0)
        return oar_error(OAR_ERR_INVALID_ARG, CF ": expected (y, a 0-d i64 handle, inputs...), as "
                                              "oar_custom_function makes them");
    for (int i = 2; i < n_in; i++)
        if (!in[i]) return oar_error(OAR_ERR_INVALID_ARG, CF ": input %d is missing", i);
    out->dtype = in[0]->dtype;
    out->ndim = in[0]->ndim;
    memcpy(out->shape, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
    *n_out = 1;
    return OAR_OK;
}

static oar_status cf_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out, int n_out) {
    (void)n_in; (void)a; (void)n_out;
    memcpy(out[0]->strides, in[0]->strides, sizeof(int64_t) * (size_t)in[0]->ndim);
    return OAR_OK;
}

static oar_status cf_grad(oar_grad_ctx *g) {
    int64_t id = 0;
    oar_status st = oar_copy_to_buffer(g->in[1], &id, sizeof id, OAR_I64);
    if (st != OAR_OK) return st;
    custom_entry *e = registry_find(id);
    if (!e)
        return oar_error(OAR_ERR_INVALID_ARG, CF ": handle %lld names no live custom function (only "
                                              "oar_custom_function makes them)", (long long)id);
    if (!g->gout[0]) return OAR_OK; /* no gradient reached this output */
    int n = g->n_in - 2;
    if (n != e->n_inputs)
        return oar_error(OAR_ERR_INVALID_ARG, CF ": handle %lld was made for %d inputs, the node has %d",
                         (long long)id, e->n_inputs, n);
    oar_tensor *gin[OAR_MAX_INPUTS] = {0};
    st = e->backward(e->user, e->output, g->gout[0], gin, n);
    for (int i = 0; i < n; i++) {
        const oar_meta *x = &e->inputs[i];
        if (st == OAR_OK && gin[i] && !g->needs[2 + i]) {
            oar_release(gin[i]);
            gin[i] = NULL;
        }
        if (st == OAR_OK && gin[i] && (gin[i]->ndim != x->ndim || gin[i]->dtype != x->dtype ||
                                       memcmp(gin[i]->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))) {
            char a[128], b[128];
            oar_format_shape(x->shape, x->ndim, a, sizeof a);
            oar_format_shape(gin[i]->shape, gin[i]->ndim, b, sizeof b);
            st = oar_error(OAR_ERR_SHAPE, CF ": backward returned a gradient of shape %s %s for input %d, "
                                          "expected the input's %s %s", b, oar_dtype_name(gin[i]->dtype), i, a,
                           oar_dtype_name(x->dtype));
        }
        /* the engine takes its own reference before this rule's scope ends */
        g->gin[2 + i] = st == OAR_OK && gin[i] ? oar_track(gin[i]) : NULL;
        if (st != OAR_OK && gin[i]) oar_release(gin[i]);
    }
    return st;
}

const oar_op_def oar_opdef_custom_function = {
    .name = CF, .n_inputs = -1, .n_outputs = 1, .key_input = 0,
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED | OAR_OPF_CALLBACK, .ref_dtypes = OAR_ALL_DTYPES,
    .host_inputs = 1u << 1, .unsaved_inputs = ~0u & ~(1u << 1), /* the rule reads the handle only */
    .infer = cf_infer, .view = cf_view, .grad = cf_grad,
};

oar_tensor *oar_custom_function(oar_tensor *y, int output, oar_tensor *const *inputs, int n_inputs,
                                oar_custom_backward backward, void (*release)(void *), void *user) {
    bool ok = y && OAR_HANDLE_OK(y) && backward && n_inputs >= 0 && n_inputs <= OAR_MAX_INPUTS - 2 &&
              (!n_inputs || inputs);
    oar_tensor *in[OAR_MAX_INPUTS] = {y};
    for (int i = 0; ok && i < n_inputs; i++) ok = (in[2 + i] = inputs[i]) && OAR_HANDLE_OK(inputs[i]);
    if (!ok) {
        if (release) release(user);
        if (y && !OAR_HANDLE_OK(y)) oar_handle_error(CF, "y", -1, y);
        else
            oar_error(OAR_ERR_INVALID_ARG, CF ": expected y, a backward function and 0..%d live inputs, got %s%s%d "
                      "inputs (one NULL or freed?)", OAR_MAX_INPUTS - 2, y ? "" : "no y, ",
                      backward ? "" : "no backward, ", n_inputs);
        return NULL;
    }
    custom_entry *e = calloc(1, sizeof *e);
    int64_t *id = malloc(sizeof *id);
    oar_meta *metas = calloc((size_t)n_inputs + 1, sizeof *metas);
    if (!e || !id || !metas) {
        free(e);
        free(id);
        free(metas);
        if (release) release(user);
        oar_error(OAR_ERR_OOM, CF ": out of memory for the function's record");
        return NULL;
    }
    for (int i = 0; i < n_inputs; i++) {
        metas[i].dtype = inputs[i]->dtype;
        metas[i].ndim = inputs[i]->ndim;
        memcpy(metas[i].shape, inputs[i]->shape, sizeof(int64_t) * (size_t)inputs[i]->ndim);
    }
    *e = (custom_entry){.output = output, .n_inputs = n_inputs, .inputs = metas, .backward = backward,
                        .release = release, .user = user};
    pthread_mutex_lock(&g_lock);
    e->id = *id = g_next_id++;
    e->next = g_buckets[(uint64_t)e->id % N_BUCKETS];
    g_buckets[(uint64_t)e->id % N_BUCKETS] = e;
    pthread_mutex_unlock(&g_lock);
    /* from here the handle owns the entry: releasing it runs release(user) */
    oar_tensor *handle = oar_from_blob(id, NULL, 0, OAR_I64, handle_free, e);
    if (!handle) {
        handle_free(id, e);
        return NULL;
    }
    in[1] = handle;
    oar_tensor *r = oar_op_call1(OAR_OP_custom_function, in, 2 + n_inputs, NULL);
    oar_release(handle); /* the node (if recorded) holds it now */
    return r;
}
