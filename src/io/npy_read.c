/* Reading .npy (versions 1.0, 2.0, 3.0): the magic, the header length, the header dict, then
 * exactly numel * itemsize bytes of data. Big-endian data is byte-swapped and Fortran-order
 * arrays are transposed into C order, so the result is always a plain contiguous tensor. */
#include "io/npy.h"

#include <stdlib.h>

/* A Fortran-order array of shape s is the C-order array of shape reversed(s), transposed. */
static oar_tensor *from_fortran(oar_tensor *rev) {
    oar_tensor *view = oar_tensor_alias(rev);
    if (!view) return NULL;
    int nd = rev->ndim;
    for (int d = 0; d < nd; d++) {
        view->shape[d] = rev->shape[nd - 1 - d];
        view->strides[d] = rev->strides[nd - 1 - d];
    }
    oar_tensor_refresh(view);
    oar_tensor *c = oar_tensor_contiguous_copy(view);
    oar_tensor_unref(view);
    return c;
}

static oar_tensor *load(oar_io_source *s) {
    unsigned char pre[12];
    if (s->size < 10 || oar_io_source_read(s, 0, pre, 10) != OAR_OK || memcmp(pre, OAR_NPY_MAGIC, 6) != 0) {
        oar_io_fail(s, OAR_ERR_FORMAT, "not a .npy file (it does not start with \\x93NUMPY)");
        return NULL;
    }
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        oar_io_fail(s, OAR_ERR_UNSUPPORTED, ".npy version %d.%d; oar reads 1.0, 2.0 and 3.0", major, minor);
        return NULL;
    }
    uint64_t hlen, start;
    if (major == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        start = 10;
    } else {
        if (oar_io_source_read(s, 0, pre, 12) != OAR_OK) return NULL;
        hlen = oar_io_get_le32(pre + 8);
        start = 12;
    }
    if (hlen > OAR_NPY_MAX_HEADER) {
        oar_io_fail(s, OAR_ERR_FORMAT, "the header length %llu exceeds the limit of %u bytes", (unsigned long long)hlen,
                    OAR_NPY_MAX_HEADER);
        return NULL;
    }
    if (hlen > s->size - start) {
        oar_io_fail(s, OAR_ERR_FORMAT, "truncated: the header needs %llu bytes, but only %llu follow",
                    (unsigned long long)hlen, (unsigned long long)(s->size - start));
        return NULL;
    }
    char *text = malloc((size_t)hlen + 1);
    if (!text) {
        oar_io_fail(s, OAR_ERR_OOM, "out of memory for the header");
        return NULL;
    }
    oar_npy_header h;
    oar_status st = oar_io_source_read(s, start, text, (size_t)hlen);
    text[hlen] = '\0';
    if (st == OAR_OK) st = oar_npy_parse_header(s, text, (size_t)hlen, &h);
    free(text);
    if (st != OAR_OK) return NULL;
    start += hlen;
    uint64_t need = (uint64_t)h.numel * oar_dtypes[h.dtype].size, have = s->size - start;
    if (have != need) {
        char sh[160];
        oar_format_shape(h.shape, h.ndim, sh, sizeof sh);
        if (have < need)
            oar_io_fail(s, OAR_ERR_FORMAT, "truncated: shape %s of %s needs %llu bytes of data, the file has %llu", sh,
                        oar_dtype_name(h.dtype), (unsigned long long)need, (unsigned long long)have);
        else
            oar_io_fail(s, OAR_ERR_FORMAT, "%llu unexpected bytes after the %llu bytes of data of shape %s",
                        (unsigned long long)(have - need), (unsigned long long)need, sh);
        return NULL;
    }
    bool transpose = h.fortran_order && h.ndim > 1;
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0; d < h.ndim; d++) shape[d] = transpose ? h.shape[h.ndim - 1 - d] : h.shape[d];
    oar_tensor *t = oar_tensor_new(h.dtype, shape, h.ndim);
    if (!t) return NULL;
    if (oar_io_source_read_tensor(s, start, t, h.big_endian, "array") != OAR_OK) {
        oar_tensor_unref(t);
        return NULL;
    }
    if (transpose) {
        oar_tensor *c = from_fortran(t);
        oar_tensor_unref(t);
        t = c;
    }
    return t ? oar_track(t) : NULL;
}

oar_tensor *oar_npy_load(const char *path) {
    oar_io_source s;
    if (oar_io_source_open_file(&s, path, "npy_load") != OAR_OK) return NULL;
    oar_tensor *t = load(&s);
    oar_io_source_close(&s);
    return t;
}

oar_tensor *oar_npy_load_buffer(const void *data, size_t size) {
    if (!data && size) {
        oar_error(OAR_ERR_INVALID_ARG, "npy_load_buffer: data is NULL for %zu bytes", size);
        return NULL;
    }
    oar_io_source s;
    oar_io_source_open_memory(&s, data, size, "npy_load_buffer");
    return load(&s);
}
