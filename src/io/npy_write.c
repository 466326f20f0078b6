/* Writing .npy: version 1.0 (2.0 when the header outgrows 16 bits), little-endian, C order,
 * the header padded with spaces and a newline so the data starts at a multiple of 64 bytes,
 * as NumPy writes it. The write is atomic (io/writer.c). */
#include "io/npy.h"

#include <stdio.h>

oar_status oar_npy_save(const char *path, const oar_tensor *t) {
    OAR_CHECK_HANDLE("npy_save", t, oar_last_status());
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "npy_save: tensor is NULL");
    if (!path || !*path) return oar_error(OAR_ERR_INVALID_ARG, "npy_save: expected a file path, got %s", path ? "\"\"" : "NULL");
    if (!t->storage) return oar_error(OAR_ERR_STATE, "npy_save: the tensor is symbolic (traced) and has no data");
    const char *descr = oar_npy_descr(t->dtype);
    if (!descr)
        return oar_error(OAR_ERR_UNSUPPORTED, "npy_save: NumPy has no %s type; cast to f32 first (oar_cast) or save "
                                              "it with safetensors", oar_dtype_name(t->dtype));
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < t->ndim; d++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", t->ndim == 1 ? "," : ""); /* (3,) as Python */
    /* preamble: magic, version, length (2 bytes in 1.0, 4 in 2.0); dict + padding + '\n' */
    size_t pre = 10, total = (pre + (size_t)n + 1 + OAR_NPY_ALIGN - 1) / OAR_NPY_ALIGN * OAR_NPY_ALIGN;
    if (total - pre > 65535) {
        pre = 12;
        total = (pre + (size_t)n + 1 + OAR_NPY_ALIGN - 1) / OAR_NPY_ALIGN * OAR_NPY_ALIGN;
    }
    unsigned char head[OAR_NPY_ALIGN * 10];
    if (total > sizeof head) return oar_error(OAR_ERR_INTERNAL, "npy_save: header of %zu bytes too long", total);
    memcpy(head, OAR_NPY_MAGIC, 6);
    head[6] = pre == 10 ? 1 : 2;
    head[7] = 0;
    size_t hlen = total - pre;
    if (pre == 10) {
        head[8] = (unsigned char)hlen;
        head[9] = (unsigned char)(hlen >> 8);
    } else {
        oar_io_put_le32(head + 8, (uint32_t)hlen);
    }
    memcpy(head + pre, dict, (size_t)n);
    memset(head + pre + n, ' ', total - pre - (size_t)n - 1);
    head[total - 1] = '\n';
    oar_io_writer *w = oar_io_writer_open(path, "npy_save");
    if (!w) return oar_last_status();
    oar_status st = oar_io_writer_write(w, head, total);
    if (st == OAR_OK) st = oar_io_write_tensor(w, t);
    if (st != OAR_OK) {
        oar_io_writer_abort(w);
        return st;
    }
    return oar_io_writer_commit(w);
}
