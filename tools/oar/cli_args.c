/* Checking a subcommand's flags before it reads them: a typo (--threds) or a flag the
 * subcommand does not have (--quant) must stop the run with the list of valid flags, never
 * run the default and exit 0 (a script would believe it measured what it asked for); a
 * malformed number (--batch 12x, --lr fast) is refused too instead of becoming 0 or 12. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_flag *find(const cli_flag *flags, int n, const char *arg, size_t len) {
    for (int k = 0; k < n; k++)
        if (strlen(flags[k].name) == len && !strncmp(flags[k].name, arg, len)) return &flags[k];
    return NULL;
}

static void list_flags(const char *cmd, const cli_flag *flags, int n) {
    fprintf(stderr, "oar %s: valid flags:", cmd);
    for (int k = 0; k < n; k++) {
        static const char *what[] = {"", " TEXT", " N", " N", " X"};
        fprintf(stderr, " %s%s", flags[k].name, what[flags[k].value]);
    }
    fprintf(stderr, "\n");
}

/* Whether v is a whole number (for CLI_COUNT, >= 1); else prints why. */
static bool check_number(const char *cmd, const char *flag, cli_value kind, const char *v) {
    char *end = NULL;
    errno = 0;
    if (kind == CLI_NUMBER) {
        double x = strtod(v, &end);
        if (end != v && !*end && errno == 0 && isfinite(x)) return true;
        fprintf(stderr, "oar %s: %s expects a number, got '%s'\n", cmd, flag, v);
        return false;
    }
    long long x = strtoll(v, &end, 10);
    if (end != v && !*end && errno == 0 && (kind == CLI_INT || x >= 1)) return true;
    fprintf(stderr, "oar %s: %s expects %s, got '%s'\n", cmd, flag,
            kind == CLI_COUNT ? "a whole number >= 1" : "a whole number", v);
    return false;
}

int cli_check_flags(const char *cmd, int argc, char **argv, const cli_flag *flags, int n_flags, int n_positional) {
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            if (a[0] == '-' && a[1]) { /* "-t", "-" are not flags oar has */
                fprintf(stderr, "oar %s: unknown flag '%s'\n", cmd, a);
                list_flags(cmd, flags, n_flags);
                return 2;
            }
            if (positional++ < n_positional) continue;
            fprintf(stderr, "oar %s: unexpected argument '%s'%s\n", cmd, a,
                    n_positional ? "" : " (this command takes flags only)");
            list_flags(cmd, flags, n_flags);
            return 2;
        }
        const char *eq = strchr(a, '=');
        const cli_flag *f = find(flags, n_flags, a, eq ? (size_t)(eq - a) : strlen(a));
        if (!f) {
            fprintf(stderr, "oar %s: unknown flag '%.*s'\n", cmd, eq ? (int)(eq - a) : (int)strlen(a), a);
            list_flags(cmd, flags, n_flags);
            return 2;
        }
        if (f->value == CLI_NONE) {
            if (eq) {
                fprintf(stderr, "oar %s: %s takes no value, got '%s'\n", cmd, f->name, a);
                return 2;
            }
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "oar %s: %s expects a value\n", cmd, f->name);
            list_flags(cmd, flags, n_flags);
            return 2;
        }
        if (f->value != CLI_TEXT && !check_number(cmd, f->name, f->value, v)) return 2;
    }
    return 0;
}
