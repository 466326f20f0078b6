/* Internal: the .npy header, a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * parsed and written by npy_header.c. */
#ifndef OAR_NPY_H
#define OAR_NPY_H

#include "io/io.h"

#define OAR_NPY_MAGIC "\x93NUMPY"
#define OAR_NPY_ALIGN 64                /* preamble + header length is a multiple of this */
#define OAR_NPY_MAX_HEADER (1u << 20)   /* larger headers are refused (NumPy's limit is 10000) */

typedef struct oar_npy_header {
    oar_dtype dtype;
    bool big_endian;
    bool fortran_order;
    int ndim;
    int64_t shape[OAR_MAX_DIMS];
    int64_t numel;
} oar_npy_header;

/* Parses the dict text (n bytes); errors name the source. */
oar_status oar_npy_parse_header(const oar_io_source *s, const char *text, size_t n, oar_npy_header *h);
/* The descr NumPy uses for dt ("<f4", "|b1", ...), or NULL for bf16, which NumPy lacks. */
const char *oar_npy_descr(oar_dtype dt);

#endif
