/* oar_jit_to_static: a cache of traced programs keyed by input signature, each with prepared
 * executors for the concrete shapes it has run at. A miss traces the function, runs the passes
 * and prepares an executor; a hit only runs. */
#include "graph/jit.h"
#include "base/device.h"

#include "graph/passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_entry(jit_entry *en) {
    for (int k = 0; k < en->n_execs; k++) {
        oar_exec_free(en->execs[k].exec);
        if (en->execs[k].program != en->program) oar_program_free(en->execs[k].program);
    }
    oar_program_free(en->program);
    oar_run_hooks_free(&en->hooks);
    for (int k = 0; k < en->n_clears; k++) oar_tensor_unref(en->clears[k]);
    free(en->clears);
    free(en->grad_cleared);
    memset(en, 0, sizeof *en);
}

/* The owners naming persistent tensors: the module and optimizer shorthands (each handle starts
 * with its own source, see nn/module.h and optim/optim.h), then the listed sources. */
static oar_status collect_sources(oar_jit *f, const oar_jit_opts *opts) {
    if (!opts) return OAR_OK;
    int n = (opts->module != NULL) + (opts->optimizer != NULL) + (opts->n_state_sources > 0 ? opts->n_state_sources : 0);
    if (n > JIT_MAX_SOURCES)
        return oar_error(OAR_ERR_INVALID_ARG, "jit_to_static: expected at most %d state sources (module, optimizer "
                                              "and state_sources together), got %d", JIT_MAX_SOURCES, n);
    if (opts->module) f->sources[f->n_sources++] = (const oar_state_source *)(const void *)opts->module;
    if (opts->optimizer) f->sources[f->n_sources++] = (const oar_state_source *)(const void *)opts->optimizer;
    for (int i = 0; i < opts->n_state_sources; i++) {
        const oar_state_source *src = opts->state_sources ? opts->state_sources[i] : NULL;
        if (!src || !src->count || !src->tensor)
            return oar_error(OAR_ERR_INVALID_ARG, "jit_to_static: expected state source %d to have count and tensor "
                                                  "functions, got %s", i, src ? "a NULL function" : "NULL");
        f->sources[f->n_sources++] = src;
    }
    return OAR_OK;
}

oar_jit *oar_jit_to_static(oar_static_fn fn, void *user, const oar_jit_opts *opts) {
    oar_init();
    if (!fn) {
        oar_error(OAR_ERR_INVALID_ARG, "jit_to_static: expected a function, got NULL");
        return NULL;
    }
    oar_jit *f = OAR_NEW(oar_jit);
    if (!f) return NULL;
    f->fn = fn;
    f->user = user;
    if (opts) f->opts = *opts;
    f->opts.specs = NULL;
    f->opts.output_names = NULL;
    f->opts.state_sources = NULL;
    if (collect_sources(f, opts) != OAR_OK) {
        free(f);
        return NULL;
    }
    if (f->opts.cache_capacity <= 0) f->opts.cache_capacity = 8;
    if (f->opts.cache_capacity > JIT_MAX_ENTRIES) f->opts.cache_capacity = JIT_MAX_ENTRIES;
    if (opts && opts->specs && opts->n_specs > 0) {
        if (opts->n_specs > JIT_MAX_IO) {
            oar_error(OAR_ERR_INVALID_ARG, "jit_to_static: expected at most %d input specs, got %d", JIT_MAX_IO,
                      opts->n_specs);
            free(f);
            return NULL;
        }
        for (int i = 0; i < opts->n_specs; i++) {
            const oar_input_spec *s = &opts->specs[i];
            if (s->ndim < 0 || s->ndim > OAR_MAX_DIMS || !oar_dtype_valid(s->dtype)) {
                oar_error(OAR_ERR_INVALID_ARG, "jit_to_static: input spec %d has an invalid dtype or rank", i);
                free(f);
                return NULL;
            }
            f->specs[i] = *s;
            f->specs[i].name = NULL;
            if (s->name) snprintf(f->input_names[i], sizeof f->input_names[i], "%s", s->name);
        }
        f->n_specs = opts->n_specs;
    }
    for (int i = 0; opts && opts->output_names && i < opts->n_output_names && i < JIT_MAX_IO; i++)
        if (opts->output_names[i]) snprintf(f->output_names[i], sizeof f->output_names[i], "%s", opts->output_names[i]);
    f->mask = oar_build_strategy_mask(&f->opts.strategy);
    return f;
}

void oar_jit_free(oar_jit *f) {
    if (!f) return;
    for (int i = 0; i < f->n_entries; i++) free_entry(&f->entries[i]);
    free(f);
}

bool oar_is_tracing(void) { return oar_trace_current() != NULL; }
int oar_jit_num_programs(const oar_jit *f) { return f ? f->n_entries : 0; }
int64_t oar_jit_num_traces(const oar_jit *f) { return f ? f->n_traces : 0; }

/* Input i's dims declared dynamic, after checking x against its spec. */
static oar_status check_spec(const oar_jit *f, int i, const oar_tensor *x, uint32_t *dyn) {
    *dyn = 0;
    if (i >= f->n_specs) return OAR_OK;
    const oar_input_spec *s = &f->specs[i];
    bool ok = x->dtype == s->dtype && x->ndim == s->ndim;
    for (int d = 0; ok && d < s->ndim; d++) {
        if (s->shape[d] < 0) *dyn |= 1u << d;
        else if (s->shape[d] != x->shape[d]) ok = false;
    }
    if (ok) return OAR_OK;
    char want[200], got[200];
    oar_meta ms = {s->dtype, s->ndim, {0}}, mx;
    memcpy(ms.shape, s->shape, sizeof ms.shape);
    oar_meta_from(&mx, x);
    oar_meta_format(&ms, 0, want, sizeof want);
    oar_meta_format(&mx, 0, got, sizeof got);
    return oar_error(OAR_ERR_SHAPE, "jit: expected input %d to match its spec %s (-1: any size), got %s", i, want,
                     got);
}

static bool same_meta(const oar_meta *a, const oar_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* An entry serves metas when dtypes and ranks agree and every non-dynamic dim matches. */
static bool entry_serves(const jit_entry *en, const oar_meta *m, oar_device dev, int n_in, int n_out, bool exact) {
    if (!en->program || en->n_in != n_in || en->n_out != n_out || (n_in && en->device != dev)) return false;
    for (int i = 0; i < n_in; i++) {
        if (m[i].dtype != en->meta[i].dtype || m[i].ndim != en->meta[i].ndim) return false;
        for (int d = 0; d < m[i].ndim; d++) {
            bool dyn = !exact && ((en->dyn[i] >> d) & 1u);
            if (!dyn && m[i].shape[d] != en->meta[i].shape[d]) return false;
        }
    }
    return true;
}

static bool program_trains(const oar_program *p) {
    if (p->n_grad_writes) return true;
    for (int i = 0; i < p->n_nodes; i++)
        if (!p->nodes[i].dead && oar_node_mutated_inputs(&p->nodes[i])) return true;
    return false;
}

/* The slot for a new entry: a free one, or the least recently used. */
static jit_entry *take_slot(oar_jit *f) {
    if (f->n_entries < f->opts.cache_capacity) return &f->entries[f->n_entries++];
    int lru = 0;
    for (int i = 1; i < f->n_entries; i++)
        if (f->entries[i].last_use < f->entries[lru].last_use) lru = i;
    free_entry(&f->entries[lru]);
    return &f->entries[lru];
}

/* Traces fn at the inputs' signature and fills a cache entry. */
static oar_status trace(oar_jit *f, const oar_meta *m, oar_device dev, const uint32_t *dyn, int n_in, int n_out,
                        jit_entry **out_entry) {
    oar_trace *t = oar_trace_begin(f->sources, f->n_sources);
    if (!t) return oar_last_status();
    if (n_in) oar_trace_set_device(t, dev);
    uint64_t trace_id = oar_active_trace;
    oar_tensor *sym[JIT_MAX_IO] = {0}, *res[JIT_MAX_IO] = {0};
    oar_status st = OAR_OK;
    for (int i = 0; i < n_in && st == OAR_OK; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "input%d", i);
        sym[i] = oar_trace_input(t, &m[i], dyn[i], f->input_names[i][0] ? f->input_names[i] : nm);
        if (!sym[i]) st = oar_last_status();
    }
    if (st == OAR_OK) {
        /* An error raised inside fn fails the trace even when fn ignored it and returned OK:
         * the failed call recorded nothing (or a value frozen at tracing, e.g. a number read
         * with oar_item), so the program would run without it, silently wrong at every call. */
        oar_error_watch watch;
        oar_error_watch_begin(&watch);
        oar_scope_begin();
        st = f->fn(f->user, sym, n_in, res, n_out);
        for (int k = 0; st == OAR_OK && k < n_out; k++) oar_keep(res[k]);
        oar_scope_end();
        oar_error_watch_end(&watch);
        if (st != OAR_OK) memset(res, 0, sizeof res); /* the scope released whatever fn made */
        if (st != OAR_OK && oar_last_status() == OAR_OK)
            st = oar_error(st, "jit: the traced function failed without a message");
        if (st == OAR_OK && watch.first != OAR_OK)
            st = oar_error(watch.first,
                           "the traced function returned OK, but a call inside it failed and its status was "
                           "ignored: %s. The program would run without that call (or with a value frozen at "
                           "tracing), so nothing was compiled; check the status of every call in the function",
                           watch.message);
    }
    oar_program *prog = NULL;
    oar_run_hooks hooks = {0};
    st = oar_trace_end(t, st, res, n_out, &prog, &hooks);
    for (int i = 0; i < n_in; i++) oar_tensor_unref(sym[i]);
    for (int k = 0; k < n_out; k++) oar_release(res[k]);
    if (st != OAR_OK) {
        oar_error_prefix("jit (while tracing)");
        return st;
    }
    f->n_traces++;
    oar_program_generalize_reshapes(prog); /* so one program serves every size of the dynamic dims */
    st = oar_passes_run(prog, f->mask, program_trains(prog));
    if (st != OAR_OK) {
        oar_program_free(prog);
        oar_run_hooks_free(&hooks);
        return st;
    }
    jit_entry *en = take_slot(f);
    en->program = prog;
    en->hooks = hooks;
    en->n_in = n_in;
    en->n_out = n_out;
    en->device = dev;
    memcpy(en->meta, m, sizeof(oar_meta) * (size_t)n_in);
    memcpy(en->dyn, dyn, sizeof(uint32_t) * (size_t)n_in);
    /* which gradients the function clears itself, and which it leaves cleared at the end */
    en->grad_cleared = oar_malloc(sizeof(bool) * (size_t)(prog->n_grad_writes + 1));
    en->clears = oar_malloc(sizeof(oar_tensor *) * (size_t)(prog->n_values + 1));
    if (!en->grad_cleared || !en->clears) return OAR_ERR_OOM;
    for (int k = 0; k < prog->n_grad_writes; k++)
        en->grad_cleared[k] = prog->grad_writes[k].param->grad_cleared_in == trace_id;
    for (int v = 0; v < prog->n_values; v++) {
        oar_tensor *x = prog->values[v].tensor;
        if (x && prog->values[v].kind == OAR_VAL_PARAM && x->grad_cleared_in == trace_id && !x->grad) {
            bool written = false;
            for (int k = 0; k < prog->n_grad_writes; k++) written |= prog->grad_writes[k].param == x;
            if (!written) en->clears[en->n_clears++] = oar_retain(x);
        }
    }
    *out_entry = en;
    return OAR_OK;
}

/* The executor of en for concrete metas m, specializing the program when they differ. */
static oar_exec *exec_for(jit_entry *en, const oar_meta *m, bool *unservable) {
    for (int k = 0; k < en->n_execs; k++) {
        bool same = true;
        for (int i = 0; i < en->n_in && same; i++) same = same_meta(&en->execs[k].meta[i], &m[i]);
        if (same) return en->execs[k].exec;
    }
    bool traced_shape = true;
    for (int i = 0; i < en->n_in && traced_shape; i++) traced_shape = same_meta(&en->meta[i], &m[i]);
    oar_program *p = traced_shape ? en->program : oar_program_specialize(en->program, m, en->n_in);
    if (!p) {
        *unservable = true;
        return NULL;
    }
    oar_exec *e = oar_exec_create(p);
    if (!e) {
        if (p != en->program) oar_program_free(p);
        return NULL;
    }
    if (en->n_execs == JIT_MAX_EXECS) { /* drop the oldest shape */
        oar_exec_free(en->execs[0].exec);
        if (en->execs[0].program != en->program) oar_program_free(en->execs[0].program);
        memmove(&en->execs[0], &en->execs[1], sizeof en->execs[0] * (JIT_MAX_EXECS - 1));
        en->n_execs--;
    }
    jit_exec *x = &en->execs[en->n_execs++];
    x->exec = e;
    x->program = p;
    memcpy(x->meta, m, sizeof(oar_meta) * (size_t)en->n_in);
    return e;
}

/* Gradients the program writes must start cleared unless the function clears them: eager
 * code would add to them, which a compiled step does not do. */
static oar_status check_grads(const jit_entry *en) {
    const oar_program *p = en->program;
    for (int k = 0; k < p->n_grad_writes; k++) {
        if (en->grad_cleared[k] || !p->grad_writes[k].param->grad) continue;
        return oar_error(OAR_ERR_STATE, "jit: a parameter holds a gradient the compiled function would add to, as "
                                        "eager code does; call zero_grad inside the function, or before each call");
    }
    return OAR_OK;
}

static oar_status run_entry(oar_jit *f, jit_entry *en, const oar_meta *m, oar_tensor *const *in, int n_in,
                            oar_tensor **out, int n_out, bool *unservable) {
    oar_exec *e = exec_for(en, m, unservable);
    if (!e) return oar_last_status();
    oar_status st = check_grads(en);
    if (st != OAR_OK) return st;
    for (int k = 0; k < en->hooks.n && st == OAR_OK; k++)
        if (en->hooks.items[k].pre) st = en->hooks.items[k].pre(en->hooks.items[k].user);
    if (st != OAR_OK) return st;
    st = oar_exec_run(e, in, n_in, out, n_out);
    if (st != OAR_OK) return st;
    for (int k = 0; k < en->hooks.n; k++)
        if (en->hooks.items[k].post) en->hooks.items[k].post(en->hooks.items[k].user);
    for (int k = 0; k < en->n_clears; k++) oar_zero_grad(en->clears[k]);
    en->last_use = ++f->tick;
    f->last = en;
    for (int k = 0; k < n_out; k++) oar_track(out[k]);
    return OAR_OK;
}

oar_status oar_jit_call(oar_jit *f, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (!f) return oar_error(OAR_ERR_INVALID_ARG, "jit_call: expected a compiled function, got NULL");
    if (n_in < 0 || n_in > JIT_MAX_IO || n_out < 0 || n_out > JIT_MAX_IO)
        return oar_error(OAR_ERR_INVALID_ARG, "jit_call: expected at most %d inputs and outputs, got %d and %d",
                         JIT_MAX_IO, n_in, n_out);
    if (oar_trace_current()) return f->fn(f->user, in, n_in, out, n_out); /* traced inline */
    oar_meta m[JIT_MAX_IO];
    uint32_t dyn[JIT_MAX_IO];
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) return oar_error(OAR_ERR_INVALID_ARG, "jit_call: input %d is NULL", i);
        if (!OAR_HANDLE_OK(in[i])) return oar_handle_error("jit_call", "input", i, in[i]);
        oar_status st = check_spec(f, i, in[i], &dyn[i]);
        if (st != OAR_OK) return st;
        oar_meta_from(&m[i], in[i]);
        if (in[i]->device != in[0]->device)
            return oar_error(OAR_ERR_INVALID_ARG, "jit_call: input 0 is on %s and input %d on %s; a compiled "
                                                  "function runs on one device: move the inputs with oar_to",
                             oar_device_name(in[0]->device), i, oar_device_name(in[i]->device));
    }
    oar_device dev = n_in ? in[0]->device : OAR_CPU;
    jit_entry *en = NULL;
    for (int pass = 0; pass < 2 && !en; pass++) /* an exact signature first, then one with dynamic dims */
        for (int k = 0; k < f->n_entries && !en; k++)
            if (entry_serves(&f->entries[k], m, dev, n_in, n_out, pass == 0)) en = &f->entries[k];
    bool unservable = false;
    if (en) {
        oar_status st = run_entry(f, en, m, in, n_in, out, n_out, &unservable);
        if (!unservable) return st;
        /* the program cannot serve this shape (a size baked in at tracing): trace it for this one */
        memset(dyn, 0, sizeof dyn);
        oar_clear_error();
    }
    oar_status st = trace(f, m, dev, dyn, n_in, n_out, &en);
    if (st != OAR_OK) return st;
    return run_entry(f, en, m, in, n_in, out, n_out, &unservable);
}

int oar_jit_dump(const oar_jit *f, int i, char *buf, size_t size) {
    if (!f || i < 0 || i >= f->n_entries) return -1;
    return oar_program_dump(f->entries[i].program, buf, size);
}

oar_status oar_program_memory_stats_get(const oar_jit *f, int i, oar_program_memory_stats *out) {
    if (!f || !out || i < 0 || i >= f->n_entries)
        return oar_error(OAR_ERR_INVALID_ARG, "program_memory_stats: expected a program index below %d, got %d",
                         f ? f->n_entries : 0, i);
    const jit_entry *en = &f->entries[i];
    memset(out, 0, sizeof *out);
    const oar_program *p = en->n_execs ? en->execs[en->n_execs - 1].program : en->program;
    oar_memory_plan plan;
    oar_status st = oar_plan_memory(p, &plan);
    if (st != OAR_OK) return st;
    /* the executor's own plan when there is one: its batch tiles (batch_tiles.h) depend on the
     * thread count it was made at */
    const oar_memory_plan *ran = en->n_execs ? oar_exec_plan(en->execs[en->n_execs - 1].exec) : NULL;
    out->planned_arena_bytes = ran ? ran->arena_bytes : plan.arena_bytes;
    out->persistent_bytes = plan.persistent_bytes;
    out->output_bytes = plan.fresh_bytes;
    out->naive_bytes = oar_plan_naive_bytes(p);
    for (int v = 0; v < p->n_values; v++) out->n_buffers += plan.root[v] == v && plan.cls[v] == OAR_BUF_ARENA;
    oar_plan_free(&plan);
    out->n_nodes = p->blocks[OAR_MAIN_BLOCK].n_nodes;
    if (en->n_execs) out->measured_peak_bytes = oar_exec_measured_peak(en->execs[en->n_execs - 1].exec);
    return OAR_OK;
}
