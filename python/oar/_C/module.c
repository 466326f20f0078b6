/* oar._C: the module. Each file adds its part. */
#include "common.h"

int oarpy_functions_init(PyObject *m);
int oarpy_optim_init(PyObject *m);
int oarpy_loader_init(PyObject *m);
int oarpy_jit_init(PyObject *m);
int oarpy_rnn_init(PyObject *m);
int oarpy_dist_init(PyObject *m);
int oarpy_custom_fn_init(PyObject *m);
int oarpy_amp_init(PyObject *m);
int oarpy_predictor_init(PyObject *m);
int oarpy_amp_masters_init(PyObject *m);

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "oar._C", .m_doc = "oar's C core, bound over its public C API.", .m_size = -1,
};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (oarpy_errors_init(m) < 0 || oarpy_tensor_init(m) < 0 || oarpy_ops_init(m) < 0 ||
        oarpy_functions_init(m) < 0 || oarpy_interop_init(m) < 0 || oarpy_optim_init(m) < 0 ||
        oarpy_loader_init(m) < 0 || oarpy_jit_init(m) < 0 || oarpy_rnn_init(m) < 0 || oarpy_dist_init(m) < 0 ||
        oarpy_custom_fn_init(m) < 0 || oarpy_amp_init(m) < 0 || oarpy_predictor_init(m) < 0 ||
        oarpy_amp_masters_init(m) < 0 ||
        PyModule_AddStringConstant(m, "version", oar_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
