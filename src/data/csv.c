/* CSV with a header line: numeric feature columns become an f32 vector per row and one integer
 * column is the label. The file is parsed once, in place, into two dense arrays; the first bad
 * line is reported by line number, column and the text found there. No quoting (numbers only). */
#include "data/data.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct csv_dataset {
    oar_dataset base;
    float *features; /* size * n_features */
    int64_t *labels;
} csv_dataset;

typedef struct csv_parse {
    const char *path;
    char **names;      /* header names, pointing into the buffer */
    int64_t n_cols, label_col;
} csv_parse;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Trims the field [b, e) in place and NUL-terminates it; returns its start. */
static char *trim(char *b, char *e) {
    while (b < e && is_space(*b)) b++;
    while (e > b && is_space(e[-1])) e--;
    *e = '\0';
    return b;
}

static bool blank(const char *b, const char *e) {
    for (; b < e; b++)
        if (!is_space(*b)) return false;
    return true;
}

static int64_t count_fields(const char *b, const char *e) {
    int64_t n = 1;
    for (const char *p = b; (p = memchr(p, ',', (size_t)(e - p))) != NULL; p++) n++;
    return n;
}

static oar_status bad_field(const csv_parse *cp, int64_t line, int64_t col, const char *expected,
                            const char *got) {
    return oar_error(OAR_ERR_FORMAT, "csv: '%s' line %lld, column %lld ('%s'): expected %s, got '%.40s'%s",
                     cp->path, (long long)line, (long long)col + 1, cp->names[col], expected, got,
                     strlen(got) > 40 ? "..." : "");
}

static bool parse_float(const char *s, float *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || fabs(v) > 3.4028234663852886e38) return false;
    *out = (float)v;
    return true;
}

/* An integer label: "3", or a whole number written as a float ("3.0", "1e2"). */
static bool parse_label(const char *s, int64_t *out) {
    if (!*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*end && errno == 0) {
        *out = v;
        return true;
    }
    double d = strtod(s, &end);
    if (*end || !isfinite(d) || d != floor(d) || fabs(d) >= 9.2e18) return false;
    *out = (int64_t)d;
    return true;
}

static oar_status parse_header(csv_parse *cp, char *b, char *e, const char *label) {
    if (blank(b, e))
        return oar_error(OAR_ERR_FORMAT, "csv: '%s' line 1: expected a header line with column "
                         "names, got %s", cp->path, b == e ? "an empty file" : "a blank line");
    cp->n_cols = count_fields(b, e);
    if (cp->n_cols < 2)
        return oar_error(OAR_ERR_FORMAT, "csv: '%s' line 1: expected at least 2 columns (features "
                         "and a label), got 1 ('%.40s')", cp->path, trim(b, e));
    cp->names = oar_malloc(sizeof(char *) * (size_t)cp->n_cols);
    if (!cp->names) return OAR_ERR_OOM;
    char *f = b;
    for (int64_t c = 0; c < cp->n_cols; c++) {
        char *comma = memchr(f, ',', (size_t)(e - f));
        char *fe = comma ? comma : e;
        cp->names[c] = trim(f, fe);
        f = fe + 1;
    }
    cp->label_col = cp->n_cols - 1;
    if (!label) return OAR_OK;
    for (int64_t c = 0; c < cp->n_cols; c++)
        if (strcmp(cp->names[c], label) == 0) {
            cp->label_col = c;
            return OAR_OK;
        }
    char list[256];
    size_t used = 0;
    for (int64_t c = 0; c < cp->n_cols && used + 4 < sizeof list; c++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", c ? ", " : "", cp->names[c]);
        if (n < 0) break;
        used += (size_t)n;
    }
    return oar_error(OAR_ERR_INVALID_ARG, "csv: '%s' has no column named '%s'; the header (line 1) "
                     "has: %s", cp->path, label, list);
}

/* Parses one data row [b, e) into its feature vector and label. */
static oar_status parse_row(const csv_parse *cp, int64_t line, char *b, char *e, float *feat,
                            int64_t *label) {
    int64_t n = count_fields(b, e);
    if (n != cp->n_cols)
        return oar_error(OAR_ERR_FORMAT, "csv: '%s' line %lld: expected %lld comma-separated "
                         "columns as in the header, got %lld", cp->path, (long long)line,
                         (long long)cp->n_cols, (long long)n);
    char *f = b;
    for (int64_t c = 0, k = 0; c < n; c++) {
        char *comma = memchr(f, ',', (size_t)(e - f));
        char *fe = comma ? comma : e;
        char *s = trim(f, fe);
        f = fe + 1;
        if (c == cp->label_col) {
            if (!parse_label(s, label)) return bad_field(cp, line, c, "an integer label", s);
        } else if (!parse_float(s, &feat[k++])) {
            return bad_field(cp, line, c, "a finite number", s);
        }
    }
    return OAR_OK;
}

static oar_status parse_csv(csv_dataset *s, csv_parse *cp, oar_bytes *b, const char *label) {
    char *p = (char *)b->data, *end = p + b->size;
    char *nl = memchr(p, '\n', b->size);
    char *le = nl ? nl : end;
    oar_status st = parse_header(cp, p, le, label);
    if (st != OAR_OK) return st;
    int64_t max_rows = 1, n_feat = cp->n_cols - 1;
    for (char *q = le; q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++) max_rows++;
    s->features = oar_malloc(sizeof(float) * (size_t)(max_rows * n_feat));
    s->labels = oar_malloc(sizeof(int64_t) * (size_t)max_rows);
    if (!s->features || !s->labels) {
        oar_error_prefix("csv: rows of '%s'", cp->path);
        return OAR_ERR_OOM;
    }
    int64_t rows = 0, line = 1;
    for (p = nl ? nl + 1 : end; p < end; p = le + 1) {
        line++;
        nl = memchr(p, '\n', (size_t)(end - p));
        le = nl ? nl : end;
        if (blank(p, le)) continue; /* blank lines (e.g. a trailing one) carry no row */
        st = parse_row(cp, line, p, le, s->features + rows * n_feat, s->labels + rows);
        if (st != OAR_OK) return st;
        rows++;
    }
    if (rows == 0)
        return oar_error(OAR_ERR_FORMAT, "csv: '%s': expected data rows after the header, got none",
                         cp->path);
    int64_t shape[1] = {n_feat};
    return oar_dataset_init(&s->base, s->base.vt, rows, OAR_F32, shape, 1, OAR_I64, NULL, 0);
}

static oar_status csv_copy(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target) {
    const csv_dataset *s = (const csv_dataset *)d;
    memcpy(input, s->features + i * d->in_numel, d->in_bytes);
    *(int64_t *)target = s->labels[i];
    return OAR_OK;
}

static void csv_destroy(oar_dataset *d) {
    csv_dataset *s = (csv_dataset *)d;
    free(s->features);
    free(s->labels);
    free(s);
}

static const oar_dataset_vt csv_vt = {csv_copy, csv_destroy};

oar_dataset *oar_dataset_csv(const char *path, const char *label) {
    csv_dataset *s = OAR_NEW(csv_dataset);
    if (!s) return NULL;
    s->base.vt = &csv_vt;
    csv_parse cp = {.path = path};
    oar_bytes b;
    oar_status st = oar_read_file("csv", path, &b);
    if (st == OAR_OK) st = parse_csv(s, &cp, &b, label);
    free(cp.names);
    oar_bytes_free(&b);
    if (st != OAR_OK) {
        csv_destroy(&s->base);
        return NULL;
    }
    return &s->base;
}
