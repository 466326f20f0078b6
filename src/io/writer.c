/* Atomic file writes: everything goes to a temporary file in the target's directory, which
 * is fsync'ed and renamed over the target, and then the directory is fsync'ed. Readers see
 * the old file or the new one, never a mixture; a failure (no permission, a full disk, an
 * error from the caller) removes the temporary and leaves the old file as it was. */
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUF_BYTES (1u << 16)

struct oar_io_writer {
    const char *who;
    char *path;      /* the file being replaced (a symlink's target when path was a link) */
    char *dir;       /* its directory */
    char *tmp;       /* the temporary beside it */
    int fd;
    uint64_t written;
    size_t used;
    unsigned char buf[BUF_BYTES];
};

static char *copy_n(const char *s, size_t n) {
    char *d = oar_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static void writer_free(oar_io_writer *w) {
    free(w->path);
    free(w->dir);
    free(w->tmp);
    free(w);
}

static oar_status fail_errno(oar_io_writer *w, int err, const char *what) {
    char eb[128];
    return oar_error(OAR_ERR_IO, "%s: %s '%.300s' failed: %s; '%.300s' is unchanged", w->who, what,
                     w->tmp ? w->tmp : w->path, oar_io_strerror(err, eb, sizeof eb), w->path);
}

/* Splits the final path into directory and base name. */
static oar_status split_path(oar_io_writer *w, const char **base) {
    const char *slash = strrchr(w->path, '/');
    if (!slash) {
        w->dir = copy_n(".", 1);
        *base = w->path;
    } else {
        w->dir = slash == w->path ? copy_n("/", 1) : copy_n(w->path, (size_t)(slash - w->path));
        *base = slash + 1;
    }
    if (!w->dir) return OAR_ERR_OOM;
    if (!**base)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a file name, got the directory path '%.300s'", w->who,
                         w->path);
    return OAR_OK;
}

/* Creates "<dir>/.<base>.tmp-<random>" exclusively (mode 0666 less the umask). */
static oar_status create_temp(oar_io_writer *w, const char *base) {
    size_t blen = strlen(base);
    if (blen > 200) blen = 200; /* keep the temporary's name under NAME_MAX */
    size_t cap = strlen(w->dir) + blen + 40;
    w->tmp = oar_malloc(cap);
    if (!w->tmp) return OAR_ERR_OOM;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)w ^
                    ((uint64_t)getpid() << 40);
    for (int attempt = 0; attempt < 64; attempt++) {
        uint32_t r[4];
        oar_philox(seed, (uint64_t)attempt, r);
        snprintf(w->tmp, cap, "%s/.%.*s.tmp-%08x%08x", w->dir, (int)blen, base, r[0], r[1]);
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (w->fd >= 0) return OAR_OK;
        if (errno != EEXIST) break;
    }
    char eb[128];
    int err = errno;
    oar_status st = oar_error(OAR_ERR_IO, "%s: cannot create a temporary file in '%.300s' to write '%.300s': %s; "
                                          "nothing was written",
                              w->who, w->dir, w->path, oar_io_strerror(err, eb, sizeof eb));
    free(w->tmp);
    w->tmp = NULL;
    return st;
}

oar_io_writer *oar_io_writer_open(const char *path, const char *who) {
    if (!path || !*path) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected a file path, got %s", who, path ? "\"\"" : "NULL");
        return NULL;
    }
    oar_io_writer *w = malloc(sizeof *w);
    if (!w) {
        oar_error(OAR_ERR_OOM, "%s: out of memory opening '%.300s'", who, path);
        return NULL;
    }
    memset(w, 0, offsetof(oar_io_writer, buf));
    w->who = who;
    w->fd = -1;
    /* Saving through a symlink replaces the file it points to, not the link. */
    struct stat ls;
    char *resolved = NULL;
    if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) resolved = realpath(path, NULL);
    w->path = resolved ? resolved : copy_n(path, strlen(path));
    if (!w->path) {
        writer_free(w);
        return NULL;
    }
    struct stat st;
    bool exists = stat(w->path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        oar_error(OAR_ERR_IO, "%s: '%.300s' is a directory; expected a file path", who, w->path);
        writer_free(w);
        return NULL;
    }
    const char *base;
    if (split_path(w, &base) != OAR_OK || create_temp(w, base) != OAR_OK) {
        writer_free(w);
        return NULL;
    }
    if (exists && S_ISREG(st.st_mode)) (void)fchmod(w->fd, st.st_mode & 07777); /* keep the old mode */
    return w;
}

static oar_status write_all(oar_io_writer *w, const unsigned char *p, size_t n) {
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t k = write(w->fd, p, chunk);
        if (k < 0) {
            if (errno == EINTR) continue;
            char what[96];
            snprintf(what, sizeof what, "writing byte %llu of", (unsigned long long)w->written);
            return fail_errno(w, errno, what);
        }
        if (k == 0) return fail_errno(w, EIO, "writing");
        p += k;
        n -= (size_t)k;
        w->written += (uint64_t)k;
    }
    return OAR_OK;
}

static oar_status flush(oar_io_writer *w) {
    oar_status st = write_all(w, w->buf, w->used);
    w->used = 0;
    return st;
}

oar_status oar_io_writer_write(oar_io_writer *w, const void *data, size_t n) {
    const unsigned char *p = data;
    if (n >= BUF_BYTES) {
        oar_status st = flush(w);
        return st != OAR_OK ? st : write_all(w, p, n);
    }
    if (w->used + n > BUF_BYTES) {
        oar_status st = flush(w);
        if (st != OAR_OK) return st;
    }
    memcpy(w->buf + w->used, p, n);
    w->used += n;
    return OAR_OK;
}

void oar_io_writer_abort(oar_io_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) unlink(w->tmp);
    writer_free(w);
}

oar_status oar_io_writer_commit(oar_io_writer *w) {
    oar_status st = flush(w);
    if (st == OAR_OK && fsync(w->fd) != 0) st = fail_errno(w, errno, "fsync of");
    if (st != OAR_OK) {
        oar_io_writer_abort(w);
        return st;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        st = fail_errno(w, errno, "closing");
        oar_io_writer_abort(w);
        return st;
    }
    if (rename(w->tmp, w->path) != 0) {
        char eb[128];
        int err = errno;
        st = oar_error(OAR_ERR_IO, "%s: renaming the temporary file over '%.300s' failed: %s; '%.300s' is unchanged",
                       w->who, w->path, oar_io_strerror(err, eb, sizeof eb), w->path);
        oar_io_writer_abort(w);
        return st;
    }
    free(w->tmp);
    w->tmp = NULL; /* the temporary is the file now */
    /* Make the rename itself durable. Some file systems cannot sync a directory (EINVAL). */
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS) {
            char eb[128];
            int err = errno;
            st = oar_error(OAR_ERR_IO, "%s: '%.300s' was written, but syncing its directory '%.300s' failed: %s", w->who,
                           w->path, w->dir, oar_io_strerror(err, eb, sizeof eb));
        }
        close(dfd);
    }
    writer_free(w);
    return st;
}

oar_tensor *oar_io_host_copy(const oar_tensor *t, oar_status *err) {
    *err = OAR_OK;
    if (t->contiguous && t->device == OAR_CPU) return NULL;
    oar_tensor *c = oar_tensor_new(t->dtype, t->shape, t->ndim);
    if (!c || oar_tensor_copy_strided(c, t) != OAR_OK) {
        oar_tensor_unref(c);
        *err = oar_last_status();
        return NULL;
    }
    return c;
}

oar_status oar_io_write_tensor(oar_io_writer *w, const oar_tensor *t) {
    if (t->numel == 0) return OAR_OK;
    size_t es = oar_dtypes[t->dtype].size, nbytes = (size_t)t->numel * es;
    bool le = oar_io_host_is_le();
    oar_status cst = OAR_OK;
    oar_tensor *c = oar_io_host_copy(t, &cst);
    if (cst != OAR_OK) return cst;
    if (!c && le) return oar_io_writer_write(w, oar_tensor_ptr(t), nbytes);
    const unsigned char *src = (const unsigned char *)oar_tensor_ptr(c ? c : t);
    oar_status st = OAR_OK;
    if (le) {
        st = oar_io_writer_write(w, src, nbytes);
    } else {
        unsigned char tmp[4096];
        size_t per = sizeof tmp / es * es;
        for (size_t off = 0; off < nbytes && st == OAR_OK; off += per) {
            size_t n = nbytes - off < per ? nbytes - off : per;
            memcpy(tmp, src + off, n);
            oar_io_swap_bytes(tmp, n / es, es);
            st = oar_io_writer_write(w, tmp, n);
        }
    }
    oar_tensor_unref(c);
    return st;
}
