/* Quantization against torch 1.13 (tests/golden/quant.txt, made by tests/golden/gen_quant.py):
 * torch.quantize_per_tensor / per_channel and dequantize (rounding ties, saturation),
 * torch.fake_quantize_per_tensor_affine / per_channel_affine with their straight-through
 * gradients, torch._fake_quantize_learnable_per_tensor_affine (LSQ) with the gradients of x, scale
 * and zero point, and the MinMax, MovingAverageMinMax and PerChannelMinMax observers' qparams.
 * Every value must match exactly (the scales of the observers to one float ulp). */
#include "golden_util.h"
#include "test_util.h"

#define MAX_T 8

typedef struct gcase {
    char kind[32], name[64], attrs[256];
    char tname[MAX_T][16];
    oar_tensor *t[MAX_T];
    int n;
} gcase;

static oar_tensor *get(gcase *c, const char *name, int nth) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->tname[i], name) && nth-- == 0) return c->t[i];
    return NULL;
}

static long attr(const gcase *c, const char *key) {
    char pat[40];
    snprintf(pat, sizeof pat, "%s=", key);
    const char *p = strstr(c->attrs, pat);
    if (!p) return 0;
    p += strlen(pat);
    if (!strncmp(p, "u8", 2)) return OAR_U8;
    if (!strncmp(p, "i8", 2)) return OAR_I8;
    return strtol(p, NULL, 10);
}

/* a and b hold the same values (compared as doubles); tol_ulp: relative tolerance in float ulps */
static bool same(const char *what, const gcase *c, oar_tensor *got, oar_tensor *want, double tol_ulp) {
    if (!got || !want || oar_numel(got) != oar_numel(want)) {
        fprintf(stderr, "%s %s: %s missing or of another size (%s)\n", c->kind, c->name, what, oar_last_error());
        return false;
    }
    for (int64_t i = 0; i < oar_numel(want); i++) {
        double a = t_at(got, i), b = t_at(want, i);
        if (fabs(a - b) > tol_ulp * 1.2e-7 * fabs(b)) {
            fprintf(stderr, "%s %s: %s[%lld] is %.9g, torch %.9g\n", c->kind, c->name, what, (long long)i, a, b);
            return false;
        }
    }
    return true;
}

static void run_quantize(gcase *c) {
    int axis = (int)attr(c, "axis");
    oar_dtype dt = (oar_dtype)attr(c, "dtype");
    oar_tensor *x = get(c, "x", 0), *s = get(c, "scale", 0), *z = get(c, "zp", 0);
    oar_tensor *q = oar_quantize(x, s, z, axis, dt);
    CHECK(q && oar_dtype_of(q) == dt);
    CHECK(same("q", c, q, get(c, "q", 0), 0));
    CHECK(same("dequantize", c, oar_dequantize(q, s, z, axis), get(c, "deq", 0), 0));
    /* the same in f64 (computed in double, where x / scale is exact, as in float, only for
     * scales that are powers of two) */
    bool pow2 = true;
    for (int64_t i = 0; i < oar_numel(s); i++) {
        int e;
        pow2 &= frexp(t_at(s, i), &e) == 0.5;
    }
    if (pow2) CHECK(same("q (f64 input)", c, oar_quantize(oar_cast(x, OAR_F64), s, z, axis, dt), get(c, "q", 0), 0));
}

static void run_fake_quant(gcase *c) {
    int axis = (int)attr(c, "axis");
    long qmin = attr(c, "quant_min"), qmax = attr(c, "quant_max");
    oar_tensor *x = oar_clone(get(c, "x", 0)), *s = get(c, "scale", 0), *z = get(c, "zp", 0);
    oar_set_requires_grad(x, true);
    oar_tensor *y = oar_fake_quant(x, s, z, axis, qmin, qmax);
    CHECK(same("y", c, y, get(c, "y", 0), 0));
    oar_tensor *gx = NULL, *gout = get(c, "gout", 0);
    CHECK(oar_grad(&y, 1, &gout, &x, 1, &gx, NULL) == OAR_OK);
    CHECK(same("gradient", c, gx, get(c, "gx", 0), 0));
    oar_release(gx);
}

/* LSQ: y exact; the gradients of x exact, of scale and zero point (sums over x) to float rounding */
static void run_lsq(gcase *c) {
    long qmin = attr(c, "quant_min"), qmax = attr(c, "quant_max");
    const char *gfp = strstr(c->attrs, "grad_factor=");
    double gf = gfp ? strtod(gfp + strlen("grad_factor="), NULL) : 0;
    oar_tensor *x = oar_clone(get(c, "x", 0)), *s = oar_clone(get(c, "scale", 0)), *z = oar_clone(get(c, "zp", 0));
    oar_set_requires_grad(x, true);
    oar_set_requires_grad(s, true);
    oar_set_requires_grad(z, true);
    oar_tensor *y = oar_fake_quant_lsq(x, s, z, qmin, qmax, gf);
    CHECK(same("y", c, y, get(c, "y", 0), 0));
    oar_tensor *wrt[3] = {x, s, z}, *g[3] = {0}, *gout = get(c, "gout", 0);
    CHECK(oar_grad(&y, 1, &gout, wrt, 3, g, NULL) == OAR_OK);
    CHECK(same("gradient of x", c, g[0], get(c, "gx", 0), 0));
    double sum_g = 0; /* the sums' scale: differences of float rounding are relative to it */
    for (int64_t i = 0; i < oar_numel(gout); i++) sum_g += fabs(t_at(gout, i));
    double tol = 1e-6 * sum_g * (qmax - qmin) * gf;
    CHECK(g[1] && fabs(t_at(g[1], 0) - t_at(get(c, "gscale", 0), 0)) <= tol);
    CHECK(g[2] && fabs(t_at(g[2], 0) - t_at(get(c, "gzp", 0), 0)) <= tol);
    if (g[1] && g[2])
        printf("  lsq %s: y and dx equal; dscale %.7g (torch %.7g), dzero_point %.7g (torch %.7g)\n", c->name,
               t_at(g[1], 0), t_at(get(c, "gscale", 0), 0), t_at(g[2], 0), t_at(get(c, "gzp", 0), 0));
    for (int i = 0; i < 3; i++) oar_release(g[i]);
}

static void run_observer(gcase *c) {
    oar_observer_opts o = {.dtype = (oar_dtype)attr(c, "dtype"), .symmetric = attr(c, "symmetric") != 0,
                           .per_channel = attr(c, "per_channel") != 0, .axis = (int)attr(c, "axis"), .momentum = 0.9,
                           .reduce_range = attr(c, "reduce_range") != 0};
    oar_observer *ob = oar_observer_create(c->kind, &o);
    CHECK(ob != NULL);
    oar_tensor *b;
    for (int i = 0; (b = get(c, "batch", i)); i++) CHECK(oar_observer_observe(ob, b) == OAR_OK);
    oar_tensor *s = NULL, *z = NULL;
    CHECK(oar_observer_qparams(ob, &s, &z) == OAR_OK);
    CHECK(same("scale", c, s, get(c, "scale", 0), 1));
    CHECK(same("zero point", c, z, get(c, "zp", 0), 0));
    oar_observer_free(ob);
}

int main(void) {
    oar_init();
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/quant.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_quant_golden: skipped the torch comparison: %s not found (set OAR_SOURCE_DIR to the "
               "repository, or regenerate with /usr/bin/python3 tests/golden/gen_quant.py)\n", path);
        return test_summary("test_quant_golden");
    }
    static char line[1 << 16];
    gcase c = {0};
    int n_cases = 0;
    bool more = true;
    while (more) {
        more = fgets(line, sizeof line, f) != NULL;
        if (more && line[0] == '#') continue;
        if (!more || !strncmp(line, "case ", 5)) {
            if (c.kind[0]) {
                oar_scope_begin();
                if (!strcmp(c.kind, "quantize")) run_quantize(&c);
                else if (!strcmp(c.kind, "fake_quant")) run_fake_quant(&c);
                else if (!strcmp(c.kind, "fake_quant_lsq")) run_lsq(&c);
                else run_observer(&c);
                oar_scope_end();
                n_cases++;
                for (int i = 0; i < c.n; i++) oar_release(c.t[i]);
            }
            memset(&c, 0, sizeof c);
            if (more) {
                char *bar = strchr(line, '|');
                CHECK(bar && sscanf(line, "case %31s %63s", c.kind, c.name) == 2);
                if (bar) snprintf(c.attrs, sizeof c.attrs, "%s", bar + 1);
            }
            continue;
        }
        char name[16];
        int used;
        if (sscanf(line, "%15s %n", name, &used) != 1 || c.n == MAX_T) continue;
        oar_tensor *t = golden_parse_tensor(line + used);
        CHECK(t != NULL);
        if (!t) continue;
        snprintf(c.tname[c.n], sizeof c.tname[c.n], "%s", name);
        c.t[c.n++] = t;
    }
    fclose(f);
    CHECK(n_cases >= 20);
    printf("test_quant_golden: %d cases from torch\n", n_cases);
    return test_summary("test_quant_golden");
}
