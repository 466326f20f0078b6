/* Internal tensor layer: storage, the tensor struct, dtype traits, strided iteration. */
#ifndef OAR_TENSOR_H
#define OAR_TENSOR_H

#include "base/base.h"

/* ---- dtype traits (dtype.c): one row per dtype, checked against OAR_DTYPE_COUNT */
typedef struct oar_dtype_traits {
    const char *name;
    size_t size;
    bool is_float, is_signed;
    double (*load)(const void *p);          /* element -> double */
    void (*store)(void *p, double v);       /* double -> element (ints truncate toward 0) */
    int64_t (*load_i64)(const void *p);
    void (*store_i64)(void *p, int64_t v);
} oar_dtype_traits;
extern const oar_dtype_traits oar_dtypes[OAR_DTYPE_COUNT];
#define OAR_DTYPE_BIT(dt) (1u << (dt))
#define OAR_FLOAT_DTYPES (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64) | OAR_DTYPE_BIT(OAR_F16) | OAR_DTYPE_BIT(OAR_BF16))
#define OAR_INT_DTYPES (OAR_DTYPE_BIT(OAR_I8) | OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I32) | OAR_DTYPE_BIT(OAR_I64))
#define OAR_ALL_DTYPES ((1u << OAR_DTYPE_COUNT) - 1)
/* The integer dtypes kept for interchange (ONNX, NumPy, torch.int16): casts, copies, shape and
 * index ops, elementwise arithmetic/comparison/bitwise ops, abs/neg, where, sum/amax/amin,
 * argmax/argmin and topk take them (docs/dtypes.md); OAR_INT_DTYPES and OAR_BASE_DTYPES leave
 * them out, so an op declaring those refuses them with the usual "no kernel for dtype" error. */
#define OAR_EXT_INT_DTYPES (OAR_DTYPE_BIT(OAR_I16) | OAR_DTYPE_BIT(OAR_U16) | OAR_DTYPE_BIT(OAR_U32) | OAR_DTYPE_BIT(OAR_U64))
/* The low-bit storage dtypes (float8, float4, int4, int2: lowbit.c): casts, copies and the ops
 * that move data take them (OAR_ALL_DTYPES); arithmetic declares OAR_NUMERIC_DTYPES, which
 * leaves them out, so it refuses them with the usual "no kernel for dtype" error. */
#define OAR_LOWBIT_DTYPES (((1u << (OAR_U2 + 1)) - 1) & ~((1u << OAR_F8E4M3FN) - 1))
#define OAR_NUMERIC_DTYPES (OAR_ALL_DTYPES & ~OAR_LOWBIT_DTYPES)
#define OAR_BASE_DTYPES (OAR_ALL_DTYPES & ~OAR_EXT_INT_DTYPES & ~OAR_LOWBIT_DTYPES)
/* the traits rows' element access of the low-bit dtypes (lowbit.c) */
#define OAR_LOWBIT_ACCESS(NAME)                                                                      \
    double oar_##NAME##_load(const void *p);                                                         \
    void oar_##NAME##_store(void *p, double v);                                                      \
    int64_t oar_##NAME##_load_i64(const void *p);                                                    \
    void oar_##NAME##_store_i64(void *p, int64_t v);
OAR_LOWBIT_ACCESS(f8e4m3fn) OAR_LOWBIT_ACCESS(f8e4m3fnuz) OAR_LOWBIT_ACCESS(f8e5m2) OAR_LOWBIT_ACCESS(f8e5m2fnuz)
OAR_LOWBIT_ACCESS(f8e8m0) OAR_LOWBIT_ACCESS(f4e2m1) OAR_LOWBIT_ACCESS(i4) OAR_LOWBIT_ACCESS(u4)
OAR_LOWBIT_ACCESS(i2) OAR_LOWBIT_ACCESS(u2)
/* u64 is the one dtype whose load_i64 is not its value (above INT64_MAX it is the bits): code
 * that compares, divides or shifts integers must take the uint64_t path for it. */
static inline bool oar_dtype_bits_u64(oar_dtype dt) { return dt == OAR_U64; }
bool oar_dtype_valid(oar_dtype dt);
/* The dtype named name ("f32", "i64", ...); false if there is none. */
bool oar_dtype_from_name(const char *name, oar_dtype *out);

/* ---- storage: a refcounted buffer shared by all views of it */
typedef struct oar_storage {
    int refcount;
    void *data;
    size_t nbytes;
    oar_device device;
    void (*deleter)(void *data, void *ctx); /* set for user buffers (oar_from_blob) */
    void *deleter_ctx;
    bool owned;                              /* allocated by oar_alloc */
    uint32_t version;                        /* bumped by in-place writes (autograd checks it) */
    uint64_t uid;                            /* unique per storage oar allocates and versions (never
                                                reused, unlike addresses); 0: not tracked (user
                                                buffers, executor buffers rewritten each run).
                                                (uid, version) names data for caches (packed weights) */
} oar_storage;

/* Autograd nodes belong to the autograd layer; tensors only hold and drop references through
 * this header, so the tensor layer does not depend on autograd. */
typedef struct oar_node_header {
    int refcount;
    void (*destroy)(struct oar_node_header *n);
} oar_node_header;
static inline void oar_node_header_release(oar_node_header *n) {
    if (n && __atomic_sub_fetch(&n->refcount, 1, __ATOMIC_ACQ_REL) == 0) n->destroy(n);
}
static inline void oar_node_header_retain(oar_node_header *n) {
    if (n) __atomic_add_fetch(&n->refcount, 1, __ATOMIC_RELAXED);
}
struct oar_scope;
typedef struct oar_hook_entry {
    oar_grad_hook fn;
    void *user;
    int handle;
    struct oar_hook_entry *next;
} oar_hook_entry;

/* Handle checks (handle.c). A tensor's first word says whether the handle is live; freed
 * structs keep a poisoned word saying how they were freed, in a quarantine, so that a public
 * entry given a dangling handle reports it instead of touching freed memory. */
#define OAR_TENSOR_LIVE 0x7e45a11eu
#define OAR_TENSOR_DEAD 0xdeadf7eeu
typedef enum oar_freed_how {
    OAR_FREED_INTERNAL = 0, /* its last reference was dropped (a module, optimizer, graph...) */
    OAR_FREED_RELEASE,      /* by oar_release */
    OAR_FREED_SCOPE         /* by the oar_scope_end of the scope that owned it */
} oar_freed_how;

struct oar_tensor {
    uint32_t magic;           /* OAR_TENSOR_LIVE, or OAR_TENSOR_DEAD once freed */
    uint32_t freed_how;       /* oar_freed_how, once freed */
    struct oar_tensor *next_dead; /* debug mode: the list of freed structs (never reused) */
    int refcount;
    oar_storage *storage;     /* NULL for a symbolic tensor (tracing) */
    int64_t offset;           /* in elements */
    int64_t numel;
    int ndim;
    oar_dtype dtype;
    oar_device device;
    bool contiguous;
    int64_t shape[OAR_MAX_DIMS];
    int64_t strides[OAR_MAX_DIMS];
    /* autograd */
    bool requires_grad;
    oar_tensor *grad;         /* leaves: accumulated gradient */
    oar_node_header *grad_fn; /* non-leaves: the node that made it */
    int output_nr;
    oar_hook_entry *hooks;    /* leaves only; non-leaf hooks live on grad_fn */
    /* scope ownership */
    struct oar_scope *scope;
    int64_t scope_slot;
    /* tracing (graph layer): the trace active on this thread when the tensor was made (0:
     * none); for symbolic tensors, the program value they stand for and the op that made it */
    uint64_t trace_id;
    int trace_value;
    const char *trace_op;
    uint64_t grad_cleared_in; /* the trace during which zero_grad dropped its .grad */
};

/* The device creation functions use on this thread (oar_set_default_device). */
extern _Thread_local oar_device oar_default_device;

/* The id of the trace running on this thread (0 when none); set by the graph layer. */
extern _Thread_local uint64_t oar_active_trace;
/* The error for reading a symbolic tensor's data (who: "item", "data", ...); names the op that
 * made it and says what to do instead. Returns OAR_ERR_STATE. */
oar_status oar_symbolic_error(const char *who, const oar_tensor *t);
/* The error for writing, while tracing, into a tensor made outside the traced function: the
 * write would happen once, at tracing, not at every run. OAR_OK when the write is fine. */
oar_status oar_trace_check_write(const char *who, const oar_tensor *dst);

/* The struct of a new tensor (zeroed, live) and its end (poisoned, quarantined). Every tensor
 * struct goes through these two. */
oar_tensor *oar_tensor_struct_new(void);
void oar_tensor_struct_free(oar_tensor *t);
/* How the frees on this thread are recorded until oar_release_how_end; nests (returns the
 * previous value, to pass back). */
oar_freed_how oar_release_how_begin(oar_freed_how how);
void oar_release_how_end(oar_freed_how previous);
/* Whether t is NULL or a live handle; a dangling one sets an error naming who, the argument
 * (what: "input 0", "the tensor") and how it was freed. Cheap: one load and compare. */
oar_status oar_handle_error(const char *who, const char *what, int index, const oar_tensor *t);
/* The same over n tensors (NULL entries are fine): the first dangling one is reported. */
oar_status oar_check_handles(const char *who, const char *what, oar_tensor *const *ts, int n);
#define OAR_HANDLE_OK(t) OAR_LIKELY(!(t) || (t)->magic == OAR_TENSOR_LIVE)
/* For public entries: returns ret (after setting the error) when t is a dangling handle. */
#define OAR_CHECK_HANDLE(who, t, ret)                                            \
    do {                                                                          \
        if (!OAR_HANDLE_OK(t)) {                                                  \
            oar_handle_error(who, "the tensor", -1, (t));                        \
            return ret;                                                           \
        }                                                                         \
    } while (0)

/* Drops one reference to a storage (NULL is fine); the last frees its data. */
void oar_storage_release(oar_storage *s);
/* Gives s a fresh uid: for a buffer oar took over (a loader's parsed bytes) and from then on
 * writes only as it writes its own, so caches may name its data by (uid, version). */
void oar_storage_track(oar_storage *s);

/* Creation without scope tracking (internal). */
oar_tensor *oar_tensor_new(oar_dtype dt, const int64_t *shape, int ndim); /* contiguous, uninitialised */
oar_tensor *oar_tensor_new_on(oar_device dev, oar_dtype dt, const int64_t *shape, int ndim);
/* Drops a reference held by oar itself (oar_release is for the user's, and leaves scopes). */
void oar_tensor_unref(oar_tensor *t);
oar_tensor *oar_tensor_alias(oar_tensor *src);                           /* same storage and layout */
oar_tensor *oar_tensor_shell(oar_dtype dt, const int64_t *shape, int ndim); /* no storage yet */
oar_status oar_tensor_alloc_storage(oar_tensor *t);
void oar_tensor_set_contiguous_strides(oar_tensor *t);
bool oar_tensor_compute_contiguous(const oar_tensor *t);
void oar_tensor_refresh(oar_tensor *t);   /* recompute numel and contiguous after layout edits */
static inline char *oar_tensor_ptr(const oar_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)oar_dtypes[t->dtype].size;
}
/* Registers a tensor returned to the user with the current scope (if any); returns t. */
oar_tensor *oar_track(oar_tensor *t);
/* Scopes (scope.c): drop t from the scope that owns it (it keeps its reference count). */
void oar_scope_forget(oar_tensor *t);
/* A scope around code oar calls (a module's forward): enter returns its depth (0 if it could
 * not be made); leave ends it, and any scope the code left open inside it, releasing what they
 * own except the keep tensors, which are left untracked for the caller to track. */
int64_t oar_scope_enter(void);
void oar_scope_leave(int64_t depth, oar_tensor *const *keep, int n_keep);
/* Copies src into dst elementwise (src broadcast to dst's shape, any strides, any dtypes,
 * any devices); fails only on a device error. */
oar_status oar_tensor_copy_strided(oar_tensor *dst, const oar_tensor *src);
/* Fills t (contiguous) with v on its device. */
oar_status oar_tensor_fill(oar_tensor *t, double v);
/* New contiguous tensor with the same values (internal, no autograd, untracked). */
oar_tensor *oar_tensor_contiguous_copy(const oar_tensor *src);
int oar_normalize_dim(int dim, int ndim);  /* -1 if out of range */
void oar_format_shape(const int64_t *shape, int ndim, char *buf, size_t size); /* "[2, 3]" */

/* ---- strided iteration over up to 4 operands sharing one (broadcast) shape */
#define OAR_ITER_MAX 4
typedef struct oar_iter {
    int ndim, n_ops;
    int64_t shape[OAR_MAX_DIMS];
    int64_t strides[OAR_ITER_MAX][OAR_MAX_DIMS]; /* bytes; 0 on broadcast dims */
    int64_t idx[OAR_MAX_DIMS];
    char *ptr[OAR_ITER_MAX];
    int64_t remaining;
} oar_iter;
/* Operands are viewed at shape (each broadcast to it, aligned at the last dim). */
void oar_iter_init(oar_iter *it, const int64_t *shape, int ndim, oar_tensor *const *ops, int n_ops);
bool oar_iter_next(oar_iter *it); /* advances; false after the last element */

/* Broadcast two shapes; false when incompatible. */
bool oar_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out, int *nout);

#endif
