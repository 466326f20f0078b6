/* The predictor: an exported program (path.json + path.safetensors) loaded and run for
 * inference, with no tracing and no model code.
 *
 * The loaded program, after the inference passes, is shared read-only by a predictor and all
 * its clones (reference counted), and so are its parameters and constants. Each predictor has
 * its own bound inputs, last outputs and executors (an executor holds the arena of one run),
 * so clones run on different threads at once. Executors are cached per concrete input shapes
 * (PRED_MAX_EXECS, least recently used goes); shapes other than the exported ones, in dims
 * exported as dynamic, run a copy of the program inferred again (oar_program_specialize). */
#include "graph/exec.h"
#include "base/device.h"
#include "graph/export.h"
#include "graph/passes/passes.h"
#include "graph/serialize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRED_MAX_EXECS 4

typedef struct pred_model {
    int refcount;            /* the predictor and its clones */
    oar_program *program;    /* after the inference passes; read-only from here on */
    int n_in, n_out;
    const char *const *input_names;  /* in the program's arena */
    const char *const *output_names;
} pred_model;

typedef struct pred_exec {
    oar_meta *meta;          /* n_in concrete input metas */
    oar_program *program;    /* the model's program, or a specialization of it (owned) */
    oar_exec *exec;
    uint64_t last_use;
} pred_exec;

struct oar_predictor {
    pred_model *m;
    oar_tensor **inputs;     /* bound inputs (references), n_in; zeroed by oar_malloc */
    oar_tensor **outputs;    /* the last run's outputs (references), n_out */
    bool has_run;
    pred_exec execs[PRED_MAX_EXECS];
    int n_execs;
    uint64_t tick;
};

static void model_release(pred_model *m) {
    if (!m || __atomic_sub_fetch(&m->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    oar_program_free(m->program);
    free(m);
}

/* "f32[?, 1, 28, 28]": dims that may vary as '?'. */
static void format_input(const oar_meta *m, uint32_t dyn, char *buf, size_t size) {
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, __VA_ARGS__)
    PUT("%s[", oar_dtype_name(m->dtype));
    for (int d = 0; d < m->ndim; d++) {
        if ((dyn >> d) & 1u) PUT("%s?", d ? ", " : "");
        else PUT("%s%lld", d ? ", " : "", (long long)m->shape[d]);
    }
    PUT("]");
#undef PUT
}

static const oar_value *input_value(const pred_model *m, int i) {
    return &m->program->values[m->program->blocks[OAR_MAIN_BLOCK].in[i]];
}

static oar_predictor *predictor_new(pred_model *m) {
    oar_predictor *p = OAR_NEW(oar_predictor);
    if (!p) return NULL;
    p->inputs = oar_malloc(sizeof(oar_tensor *) * (size_t)(m->n_in + 1));
    p->outputs = oar_malloc(sizeof(oar_tensor *) * (size_t)(m->n_out + 1));
    if (!p->inputs || !p->outputs) {
        free(p->inputs);
        free(p->outputs);
        free(p);
        return NULL;
    }
    __atomic_add_fetch(&m->refcount, 1, __ATOMIC_RELAXED);
    p->m = m;
    return p;
}

/* Moves a loaded program to dev: its weights and constants copied there (the program holds the
 * copies), its values marked as living there. */
static oar_status program_to_device(oar_program *prog, oar_device dev) {
    if (!oar_device_use(dev, "predictor_create_on")) return oar_last_status();
    for (int v = 0; v < prog->n_values; v++) {
        oar_tensor *t = prog->values[v].tensor;
        if (!t || t->device == dev) continue;
        oar_tensor *c = oar_tensor_new_on(dev, t->dtype, t->shape, t->ndim);
        if (!c || oar_tensor_copy_strided(c, t) != OAR_OK) {
            oar_tensor_unref(c);
            return oar_last_status();
        }
        prog->values[v].tensor = c;
        oar_tensor_unref(t);
    }
    prog->device = dev;
    return OAR_OK;
}

oar_predictor *oar_predictor_create(const oar_predictor_config *config) {
    return oar_predictor_create_on(config, OAR_CPU);
}

oar_predictor *oar_predictor_create_on(const oar_predictor_config *config, oar_device device) {
    oar_init();
    if (!config || !config->model_path || !*config->model_path) {
        oar_error(OAR_ERR_INVALID_ARG, "predictor_create: expected a config with model_path (\"dir/model\" for "
                                       "dir/model.json and dir/model.safetensors), got %s",
                  !config ? "NULL" : "no path");
        return NULL;
    }
    const char *path = config->model_path;
    oar_program_io io = {0};
    oar_program *prog = oar_program_load_io(path, &io);
    if (!prog) {
        oar_error_prefix("predictor_create");
        return NULL;
    }
    int w = oar_program_state_writer(prog);
    if (w >= 0) {
        oar_error(OAR_ERR_UNSUPPORTED, "predictor_create: '%.300s' updates state in place when it runs (node %d, %s); "
                                       "a predictor runs inference programs only: export a forward function with "
                                       "the model in eval mode", path, w, oar_op_table[prog->nodes[w].op]->name);
        oar_program_free(prog);
        return NULL;
    }
    oar_status st = device != OAR_CPU ? program_to_device(prog, device) : OAR_OK;
    if (st == OAR_OK) st = oar_passes_run(prog, oar_build_strategy_mask(&config->strategy), false);
    if (st != OAR_OK) {
        oar_error_prefix("predictor_create: '%.300s'", path);
        oar_program_free(prog);
        return NULL;
    }
    pred_model *m = OAR_NEW(pred_model);
    if (!m) {
        oar_program_free(prog);
        return NULL;
    }
    m->program = prog;
    m->n_in = io.n_inputs;
    m->n_out = io.n_outputs;
    m->input_names = io.input_names;
    m->output_names = io.output_names;
    oar_predictor *p = predictor_new(m);
    if (!p) {
        oar_program_free(prog);
        free(m);
    }
    return p;
}

oar_predictor *oar_predictor_clone(oar_predictor *p) {
    if (!p) {
        oar_error(OAR_ERR_INVALID_ARG, "predictor_clone: expected a predictor, got NULL");
        return NULL;
    }
    return predictor_new(p->m);
}

static void exec_drop(pred_exec *x, const pred_model *m) {
    oar_exec_free(x->exec);
    if (x->program != m->program) oar_program_free(x->program);
    free(x->meta);
    memset(x, 0, sizeof *x);
}

void oar_predictor_free(oar_predictor *p) {
    if (!p) return;
    for (int i = 0; i < p->m->n_in; i++) oar_tensor_unref(p->inputs[i]);
    for (int k = 0; k < p->m->n_out; k++) oar_tensor_unref(p->outputs[k]);
    for (int k = 0; k < p->n_execs; k++) exec_drop(&p->execs[k], p->m);
    free(p->inputs);
    free(p->outputs);
    model_release(p->m);
    free(p);
}

int oar_predictor_num_inputs(const oar_predictor *p) { return p ? p->m->n_in : 0; }
int oar_predictor_num_outputs(const oar_predictor *p) { return p ? p->m->n_out : 0; }

const char *oar_predictor_input_name(const oar_predictor *p, int i) {
    return p && i >= 0 && i < p->m->n_in ? p->m->input_names[i] : NULL;
}

const char *oar_predictor_output_name(const oar_predictor *p, int i) {
    return p && i >= 0 && i < p->m->n_out ? p->m->output_names[i] : NULL;
}

/* The known names, for messages: "'x', 'mask'". */
static void list_names(const char *const *names, int n, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s'%s'", i ? ", " : "", names[i]);
}

static int find_name(const char *const *names, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

oar_status oar_predictor_set_input(oar_predictor *p, const char *name, oar_tensor *t) {
    OAR_CHECK_HANDLE("predictor_set_input", t, oar_last_status());
    if (!p) return oar_error(OAR_ERR_INVALID_ARG, "predictor_set_input: expected a predictor, got NULL");
    const pred_model *m = p->m;
    int i = find_name(m->input_names, m->n_in, name);
    if (i < 0) {
        char known[512];
        list_names(m->input_names, m->n_in, known, sizeof known);
        return oar_error(OAR_ERR_INVALID_ARG, "predictor_set_input: the model has no input named '%s'; its inputs "
                                              "are %s", name ? name : "(null)", known);
    }
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "predictor_set_input: input '%s': expected a tensor, got NULL", name);
    if (!t->storage) return oar_symbolic_error("predictor_set_input", t);
    const oar_value *v = input_value(m, i);
    char want[256], got[256];
    oar_meta mt;
    oar_meta_from(&mt, t);
    format_input(&v->meta, v->dyn_dims, want, sizeof want);
    format_input(&mt, 0, got, sizeof got);
    if (t->dtype != v->meta.dtype)
        return oar_error(OAR_ERR_DTYPE, "predictor_set_input: input '%s' expects %s, got %s (dtype %s, expected %s)",
                         name, want, got, oar_dtype_name(t->dtype), oar_dtype_name(v->meta.dtype));
    if (t->ndim != v->meta.ndim)
        return oar_error(OAR_ERR_SHAPE, "predictor_set_input: input '%s' expects %s, got %s (%d dims, expected %d)",
                         name, want, got, t->ndim, v->meta.ndim);
    for (int d = 0; d < t->ndim; d++)
        if (!((v->dyn_dims >> d) & 1u) && t->shape[d] != v->meta.shape[d])
            return oar_error(OAR_ERR_SHAPE, "predictor_set_input: input '%s' expects %s ('?': any size), got %s "
                                            "(dim %d is %lld, expected %lld: it was fixed at export)", name, want,
                             got, d, (long long)t->shape[d], (long long)v->meta.shape[d]);
    oar_tensor_unref(p->inputs[i]);
    p->inputs[i] = oar_retain(t);
    return OAR_OK;
}

static bool same_metas(const oar_meta *a, const oar_meta *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].dtype != b[i].dtype || a[i].ndim != b[i].ndim ||
            memcmp(a[i].shape, b[i].shape, sizeof(int64_t) * (size_t)a[i].ndim))
            return false;
    return true;
}

/* The executor for the bound inputs' shapes: cached, else prepared (on a specialization of the
 * program when the shapes differ from the exported ones). */
static oar_exec *exec_for(oar_predictor *p, const oar_meta *metas) {
    const pred_model *m = p->m;
    for (int k = 0; k < p->n_execs; k++)
        if (same_metas(p->execs[k].meta, metas, m->n_in)) {
            p->execs[k].last_use = ++p->tick;
            return p->execs[k].exec;
        }
    bool exported = true;
    for (int i = 0; i < m->n_in && exported; i++) exported = same_metas(&input_value(m, i)->meta, &metas[i], 1);
    oar_program *prog = exported ? m->program : oar_program_specialize(m->program, metas, m->n_in);
    if (!prog) {
        char shapes[512];
        size_t n = 0;
        shapes[0] = '\0';
        for (int i = 0; i < m->n_in && n < sizeof shapes; i++) {
            char s[200];
            format_input(&metas[i], 0, s, sizeof s);
            n += (size_t)snprintf(shapes + n, sizeof shapes - n, "%s%s %s", i ? ", " : "", m->input_names[i], s);
        }
        oar_error_prefix("predictor_run: the model cannot run at inputs %s", shapes);
        return NULL;
    }
    oar_meta *meta = oar_malloc(sizeof(oar_meta) * (size_t)(m->n_in + 1));
    oar_exec *e = meta ? oar_exec_create(prog) : NULL;
    if (!e) {
        free(meta);
        if (prog != m->program) oar_program_free(prog);
        oar_error_prefix("predictor_run");
        return NULL;
    }
    if (p->n_execs == PRED_MAX_EXECS) { /* the least recently used shape goes */
        int lru = 0;
        for (int k = 1; k < p->n_execs; k++)
            if (p->execs[k].last_use < p->execs[lru].last_use) lru = k;
        exec_drop(&p->execs[lru], m);
        p->execs[lru] = p->execs[--p->n_execs];
    }
    pred_exec *x = &p->execs[p->n_execs++];
    memcpy(meta, metas, sizeof(oar_meta) * (size_t)m->n_in);
    x->meta = meta;
    x->program = prog;
    x->exec = e;
    x->last_use = ++p->tick;
    return e;
}

oar_status oar_predictor_run(oar_predictor *p) {
    if (!p) return oar_error(OAR_ERR_INVALID_ARG, "predictor_run: expected a predictor, got NULL");
    const pred_model *m = p->m;
    oar_meta *metas = oar_malloc(sizeof(oar_meta) * (size_t)(m->n_in + 1));
    oar_tensor **out = oar_malloc(sizeof(oar_tensor *) * (size_t)(m->n_out + 1));
    oar_status st = metas && out ? OAR_OK : OAR_ERR_OOM;
    for (int i = 0; i < m->n_in && st == OAR_OK; i++) {
        if (!p->inputs[i])
            st = oar_error(OAR_ERR_STATE, "predictor_run: input '%s' is not set; call oar_predictor_set_input "
                                          "for every input first", m->input_names[i]);
        else oar_meta_from(&metas[i], p->inputs[i]);
    }
    oar_exec *e = st == OAR_OK ? exec_for(p, metas) : NULL;
    if (st == OAR_OK && !e) st = oar_last_status();
    if (st == OAR_OK && (st = oar_exec_run(e, p->inputs, m->n_in, out, m->n_out)) != OAR_OK)
        oar_error_prefix("predictor_run");
    if (st == OAR_OK) {
        for (int k = 0; k < m->n_out; k++) {
            oar_tensor_unref(p->outputs[k]);
            p->outputs[k] = out[k];
        }
        p->has_run = true;
    }
    free(metas);
    free(out);
    return st;
}

oar_tensor *oar_predictor_get_output(oar_predictor *p, const char *name) {
    if (!p) {
        oar_error(OAR_ERR_INVALID_ARG, "predictor_get_output: expected a predictor, got NULL");
        return NULL;
    }
    const pred_model *m = p->m;
    int k = find_name(m->output_names, m->n_out, name);
    if (k < 0) {
        char known[512];
        list_names(m->output_names, m->n_out, known, sizeof known);
        oar_error(OAR_ERR_INVALID_ARG, "predictor_get_output: the model has no output named '%s'; its outputs are %s",
                  name ? name : "(null)", known);
        return NULL;
    }
    if (!p->has_run) {
        oar_error(OAR_ERR_STATE, "predictor_get_output: output '%s' has no value yet; call oar_predictor_run first",
                  name);
        return NULL;
    }
    /* a header of its own per call, so each returned reference is the caller's to release */
    oar_tensor *t = oar_tensor_alias(p->outputs[k]);
    if (!t) {
        oar_error(OAR_ERR_OOM, "predictor_get_output: out of memory");
        return NULL;
    }
    t->trace_id = 0;
    t->trace_op = NULL;
    return oar_track(t);
}
