/* Zero-copy exchange: the buffer protocol both ways (numpy.asarray(t), oar.from_numpy) and
 * DLPack (__dlpack__/__dlpack_device__, from_dlpack) with NumPy >= 1.22 and PyTorch. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

/* ---- buffer formats */
static const char *const formats[OAR_DTYPE_COUNT] = {
    [OAR_F32] = "f", [OAR_F64] = "d", [OAR_F16] = "e", [OAR_BF16] = NULL,
    [OAR_I8] = "b", [OAR_U8] = "B", [OAR_I32] = "i", [OAR_I64] = "q", [OAR_BOOL] = "?",
    [OAR_I16] = "h", [OAR_U16] = "H", [OAR_U32] = "I", [OAR_U64] = "Q",
};

int oarpy_dtype_from_format(const char *fmt, Py_ssize_t itemsize) {
    if (!fmt) fmt = "B";
    if (*fmt == '<' || *fmt == '@' || *fmt == '=') fmt++;
    if (strlen(fmt) != 1) return -1;
    switch (*fmt) {
    case 'f': return itemsize == 4 ? OAR_F32 : -1;
    case 'd': return itemsize == 8 ? OAR_F64 : -1;
    case 'e': return itemsize == 2 ? OAR_F16 : -1;
    case 'b': return OAR_I8;
    case 'B': return OAR_U8;
    case '?': return OAR_BOOL;
    case 'h': return itemsize == 2 ? OAR_I16 : -1;
    case 'H': return itemsize == 2 ? OAR_U16 : -1;
    case 'i': case 'l': case 'q':
        return itemsize == 4 ? OAR_I32 : itemsize == 8 ? OAR_I64 : -1;
    case 'I': case 'L': case 'Q':
        return itemsize == 4 ? OAR_U32 : itemsize == 8 ? OAR_U64 : -1;
    default: return -1;
    }
}

/* The exporter keeps shape and strides (Py_ssize_t) in view->internal. */
static int getbuffer(PyObject *self, Py_buffer *view, int flags) {
    oar_tensor *t = oarpy_tensor(self, "Tensor (buffer)");
    if (!t) return -1;
    oar_dtype dt = oar_dtype_of(t);
    if (oar_device_of(t) != OAR_CPU) {
        PyErr_SetString(PyExc_TypeError, "can't convert a cuda tensor to numpy: use Tensor.cpu() to copy it to host memory first");
        return -1;
    }
    if (!formats[dt]) {
        PyErr_Format(PyExc_TypeError, "Got unsupported ScalarType %s: numpy has no %s; convert with "
                                      "Tensor.float() first", oar_dtype_name(dt),
                     dt == OAR_BF16 ? "bfloat16" : oar_dtype_name(dt));
        return -1;
    }
    int nd = oar_ndim(t);
    Py_ssize_t *dims = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(2 * nd + 1));
    if (!dims) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t isz = (Py_ssize_t)oar_dtype_size(dt);
    for (int i = 0; i < nd; i++) {
        dims[i] = (Py_ssize_t)oar_shape(t)[i];
        dims[nd + i] = (Py_ssize_t)oar_strides(t)[i] * isz;
    }
    void *data = oar_data(t);
    if (!data && oar_numel(t) > 0) {
        PyMem_Free(dims);
        oarpy_raise();
        return -1;
    }
    static char empty[1];
    view->buf = data ? data : empty;
    view->obj = self;
    Py_INCREF(self);
    view->len = oar_numel(t) * isz;
    view->readonly = 0;
    view->itemsize = isz;
    view->format = (flags & PyBUF_FORMAT) ? (char *)formats[dt] : NULL;
    view->ndim = nd;
    view->shape = dims;
    view->strides = dims + nd;
    view->suboffsets = NULL;
    view->internal = dims;
    if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !oar_is_contiguous(t)) {
        PyErr_SetString(PyExc_BufferError, "Tensor: not contiguous; call .contiguous() first");
        PyMem_Free(dims);
        Py_CLEAR(view->obj);
        return -1;
    }
    return 0;
}

static void releasebuffer(PyObject *self, Py_buffer *view) { PyMem_Free(view->internal); }

PyBufferProcs oarpy_buffer_procs = {.bf_getbuffer = getbuffer, .bf_releasebuffer = releasebuffer};

/* from_buffer(obj): a tensor sharing obj's memory (a numpy array), kept alive by the tensor.
 * Arrays that are not C-contiguous are refused: the caller copies (np.ascontiguousarray). */
static void release_view(void *data, void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyBuffer_Release((Py_buffer *)ctx);
    PyMem_Free(ctx);
    PyGILState_Release(g);
}

static PyObject *from_buffer(PyObject *m, PyObject *obj) {
    Py_buffer *view = PyMem_Malloc(sizeof *view);
    if (!view) return PyErr_NoMemory();
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) < 0) {
        PyMem_Free(view);
        return NULL;
    }
    int dt = oarpy_dtype_from_format(view->format, view->itemsize);
    const char *why = NULL;
    if (dt < 0) why = "unsupported element type";
    else if (view->ndim > OAR_MAX_DIMS) why = "too many dims";
    else if (!PyBuffer_IsContiguous(view, 'C')) why = "not C-contiguous";
    if (why) {
        PyErr_Format(PyExc_TypeError, "from_numpy: expected a C-contiguous array of float64, float32, float16, int64, "
                                      "int32, int8, uint8 or bool, got one with %s (format '%s'); copy it with "
                                      "numpy.ascontiguousarray or astype first", why, view->format ? view->format : "B");
        PyBuffer_Release(view);
        PyMem_Free(view);
        return NULL;
    }
    int64_t shape[OAR_MAX_DIMS];
    for (int i = 0; i < view->ndim; i++) shape[i] = view->shape ? view->shape[i] : view->len / view->itemsize;
    oar_tensor *t = oar_from_blob(view->buf, shape, view->ndim, (oar_dtype)dt, release_view, view);
    if (!t) {
        PyBuffer_Release(view);
        PyMem_Free(view);
        return oarpy_raise();
    }
    return oarpy_wrap(t);
}

/* ---- DLPack (the ABI of dlpack.h v0.x, written here from the spec) */
typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
enum { kDLCPU = 1, kDLCUDA = 2 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

static const DLDataType dl_types[OAR_DTYPE_COUNT] = {
    [OAR_F32] = {kDLFloat, 32, 1}, [OAR_F64] = {kDLFloat, 64, 1}, [OAR_F16] = {kDLFloat, 16, 1},
    [OAR_BF16] = {kDLBfloat, 16, 1}, [OAR_I8] = {kDLInt, 8, 1}, [OAR_U8] = {kDLUInt, 8, 1},
    [OAR_I32] = {kDLInt, 32, 1}, [OAR_I64] = {kDLInt, 64, 1}, [OAR_BOOL] = {kDLBool, 8, 1},
    [OAR_I16] = {kDLInt, 16, 1}, [OAR_U16] = {kDLUInt, 16, 1}, [OAR_U32] = {kDLUInt, 32, 1},
    [OAR_U64] = {kDLUInt, 64, 1},
};

typedef struct {
    DLManagedTensor managed;
    oar_tensor *t;
    int64_t shape[OAR_MAX_DIMS], strides[OAR_MAX_DIMS];
} Exported;

static void exported_deleter(DLManagedTensor *self) {
    Exported *e = (Exported *)self->manager_ctx;
    oar_release(e->t);
    free(e);
}

static void capsule_destructor(PyObject *cap) {
    if (!PyCapsule_IsValid(cap, "dltensor")) return; /* consumed: the consumer owns it */
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter) m->deleter(m);
}

PyObject *oarpy_dlpack(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"stream", NULL};
    PyObject *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", names, &stream)) return NULL;
    oar_tensor *t = oarpy_tensor(self, "Tensor.__dlpack__");
    if (!t) return NULL;
    if (oar_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError, "Can't export tensors that require gradient, use tensor.detach()");
        return NULL;
    }
    if (dl_types[oar_dtype_of(t)].bits == 0) { /* the low-bit dtypes: not in this DLPack version */
        PyErr_Format(PyExc_BufferError, "__dlpack__: oar's %s has no DLPack type here; cast it first (.to(oar.float32))",
                     oar_dtype_name(oar_dtype_of(t)));
        return NULL;
    }
    Exported *e = calloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    int nd = oar_ndim(t);
    for (int i = 0; i < nd; i++) {
        e->shape[i] = oar_shape(t)[i];
        e->strides[i] = oar_strides(t)[i];
    }
    oar_device dev = oar_device_of(t);
    void *ptr = oar_device_ptr(t);
    if (!ptr && oar_numel(t) > 0) {
        free(e);
        return oarpy_raise();
    }
    e->t = oar_retain(t);
    e->managed.dl_tensor = (DLTensor){.data = ptr,
                                      .device = {dev == OAR_CUDA ? kDLCUDA : kDLCPU, 0},
                                      .ndim = nd,
                                      .dtype = dl_types[oar_dtype_of(t)],
                                      .shape = e->shape,
                                      .strides = e->strides,
                                      .byte_offset = 0};
    e->managed.manager_ctx = e;
    e->managed.deleter = exported_deleter;
    PyObject *cap = PyCapsule_New(&e->managed, "dltensor", capsule_destructor);
    if (!cap) exported_deleter(&e->managed);
    return cap;
}

PyObject *oarpy_dlpack_device(PyObject *self, PyObject *u) {
    oar_tensor *t = oarpy_tensor(self, "Tensor.__dlpack_device__");
    if (!t) return NULL;
    return Py_BuildValue("(ii)", oar_device_of(t) == OAR_CUDA ? kDLCUDA : kDLCPU, 0);
}

static void imported_deleter(void *data, void *ctx) {
    DLManagedTensor *m = ctx;
    if (m->deleter) m->deleter(m);
}

/* from_dlpack_capsule(capsule): a tensor sharing the producer's memory (host, row-major). */
static PyObject *from_dlpack_capsule(PyObject *mod, PyObject *cap) {
    if (!PyCapsule_IsValid(cap, "dltensor")) {
        PyErr_SetString(PyExc_TypeError, "from_dlpack: expected an object with __dlpack__ or an unconsumed "
                                         "'dltensor' capsule (a capsule can be consumed once)");
        return NULL;
    }
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    DLTensor *d = &m->dl_tensor;
    int dt = -1;
    for (int i = 0; i < OAR_DTYPE_COUNT; i++)
        if (dl_types[i].code == d->dtype.code && dl_types[i].bits == d->dtype.bits) dt = i;
    if (d->dtype.code == kDLUInt && d->dtype.bits == 8) dt = OAR_U8;
    const char *why = NULL;
    if (d->device.device_type != kDLCPU) why = "a tensor on a device other than the CPU";
    else if (dt < 0 || d->dtype.lanes != 1) why = "an unsupported element type";
    else if (d->ndim > OAR_MAX_DIMS || d->ndim < 0) why = "too many dims";
    int64_t shape[OAR_MAX_DIMS];
    if (!why && d->strides) { /* row-major only: other layouts are copied by the caller */
        int64_t expect = 1;
        for (int i = d->ndim - 1; i >= 0; i--) {
            if (d->shape[i] != 1 && d->strides[i] != expect) why = "a layout that is not row-major";
            expect *= d->shape[i];
        }
    }
    if (why) {
        PyErr_Format(PyExc_RuntimeError, "from_dlpack: got %s; oar shares host tensors of its dtypes in row-major "
                                         "order (call .contiguous() or .cpu() on the source first)", why);
        return NULL;
    }
    for (int i = 0; i < d->ndim; i++) shape[i] = d->shape[i];
    oar_tensor *t = oar_from_blob((char *)d->data + d->byte_offset, shape, d->ndim, (oar_dtype)dt, imported_deleter, m);
    if (!t) return oarpy_raise();
    if (PyCapsule_SetName(cap, "used_dltensor") < 0) {
        oar_release(t); /* runs the producer's deleter */
        return NULL;
    }
    return oarpy_wrap(t);
}

static PyMethodDef methods[] = {
    {"from_buffer", from_buffer, METH_O, "A tensor sharing a buffer's memory."},
    {"from_dlpack_capsule", from_dlpack_capsule, METH_O, "A tensor sharing a DLPack capsule's memory."},
    {NULL, NULL, 0, NULL},
};

int oarpy_interop_init(PyObject *m) { return PyModule_AddFunctions(m, methods); }
