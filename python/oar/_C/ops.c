/* The op table from Python: _C.op_table() describes every op (the Python layer generates its
 * functions from it) and _C.call(op, inputs, attrs) runs any op with attributes converted by
 * the schema's kinds. Scalar forms of the arithmetic (x + 1) have their own fast entry. */
#include "common.h"

#include <string.h>

static PyObject *op_table(PyObject *m, PyObject *u) {
    int n = oar_op_count();
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        oar_op_schema s;
        if (oar_op_schema_get(i, &s) != OAR_OK) {
            Py_DECREF(list);
            return oarpy_raise();
        }
        PyObject *attrs = PyTuple_New(s.n_attrs), *defaults = PyDict_New();
        for (int a = 0; attrs && defaults && a < s.n_attrs; a++) {
            const char *name = oar_op_attr_name(i, a), *def = oar_op_attr_default(i, a);
            PyTuple_SET_ITEM(attrs, a, Py_BuildValue("(si)", name, (int)oar_op_attr_kind_of(i, a)));
            if (def) { /* the default as attribute text; _ops.py reads it by the kind */
                PyObject *t = PyUnicode_FromString(def);
                if (!t || PyDict_SetItemString(defaults, name, t) < 0) Py_CLEAR(defaults);
                Py_XDECREF(t);
            }
        }
        PyObject *row = attrs && defaults
                            ? Py_BuildValue("{s:s,s:i,s:i,s:i,s:I,s:I,s:I,s:O,s:N,s:N}", "name", s.name, "n_inputs",
                                            s.n_inputs, "n_outputs", s.n_outputs, "n_visible", s.n_visible, "flags",
                                            s.flags, "optional_inputs", s.optional_inputs, "mutated_inputs",
                                            s.mutated_inputs, "differentiable", s.differentiable ? Py_True : Py_False,
                                            "attrs", attrs, "defaults", defaults)
                            : NULL;
        if (!row) {
            Py_XDECREF(attrs);
            Py_XDECREF(defaults);
        }
        if (!row) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, row);
    }
    return list;
}

/* One Python value as the attribute kind the schema asks for. ints points at storage for INTS. */
static int convert_attr(const char *opname, const char *name, int kind, PyObject *v, oar_op_attr_value *out,
                        int64_t *ints) {
    out->name = name;
    switch (kind) {
    case OAR_OP_ATTR_INT:
    case OAR_OP_ATTR_DTYPE:
        if (PyLong_Check(v)) { /* bools are ints */
            int overflow;
            out->i = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow) {
                PyErr_Format(PyExc_OverflowError, "%s: attribute '%s' does not fit in 64 bits", opname, name);
                return -1;
            }
            out->kind = (oar_op_attr_kind)kind;
            return 0;
        }
        break;
    case OAR_OP_ATTR_FLOAT:
        if (PyFloat_Check(v) || PyLong_Check(v)) {
            out->f = PyFloat_AsDouble(v);
            if (out->f == -1.0 && PyErr_Occurred()) return -1;
            out->kind = OAR_OP_ATTR_FLOAT;
            return 0;
        }
        break;
    case OAR_OP_ATTR_INTS: {
        if (PyLong_Check(v)) {
            ints[0] = PyLong_AsLongLong(v);
            if (ints[0] == -1 && PyErr_Occurred()) return -1;
            out->n_ints = 1;
        } else if (PyList_Check(v) || PyTuple_Check(v)) {
            Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
            if (n > OAR_OP_MAX_INTS) {
                PyErr_Format(PyExc_ValueError, "%s: expected at most %d values for '%s', got %zd", opname,
                             OAR_OP_MAX_INTS, name, n);
                return -1;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *e = PySequence_Fast_GET_ITEM(v, i);
                if (!PyLong_Check(e)) {
                    PyErr_Format(PyExc_TypeError, "%s: expected '%s' to hold ints, got %s at position %zd", opname,
                                 name, Py_TYPE(e)->tp_name, i);
                    return -1;
                }
                ints[i] = PyLong_AsLongLong(e);
                if (ints[i] == -1 && PyErr_Occurred()) return -1;
            }
            out->n_ints = (int)n;
        } else {
            break;
        }
        out->ints = ints;
        out->kind = OAR_OP_ATTR_INTS;
        return 0;
    }
    case OAR_OP_ATTR_STR:
        if (PyUnicode_Check(v)) {
            out->s = PyUnicode_AsUTF8(v);
            if (!out->s) return -1;
            out->kind = OAR_OP_ATTR_STR;
            return 0;
        }
        break;
    }
    static const char *kinds[] = {"?", "an int", "a float", "a list of ints", "a str", "a dtype"};
    PyErr_Format(PyExc_TypeError, "%s: expected '%s' to be %s, got %s", opname, name,
                 kinds[kind >= 1 && kind <= 5 ? kind : 0], Py_TYPE(v)->tp_name);
    return -1;
}

/* call(op_id, inputs, attrs=None) -> Tensor, or a tuple where the op may return several. */
static PyObject *call(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "call(op, inputs, attrs=None)");
        return NULL;
    }
    int op = (int)PyLong_AsLong(args[0]);
    if (op == -1 && PyErr_Occurred()) return NULL;
    oar_op_schema s;
    if (oar_op_schema_get(op, &s) != OAR_OK) return oarpy_raise();
    PyObject *inputs = PySequence_Fast(args[1], "call: inputs must be a sequence");
    if (!inputs) return NULL;
    Py_ssize_t n_in = PySequence_Fast_GET_SIZE(inputs);
    oar_tensor *in[OAR_OP_MAX_INPUTS];
    PyObject *result = NULL;
    if (n_in > OAR_OP_MAX_INPUTS) {
        PyErr_Format(PyExc_ValueError, "%s: expected at most %d inputs, got %zd", s.name, OAR_OP_MAX_INPUTS, n_in);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_in; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(inputs, i);
        if (o == Py_None) {
            in[i] = NULL;
            if (i < 32 && (s.optional_inputs >> i) & 1u) continue;
            PyErr_Format(PyExc_TypeError, "%s: input %zd is None; expected a Tensor", s.name, i);
            goto done;
        }
        if (!PyObject_TypeCheck(o, &TensorBase_Type)) {
            PyErr_Format(PyExc_TypeError, "%s: expected input %zd to be a Tensor, got %s", s.name, i,
                         Py_TYPE(o)->tp_name);
            goto done;
        }
        if (!(in[i] = oarpy_tensor(o, s.name))) goto done;
    }
    oar_op_attr_value attrs[8];
    int64_t ints[8][OAR_OP_MAX_INTS];
    int n_attrs = 0;
    PyObject *d = nargs == 3 ? args[2] : Py_None;
    if (d != Py_None) {
        if (!PyDict_Check(d)) {
            PyErr_SetString(PyExc_TypeError, "call: attrs must be a dict");
            goto done;
        }
        for (int a = 0; a < s.n_attrs; a++) {
            const char *name = oar_op_attr_name(op, a);
            PyObject *v = PyDict_GetItemString(d, name);
            if (!v) continue; /* reported as missing by the core, with the schema */
            if (convert_attr(s.name, name, oar_op_attr_kind_of(op, a), v, &attrs[n_attrs], ints[n_attrs]) < 0)
                goto done;
            n_attrs++;
        }
        if (PyDict_Size(d) != n_attrs) { /* a name the schema lacks */
            PyObject *k, *v;
            Py_ssize_t pos = 0;
            while (PyDict_Next(d, &pos, &k, &v)) {
                const char *kn = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
                int a = 0;
                while (kn && a < s.n_attrs && strcmp(oar_op_attr_name(op, a), kn) != 0) a++;
                if (!kn || a == s.n_attrs) {
                    PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", s.name, k);
                    goto done;
                }
            }
        }
    }
    oar_tensor *out[64];
    int n_out = 64;
    if (oar_op_call_named(op, in, (int)n_in, attrs, n_attrs, out, &n_out) != OAR_OK) {
        oarpy_raise();
        goto done;
    }
    if (s.n_visible == 1) {
        result = oarpy_wrap(out[0]);
        goto done;
    }
    result = PyTuple_New(n_out);
    for (int i = 0; i < n_out; i++) {
        PyObject *w = result ? oarpy_wrap(out[i]) : NULL;
        if (!w) {
            for (int j = i + (result ? 1 : 0); j < n_out; j++) oar_release(out[j]);
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, i, w);
    }
done:
    Py_DECREF(inputs);
    return result;
}

/* scalar_op(kind, x, s): x (op) s with the scalar in x's dtype, as torch's operators. */
typedef oar_tensor *(*scalar_fn)(oar_tensor *, double);
static const scalar_fn scalar_fns[] = {
    oar_add_scalar, oar_sub_scalar, oar_rsub_scalar, oar_mul_scalar, oar_div_scalar, oar_rdiv_scalar,
    oar_pow_scalar, oar_rpow_scalar, oar_maximum_scalar, oar_minimum_scalar, oar_eq_scalar, oar_ne_scalar,
    oar_lt_scalar, oar_le_scalar, oar_gt_scalar, oar_ge_scalar,
};
static const char *scalar_names =
    "add sub rsub mul div rdiv pow rpow maximum minimum eq ne lt le gt ge";

static PyObject *scalar_op(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "scalar_op(kind, x, s)");
        return NULL;
    }
    long k = PyLong_AsLong(args[0]);
    if (k < 0 || k >= (long)(sizeof scalar_fns / sizeof *scalar_fns)) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "scalar_op: unknown kind %ld", k);
        return NULL;
    }
    oar_tensor *x = oarpy_tensor(args[1], "scalar_op");
    if (!x) return NULL;
    double s = PyFloat_AsDouble(args[2]);
    if (s == -1.0 && PyErr_Occurred()) return NULL;
    oar_tensor *r = scalar_fns[k](x, s);
    return oarpy_wrap(r);
}

static PyMethodDef methods[] = {
    {"op_table", op_table, METH_NOARGS, "Every op's schema, as dicts."},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(op_id, inputs, attrs=None)"},
    {"scalar_op", (PyCFunction)(void (*)(void))scalar_op, METH_FASTCALL, "scalar_op(kind, x, s)"},
    {NULL, NULL, 0, NULL},
};

int oarpy_ops_init(PyObject *m) {
    if (PyModule_AddFunctions(m, methods) < 0) return -1;
    return PyModule_AddStringConstant(m, "SCALAR_OPS", scalar_names);
}
