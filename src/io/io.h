/* Internal file layer: atomic writers, bounded readers, byte order, the tensor dictionary.
 * Every message names the operation ("safetensors_load") and the file. */
#ifndef OAR_IO_H
#define OAR_IO_H

#include "tensor/tensor.h"

#include <string.h>

/* ---- byte order: files are little-endian (oar_io_swap_bytes is in text.c) */
static inline bool oar_io_host_is_le(void) {
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}
static inline uint64_t oar_io_get_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint32_t oar_io_get_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void oar_io_put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void oar_io_put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
/* Reverses the bytes of each of n items of itemsize bytes (1 is a no-op). */
void oar_io_swap_bytes(void *data, size_t n, size_t itemsize);

/* ---- text helpers (text.c) */
bool oar_io_valid_utf8(const char *s, size_t n);
/* Index of a name that also appears earlier in the list, or -1 when all are distinct. */
int oar_io_find_duplicate(const char *const *names, int n);
char *oar_io_strdup(const char *s); /* oar_malloc'd copy, or NULL with the OOM error set */
/* strerror, thread-safe, into buf. */
const char *oar_io_strerror(int err, char *buf, size_t size);
/* Checked shape product: false when a size is negative or the product (zero sizes counted
 * as one) exceeds INT64_MAX / 16, so no stride or byte count can overflow. */
bool oar_io_shape_numel(const int64_t *shape, int ndim, int64_t *numel);

/* ---- atomic writer (writer.c): writes a temporary file beside path; commit fsyncs it,
 * renames it over path and fsyncs the directory. Any failure removes the temporary and
 * leaves path as it was. */
typedef struct oar_io_writer oar_io_writer;
oar_io_writer *oar_io_writer_open(const char *path, const char *who);
oar_status oar_io_writer_write(oar_io_writer *w, const void *data, size_t n);
oar_status oar_io_writer_commit(oar_io_writer *w);  /* frees w, success or not */
void oar_io_writer_abort(oar_io_writer *w);         /* removes the temporary, frees w */
/* Writes t's elements in row-major order, little-endian (any strides). */
oar_status oar_io_write_tensor(oar_io_writer *w, const oar_tensor *t);

/* ---- bounded reader (source.c): a regular file or a memory buffer */
typedef struct oar_io_source {
    const char *who;    /* operation, for messages */
    char label[256];    /* 'path' or <buffer>, for messages */
    int fd;             /* -1 for memory */
    const unsigned char *mem;
    uint64_t size;
} oar_io_source;
oar_status oar_io_source_open_file(oar_io_source *s, const char *path, const char *who);
void oar_io_source_open_memory(oar_io_source *s, const void *data, size_t size, const char *who);
void oar_io_source_close(oar_io_source *s);
/* Reads exactly n bytes at off; a short file is a format error. */
oar_status oar_io_source_read(const oar_io_source *s, uint64_t off, void *buf, size_t n);
/* Reads t's bytes (t contiguous, fresh) from off; converts from little- (or big-) endian to
 * the host's order and checks that bool elements are 0 or 1. */
oar_status oar_io_source_read_tensor(const oar_io_source *s, uint64_t off, oar_tensor *t, bool big_endian,
                                     const char *name);
/* Records a format error "who: label: <message>". */
oar_status oar_io_fail(const oar_io_source *s, oar_status st, const char *fmt, ...) OAR_PRINTF(3, 4);

/* ---- the tensor dictionary (dict.c) */
struct oar_tensor_dict {
    int n, n_meta;
    char **names;
    oar_tensor **tensors;  /* owned references */
    int *by_name;          /* indices sorted by name */
    char **meta_keys, **meta_values;
};
/* An empty dictionary with room for n tensors and n_meta metadata pairs (entries NULL). */
oar_tensor_dict *oar_dict_alloc(int n, int n_meta);
/* t's elements in host memory, contiguous: NULL when t is already so (read it in place), else
 * a new host copy (a GPU tensor is copied over; the caller drops it). *err is set on failure. */
oar_tensor *oar_io_host_copy(const oar_tensor *t, oar_status *err);
/* Builds the name index; fails (format error naming it) on a duplicate name or key. */
oar_status oar_dict_index(oar_tensor_dict *d, const char *who, const char *label);

/* ---- checksums of tensor data (checksum.c) */
#define OAR_IO_CRC_PREFIX "oar.crc32c." /* metadata key: prefix + tensor name; value: 8 hex digits */
/* Whether loads verify checksums: oar_set_verify_checksums, else not when OAR_SKIP_CHECKSUM is
 * set to anything but 0 or "". */
bool oar_io_verify_checksums(void);
bool oar_io_is_checksum_key(const char *key);
/* CRC32C of t's elements as a file stores them: row-major, little-endian. */
oar_status oar_io_tensor_crc32c(const oar_tensor *t, uint32_t *out);
/* "0a1b2c3d" (lower-case hex, as written) -> value; false for anything else. */
bool oar_io_parse_crc(const char *text, uint32_t *out);

/* ---- safetensors dtype names */
const char *oar_st_dtype_name(oar_dtype dt);              /* "F32", ... */
bool oar_st_dtype_parse(const char *name, oar_dtype *dt); /* false when oar has no such type */

#endif
