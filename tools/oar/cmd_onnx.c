/* ONNX from the command line: `oar onnx-test DIR...` (the conformance runner over ONNX backend
 * node cases), and the .onnx forms of `oar infer` and `oar inspect`. */
#include "cli.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_IO 16

static void print_shape(const oar_tensor *t) {
    printf("%s[", oar_dtype_name(oar_dtype_of(t)));
    for (int d = 0; d < oar_ndim(t); d++) printf("%s%lld", d ? ", " : "", (long long)oar_shape(t)[d]);
    printf("]");
}

bool cli_is_onnx(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n > 5 && !strcmp(path + n - 5, ".onnx");
}

/* ---- oar infer model.onnx --input [NAME=]X.npy ... [--output Y.npy] [--outputs DIR] */
int cli_onnx_infer(const char *path, const char *const *inputs, int n_inputs, const char *out_file,
                   const char *out_dir) {
    int rc = 1;
    oar_scope_begin();
    oar_tensor *in[MAX_IO] = {0};
    oar_onnx_value vout[MAX_IO] = {{0}};
    oar_onnx_model *m = oar_onnx_load(path, NULL);
    if (!m) goto done;
    int n_in = oar_onnx_num_inputs(m), n_out = oar_onnx_num_outputs(m);
    if (n_inputs != n_in) {
        oar_set_error(OAR_ERR_INVALID_ARG, "the model takes %d input%s, got %d --input", n_in, n_in == 1 ? "" : "s",
                      n_inputs);
        goto done;
    }
    for (int i = 0; i < n_inputs; i++) {
        const char *file = inputs[i], *eq = strchr(inputs[i], '=');
        int slot = i;
        if (eq) {
            file = eq + 1;
            slot = -1;
            for (int j = 0; j < n_in; j++) {
                oar_input_spec s;
                if (oar_onnx_input_spec(m, j, &s) == OAR_OK && strlen(s.name) == (size_t)(eq - inputs[i]) &&
                    !strncmp(s.name, inputs[i], (size_t)(eq - inputs[i])))
                    slot = j;
            }
            if (slot < 0) {
                oar_set_error(OAR_ERR_INVALID_ARG, "the model has no input named '%.*s'", (int)(eq - inputs[i]),
                              inputs[i]);
                goto done;
            }
        }
        if (!(in[slot] = oar_npy_load(file))) goto done;
    }
    oar_onnx_value vin[MAX_IO] = {{0}};
    for (int i = 0; i < n_in; i++) {
        if (oar_onnx_input_kind(m, i) == 1 || oar_onnx_input_kind(m, i) == 3) {
            oar_input_spec s;
            oar_onnx_input_spec(m, i, &s);
            oar_set_error(OAR_ERR_UNSUPPORTED, "input %d ('%s') is a sequence; oar infer takes tensors (.npy files): "
                                               "run such a model through oar_onnx_run_values", i, s.name);
            goto done;
        }
        vin[i].tensor = in[i];
    }
    if (oar_onnx_run_values(m, vin, n_in, vout, n_out) != OAR_OK) goto done;
    printf("model %s: %d input%s, %d output%s\n", path, n_in, n_in == 1 ? "" : "s", n_out, n_out == 1 ? "" : "s");
    for (int k = 0; k < n_out; k++) {
        printf("output '%s': ", oar_onnx_output_name(m, k));
        if (vout[k].kind == OAR_ONNX_TENSOR) print_shape(vout[k].tensor);
        else if (vout[k].kind == OAR_ONNX_NONE) printf("an optional with no element");
        else {
            printf("a sequence of %d tensors", vout[k].n);
            for (int t = 0; t < vout[k].n; t++) {
                printf("%s", t ? ", " : ": ");
                print_shape(vout[k].items[t]);
            }
        }
        printf("\n");
    }
    if (out_file) {
        if (vout[0].kind != OAR_ONNX_TENSOR) {
            oar_set_error(OAR_ERR_UNSUPPORTED, "output 0 is not a tensor; --output saves one tensor as .npy");
            goto done;
        }
        if (oar_npy_save(out_file, vout[0].tensor) != OAR_OK) goto done;
        printf("saved output '%s' to %s\n", oar_onnx_output_name(m, 0), out_file);
    }
    for (int k = 0; out_dir && k < n_out; k++) {
        if (vout[k].kind != OAR_ONNX_TENSOR) {
            oar_set_error(OAR_ERR_UNSUPPORTED, "output %d is not a tensor; --outputs saves tensors as .npy", k);
            goto done;
        }
        char file[4096];
        snprintf(file, sizeof file, "%.4000s/output_%d.npy", out_dir, k);
        if (oar_npy_save(file, vout[k].tensor) != OAR_OK) goto done;
        printf("saved output '%s' to %s\n", oar_onnx_output_name(m, k), file);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "oar infer: %s\n", oar_last_error());
    for (int k = 0; k < MAX_IO; k++) oar_onnx_value_clear(&vout[k]);
    oar_onnx_free(m);
    oar_scope_end();
    return rc;
}

/* ---- oar inspect model.onnx */
int cli_onnx_inspect(const char *path) {
    oar_onnx_model *m = oar_onnx_load(path, NULL);
    if (!m) {
        fprintf(stderr, "oar inspect: %s\n", oar_last_error());
        return 1;
    }
    int n = oar_onnx_describe(m, NULL, 0);
    char *buf = malloc((size_t)n + 1);
    if (buf) {
        oar_onnx_describe(m, buf, (size_t)n + 1);
        fputs(buf, stdout);
    }
    free(buf);
    n = oar_onnx_dump(m, NULL, 0);
    if (n > 0 && (buf = malloc((size_t)n + 1))) {
        oar_onnx_dump(m, buf, (size_t)n + 1);
        printf("\nprogram (compiled at the declared input shapes):\n%s", buf);
        free(buf);
    } else {
        printf("\n(no program yet: the inputs have dynamic dims, give shapes or are sequences, or a Loop stops on a "
               "condition, which is not run on zeros at load; `oar infer` compiles one per input shape, "
               "oar_onnx_run_values per sequence length)\n");
    }
    oar_onnx_free(m);
    return 0;
}

/* ---- oar onnx-test */
typedef enum { R_PASS, R_FAIL, R_UNSUPPORTED } result;
static const char *const result_names[] = {"pass", "FAIL", "unsupported"};

typedef struct op_row {
    char name[64];
    int count[3];
} op_row;

typedef struct runner {
    double rtol, atol;
    bool verbose;
    op_row ops[512];
    int n_ops;
    int total[3];
    char **passed;     /* names of passing cases */
    int n_passed, cap_passed;
} runner;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in dir (sorted), those starting with prefix. */
static int list_dir(const char *dir, const char *prefix, char ***out) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
        if (n == cap) {
            char **g = realloc(names, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 64));
            if (!g) break;
            names = g;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    *out = names;
    return n;
}

static void free_list(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static bool is_dir(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISDIR(s.st_mode);
}

/* The operator a case tests: the "operator" column of DIR/index.tsv, else "?". */
static void case_operator(const char *dir, const char *name, char *op, size_t size) {
    snprintf(op, size, "?");
    char path[4096], line[4096];
    snprintf(path, sizeof path, "%.4000s/index.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    int col = -1;
    while (fgets(line, sizeof line, f)) {
        char *save = NULL, *tok = strtok_r(line, "\t\n", &save);
        if (col < 0) { /* the header */
            for (int i = 0; tok; i++, tok = strtok_r(NULL, "\t\n", &save))
                if (!strcmp(tok, "operator")) col = i;
            if (col < 0) break;
            continue;
        }
        if (!tok || strcmp(tok, name)) continue;
        for (int i = 0; tok && i < col; i++) tok = strtok_r(NULL, "\t\n", &save);
        if (tok) snprintf(op, size, "%s", tok);
        break;
    }
    fclose(f);
}

/* Whether got matches want within the tolerances; why says where it does not. */
static bool compare(oar_tensor *got, oar_tensor *want, double rtol, double atol, char *why, size_t size) {
    if (oar_dtype_of(got) != oar_dtype_of(want) || oar_ndim(got) != oar_ndim(want) ||
        memcmp(oar_shape(got), oar_shape(want), sizeof(int64_t) * (size_t)oar_ndim(got))) {
        char a[128] = "", b[128] = "";
        size_t n = 0, m = 0;
        n += (size_t)snprintf(a, sizeof a, "%s[", oar_dtype_name(oar_dtype_of(got)));
        for (int d = 0; d < oar_ndim(got) && n < sizeof a; d++)
            n += (size_t)snprintf(a + n, sizeof a - n, "%s%lld", d ? "," : "", (long long)oar_shape(got)[d]);
        m += (size_t)snprintf(b, sizeof b, "%s[", oar_dtype_name(oar_dtype_of(want)));
        for (int d = 0; d < oar_ndim(want) && m < sizeof b; d++)
            m += (size_t)snprintf(b + m, sizeof b - m, "%s%lld", d ? "," : "", (long long)oar_shape(want)[d]);
        snprintf(why, size, "got %s], expected %s]", a, b);
        return false;
    }
    int64_t n = oar_numel(want);
    double *g = malloc(sizeof(double) * (size_t)(n + 1)), *w = malloc(sizeof(double) * (size_t)(n + 1));
    bool ok = g && w && oar_copy_to_buffer(got, g, sizeof(double) * (size_t)n, OAR_F64) == OAR_OK &&
              oar_copy_to_buffer(want, w, sizeof(double) * (size_t)n, OAR_F64) == OAR_OK;
    if (!ok) snprintf(why, size, "cannot read the values: %s", oar_last_error());
    bool exact = !oar_dtype_is_float(oar_dtype_of(want));
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; ok && i < n; i++) {
        bool same = (isnan(g[i]) && isnan(w[i])) || g[i] == w[i] ||
                    (!exact && isfinite(w[i]) && fabs(g[i] - w[i]) <= atol + rtol * fabs(w[i]));
        if (!same && bad++ == 0) first = i;
    }
    if (ok && bad) {
        snprintf(why, size, "%lld of %lld values differ; first at %lld: got %.9g, expected %.9g", (long long)bad,
                 (long long)n, (long long)first, g[first], w[first]);
        ok = false;
    }
    free(g);
    free(w);
    return ok;
}

/* Reads dir/prefix0.pb, prefix1.pb, ... into vs (at most MAX_IO), each as the kind the model
 * declares for it (kind(m, k): a tensor, a sequence, an optional); the count or -1. */
static int read_values(const char *dir, const char *prefix, oar_onnx_value *vs, const oar_onnx_model *m,
                       int (*kind)(const oar_onnx_model *, int)) {
    int n = 0;
    for (; n < MAX_IO; n++) {
        char path[4096];
        snprintf(path, sizeof path, "%.3900s/%.60s%d.pb", dir, prefix, n);
        FILE *f = fopen(path, "rb");
        if (!f) break;
        fclose(f);
        int k = kind(m, n);
        if (oar_onnx_value_load(path, k < 0 ? 0 : k, &vs[n]) != OAR_OK) return -1;
    }
    return n;
}

static const char *kind_name(oar_onnx_kind k) {
    return k == OAR_ONNX_TENSOR ? "a tensor" : k == OAR_ONNX_SEQUENCE ? "a sequence" : "an empty optional";
}

/* got against want: the same kind, length and elements. */
static bool compare_value(const oar_onnx_value *got, const oar_onnx_value *want, double rtol, double atol, char *why,
                          size_t size) {
    if (got->kind != want->kind) {
        snprintf(why, size, "got %s, expected %s", kind_name(got->kind), kind_name(want->kind));
        return false;
    }
    if (got->kind == OAR_ONNX_TENSOR) return compare(got->tensor, want->tensor, rtol, atol, why, size);
    if (got->kind == OAR_ONNX_NONE) return true;
    if (got->n != want->n) {
        snprintf(why, size, "a sequence of %d tensors, expected %d", got->n, want->n);
        return false;
    }
    for (int t = 0; t < got->n; t++) {
        char w[400];
        if (!compare(got->items[t], want->items[t], rtol, atol, w, sizeof w)) {
            snprintf(why, size, "sequence element %d: %s", t, w);
            return false;
        }
    }
    return true;
}

static result run_case(runner *r, const char *dir, char *why, size_t size) {
    char path[4096];
    snprintf(path, sizeof path, "%.4000s/model.onnx", dir);
    oar_onnx_model *m = oar_onnx_load(path, NULL);
    if (!m) {
        snprintf(why, size, "%s", oar_last_error());
        return oar_last_status() == OAR_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
    }
    char **sets = NULL;
    int n_sets = list_dir(dir, "test_data_set_", &sets);
    result res = n_sets > 0 ? R_PASS : R_FAIL;
    if (n_sets <= 0) snprintf(why, size, "no test_data_set_* directory");
    for (int s = 0; s < n_sets && res == R_PASS; s++) {
        char set[4096];
        snprintf(set, sizeof set, "%.3000s/%.1000s", dir, sets[s]);
        oar_scope_begin();
        oar_onnx_value in[MAX_IO] = {0}, want[MAX_IO] = {0}, got[MAX_IO] = {0};
        int n_in = read_values(set, "input_", in, m, oar_onnx_input_kind);
        int n_want = read_values(set, "output_", want, m, oar_onnx_output_kind);
        if (n_in < 0 || n_want < 0) {
            snprintf(why, size, "%s: %s", sets[s], oar_last_error());
            res = oar_last_status() == OAR_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
        } else if (n_in != oar_onnx_num_inputs(m) || n_want != oar_onnx_num_outputs(m)) {
            snprintf(why, size, "%s has %d inputs and %d outputs; the model takes %d and gives %d (optional inputs "
                                "given as test data are not supported)", sets[s], n_in, n_want,
                     oar_onnx_num_inputs(m), oar_onnx_num_outputs(m));
            res = R_UNSUPPORTED;
        } else if (oar_onnx_run_values(m, in, n_in, got, n_want) != OAR_OK) {
            snprintf(why, size, "%s", oar_last_error());
            res = oar_last_status() == OAR_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
        } else {
            for (int k = 0; k < n_want && res == R_PASS; k++) {
                char w[512];
                if (!compare_value(&got[k], &want[k], r->rtol, r->atol, w, sizeof w)) {
                    snprintf(why, size, "%s output %d: %s", sets[s], k, w);
                    res = R_FAIL;
                }
            }
        }
        for (int k = 0; k < MAX_IO; k++) {
            oar_onnx_value_clear(&in[k]);
            oar_onnx_value_clear(&want[k]);
            oar_onnx_value_clear(&got[k]);
        }
        oar_scope_end();
    }
    free_list(sets, n_sets > 0 ? n_sets : 0);
    oar_onnx_free(m);
    return res;
}

static void count(runner *r, const char *op, result res) {
    int i = 0;
    while (i < r->n_ops && strcmp(r->ops[i].name, op)) i++;
    if (i == r->n_ops && r->n_ops < (int)(sizeof r->ops / sizeof *r->ops)) snprintf(r->ops[r->n_ops++].name, 64, "%s", op);
    if (i < r->n_ops) r->ops[i].count[res]++;
    r->total[res]++;
}

static void run_dir(runner *r, const char *dir) {
    char model[4096];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    FILE *f = fopen(model, "rb");
    char **cases = NULL;
    int n;
    char parent[4096];
    if (f) { /* one case */
        fclose(f);
        snprintf(parent, sizeof parent, "%s", dir);
        char *slash = strrchr(parent, '/');
        const char *name = slash ? slash + 1 : parent;
        cases = malloc(sizeof(char *));
        cases[0] = strdup(name);
        if (slash) *slash = '\0';
        else snprintf(parent, sizeof parent, ".");
        n = 1;
    } else {
        snprintf(parent, sizeof parent, "%s", dir);
        n = list_dir(dir, "test_", &cases);
    }
    for (int i = 0; i < n; i++) {
        char path[8192], why[1024] = "", op[64];
        snprintf(path, sizeof path, "%s/%s", parent, cases[i]);
        if (!is_dir(path)) continue;
        case_operator(parent, cases[i], op, sizeof op);
        result res = run_case(r, path, why, sizeof why);
        count(r, op, res);
        if (res == R_PASS && r->n_passed < 100000) {
            if (r->n_passed == r->cap_passed) {
                char **g = realloc(r->passed, sizeof(char *) * (size_t)(r->cap_passed = r->cap_passed ? 2 * r->cap_passed : 256));
                if (g) r->passed = g;
            }
            if (r->n_passed < r->cap_passed) r->passed[r->n_passed++] = strdup(cases[i]);
        }
        if (res != R_PASS || r->verbose)
            printf("%-11s %-58s %-22s %.300s\n", result_names[res], cases[i], op, why);
    }
    free_list(cases, n > 0 ? n : 0);
}

static bool was_passed(const runner *r, const char *name) {
    for (int i = 0; i < r->n_passed; i++)
        if (!strcmp(r->passed[i], name)) return true;
    return false;
}

/* Every case listed in file must pass now; returns the number that did not (-1: no file). */
static int check_expected(const runner *r, const char *file, int *listed) {
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    char line[512];
    int missing = 0;
    *listed = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        (*listed)++;
        if (!was_passed(r, line)) {
            printf("REGRESSION  %s: listed in %s as passing, did not pass\n", line, file);
            missing++;
        }
    }
    fclose(f);
    return missing;
}

static int by_op_name(const void *a, const void *b) { return strcmp(((const op_row *)a)->name, ((const op_row *)b)->name); }

int oar_cmd_onnx_test(int argc, char **argv) {
    static const cli_flag flags[] = {{"--expect", CLI_TEXT}, {"--write-expect", CLI_TEXT}, {"--rtol", CLI_NUMBER},
                                     {"--atol", CLI_NUMBER}, {"--verbose", CLI_NONE}};
    if (cli_check_flags("onnx-test", argc, argv, flags, CLI_N_FLAGS(flags), 64)) return 2;
    runner r = {.rtol = 1e-3, .atol = 1e-7};
    const char *expect = NULL, *write_expect = NULL;
    const char *dirs[64];
    int n_dirs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--expect") && v) expect = v, i++;
        else if (!strcmp(a, "--write-expect") && v) write_expect = v, i++;
        else if (!strcmp(a, "--rtol") && v) r.rtol = atof(v), i++;
        else if (!strcmp(a, "--atol") && v) r.atol = atof(v), i++;
        else if (!strcmp(a, "--verbose")) r.verbose = true;
        else dirs[n_dirs++] = a;
    }
    if (!n_dirs) {
        fprintf(stderr, "usage: oar onnx-test DIR... [--expect FILE] [--write-expect FILE] [--rtol R] [--atol A] "
                        "[--verbose]\n"
                        "  DIR             a directory of ONNX node cases (test_*/model.onnx + test_data_set_*/), or "
                        "one case\n"
                        "  --expect FILE   cases that must pass (one name a line): exit 1 if any does not\n"
                        "  --write-expect FILE   write the passing cases there\n"
                        "  tolerances: |got - expected| <= atol + rtol |expected| (default rtol 1e-3, atol 1e-7, as "
                        "ONNX's backend runner); integers and bools exactly\n");
        return 2;
    }
    for (int i = 0; i < n_dirs; i++) {
        if (!is_dir(dirs[i])) {
            fprintf(stderr, "oar onnx-test: '%s' is not a directory\n", dirs[i]);
            return 2;
        }
        run_dir(&r, dirs[i]);
    }
    qsort(r.ops, (size_t)r.n_ops, sizeof *r.ops, by_op_name);
    printf("\n%-26s %6s %6s %6s %12s\n", "operator", "cases", "pass", "fail", "unsupported");
    for (int i = 0; i < r.n_ops; i++) {
        const op_row *o = &r.ops[i];
        printf("%-26s %6d %6d %6d %12d\n", o->name, o->count[0] + o->count[1] + o->count[2], o->count[R_PASS],
               o->count[R_FAIL], o->count[R_UNSUPPORTED]);
    }
    int all = r.total[0] + r.total[1] + r.total[2], tried = r.total[R_PASS] + r.total[R_FAIL];
    printf("%-26s %6d %6d %6d %12d\n", "total", all, r.total[R_PASS], r.total[R_FAIL], r.total[R_UNSUPPORTED]);
    printf("{\"cases\": %d, \"pass\": %d, \"fail\": %d, \"unsupported\": %d, \"pass_rate\": %.4f, "
           "\"pass_rate_supported\": %.4f, \"rtol\": %g, \"atol\": %g}\n",
           all, r.total[R_PASS], r.total[R_FAIL], r.total[R_UNSUPPORTED], all ? (double)r.total[R_PASS] / all : 0.0,
           tried ? (double)r.total[R_PASS] / tried : 0.0, r.rtol, r.atol);
    int rc = 0;
    if (write_expect) {
        FILE *f = fopen(write_expect, "w");
        if (!f) {
            fprintf(stderr, "oar onnx-test: cannot write '%s'\n", write_expect);
            rc = 2;
        } else {
            fprintf(f, "# ONNX conformance cases that pass (oar onnx-test --write-expect); the test fails if one "
                       "stops passing\n");
            for (int i = 0; i < r.n_passed; i++) fprintf(f, "%s\n", r.passed[i]);
            fclose(f);
        }
    }
    if (expect) {
        int listed = 0, missing = check_expected(&r, expect, &listed);
        if (missing < 0) {
            fprintf(stderr, "oar onnx-test: cannot read '%s'\n", expect);
            rc = 2;
        } else if (missing) {
            printf("%d of the %d cases listed in %s no longer pass\n", missing, listed, expect);
            rc = 1;
        } else {
            printf("all %d cases listed in %s pass (%d pass now)\n", listed, expect, r.n_passed);
        }
    }
    free_list(r.passed, r.n_passed);
    return rc;
}
