/* The executor (see exec.h). Preparing resolves everything a run needs: a kernel per node
 * (chosen once, for the program's shapes), a tensor header per value pointing into the planned
 * arena, and the instruction list. A run binds the inputs, allocates the outputs the caller
 * will keep, walks the list and sets the gradients the program writes.
 *
 * The run loop is the per-op cost of every compiled step, so an instruction holds what stays
 * the same between runs, resolved once: the kernel's function, its argument lists (header
 * pointers; the few slots that name a main input are patched when inputs are bound), whether
 * its inputs are contiguous by construction (then the kernel is called directly, with no
 * check or copy), and its attributes. Views whose input's storage never changes (parameters,
 * the arena, persistent buffers) are computed once and leave the list. The profiler's spans
 * and the NaN/Inf check cost one load and one predictable branch per instruction when off.
 *
 * Programs on a device (the GPU) keep every address fixed: inputs are copied into slots,
 * outputs are copied out of buffers of their own, so from the second run on the instruction
 * list is recorded as device graphs and replayed (see run_graphed). */
#include "graph/exec.h"
#include "base/device.h"

#include "graph/hoist.h"
#include "ops/kernel_calls.h"
#include "profiler/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A run of instructions recorded as one device graph. */
typedef struct segment {
    int first, n;   /* positions in e->code */
    void *graph;    /* recorded; NULL until then, or for good when recording failed */
    bool failed;    /* runs as plain launches */
} segment;

typedef enum instr_kind { INSTR_KERNEL, INSTR_VIEW, INSTR_CONTROL } instr_kind;

typedef struct instr {
    instr_kind kind;
    bool direct;                    /* kernel: inputs contiguous (or op strided): call fn as is */
    bool random;                    /* kernel: reserves generator counters per run */
    bool bumps;                     /* kernel: writes input 0's buffer in place (a new version) */
    int n_in, n_out;
    oar_kernel_fn fn;               /* kernel->fn */
    oar_tensor **in, **out;         /* kernel: argument lists, in e->args */
    const oar_attr *attrs;
    oar_op_id op;
    const oar_op_def *def;
    const oar_kernel_entry *kernel; /* NULL for views and control flow */
    const oar_node *node;
    oar_kparams *params;            /* recorded in a graph, a host_inputs or random op's device kernel:
                                       its per-run values (op.h) */
    int tile_len;                   /* the first instruction of a batch tile: the tile's length, else 0 */
    int tile;                       /* and its index in plan.tiles */
} instr;

struct oar_exec {
    const oar_program *p;
    oar_memory_plan plan;
    oar_tensor **hdr;        /* per value: its tensor header (borrowed storage where not a root) */
    bool *borrowed;          /* per value: hdr's storage is borrowed from another header */
    oar_storage *arena;      /* the planned intermediates, one allocation */
    instr *code;
    int n_code;
    oar_tensor **args;        /* the kernels' argument lists, one after another */
    int *input_arg;           /* args slots holding a main input's header, patched by bind */
    int *input_arg_of;        /* per such slot: the main input's index */
    int n_input_args;
    instr *once;             /* nodes computed from parameters and constants only (hoist.h) */
    int n_once;
    int *watch;              /* the parameters and constants they read */
    oar_storage **watch_storage; /* each one's storage when they last ran (a reference) */
    uint32_t *watch_version;     /* and that storage's version then */
    int n_watch;
    bool once_done;
    bool *hoisted;           /* per node: computed once (hoist.h) */
    int *fresh;              /* FRESH roots, allocated per run */
    int n_fresh;
    int *shared;             /* non-view values sharing a root (in-place outputs) */
    int n_shared;
    oar_tensor **input_shell; /* per main input: the layout kernels were chosen for */
    oar_tensor **input_copy;  /* per main input: a contiguous copy made for this run, if any */
    bool bound;               /* inputs are bound (between bind_inputs and unbind) */
    int64_t measured_peak;
    bool on_device;           /* the program's device is not the host: fixed slots, graphs */
    const oar_device_ops *dev; /* its device table (on_device) */
    int64_t runs;             /* completed runs (graphs are recorded from the second) */
    segment *segs;            /* graph segments, made at the first graphed run */
    int n_segs;
    bool segs_made;
    char graph_note[320];     /* what was recorded and why the rest was not */
};

static void free_params(oar_exec *e, instr *I);

const oar_memory_plan *oar_exec_plan(const oar_exec *e) { return &e->plan; }
int64_t oar_exec_measured_peak(const oar_exec *e) { return e->measured_peak; }

static oar_tensor *shell_of(const oar_program *p, int v) {
    const oar_meta *m = &p->values[v].meta;
    oar_tensor *t = oar_tensor_shell(m->dtype, m->shape, m->ndim);
    if (t) t->device = p->device;
    return t;
}

/* Storage of its own for header h on the program's device, untracked (rewritten every run). */
static oar_status own_storage(oar_tensor *h) {
    if (oar_tensor_alloc_storage(h) != OAR_OK) return OAR_ERR_OOM;
    h->storage->uid = 0;
    return OAR_OK;
}

/* Points header v at its root's storage (borrowed: the root's header keeps it alive). */
static void share_root(oar_exec *e, int v) {
    oar_tensor *root = e->hdr[e->plan.root[v]], *h = e->hdr[v];
    h->storage = root->storage;
    h->offset = root->offset;
    e->borrowed[v] = true;
}

/* The view fn of node n on current headers: out shares in[0]'s storage. */
static oar_status run_view(oar_exec *e, const instr *I) {
    const oar_node *n = I->node;
    oar_tensor *in[OAR_MAX_INPUTS], *out[OAR_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++) in[k] = n->in[k] >= 0 ? e->hdr[n->in[k]] : NULL;
    for (int o = 0; o < n->n_out; o++) {
        oar_tensor *h = e->hdr[n->out[o]];
        const oar_meta *m = &e->p->values[n->out[o]].meta;
        h->storage = in[0]->storage;
        h->offset = in[0]->offset;
        h->ndim = in[0]->ndim;
        memcpy(h->shape, in[0]->shape, sizeof h->shape);
        memcpy(h->strides, in[0]->strides, sizeof h->strides);
        h->dtype = m->dtype;
        h->ndim = m->ndim;
        memcpy(h->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
        e->borrowed[n->out[o]] = true;
        out[o] = h;
    }
    oar_status st = I->def->view(in, n->n_in, n->attrs, out, n->n_out);
    for (int o = 0; o < n->n_out; o++) oar_tensor_refresh(out[o]);
    return st;
}

/* A kernel instruction through the checked path: inputs that are not contiguous are copied
 * (oar_op_run_kernel), and the profiler's hooks run around it when on. */
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static oar_status run_kernel_slow(const instr *I, oar_tensor *const *in, oar_tensor *const *out, int hooks) {
    int64_t t0 = (hooks & 1) && oar_prof_spans_on() ? oar_prof_now() : 0;
    oar_status st = oar_op_run_kernel(I->op, I->kernel, in, I->n_in, out, I->n_out, I->attrs);
    if (t0 && st == OAR_OK) oar_prof_kernel_end(I->def->name, I->kernel->impl, in, I->n_in, out, I->n_out, t0);
    if (st == OAR_OK && oar_prof_check_on()) st = oar_check_outputs(I->def->name, in, I->n_in, out, I->n_out);
    return st;
}

/* A kernel instruction on the argument lists given (its own, or a batch tile's slices). */
static oar_status call_kernel(const instr *I, oar_tensor *const *in, oar_tensor *const *out, const oar_kctx *ctx) {
    oar_status st;
    int hooks = oar_prof_hooks_on();
    if (OAR_LIKELY(I->direct && !hooks && !I->random)) {
        oar_kernel_call_begin();
        st = I->fn(ctx, in, I->n_in, out, I->n_out, I->attrs);
        if (OAR_UNLIKELY(st != OAR_OK) && oar_last_status() == OAR_OK)
            oar_error(st, "%s: the %s kernel failed without a message", I->def->name, I->kernel->impl);
    } else {
        st = run_kernel_slow(I, in, out, hooks);
    }
    return st;
}

/* Header h cut to images [b0, b0 + rows) of a batched value (into *cut): a value the tile
 * slices holds the whole batch, an interior one holds one slice from its start. */
static oar_tensor *cut_rows(const oar_tensor *h, char how, int64_t b0, int64_t rows, oar_tensor *cut) {
    *cut = *h;
    if (h->shape[0] > 0) cut->numel = h->numel / h->shape[0] * rows;
    cut->shape[0] = rows;
    if (how == OAR_TILE_SLICED) cut->offset += b0 * h->strides[0];
    return cut;
}

/* Batch tile k (batch_tiles.h): its instructions once per slice of images, on headers cut to
 * the slice, so each slice a node writes is read by the next while in cache. */
static oar_status run_tile(oar_exec *e, const instr *first, const oar_kctx *ctx) {
    const oar_batch_tile *bt = &e->plan.tiles[first->tile];
    oar_status st = OAR_OK;
    for (int64_t b0 = 0; b0 < bt->batch && st == OAR_OK; b0 += bt->sub) {
        int64_t rows = bt->batch - b0 < bt->sub ? bt->batch - b0 : bt->sub;
        for (int i = 0; i < first->tile_len && st == OAR_OK; i++) {
            const instr *I = first + i;
            const oar_node *n = I->node;
            oar_tensor cut[OAR_TILE_MAX_ARGS], *in[OAR_TILE_MAX_ARGS], *out[OAR_TILE_MAX_ARGS];
            for (int k = 0; k < I->n_in; k++) {
                char how = n->in[k] >= 0 ? e->plan.tiled[n->in[k]] : OAR_TILE_NONE;
                in[k] = how && I->in[k] ? cut_rows(I->in[k], how, b0, rows, &cut[k]) : I->in[k];
            }
            for (int o = 0; o < I->n_out; o++)
                out[o] = cut_rows(I->out[o], e->plan.tiled[n->out[o]], b0, rows, &cut[I->n_in + o]);
            st = call_kernel(I, in, out, ctx);
            if (OAR_UNLIKELY(st != OAR_OK)) oar_error_prefix("program node %d", (int)(n - e->p->nodes));
        }
    }
    return st;
}

static oar_status run_instr(oar_exec *e, const instr *I, const oar_kctx *ctx) {
    oar_status st;
    if (OAR_LIKELY(I->kind == INSTR_KERNEL)) {
        st = call_kernel(I, I->in, I->out, ctx);
        /* caches keyed on (storage, version), such as oneDNN's packed weights, see the new data */
        if (I->bumps) I->out[0]->storage->version++;
    } else if (I->kind == INSTR_VIEW) {
        st = run_view(e, I);
    } else {
        st = oar_run_control(e->p, I->node, e->hdr);
    }
    if (OAR_UNLIKELY(st != OAR_OK)) oar_error_prefix("program node %d", (int)(I->node - e->p->nodes));
    return st;
}

/* Instruction *i, or the batch tile starting there (then *i moves to the tile's last one). */
static oar_status run_at(oar_exec *e, int *i, const oar_kctx *ctx) {
    const instr *I = &e->code[*i];
    if (OAR_LIKELY(!I->tile_len)) return run_instr(e, I, ctx);
    *i += I->tile_len - 1;
    return run_tile(e, I, ctx);
}

static oar_status make_headers(oar_exec *e) {
    const oar_program *p = e->p;
    const oar_memory_plan *pl = &e->plan;
    e->hdr = oar_malloc(sizeof(oar_tensor *) * (size_t)(p->n_values + 1));
    e->borrowed = oar_malloc(sizeof(bool) * (size_t)(p->n_values + 1));
    e->fresh = oar_malloc(sizeof(int) * (size_t)(p->n_values + 1));
    e->shared = oar_malloc(sizeof(int) * (size_t)(p->n_values + 1));
    int n_in = p->blocks[OAR_MAIN_BLOCK].n_in;
    e->input_shell = oar_malloc(sizeof(oar_tensor *) * (size_t)(n_in + 1));
    e->input_copy = oar_malloc(sizeof(oar_tensor *) * (size_t)(n_in + 1));
    if (!e->hdr || !e->borrowed || !e->fresh || !e->shared || !e->input_shell || !e->input_copy) return OAR_ERR_OOM;
    /* Always made, even when the plan needs 0 bytes: at a zero-size batch every intermediate is
     * empty, yet each is still an arena value whose header points at this storage (oar_alloc
     * gives a valid pointer for 0 bytes). */
    e->arena = OAR_NEW(oar_storage);
    if (!e->arena) return OAR_ERR_OOM;
    e->arena->refcount = 1;
    e->arena->owned = true;
    e->arena->nbytes = (size_t)pl->arena_bytes;
    e->arena->device = p->device;
    if (!(e->arena->data = e->on_device ? e->dev->alloc(e->arena->nbytes) : oar_alloc(e->arena->nbytes)))
        return OAR_ERR_OOM;
    for (int v = 0; v < p->n_values; v++) {
        const oar_value *val = &p->values[v];
        if (val->kind == OAR_VAL_PARAM || val->kind == OAR_VAL_CONST) {
            e->hdr[v] = oar_retain(val->tensor);
            continue;
        }
        if (val->block != OAR_MAIN_BLOCK) continue; /* sub-block values: made when their block runs */
        if (val->kind == OAR_VAL_NODE && p->nodes[val->node].dead) continue; /* removed by a pass: never used */
        if (val->kind == OAR_VAL_INPUT) { /* bound per run; a contiguous shell until then */
            if (!(e->hdr[v] = shell_of(p, v))) return oar_last_status();
            if (e->on_device && own_storage(e->hdr[v]) != OAR_OK) return OAR_ERR_OOM; /* its slot */
            continue;
        }
        if (!(e->hdr[v] = shell_of(p, v))) return oar_last_status();
        if (pl->root[v] != v) { /* views: set by their instruction; in-place outputs: at each run */
            if (!(oar_op_table[p->nodes[val->node].op]->flags & OAR_OPF_VIEW)) e->shared[e->n_shared++] = v;
            continue;
        }
        switch (pl->cls[v]) {
        case OAR_BUF_ARENA:
            e->hdr[v]->storage = e->arena;
            __atomic_add_fetch(&e->arena->refcount, 1, __ATOMIC_RELAXED);
            e->hdr[v]->offset = pl->offset[v] / (int64_t)oar_dtypes[val->meta.dtype].size;
            break;
        case OAR_BUF_PERSISTENT:
            if (oar_tensor_alloc_storage(e->hdr[v]) != OAR_OK) return OAR_ERR_OOM;
            /* gradients are rewritten every run without a version bump: not tracked. Computed-
             * once values bump their version each time they are recomputed (run_once). */
            if (!e->hoisted[val->node]) e->hdr[v]->storage->uid = 0;
            break;
        case OAR_BUF_FRESH: /* on a device: a fixed buffer, copied out at each run */
            if (e->on_device) {
                if (own_storage(e->hdr[v]) != OAR_OK) return OAR_ERR_OOM;
            } else {
                e->fresh[e->n_fresh++] = v;
            }
            break;
        default: break;
        }
    }
    return OAR_OK;
}

/* Fills a kernel instruction's argument lists (in e->args from *next on) and notes the slots
 * that name a main input, whose header changes with every run. */
static void make_args(oar_exec *e, instr *I, const int *input_index, int *next) {
    const oar_node *n = I->node;
    I->in = e->args + *next;
    I->out = I->in + n->n_in;
    *next += n->n_in + n->n_out;
    bool direct = (I->def->flags & OAR_OPF_STRIDED) != 0, all_contiguous = true;
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        I->in[k] = v >= 0 ? e->hdr[v] : NULL;
        if (v >= 0 && !I->in[k]) all_contiguous = false; /* a sub-block value: no header here */
        else if (I->in[k] && !I->in[k]->contiguous) all_contiguous = false;
        if (v >= 0 && input_index[v] >= 0) {
            e->input_arg[e->n_input_args] = (int)(&I->in[k] - e->args);
            e->input_arg_of[e->n_input_args++] = input_index[v];
        }
    }
    for (int o = 0; o < n->n_out; o++) I->out[o] = e->hdr[n->out[o]];
    /* bound inputs are made contiguous and other layouts are fixed once prepared */
    I->direct = direct || all_contiguous;
    /* host tensors a device kernel reads (a 0-d parameter; not its host inputs) are copied over
     * per run by the checked path, as eager dispatch does */
    for (int k = 0; k < n->n_in && I->kernel->device != OAR_CPU; k++)
        if (I->in[k] && I->in[k]->device == OAR_CPU && !(k < 32 && ((I->def->host_inputs >> k) & 1u)))
            I->direct = false;
    I->random = (I->def->flags & OAR_OPF_RANDOM) != 0;
    I->bumps = n->inplace;
    I->fn = I->kernel->fn;
    I->attrs = n->attrs;
    I->n_in = n->n_in;
    I->n_out = n->n_out;
}

/* The parameters and constants the computed-once nodes read, each listed once. */
static oar_status watch_inputs(oar_exec *e, const bool *hoisted) {
    const oar_program *p = e->p;
    bool *listed = calloc((size_t)p->n_values + 1, 1);
    e->watch = oar_malloc(sizeof(int) * (size_t)(p->n_values + 1));
    e->watch_storage = calloc((size_t)p->n_values + 1, sizeof(oar_storage *));
    e->watch_version = calloc((size_t)p->n_values + 1, sizeof(uint32_t));
    if (!listed || !e->watch || !e->watch_storage || !e->watch_version) {
        free(listed);
        return oar_error(OAR_ERR_OOM, "executor: out of memory");
    }
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        if (!hoisted[i]) continue;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || listed[v] || p->values[v].kind == OAR_VAL_NODE) continue;
            listed[v] = true;
            e->watch[e->n_watch++] = v;
        }
    }
    free(listed);
    return OAR_OK;
}

/* Kernels are chosen once, on headers with the program's shapes and planned storage. */
static oar_status make_code(oar_exec *e) {
    const oar_program *p = e->p;
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    e->code = oar_malloc(sizeof(instr) * (size_t)(main->n_nodes + 1));
    e->once = oar_malloc(sizeof(instr) * (size_t)(main->n_nodes + 1));
    if (!e->code || !e->once) return OAR_ERR_OOM;
    oar_status wst = watch_inputs(e, e->hoisted);
    if (wst != OAR_OK) return wst;
    size_t n_args = 0;
    for (int i = 0; i < main->n_nodes; i++) n_args += (size_t)(p->nodes[main->nodes[i]].n_in + p->nodes[main->nodes[i]].n_out);
    e->args = oar_malloc(sizeof(oar_tensor *) * (n_args + 1));
    e->input_arg = oar_malloc(sizeof(int) * (n_args + 1));
    e->input_arg_of = oar_malloc(sizeof(int) * (n_args + 1));
    int *input_index = oar_malloc(sizeof(int) * (size_t)(p->n_values + 1));
    if (!e->args || !e->input_arg || !e->input_arg_of || !input_index) {
        free(input_index);
        return OAR_ERR_OOM;
    }
    for (int v = 0; v < p->n_values; v++) input_index[v] = -1;
    for (int i = 0; i < main->n_in; i++) input_index[main->in[i]] = i;
    int next_arg = 0;
    for (int i = 0; i < main->n_nodes; i++) {
        const oar_node *n = &p->nodes[main->nodes[i]];
        const oar_op_def *d = oar_op_table[n->op];
        /* nodes reading only parameters and constants run once per parameter change (hoist.h) */
        instr *I = e->hoisted[main->nodes[i]] ? &e->once[e->n_once++] : &e->code[e->n_code++];
        memset(I, 0, sizeof *I);
        I->op = n->op;
        I->def = d;
        I->node = n;
        if (d->flags & OAR_OPF_VIEW) { /* the layout it gives, so consumers' kernels fit it */
            I->kind = INSTR_VIEW;
            oar_status st = run_view(e, I);
            for (int o = 0; o < n->n_out; o++) e->hdr[n->out[o]]->storage = NULL;
            if (st != OAR_OK) {
                free(input_index);
                return st;
            }
            continue;
        }
        if (d->flags & OAR_OPF_CONTROL) {
            I->kind = INSTR_CONTROL;
            continue;
        }
        I->kind = INSTR_KERNEL;
        oar_tensor *in[OAR_MAX_INPUTS], *out[OAR_MAX_OUTPUTS];
        for (int k = 0; k < n->n_in; k++) in[k] = n->in[k] >= 0 ? e->hdr[n->in[k]] : NULL;
        for (int o = 0; o < n->n_out; o++) out[o] = e->hdr[n->out[o]];
        bool shapes_only = true;
        oar_tensor *tmp[OAR_MAX_INPUTS] = {0}; /* values of sub-blocks have no header */
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && !in[k]) {
                if (!(tmp[k] = shell_of(p, n->in[k]))) shapes_only = false;
                in[k] = tmp[k];
            }
        /* kernels' supports() may look at pointers: headers bound only at run time get a stand-in */
        static char stand_in_data[64];
        static oar_storage stand_in = {.refcount = 1 << 30, .data = stand_in_data, .nbytes = sizeof stand_in_data};
        oar_tensor *lent[OAR_MAX_INPUTS + OAR_MAX_OUTPUTS];
        int n_lent = 0;
        for (int k = 0; k < n->n_in; k++)
            if (in[k] && !in[k]->storage) (lent[n_lent++] = in[k])->storage = &stand_in;
        for (int o = 0; o < n->n_out; o++)
            if (!out[o]->storage) (lent[n_lent++] = out[o])->storage = &stand_in;
        I->kernel = shapes_only ? oar_select_kernel(n->op, in, n->n_in, out, n->n_out, n->attrs) : NULL;
        for (int k = 0; k < n_lent; k++) lent[k]->storage = NULL;
        for (int k = 0; k < n->n_in; k++) oar_tensor_unref(tmp[k]);
        if (!I->kernel) {
            free(input_index);
            oar_error_prefix("executor: node %d", main->nodes[i]);
            return oar_last_status();
        }
        make_args(e, I, input_index, &next_arg);
    }
    free(input_index);
    return OAR_OK;
}

/* Whether value v's storage is the same at every run: parameters and constants, the arena and
 * persistent buffers (not inputs, bound per run, nor fresh outputs, allocated per run). */
static bool storage_fixed(const oar_exec *e, int v) {
    int r = e->plan.root[v];
    switch (e->plan.cls[v]) {
    case OAR_BUF_ARENA:
    case OAR_BUF_PERSISTENT: return true;
    case OAR_BUF_FRESH: return e->on_device;
    case OAR_BUF_EXTERNAL:
        return e->p->values[r].kind == OAR_VAL_PARAM || e->p->values[r].kind == OAR_VAL_CONST ||
               (e->on_device && e->p->values[r].kind == OAR_VAL_INPUT && e->p->values[r].block == OAR_MAIN_BLOCK);
    default: return false;
    }
}

/* What needs no redoing per run is done now: in-place outputs of fixed roots take the root's
 * storage, and views of fixed storage are computed and leave the instruction list. */
static oar_status settle_fixed(oar_exec *e) {
    int kept = 0;
    for (int k = 0; k < e->n_shared; k++) {
        if (storage_fixed(e, e->shared[k])) share_root(e, e->shared[k]);
        else e->shared[kept++] = e->shared[k];
    }
    e->n_shared = kept;
    kept = 0;
    for (int i = 0; i < e->n_code; i++) {
        instr *I = &e->code[i];
        const oar_node *n = I->node;
        if (I->kind == INSTR_VIEW && n->n_in > 0 && n->in[0] >= 0 && e->hdr[n->in[0]] && storage_fixed(e, n->in[0])) {
            oar_status st = run_view(e, I);
            if (st != OAR_OK) {
                oar_error_prefix("program node %d", (int)(n - e->p->nodes));
                return st;
            }
            continue;
        }
        e->code[kept++] = *I;
    }
    e->n_code = kept;
    return OAR_OK;
}

/* Batch tiles (batch_tiles.h): the first instruction of each gets the tile's length, and the
 * interior values' headers hold one slice (their planned size) from now on: the kernels were
 * chosen on whole-batch shapes, which the slices only cut. */
static oar_status mark_tiles(oar_exec *e) {
    const oar_program *p = e->p;
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    if (!e->plan.n_tiles) return OAR_OK;
    int *step = malloc(sizeof(int) * ((size_t)p->n_nodes + 1));
    if (!step) return oar_error(OAR_ERR_OOM, "executor: out of memory");
    for (int s = 0; s < mb->n_nodes; s++) step[mb->nodes[s]] = s;
    oar_status st = OAR_OK;
    for (int t = 0; t < e->plan.n_tiles && st == OAR_OK; t++) {
        const oar_batch_tile *bt = &e->plan.tiles[t];
        int head = -1;
        for (int i = 0; i < e->n_code; i++) {
            int s = step[e->code[i].node - p->nodes];
            if (s < bt->first || s > bt->last) continue;
            if (e->code[i].kind != INSTR_KERNEL || (head >= 0 && head + e->code[head].tile_len != i)) {
                st = oar_error(OAR_ERR_STATE, "executor: batch tile of steps %d to %d holds a view, control flow or "
                               "a gap at node %d", bt->first, bt->last, (int)(e->code[i].node - p->nodes));
                break;
            }
            if (head < 0) head = i, e->code[i].tile = t;
            e->code[head].tile_len++;
        }
    }
    free(step);
    for (int v = 0; v < p->n_values && st == OAR_OK; v++) {
        if (e->plan.tiled[v] != OAR_TILE_INTERIOR || !e->hdr[v]) continue;
        const oar_batch_tile *bt = NULL;
        for (int t = 0; t < e->plan.n_tiles; t++)
            if (e->plan.first[v] == e->plan.tiles[t].first) bt = &e->plan.tiles[t];
        oar_tensor *h = e->hdr[v];
        if (!bt || h->ndim < 1 || h->shape[0] != bt->batch) {
            st = oar_error(OAR_ERR_STATE, "executor: value %d is planned as one slice of a batch tile but is no batch", v);
            break;
        }
        h->numel = h->numel / bt->batch * bt->sub;
        h->shape[0] = bt->sub;
    }
    return st;
}

oar_exec *oar_exec_create(const oar_program *p) {
    oar_exec *e = OAR_NEW(oar_exec);
    if (!e) return NULL;
    e->p = p;
    e->on_device = p->device != OAR_CPU;
    if (e->on_device && !(e->dev = oar_device_use(p->device, "program"))) {
        free(e);
        return NULL;
    }
    oar_status st = oar_plan_memory_tiled(p, e->on_device ? 0 : oar_get_num_threads(), &e->plan);
    if (st == OAR_OK && getenv("OAR_CHECK_PLAN")) st = oar_plan_check(p, &e->plan);
    if (st == OAR_OK && !(e->hoisted = oar_program_hoisted_nodes(p))) st = oar_last_status();
    if (st == OAR_OK) st = make_headers(e);
    if (st == OAR_OK) st = make_code(e);
    if (st == OAR_OK) st = settle_fixed(e);
    if (st == OAR_OK) st = mark_tiles(e);
    if (st != OAR_OK) {
        oar_exec_free(e);
        return NULL;
    }
    return e;
}

void oar_exec_free(oar_exec *e) {
    if (!e) return;
    for (int k = 0; k < e->n_segs; k++)
        if (e->segs[k].graph) e->dev->graph_free(e->segs[k].graph);
    free(e->segs);
    for (int i = 0; e->code && i < e->n_code; i++) free_params(e, &e->code[i]);
    if (e->hdr)
        for (int v = 0; v < e->p->n_values; v++) {
            if (!e->hdr[v]) continue;
            if (e->borrowed[v]) e->hdr[v]->storage = NULL;
            oar_tensor_unref(e->hdr[v]);
        }
    oar_storage_release(e->arena); /* the exec's own reference */
    oar_plan_free(&e->plan);
    free(e->hdr);
    free(e->borrowed);
    free(e->fresh);
    free(e->shared);
    free(e->input_shell);
    free(e->input_copy);
    free(e->code);
    free(e->args);
    free(e->input_arg);
    free(e->input_arg_of);
    free(e->once);
    free(e->hoisted);
    for (int k = 0; k < e->n_watch; k++) oar_storage_release(e->watch_storage[k]);
    free(e->watch);
    free(e->watch_storage);
    free(e->watch_version);
    free(e);
}

static oar_status bind_inputs(oar_exec *e, oar_tensor *const *in, int n_in) {
    const oar_program *p = e->p;
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    if (n_in != main->n_in)
        return oar_error(OAR_ERR_INVALID_ARG, "program: expected %d inputs, got %d", main->n_in, n_in);
    for (int i = 0; i < n_in; i++) {
        const oar_meta *m = &p->values[main->in[i]].meta;
        oar_tensor *x = in[i];
        if (!x) return oar_error(OAR_ERR_INVALID_ARG, "program: input %d is NULL", i);
        if (!x->storage) return oar_symbolic_error("program input", x);
        if (x->device != p->device && !(e->on_device && x->device == OAR_CPU))
            return oar_error(OAR_ERR_INVALID_ARG, "program: input %d is on %s, but the program runs on %s; move the "
                                                  "input with oar_to, or compile the function for that device",
                             i, oar_device_name(x->device), oar_device_name(p->device));
        if (x->dtype != m->dtype || x->ndim != m->ndim ||
            memcmp(x->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim)) {
            char want[200], got[200];
            oar_meta_format(m, 0, want, sizeof want);
            oar_meta t;
            oar_meta_from(&t, x);
            oar_meta_format(&t, 0, got, sizeof got);
            return oar_error(OAR_ERR_SHAPE, "program: expected input %d to be %s, got %s", i, want, got);
        }
    }
    if (e->on_device) { /* copied into the input's slot, in stream order (host or device source) */
        for (int i = 0; i < n_in; i++)
            if (oar_tensor_copy_strided(e->hdr[main->in[i]], in[i]) != OAR_OK) return oar_last_status();
        return OAR_OK;
    }
    for (int i = 0; i < n_in; i++) {
        e->input_shell[i] = e->hdr[main->in[i]];
        e->input_copy[i] = NULL;
    }
    e->bound = true;
    for (int i = 0; i < n_in; i++) { /* kernels were chosen for contiguous inputs */
        oar_tensor *x = in[i];
        if (!x->contiguous && !(e->input_copy[i] = oar_tensor_contiguous_copy(x))) return OAR_ERR_OOM;
        e->hdr[main->in[i]] = e->input_copy[i] ? e->input_copy[i] : x; /* borrowed for the run */
    }
    for (int k = 0; k < e->n_input_args; k++) e->args[e->input_arg[k]] = e->hdr[main->in[e->input_arg_of[k]]];
    return OAR_OK;
}

static void unbind(oar_exec *e) {
    const oar_block *main = &e->p->blocks[OAR_MAIN_BLOCK];
    if (e->bound) {
        for (int i = 0; i < main->n_in; i++) {
            e->hdr[main->in[i]] = e->input_shell[i];
            oar_tensor_unref(e->input_copy[i]);
        }
        for (int k = 0; k < e->n_input_args; k++) e->args[e->input_arg[k]] = e->hdr[main->in[e->input_arg_of[k]]];
        e->bound = false;
    }
    /* this run's fresh storage goes; the caller's output headers keep what they need */
    for (int k = 0; k < e->n_fresh; k++) {
        oar_tensor *h = e->hdr[e->fresh[k]];
        oar_storage_release(h->storage);
        h->storage = NULL;
    }
}

/* Outputs the caller keeps: fresh roots and views of them get their own headers. */
static oar_status hand_out(oar_exec *e, oar_tensor **out, int n_out) {
    const oar_block *main = &e->p->blocks[OAR_MAIN_BLOCK];
    if (n_out != main->n_out)
        return oar_error(OAR_ERR_INVALID_ARG, "program: expected room for %d outputs, got %d", main->n_out, n_out);
    for (int k = 0; k < n_out; k++) {
        oar_tensor *h = e->hdr[main->out[k]];
        int r = e->plan.root[main->out[k]];
        bool copy = e->on_device && (e->plan.cls[r] == OAR_BUF_FRESH || e->p->values[r].kind == OAR_VAL_INPUT);
        if (copy) { /* the next run rewrites the fixed buffer: the caller gets its own */
            out[k] = oar_tensor_new_on(e->p->device, h->dtype, h->shape, h->ndim);
            if (out[k] && oar_tensor_copy_strided(out[k], h) != OAR_OK) {
                oar_tensor_unref(out[k]);
                out[k] = NULL;
            }
        } else {
            out[k] = oar_tensor_alias(h);
        }
        if (!out[k]) {
            for (int j = 0; j < k; j++) oar_tensor_unref(out[j]);
            return OAR_ERR_OOM;
        }
        out[k]->trace_id = 0;
        out[k]->trace_op = NULL;
    }
    return OAR_OK;
}

static void write_grads(oar_exec *e) {
    const oar_program *p = e->p;
    for (int k = 0; k < p->n_grad_writes; k++) {
        oar_tensor *param = p->grad_writes[k].param, *g = e->hdr[p->grad_writes[k].value];
        if (param->grad && param->grad->storage == g->storage && param->grad->offset == g->offset) continue;
        oar_tensor *a = oar_tensor_alias(g);
        if (!a) continue;
        a->trace_id = 0;
        oar_tensor_unref(param->grad);
        param->grad = a;
    }
}

/* Whether the computed-once nodes hold results for the parameters as they are now: each one
 * still has the storage it had (a reference is kept, so its address cannot be reused by
 * another) at the same version. Writes through the API bump the version (copy_, init,
 * checkpoint loads, optimizer updates); raw writes through oar_data are not seen, as for
 * autograd's checks. */
static bool once_current(const oar_exec *e) {
    if (!e->once_done) return false;
    for (int k = 0; k < e->n_watch; k++) {
        const oar_storage *s = e->hdr[e->watch[k]]->storage;
        if (s != e->watch_storage[k] || s->version != e->watch_version[k]) return false;
    }
    return true;
}

static oar_status run_once(oar_exec *e, const oar_kctx *ctx) {
    e->once_done = false;
    oar_status st = OAR_OK;
    for (int i = 0; i < e->n_once && st == OAR_OK; i++) st = run_instr(e, &e->once[i], ctx);
    if (st != OAR_OK) return st;
    for (int i = 0; i < e->n_once; i++) { /* new data in the same buffers: caches keyed on versions see it */
        const oar_node *n = e->once[i].node;
        if (e->once[i].kernel)
            for (int o = 0; o < n->n_out; o++) e->hdr[n->out[o]]->storage->version++;
    }
    for (int k = 0; k < e->n_watch; k++) {
        oar_storage *s = e->hdr[e->watch[k]]->storage;
        if (s != e->watch_storage[k]) {
            if (s) __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED);
            oar_storage_release(e->watch_storage[k]);
            e->watch_storage[k] = s;
        }
        e->watch_version[k] = s ? s->version : 0;
    }
    e->once_done = true;
    return OAR_OK;
}

/* The instruction list with the phases its nodes were traced in replayed as profiler ranges,
 * so a compiled step's overview splits forward, backward and optimizer as eager's does. Nodes
 * a pass made (phase 0) continue the phase before them. */
static oar_status run_phased(oar_exec *e, const oar_kctx *ctx) {
    oar_status st = OAR_OK;
    uint8_t cur = 0;
    for (int i = 0; i < e->n_code && st == OAR_OK; i++) {
        uint8_t ph = e->code[i].node->phase;
        if (ph && ph != cur) {
            if (cur) oar_prof_pop();
            oar_prof_push(oar_prof_phase_name(ph));
            cur = ph;
        }
        st = run_at(e, &i, ctx);
    }
    if (cur) oar_prof_pop();
    return st;
}

/* Whether instruction I may be recorded into a device graph: a kernel called directly, with
 * random draws and host inputs only through per-run values (op.h's oar_kparams: the counters
 * and the values the launching code reads; a replay would repeat them otherwise) and no
 * per-run bookkeeping. */
static const char *unrecordable(const instr *I) {
    if (I->kind == INSTR_CONTROL) return "control flow runs its blocks op by op";
    if (I->kind == INSTR_VIEW) return "a view of per-run storage";
    if (I->random && !I->params) return "draws random numbers (a replay would repeat them)";
    if (I->def->host_inputs && !I->params) return "reads host inputs when launched (a replay would repeat their values)";
    if (!I->direct) return "needs per-run copies of its inputs";
    return NULL;
}

/* Host and device buffers for the per-run values of a kernel that takes them (graph_params;
 * none on failure: the node then runs plain). */
static void make_params(oar_exec *e, instr *I) {
    if (I->kind != INSTR_KERNEL || !I->kernel->graph_params || I->kernel->device == OAR_CPU || !I->direct) return;
    if (!I->random && !I->def->host_inputs) return;
    oar_kparams *kp = calloc(1, sizeof *kp);
    size_t cap = OAR_KPARAMS_PER_INPUT * (size_t)(I->n_in + 1);
    if (kp) kp->host = malloc(cap);
    if (kp && kp->host) kp->dev = e->dev->alloc(cap);
    if (!kp || !kp->host || !kp->dev) {
        if (kp) free(kp->host);
        free(kp);
        oar_clear_error();
        return;
    }
    kp->cap = cap;
    I->params = kp;
}

static void free_params(oar_exec *e, instr *I) {
    if (!I->params) return;
    e->dev->free(I->params->dev, I->params->cap); /* stream-ordered: after the last replay's reads */
    free(I->params->host);
    free(I->params);
    I->params = NULL;
}

/* Kernel I with its per-run values in phase ph (or a plain call where it has none). */
static oar_status run_phase(oar_exec *e, instr *I, const oar_kctx *ctx, oar_kparams_phase ph) {
    if (!I->params) return run_instr(e, I, ctx);
    oar_kctx c = *ctx;
    c.params = I->params;
    if (I->random && ph == OAR_KPARAMS_PREPARE) /* this run's counters, reserved as a plain call would */
        c.rng = oar_rng_reserve((uint64_t)(I->def->draws ? I->def->draws(I->out, I->n_out, I->attrs)
                                                        : I->n_out ? I->out[0]->numel : 0));
    I->params->phase = ph;
    I->params->used = 0;
    oar_kernel_call_begin();
    oar_status st = I->fn(&c, I->in, I->n_in, I->out, I->n_out, I->attrs);
    if (st != OAR_OK && oar_last_status() == OAR_OK)
        oar_error(st, "%s: the %s kernel failed without a message", I->def->name, I->kernel->impl);
    if (st != OAR_OK) oar_error_prefix("program node %d", (int)(I->node - e->p->nodes));
    if (st == OAR_OK && ph == OAR_KPARAMS_LAUNCH && I->bumps) I->out[0]->storage->version++;
    return st;
}

/* Before segment sg's replay: the host side of this run for its nodes with per-run values,
 * the values copied to the device (in stream order, ahead of the replay that reads them). */
static oar_status prepare_segment(oar_exec *e, const segment *sg, const oar_kctx *ctx) {
    oar_status st = OAR_OK;
    for (int i = sg->first; i < sg->first + sg->n && st == OAR_OK; i++) {
        instr *I = &e->code[i];
        if (!I->params) continue;
        st = run_phase(e, I, ctx, OAR_KPARAMS_PREPARE);
        if (st == OAR_OK && I->params->used)
            st = e->dev->copy(I->params->dev, I->params->host, I->params->used, OAR_COPY_TO_DEVICE);
    }
    return st;
}

static void note_plain(oar_exec *e, const instr *I, const char *why) {
    size_t n = strlen(e->graph_note);
    if (n + 2 >= sizeof e->graph_note) return;
    snprintf(e->graph_note + n, sizeof e->graph_note - n, "%snode %d (%s): %s", n ? "; " : "",
             (int)(I->node - e->p->nodes), I->def->name, why);
}

/* Splits the instruction list into segments of recordable instructions (the rest run plain). */
static oar_status make_segments(oar_exec *e) {
    e->segs_made = true;
    e->segs = calloc((size_t)e->n_code + 1, sizeof(segment));
    if (!e->segs) return oar_error(OAR_ERR_OOM, "executor: out of memory");
    for (int i = 0; i < e->n_code; i++) {
        make_params(e, &e->code[i]);
        const char *why = unrecordable(&e->code[i]);
        if (why) {
            note_plain(e, &e->code[i], why);
            continue;
        }
        segment *sg = e->n_segs && e->segs[e->n_segs - 1].first + e->segs[e->n_segs - 1].n == i
                          ? &e->segs[e->n_segs - 1] : &e->segs[e->n_segs++];
        if (!sg->n) sg->first = i;
        sg->n++;
    }
    return OAR_OK;
}

/* Records segment k (its work is queued by the launch that follows, not while recording). A
 * kernel that cannot be recorded (it reads a result back) fails the recording: it runs as a
 * plain launch from then on, with the reason in the note, and the instructions before and
 * after it become segments of their own, recorded in turn. A recording that fails otherwise
 * (the allocator had to free device memory, instantiation failed) leaves the whole segment to
 * plain launches. */
static void record_segment(oar_exec *e, int k, const oar_kctx *ctx) {
    segment *sg = &e->segs[k];
    oar_status st = e->dev->graph_begin();
    int bad = -1;
    for (int i = sg->first; i < sg->first + sg->n && st == OAR_OK; i++)
        if ((st = run_phase(e, &e->code[i], ctx, OAR_KPARAMS_LAUNCH)) != OAR_OK) bad = i;
    char why[200];
    snprintf(why, sizeof why, "%s", st == OAR_OK ? "" : oar_last_error());
    sg->graph = e->dev->graph_end(st == OAR_OK);
    if (!sg->graph && st == OAR_OK) snprintf(why, sizeof why, "%s", oar_last_error());
    oar_clear_error();
    if (getenv("OAR_CUDA_GRAPHS_VERBOSE"))
        fprintf(stderr, "oar: a program segment of %d nodes %s%s\n", sg->n,
                sg->graph ? "is recorded as a CUDA graph" : "runs as plain launches: ", sg->graph ? "" : why);
    if (sg->graph) return;
    if (bad < 0) { /* nothing to split at */
        sg->failed = true;
        note_plain(e, &e->code[sg->first], why[0] ? why : "recording failed");
        return;
    }
    note_plain(e, &e->code[bad], why);
    int end = sg->first + sg->n;
    segment after = {.first = bad + 1, .n = end - bad - 1};
    sg->n = bad - sg->first;
    int at = k + 1; /* where the segment after the bad instruction goes */
    if (!sg->n) { /* nothing before it: the slot takes the part after */
        *sg = after;
        if (sg->n) return;
        memmove(&e->segs[k], &e->segs[k + 1], sizeof(segment) * (size_t)(e->n_segs - k - 1));
        e->n_segs--;
        return;
    }
    if (!after.n) return;
    memmove(&e->segs[at + 1], &e->segs[at], sizeof(segment) * (size_t)(e->n_segs - at));
    e->segs[at] = after;
    e->n_segs++;
}

/* A run as device graphs: each segment is replayed (recorded first when it is new); the
 * instructions between segments, and segments that could not be recorded, run plain. With
 * the profiler on, each replay is one range ("cuda_graph"). */
static oar_status run_graphed(oar_exec *e, const oar_kctx *ctx) {
    if (!e->segs_made && make_segments(e) != OAR_OK) return oar_last_status();
    bool ranges = oar_prof_ranges_on();
    oar_status st = OAR_OK;
    int k = 0;
    for (int i = 0; i < e->n_code && st == OAR_OK;) {
        while (k < e->n_segs && e->segs[k].first + e->segs[k].n <= i) k++;
        segment *sg = k < e->n_segs && e->segs[k].first == i ? &e->segs[k] : NULL;
        if (sg && !sg->graph && !sg->failed && !oar_prof_hooks_on()) { /* record with hooks off only */
            record_segment(e, k, ctx);
            continue; /* position i again: a graph to launch, or a shorter segment, or a plain node */
        }
        if (!sg || !sg->graph) {
            int end = sg ? i + sg->n : i + 1;
            for (; i < end && st == OAR_OK; i++) st = run_instr(e, &e->code[i], ctx);
            continue;
        }
        st = prepare_segment(e, sg, ctx);
        if (st != OAR_OK) break;
        if (ranges) oar_prof_push("cuda_graph");
        st = e->dev->graph_launch(sg->graph);
        if (ranges) oar_prof_pop();
        for (int j = i; j < i + sg->n; j++) /* the host-side bookkeeping plain runs do */
            if (e->code[j].bumps) e->code[j].out[0]->storage->version++;
        i += sg->n;
    }
    return st;
}

const char *oar_exec_graph_note(const oar_exec *e) {
    if (!e->on_device) return "host program: no graphs";
    if (!oar_cuda_graphs_enabled()) return "CUDA graphs are switched off";
    if (!e->segs_made) return "not recorded yet (graphs are recorded from the second run)";
    return e->graph_note[0] ? e->graph_note : "the whole step is recorded";
}

int oar_exec_graph_count(const oar_exec *e) {
    int n = 0;
    for (int k = 0; k < e->n_segs; k++) n += e->segs[k].graph != NULL;
    return n;
}

oar_status oar_exec_run(oar_exec *e, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_kernel_call_begin(); /* the inputs bound below may lie where a kernel's kept work came from */
    oar_status st = bind_inputs(e, in, n_in);
    if (st != OAR_OK) {
        unbind(e);
        return st;
    }
    int64_t base = oar_memory_stats_get(e->p->device).current_bytes; /* the peak is the caller's: never reset here */
    for (int k = 0; k < e->n_fresh && st == OAR_OK; k++) {
        oar_tensor *h = e->hdr[e->fresh[k]];
        if (oar_tensor_alloc_storage(h) != OAR_OK) st = OAR_ERR_OOM;
    }
    /* headers sharing a root (in-place outputs) follow the root's storage of this run */
    for (int k = 0; k < e->n_shared && st == OAR_OK; k++) share_root(e, e->shared[k]);
    /* once per run: the pool's size may change between runs */
    oar_kctx ctx = {.nthreads = oar_get_num_threads(), .device = e->p->device, .stream = oar_device_stream(e->p->device)};
    oar_no_grad_begin();
    if (st == OAR_OK && e->n_once && !once_current(e)) st = run_once(e, &ctx);
    if (e->on_device && e->runs > 0 && e->dev->graph_begin && oar_cuda_graphs_enabled() && !oar_prof_check_on()) {
        if (st == OAR_OK) st = run_graphed(e, &ctx);
    } else if (OAR_UNLIKELY(oar_prof_ranges_on())) {
        if (st == OAR_OK) st = run_phased(e, &ctx);
    } else {
        for (int i = 0; i < e->n_code && st == OAR_OK; i++) st = run_at(e, &i, &ctx);
    }
    oar_no_grad_end();
    if (st == OAR_OK) st = hand_out(e, out, n_out);
    if (st == OAR_OK) write_grads(e);
    if (st == OAR_OK) e->runs++;
    int64_t peak = oar_memory_stats_get(e->p->device).peak_bytes - base + e->plan.arena_bytes + e->plan.persistent_bytes;
    if (peak > e->measured_peak) e->measured_peak = peak;
    unbind(e);
    return st;
}
