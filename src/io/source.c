/* Bounded reads from a regular file or a memory buffer: every read is checked against the
 * size known up front, so a hostile length can only produce an error, never an overrun. */
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

oar_status oar_io_fail(const oar_io_source *s, oar_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return oar_error(st, "%s: %s: %s", s->who, s->label, msg);
}

oar_status oar_io_source_open_file(oar_io_source *s, const char *path, const char *who) {
    memset(s, 0, sizeof *s);
    s->who = who;
    s->fd = -1;
    if (!path) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a file path, got NULL", who);
    snprintf(s->label, sizeof s->label, "'%.250s'", path);
    char eb[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return oar_io_fail(s, OAR_ERR_IO, "cannot open: %s", oar_io_strerror(err, eb, sizeof eb));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return oar_io_fail(s, OAR_ERR_IO, "cannot stat: %s", oar_io_strerror(err, eb, sizeof eb));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return oar_io_fail(s, OAR_ERR_IO, "not a regular file%s", S_ISDIR(st.st_mode) ? " (a directory)" : "");
    }
    s->fd = fd;
    s->size = (uint64_t)st.st_size;
    return OAR_OK;
}

void oar_io_source_open_memory(oar_io_source *s, const void *data, size_t size, const char *who) {
    memset(s, 0, sizeof *s);
    s->who = who;
    s->fd = -1;
    s->mem = data;
    s->size = data ? size : 0;
    snprintf(s->label, sizeof s->label, "<buffer of %zu bytes>", (size_t)s->size);
}

void oar_io_source_close(oar_io_source *s) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}

oar_status oar_io_source_read(const oar_io_source *s, uint64_t off, void *buf, size_t n) {
    if (off > s->size || n > s->size - off)
        return oar_io_fail(s, OAR_ERR_FORMAT, "truncated: expected %zu bytes at offset %llu, but the file has %llu bytes",
                           n, (unsigned long long)off, (unsigned long long)s->size);
    if (n == 0) return OAR_OK;
    if (s->fd < 0) {
        memcpy(buf, s->mem + off, n);
        return OAR_OK;
    }
    unsigned char *p = buf;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t k = pread(s->fd, p, chunk, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            char eb[128];
            int err = errno;
            return oar_io_fail(s, OAR_ERR_IO, "read error at offset %llu: %s", (unsigned long long)off,
                               oar_io_strerror(err, eb, sizeof eb));
        }
        if (k == 0)
            return oar_io_fail(s, OAR_ERR_FORMAT, "the file ended at offset %llu while it was being read "
                                                  "(was it truncated meanwhile?)", (unsigned long long)off);
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return OAR_OK;
}

oar_status oar_io_source_read_tensor(const oar_io_source *s, uint64_t off, oar_tensor *t, bool big_endian,
                                     const char *name) {
    size_t es = oar_dtypes[t->dtype].size, n = (size_t)t->numel;
    unsigned char *p = (unsigned char *)oar_tensor_ptr(t);
    oar_status st = oar_io_source_read(s, off, p, n * es);
    if (st != OAR_OK) return st;
    if (big_endian == oar_io_host_is_le()) oar_io_swap_bytes(p, n, es);
    if (t->dtype == OAR_BOOL)
        for (size_t i = 0; i < n; i++)
            if (p[i] > 1)
                return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': element %zu of a bool tensor is byte 0x%02x; "
                                                      "expected 0 or 1", name, i, p[i]);
    return OAR_OK;
}
