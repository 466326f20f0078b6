/* Helpers shared by the file tests: a scratch directory, whole-file reads and writes, exact
 * tensor comparison. */
#ifndef OAR_TEST_IO_UTIL_H
#define OAR_TEST_IO_UTIL_H

#include "test_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh directory under $TMPDIR (or /tmp); path written into buf. */
static inline bool io_mkdtemp(char *buf, size_t size) {
    const char *base = getenv("TMPDIR");
    snprintf(buf, size, "%s/oar_test_io_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(buf) != NULL;
}

/* Removes a directory tree (for the scratch directory). */
static inline void io_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char child[4096 + 512];
                if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) continue;
                io_rmtree(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Number of entries in dir; *temps counts names that look like oar's temporaries. */
static inline int io_count_entries(const char *dir, int *temps) {
    int n = 0;
    *temps = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        n++;
        if (strstr(e->d_name, ".tmp-")) (*temps)++;
    }
    closedir(d);
    return n;
}

static inline unsigned char *io_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static inline bool io_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

/* Same dtype, shape and bytes (any strides). */
static inline bool io_same_tensor(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_dtype_of(a) != oar_dtype_of(b) || oar_ndim(a) != oar_ndim(b)) return false;
    if (oar_ndim(a) && memcmp(oar_shape(a), oar_shape(b), sizeof(int64_t) * (size_t)oar_ndim(a))) return false;
    oar_tensor *ca = oar_contiguous(a), *cb = oar_contiguous(b);
    bool same = ca && cb &&
                !memcmp(oar_data(ca), oar_data(cb), (size_t)oar_numel(a) * oar_dtype_size(oar_dtype_of(a)));
    oar_release(ca);
    oar_release(cb);
    return same;
}

/* Whether oar was built with cJSON (safetensors and checkpoints need it; .npy does not).
 * Without it, the safetensors entry points must say so. */
static inline bool io_have_safetensors(void) {
    oar_clear_error();
    oar_safetensors_load_buffer("", 0);
    if (oar_last_status() != OAR_ERR_UNSUPPORTED) return true;
    bool said = strstr(oar_last_error(), "built without cJSON") != NULL;
    CHECK(said);
    return false;
}

/* A file under the source tree (OAR_SOURCE_DIR), or NULL when the variable is not set. */
static inline const char *io_source_path(char *buf, size_t size, const char *rel) {
    const char *src = getenv("OAR_SOURCE_DIR");
    if (!src) return NULL;
    snprintf(buf, size, "%s/%s", src, rel);
    return buf;
}

#endif
