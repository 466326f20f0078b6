/* `oar ops`: what the op table holds — kernels per (device, dtype), gradient rules, and
 * whether the sweep has cases for the op. */
#include "cli.h"
#include "ops/op.h"
#include "sweep.h"

#include <stdio.h>
#include <string.h>

static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

/* The op's autocast class: "low", "fp32"... or "fp32/follow" where f16's and bf16's differ. */
static const char *amp_classes(const char *op, char *buf, size_t size) {
    const char *h = oar_amp_class_name((oar_amp_class)oar_amp_op_class(op, OAR_F16));
    const char *b = oar_amp_class_name((oar_amp_class)oar_amp_op_class(op, OAR_BF16));
    if (strcmp(h, b) == 0) snprintf(buf, size, "%s", h);
    else snprintf(buf, size, "%s/%s", h, b);
    return buf;
}

static void print_json(void) {
    printf("[\n");
    for (int op = 0; op < OAR_OP_COUNT; op++) {
        const oar_op_def *d = oar_op_table[op];
        const oar_kernel_entry *ks;
        int nk = oar_op_kernels((oar_op_id)op, &ks);
        printf("  {\"name\": ");
        print_json_string(d->name);
        printf(", \"kernels\": [");
        int first = 1;
        for (int k = 0; k < nk; k++) {
            for (int dt = 0; dt < OAR_DTYPE_COUNT; dt++) {
                if (!(ks[k].dtypes & (1u << dt))) continue;
                printf("%s{\"device\": \"%s\", \"dtype\": \"%s\", \"impl\": ", first ? "" : ", ",
                       ks[k].device == OAR_CPU ? "cpu" : "cuda", oar_dtype_name((oar_dtype)dt));
                print_json_string(ks[k].impl);
                printf("}");
                first = 0;
            }
        }
        if (d->flags & OAR_OPF_VIEW) {
            /* view ops run no kernel: the view function is their implementation */
            printf("%s{\"device\": \"cpu\", \"dtype\": \"any\", \"impl\": \"view\"}", first ? "" : ", ");
        }
        bool diff = !(d->flags & OAR_OPF_NONDIFF);
        printf("], \"amp_f16\": \"%s\", \"amp_bf16\": \"%s\"",
               oar_amp_class_name((oar_amp_class)oar_amp_op_class(d->name, OAR_F16)),
               oar_amp_class_name((oar_amp_class)oar_amp_op_class(d->name, OAR_BF16)));
        printf(", \"differentiable\": %s, \"has_grad\": %s, \"swept\": %s, \"sweep_cases\": %d, "
               "\"inputs\": %d, \"outputs\": %d, \"attrs\": [",
               diff ? "true" : "false", d->grad ? "true" : "false",
               sweep_count_cases(d->name) ? "true" : "false", sweep_count_cases(d->name), d->n_inputs,
               d->n_outputs);
        for (int a = 0; a < d->n_attrs; a++) {
            if (a) printf(", ");
            print_json_string(d->attrs[a].name);
        }
        printf("], \"defaults\": {"); /* the table's attribute defaults, as attribute text */
        for (int a = 0, k = 0; a < d->n_attrs; a++) {
            if (!d->attrs[a].def) continue;
            printf("%s", k++ ? ", " : "");
            print_json_string(d->attrs[a].name);
            printf(": ");
            print_json_string(d->attrs[a].def);
        }
        printf("}}%s\n", op + 1 < OAR_OP_COUNT ? "," : "");
    }
    printf("]\n");
}

static void dtype_list(uint32_t mask, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (int dt = 0; dt < OAR_DTYPE_COUNT && n < size; dt++)
        if (mask & (1u << dt)) n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? "," : "", oar_dtype_name((oar_dtype)dt));
}

static void print_table(void) {
    int n_grad = 0, n_diff = 0, n_swept = 0, n_fast = 0;
    printf("%-24s %-5s %-5s %-6s %-14s %s\n", "op", "grad", "swept", "cases", "amp f16/bf16", "kernels (cpu)");
    for (int op = 0; op < OAR_OP_COUNT; op++) {
        const oar_op_def *d = oar_op_table[op];
        const oar_kernel_entry *ks;
        int nk = oar_op_kernels((oar_op_id)op, &ks);
        bool diff = !(d->flags & OAR_OPF_NONDIFF);
        int cases = sweep_count_cases(d->name);
        n_diff += diff;
        n_grad += diff && d->grad;
        n_swept += cases > 0;
        char kinfo[512];
        size_t n = 0;
        kinfo[0] = '\0';
        if (d->flags & OAR_OPF_VIEW) n += (size_t)snprintf(kinfo, sizeof kinfo, "view (any dtype)");
        for (int k = 0; k < nk && n < sizeof kinfo; k++) {
            char dts[128];
            dtype_list(ks[k].dtypes, dts, sizeof dts);
            n += (size_t)snprintf(kinfo + n, sizeof kinfo - n, "%s%s[%s]", n ? "  " : "", ks[k].impl, dts);
        }
        n_fast += nk > 1;
        char amp[32];
        printf("%-24s %-5s %-5s %-6d %-14s %s\n", d->name, diff ? (d->grad ? "yes" : "MISSING") : "-",
               cases ? "yes" : "no", cases, amp_classes(d->name, amp, sizeof amp), kinfo);
    }
    printf("\n%d ops: %d differentiable (%d with a gradient rule), %d covered by the sweep, %d with fast kernels\n",
           OAR_OP_COUNT, n_diff, n_grad, n_swept, n_fast);
}

int oar_cmd_ops(int argc, char **argv) {
    static const cli_flag flags[] = {{"--json", CLI_NONE}};
    if (cli_check_flags("ops", argc, argv, flags, CLI_N_FLAGS(flags), 0)) return 2;
    oar_init();
    if (cli_has_flag(argc, argv, "--json")) print_json();
    else print_table();
    return 0;
}
