/* Tensor and storage lifetimes, metadata accessors, element copies. */
#include "tensor/tensor.h"
#include "base/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local uint64_t oar_active_trace;

void oar_storage_release(oar_storage *s) {
    if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (s->owned && s->device != OAR_CPU) {
        const oar_device_ops *ops = oar_device_use(s->device, "free");
        if (ops) ops->free(s->data, s->nbytes);
    } else if (s->owned) oar_free(s->data, s->nbytes);
    else if (s->deleter) s->deleter(s->data, s->deleter_ctx);
    free(s);
}

void oar_tensor_set_contiguous_strides(oar_tensor *t) {
    int64_t st = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->strides[d] = st;
        st *= t->shape[d];
    }
}

bool oar_tensor_compute_contiguous(const oar_tensor *t) {
    int64_t st = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != st) return false;
        st *= t->shape[d];
    }
    return true;
}

void oar_tensor_refresh(oar_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    t->numel = n;
    t->contiguous = oar_tensor_compute_contiguous(t);
}

oar_tensor *oar_tensor_shell(oar_dtype dt, const int64_t *shape, int ndim) {
    if (!oar_dtype_valid(dt)) {
        oar_error(OAR_ERR_DTYPE, "tensor: expected a dtype in 0..%d, got %d", OAR_DTYPE_COUNT - 1, (int)dt);
        return NULL;
    }
    if (ndim < 0 || ndim > OAR_MAX_DIMS) {
        oar_error(OAR_ERR_SHAPE, "tensor: expected 0 <= ndim <= %d, got %d", OAR_MAX_DIMS, ndim);
        return NULL;
    }
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            oar_error(OAR_ERR_SHAPE, "tensor: expected non-negative sizes, got shape[%d] = %lld", d,
                      (long long)shape[d]);
            return NULL;
        }
    }
    oar_tensor *t = oar_tensor_struct_new();
    if (!t) return NULL;
    t->refcount = 1;
    t->ndim = ndim;
    t->dtype = dt;
    t->device = OAR_CPU;
    t->scope_slot = -1;
    t->trace_id = oar_active_trace;
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    oar_tensor_set_contiguous_strides(t);
    oar_tensor_refresh(t);
    return t;
}

static uint64_t g_storage_uid;

void oar_storage_track(oar_storage *s) { s->uid = __atomic_add_fetch(&g_storage_uid, 1, __ATOMIC_RELAXED); }

oar_status oar_tensor_alloc_storage(oar_tensor *t) {
    oar_storage *s = OAR_NEW(oar_storage);
    if (!s) return OAR_ERR_OOM;
    s->refcount = 1;
    oar_storage_track(s);
    s->nbytes = (size_t)t->numel * oar_dtypes[t->dtype].size;
    s->owned = true;
    s->device = t->device;
    if (t->device == OAR_CPU) {
        s->data = oar_alloc(s->nbytes);
    } else {
        const oar_device_ops *ops = oar_device_use(t->device, "tensor");
        s->data = ops ? ops->alloc(s->nbytes) : NULL;
    }
    if (!s->data) {
        free(s);
        return OAR_ERR_OOM;
    }
    t->storage = s;
    t->offset = 0;
    return OAR_OK;
}

oar_tensor *oar_tensor_new(oar_dtype dt, const int64_t *shape, int ndim) {
    return oar_tensor_new_on(OAR_CPU, dt, shape, ndim);
}

oar_tensor *oar_tensor_new_on(oar_device dev, oar_dtype dt, const int64_t *shape, int ndim) {
    oar_tensor *t = oar_tensor_shell(dt, shape, ndim);
    if (t) t->device = dev;
    if (t && oar_tensor_alloc_storage(t) != OAR_OK) {
        oar_tensor_struct_free(t);
        return NULL;
    }
    return t;
}

oar_tensor *oar_tensor_alias(oar_tensor *src) {
    oar_tensor *t = oar_tensor_struct_new();
    if (!t) return NULL;
    t->refcount = 1;
    t->storage = src->storage;
    if (t->storage) __atomic_add_fetch(&t->storage->refcount, 1, __ATOMIC_RELAXED);
    t->offset = src->offset;
    t->numel = src->numel;
    t->ndim = src->ndim;
    t->dtype = src->dtype;
    t->device = src->device;
    t->contiguous = src->contiguous;
    memcpy(t->shape, src->shape, sizeof t->shape);
    memcpy(t->strides, src->strides, sizeof t->strides);
    t->scope_slot = -1;
    t->trace_id = src->trace_id;
    t->trace_value = src->trace_value;
    t->trace_op = src->trace_op;
    return t;
}

oar_tensor *oar_retain(oar_tensor *t) {
    OAR_CHECK_HANDLE("retain", t, NULL);
    if (t) __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void oar_release(oar_tensor *t) {
    if (!t) return;
    OAR_CHECK_HANDLE("release", t, );
    if (t->scope) oar_scope_forget(t); /* the scope's reference is the one released */
    oar_freed_how prev = oar_release_how_begin(OAR_FREED_RELEASE);
    oar_tensor_unref(t);
    oar_release_how_end(prev);
}

void oar_tensor_unref(oar_tensor *t) {
    if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) > 0) return;
    oar_tensor_unref(t->grad);
    oar_node_header_release(t->grad_fn);
    for (oar_hook_entry *h = t->hooks; h;) {
        oar_hook_entry *n = h->next;
        free(h);
        h = n;
    }
    oar_storage_release(t->storage);
    oar_tensor_struct_free(t);
}

/* A dangling handle reads as NULL here (with the error set), like a missing tensor. */
#define LIVE(who, t, ret) OAR_CHECK_HANDLE(who, t, ret)

int oar_ndim(const oar_tensor *t) { LIVE("ndim", t, -1); return t ? t->ndim : -1; }
const int64_t *oar_shape(const oar_tensor *t) { LIVE("shape", t, NULL); return t ? t->shape : NULL; }
const int64_t *oar_strides(const oar_tensor *t) { LIVE("strides", t, NULL); return t ? t->strides : NULL; }
int64_t oar_numel(const oar_tensor *t) { LIVE("numel", t, -1); return t ? t->numel : -1; }
oar_dtype oar_dtype_of(const oar_tensor *t) { LIVE("dtype_of", t, OAR_DTYPE_COUNT); return t ? t->dtype : OAR_DTYPE_COUNT; }
oar_device oar_device_of(const oar_tensor *t) { LIVE("device_of", t, OAR_CPU); return t ? t->device : OAR_CPU; }
bool oar_is_contiguous(const oar_tensor *t) { LIVE("is_contiguous", t, false); return t && t->contiguous; }

int64_t oar_size(const oar_tensor *t, int dim) {
    LIVE("size", t, -1);
    if (!t) return -1;
    int d = oar_normalize_dim(dim, t->ndim);
    if (d < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "size: expected dim in [%d, %d], got %d", -t->ndim,
                  t->ndim - 1, dim);
        return -1;
    }
    return t->shape[d];
}

oar_status oar_symbolic_error(const char *who, const oar_tensor *t) {
    const char *op = t->trace_op ? t->trace_op : "an input";
    return oar_error(OAR_ERR_STATE, "%s: this tensor is symbolic: it was made by '%s' in a function being "
                                    "traced by oar_jit_to_static, and has no value until the compiled program "
                                    "runs. Return it as an output, or use oar_cond/oar_while to branch or loop "
                                    "on tensor values", who, t->trace_op ? t->trace_op : op);
}

oar_status oar_trace_check_write(const char *who, const oar_tensor *dst) {
    if (!oar_active_trace || dst->trace_id == oar_active_trace) return OAR_OK;
    return oar_error(OAR_ERR_STATE, "%s: writing into a tensor made outside the function being traced by "
                                    "oar_jit_to_static would happen once, at tracing, not at every run; compute "
                                    "a new tensor and return it instead", who);
}

void *oar_data(oar_tensor *t) {
    LIVE("data", t, NULL);
    if (!t) return NULL;
    if (!t->storage) {
        oar_symbolic_error("data", t);
        return NULL;
    }
    if (t->device != OAR_CPU) {
        oar_error(OAR_ERR_STATE, "data: expected a tensor in host memory, got one on %s; copy it with "
                                 "oar_to(t, OAR_CPU) first", oar_device_name(t->device));
        return NULL;
    }
    return oar_tensor_ptr(t);
}

void *oar_device_ptr(oar_tensor *t) {
    if (!t) return NULL;
    if (!t->storage) {
        oar_symbolic_error("device_ptr", t);
        return NULL;
    }
    return oar_tensor_ptr(t);
}

int oar_normalize_dim(int dim, int ndim) {
    int n = ndim == 0 ? 1 : ndim;
    if (dim < -n || dim >= n) return -1;
    return dim < 0 ? dim + n : dim;
}

void oar_format_shape(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

bool oar_broadcast_shapes(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out, int *nout) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return true;
}

void oar_iter_init(oar_iter *it, const int64_t *shape, int ndim, oar_tensor *const *ops, int n_ops) {
    memset(it, 0, sizeof *it);
    it->ndim = ndim;
    it->n_ops = n_ops;
    it->remaining = 1;
    for (int d = 0; d < ndim; d++) {
        it->shape[d] = shape[d];
        it->remaining *= shape[d];
    }
    for (int k = 0; k < n_ops; k++) {
        const oar_tensor *t = ops[k];
        int64_t es = (int64_t)oar_dtypes[t->dtype].size;
        int lead = ndim - t->ndim;
        for (int d = 0; d < ndim; d++) {
            int td = d - lead;
            it->strides[k][d] = (td < 0 || t->shape[td] == 1) ? 0 : t->strides[td] * es;
        }
        it->ptr[k] = t->storage ? oar_tensor_ptr(t) : NULL;
    }
}

bool oar_iter_next(oar_iter *it) {
    if (--it->remaining <= 0) return false;
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (++it->idx[d] < it->shape[d]) {
            for (int k = 0; k < it->n_ops; k++) it->ptr[k] += it->strides[k][d];
            return true;
        }
        it->idx[d] = 0;
        for (int k = 0; k < it->n_ops; k++) it->ptr[k] -= it->strides[k][d] * (it->shape[d] - 1);
    }
    return false;
}

/* ---- same-dtype copies: dims that are laid out alike in both tensors are merged, then the
 * last two dims are copied as tiles (whole rows with memmove when both are contiguous along
 * the last dim), so a permute-then-copy costs a pass over memory, not a call per element. */

#define COPY_TILE 32 /* a tile's rows and columns: 32 x 32 floats read and written in cache */

/* One strided run of n elements of es bytes; the common sizes compile to plain moves. */
static void copy_run(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, size_t es) {
    switch (es) {
    case 4: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, 4); break;
    case 8: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, 8); break;
    case 2: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, 2); break;
    case 1: for (int64_t i = 0; i < n; i++, d += ds, s += ss) *d = *s; break;
    default: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, es); break;
    }
}

/* A [rows, cols] block with byte strides (row, col) on each side. */
static void copy_2d(char *d, const int64_t *dst, const char *s, const int64_t *sst, int64_t rows, int64_t cols,
                    size_t es) {
    if (dst[1] == (int64_t)es && sst[1] == (int64_t)es) {
        for (int64_t r = 0; r < rows; r++) memmove(d + r * dst[0], s + r * sst[0], (size_t)cols * es);
        return;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += COPY_TILE) {
        int64_t nr = rows - r0 < COPY_TILE ? rows - r0 : COPY_TILE;
        for (int64_t c0 = 0; c0 < cols; c0 += COPY_TILE) {
            int64_t nc = cols - c0 < COPY_TILE ? cols - c0 : COPY_TILE;
            for (int64_t r = r0; r < r0 + nr; r++)
                copy_run(d + r * dst[0] + c0 * dst[1], dst[1], s + r * sst[0] + c0 * sst[1], sst[1], nc, es);
        }
    }
}

/* it holds both tensors' byte strides over dst's shape (src broadcast into it). */
static void copy_same_dtype(const oar_iter *it, size_t es) {
    int64_t shape[OAR_MAX_DIMS], st[2][OAR_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] == 1) continue;
        /* merge with the previous dim when both tensors step over it as one longer dim */
        if (n && st[0][n - 1] == it->strides[0][d] * it->shape[d] && st[1][n - 1] == it->strides[1][d] * it->shape[d]) {
            shape[n - 1] *= it->shape[d];
            st[0][n - 1] = it->strides[0][d];
            st[1][n - 1] = it->strides[1][d];
            continue;
        }
        shape[n] = it->shape[d];
        st[0][n] = it->strides[0][d];
        st[1][n++] = it->strides[1][d];
    }
    /* the last two dims form the block; the dims before them are walked as an odometer */
    int64_t rows = n >= 2 ? shape[n - 2] : 1, cols = n >= 1 ? shape[n - 1] : 1;
    int64_t dst[2] = {n >= 2 ? st[0][n - 2] : 0, n >= 1 ? st[0][n - 1] : (int64_t)es};
    int64_t sst[2] = {n >= 2 ? st[1][n - 2] : 0, n >= 1 ? st[1][n - 1] : (int64_t)es};
    int outer = n > 2 ? n - 2 : 0;
    int64_t idx[OAR_MAX_DIMS] = {0};
    char *d = it->ptr[0], *s = it->ptr[1];
    for (;;) {
        copy_2d(d, dst, s, sst, rows, cols, es);
        int k = outer - 1;
        for (; k >= 0; k--) {
            d += st[0][k];
            s += st[1][k];
            if (++idx[k] < shape[k]) break;
            d -= st[0][k] * shape[k];
            s -= st[1][k] * shape[k];
            idx[k] = 0;
        }
        if (k < 0) return;
    }
}

static oar_status copy_between_devices(oar_tensor *dst, const oar_tensor *src) {
    oar_device dev = dst->device != OAR_CPU ? dst->device : src->device;
    const oar_device_ops *ops = oar_device_use(dev, "copy");
    if (!ops) return oar_last_status();
    if (dst->device == src->device) {
        oar_copy_desc d = {.ndim = dst->ndim, .dst_dtype = dst->dtype, .src_dtype = src->dtype,
                           .dst = oar_tensor_ptr(dst), .src = oar_tensor_ptr(src)};
        memcpy(d.shape, dst->shape, sizeof d.shape);
        memcpy(d.dst_strides, dst->strides, sizeof d.dst_strides);
        /* src may be broadcast to dst's shape (aligned at the last dim, like oar_iter) */
        int lead = dst->ndim - src->ndim;
        for (int k = 0; k < dst->ndim; k++) {
            int sk = k - lead;
            d.src_strides[k] = sk < 0 || src->shape[sk] == 1 ? 0 : src->strides[sk];
        }
        return ops->copy_strided(&d);
    }
    /* across devices: bytes move contiguous and in one dtype; layout and dtype change on one side */
    if (dst->dtype != src->dtype || !dst->contiguous || !src->contiguous || dst->numel != src->numel) {
        oar_tensor *tmp = oar_tensor_new_on(src->device, dst->dtype, dst->shape, dst->ndim);
        if (!tmp) return oar_last_status();
        oar_status st = oar_tensor_copy_strided(tmp, src);
        if (st == OAR_OK && !dst->contiguous) {
            oar_tensor *moved = oar_tensor_new_on(dst->device, dst->dtype, dst->shape, dst->ndim);
            st = moved ? oar_tensor_copy_strided(moved, tmp) : oar_last_status();
            if (st == OAR_OK) st = oar_tensor_copy_strided(dst, moved);
            oar_tensor_unref(moved);
        } else if (st == OAR_OK) {
            st = oar_tensor_copy_strided(dst, tmp);
        }
        oar_tensor_unref(tmp);
        return st;
    }
    return ops->copy(oar_tensor_ptr(dst), oar_tensor_ptr(src), (size_t)dst->numel * oar_dtypes[dst->dtype].size,
                     dst->device == OAR_CPU ? OAR_COPY_TO_HOST : OAR_COPY_TO_DEVICE);
}

oar_status oar_tensor_copy_strided(oar_tensor *dst, const oar_tensor *src) {
    if (dst->numel == 0) return OAR_OK;
    if (dst->device != OAR_CPU || src->device != OAR_CPU) return copy_between_devices(dst, src);
    if (dst->dtype == src->dtype && dst->contiguous && src->contiguous && dst->numel == src->numel) {
        memcpy(oar_tensor_ptr(dst), oar_tensor_ptr(src), (size_t)dst->numel * oar_dtypes[dst->dtype].size);
        return OAR_OK;
    }
    oar_tensor *ops[2] = {dst, (oar_tensor *)src};
    oar_iter it;
    oar_iter_init(&it, dst->shape, dst->ndim, ops, 2);
    const oar_dtype_traits *td = &oar_dtypes[dst->dtype], *ts = &oar_dtypes[src->dtype];
    if (dst->dtype == src->dtype) {
        copy_same_dtype(&it, td->size);
    } else if (!td->is_float && !ts->is_float) {
        do td->store_i64(it.ptr[0], ts->load_i64(it.ptr[1])); while (oar_iter_next(&it));
    } else {
        do td->store(it.ptr[0], ts->load(it.ptr[1])); while (oar_iter_next(&it));
    }
    return OAR_OK;
}

oar_tensor *oar_tensor_contiguous_copy(const oar_tensor *src) {
    oar_tensor *t = oar_tensor_new_on(src->device, src->dtype, src->shape, src->ndim);
    if (t && oar_tensor_copy_strided(t, src) != OAR_OK) {
        oar_tensor_unref(t);
        return NULL;
    }
    return t;
}

/* Why: ZeRO's parameters_as_bucket_view makes each parameter a view of a flat buffer, but the
 * parameter's handle is held by modules, optimizers and data parallel, so the handle itself must
 * move onto the buffer; its gradient, hooks and requires_grad stay as they are. */
oar_status oar_set_storage_(oar_tensor *t, oar_tensor *src) {
    OAR_CHECK_HANDLE("set_storage_", t, oar_last_status());
    OAR_CHECK_HANDLE("set_storage_", src, oar_last_status());
    if (!t || !src) return oar_error(OAR_ERR_INVALID_ARG, "set_storage_: expected two tensors, got NULL");
    if (!t->storage || !src->storage)
        return oar_error(OAR_ERR_INVALID_ARG, "set_storage_: expected tensors with data, got a symbolic one "
                                              "(this call cannot be traced: make the views before tracing)");
    char a[96], b[96];
    oar_format_shape(t->shape, t->ndim, a, sizeof a);
    oar_format_shape(src->shape, src->ndim, b, sizeof b);
    bool same_shape = t->ndim == src->ndim && !memcmp(t->shape, src->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (!same_shape || t->dtype != src->dtype || t->device != src->device)
        return oar_error(OAR_ERR_INVALID_ARG, "set_storage_: expected a source of the tensor's shape %s, dtype %s "
                                              "and device, got %s, %s%s; view the buffer as the tensor's shape",
                         a, oar_dtype_name(t->dtype), b, oar_dtype_name(src->dtype),
                         t->device != src->device ? " on another device" : "");
    if (t == src || (t->storage == src->storage && t->offset == src->offset &&
                     !memcmp(t->strides, src->strides, sizeof(int64_t) * (size_t)t->ndim)))
        return OAR_OK;
    __atomic_add_fetch(&src->storage->refcount, 1, __ATOMIC_RELAXED);
    oar_storage *old = t->storage;
    t->storage = src->storage;
    t->offset = src->offset;
    t->contiguous = src->contiguous;
    memcpy(t->strides, src->strides, sizeof t->strides);
    t->storage->version++; /* t's values changed: what autograd saved of t is stale */
    oar_storage_release(old);
    return OAR_OK;
}
