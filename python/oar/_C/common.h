/* Shared by the files of the oar._C extension: the tensor object and the helpers each file
 * offers the others. The extension uses oar's public C API only (include/oar.h). */
#ifndef OAR_PY_COMMON_H
#define OAR_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "oar.h"

/* A Python handle on one oar tensor reference. hooks keeps the gradient hooks registered
 * through this object alive (they are removed from the tensor when the object goes). */
typedef struct {
    PyObject_HEAD
    oar_tensor *t;
    PyObject *hooks;    /* dict: C hook handle -> callable, or NULL */
    PyObject *dict;     /* instance attributes (subclasses such as Parameter set some) */
    PyObject *weakrefs;
} TensorObject;

extern PyTypeObject TensorBase_Type;

/* errors.c: raises the exception for oar's last error; returns NULL. */
PyObject *oarpy_raise(void);
/* Raises for a status that is not OAR_OK; returns 0 when OK, -1 otherwise. */
int oarpy_check(oar_status st);
int oarpy_errors_init(PyObject *m);

/* tensor.c */
/* Wraps a new reference (stolen); NULL t raises oar's last error. The object's type is the
 * class registered by _set_tensor_class (oar.Tensor) unless cls is given. */
PyObject *oarpy_wrap(oar_tensor *t);
PyObject *oarpy_wrap_as(PyTypeObject *cls, oar_tensor *t);
/* The tensor of a TensorBase object, a borrowed pointer; NULL with TypeError naming what and
 * the received type otherwise. Checks the handle is alive. */
oar_tensor *oarpy_tensor(PyObject *o, const char *what);
/* dist_group.c: a DistGroup (None: NULL, the world); -1 with an exception otherwise. */
int oarpy_dist_group(PyObject *o, oar_dist_group **out);
int oarpy_dist_group_init(PyObject *m);
int oarpy_tensor_init(PyObject *m);
extern PyObject *oarpy_tensor_class;

/* optim.c: the C optimizer of an _C.Optimizer object (borrowed); NULL with TypeError naming
 * what and the received type otherwise. */
oar_optimizer *oarpy_optimizer(PyObject *o, const char *what);

/* ops.c: the op table and the generic call. */
int oarpy_ops_init(PyObject *m);

/* interop.c: buffer protocol (in tensor.c's type), DLPack, numpy. */
extern PyBufferProcs oarpy_buffer_procs;
int oarpy_interop_init(PyObject *m);
PyObject *oarpy_dlpack(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *oarpy_dlpack_device(PyObject *self, PyObject *unused);

/* A dtype from its format character and item size (buffer protocol), -1 if none fits. */
int oarpy_dtype_from_format(const char *fmt, Py_ssize_t itemsize);

#endif
