/* `oar launch --nproc N [--hosts h1:n,h2:n] [--port P] [--grace S] -- PROGRAM ARGS`: starts a
 * distributed job by running mpirun, prints the table of ranks and their liveness endpoints (as
 * Paddle's launcher prints its trainers), and exits with the job's status. oar_dist_init in each
 * process reads its rank from mpirun and listens on OAR_DIST_PORT + its local rank.
 *
 * Open MPI ends the whole job as soon as one rank dies or exits non-zero (SIGTERM to the others,
 * then SIGKILL a second later, with their output held meanwhile), so the survivors of a killed
 * rank could be torn down before they had said which rank died. The job therefore runs with
 * Open MPI's recovery on: every rank ends on its own (oar's ranks fail within 2 s of a dead peer),
 * each rank runs under `oar launch-rank` (launch_rank.c), which reports its status, and the
 * launcher's status is the first failed rank's (launch_status.c); ranks still running --grace
 * seconds after the first failure are stopped. */
#include "cli.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_HOSTS 64

static void usage(void) {
    fprintf(stderr, "usage: oar launch --nproc N [--hosts h1:n1,h2:n2] [--port P] [--grace S] -- PROGRAM [ARGS...]\n"
                    "  --nproc N     processes in all (ranks 0..N-1)\n"
                    "  --hosts LIST  hosts and their process counts, filled in order (default: N on this host)\n"
                    "  --port P      first liveness port; rank r listens on P + its local rank (default: free\n"
                    "                ports found here)\n"
                    "  --grace S     when a rank fails, the others have S seconds to end on their own before the\n"
                    "                job is stopped (default %d)\n"
                    "  mpirun (Open MPI) comes from $OAR_MPIRUN or PATH; the job's exit status is oar launch's:\n"
                    "  the first failed rank's (its exit code, or 128 + the signal that killed it)\n",
            LAUNCH_DEFAULT_GRACE_S);
}

/* Whether ports [p, p + n) can be bound here now. */
static bool ports_free(int p, int n) {
    for (int k = 0; k < n; k++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(p + k)),
                                .sin_addr.s_addr = htonl(INADDR_ANY)};
        bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0) close(fd);
        if (!ok) return false;
    }
    return true;
}

static int find_ports(int n) {
    for (int tries = 0; tries < 50; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
        socklen_t len = sizeof a;
        if (fd < 0) return -1;
        bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0;
        close(fd);
        int p = ntohs(a.sin_port);
        if (ok && p + n < 65536 && ports_free(p, n)) return p;
    }
    return -1;
}

static const char *find_mpirun(char *buf, size_t size) {
    const char *env = getenv("OAR_MPIRUN");
    if (env && *env) return env;
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, size, "%s/mpirun", d);
        if (access(buf, X_OK) == 0) return buf;
    }
    return NULL;
}

/* A token that marks this job's status lines, so a rank's own output cannot pass for one. */
static void make_nonce(char *buf, size_t size) {
    unsigned long long v = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
        v = (unsigned long long)getpid() * 2654435761ull ^ (unsigned long long)time(NULL);
    if (fd >= 0) close(fd);
    snprintf(buf, size, "%016llx", v);
}

int oar_cli_launch(int nproc, const char *hosts, int port, int grace_s, char **prog) {
    if (grace_s <= 0) grace_s = LAUNCH_DEFAULT_GRACE_S;
    char names[MAX_HOSTS][64];
    int counts[MAX_HOSTS], n_hosts = 0, total = 0;
    if (hosts) { /* "h1:2,h2:2" */
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", hosts);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *colon = strrchr(tok, ':'), *end = NULL;
            long c = colon ? strtol(colon + 1, &end, 10) : 0;
            if (!colon || colon == tok || !end || *end || c < 1 || n_hosts == MAX_HOSTS || colon - tok >= 64) {
                fprintf(stderr, "oar launch: --hosts expects host:count,host:count (count >= 1, at most %d hosts), "
                                "got '%s'\n", MAX_HOSTS, tok);
                return 2;
            }
            snprintf(names[n_hosts], sizeof names[0], "%.*s", (int)(colon - tok), tok);
            counts[n_hosts++] = (int)c;
            total += (int)c;
        }
        if (total != nproc) {
            fprintf(stderr, "oar launch: --hosts lists %d processes, --nproc asks for %d\n", total, nproc);
            return 2;
        }
    } else {
        snprintf(names[0], sizeof names[0], "localhost");
        counts[0] = nproc;
        n_hosts = 1;
    }
    int most = 0;
    for (int h = 0; h < n_hosts; h++) most = counts[h] > most ? counts[h] : most;
    if (!port && (port = find_ports(most)) < 0) {
        fprintf(stderr, "oar launch: found no %d free consecutive ports for the liveness channel; pass --port\n", most);
        return 1;
    }
    char mpirun_buf[4096];
    const char *mpirun = find_mpirun(mpirun_buf, sizeof mpirun_buf);
    if (!mpirun) {
        fprintf(stderr, "oar launch: mpirun not found in PATH (install openmpi-bin, or set OAR_MPIRUN)\n");
        return 1;
    }
    static char self[4096]; /* each rank's wrapper is this binary: it must be at the same path on every host */
    ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (self_len <= 0) {
        fprintf(stderr, "oar launch: cannot find the oar binary (/proc/self/exe) to start the ranks with\n");
        return 1;
    }
    self[self_len] = 0;
    char nonce[32];
    make_nonce(nonce, sizeof nonce);

    /* the table, and the Fleet-style endpoint list every rank sees */
    static char endpoints[16384], port_env[32], n_env[32], ep_env[16400 + 32], host_list[4096];
    size_t used = 0, hused = 0;
    printf("oar launch: %d processes on %d host%s, mpirun %s\n", nproc, n_hosts, n_hosts > 1 ? "s" : "", mpirun);
    printf("  rank  local  host                 endpoint\n");
    for (int h = 0, r = 0; h < n_hosts; h++) {
        hused += (size_t)snprintf(host_list + hused, sizeof host_list - hused, "%s%s:%d", h ? "," : "", names[h],
                                  counts[h]);
        for (int l = 0; l < counts[h]; l++, r++) {
            printf("  %-4d  %-5d  %-20s %s:%d\n", r, l, names[h], names[h], port + l);
            if (used < sizeof endpoints)
                used += (size_t)snprintf(endpoints + used, sizeof endpoints - used, "%s%s:%d", r ? "," : "",
                                         names[h], port + l);
        }
    }
    fflush(stdout);
    snprintf(port_env, sizeof port_env, "OAR_DIST_PORT=%d", port);
    snprintf(n_env, sizeof n_env, "PADDLE_TRAINERS_NUM=%d", nproc);
    snprintf(ep_env, sizeof ep_env, "PADDLE_TRAINER_ENDPOINTS=%s", endpoints);

    int n_prog = 0;
    while (prog[n_prog]) n_prog++;
    char np[16];
    snprintf(np, sizeof np, "%d", nproc);
    /* recovery on, no abort on a non-zero exit: the ranks end on their own (above) */
    const char *fixed[] = {mpirun, "-np", np, "--oversubscribe", "--bind-to", "none", "--map-by", "slot",
                           "--mca", "orte_enable_recovery", "1", "--mca", "orte_abort_on_non_zero_status", "0",
                           "-x", port_env, "-x", n_env, "-x", ep_env};
    int n_fixed = (int)(sizeof fixed / sizeof *fixed);
    char **args = calloc((size_t)(n_fixed + n_prog + 8), sizeof(char *));
    if (!args) return 1;
    int a = 0;
    for (int k = 0; k < n_fixed; k++) args[a++] = (char *)fixed[k];
    if (geteuid() == 0) args[a++] = "--allow-run-as-root";
    if (hosts) args[a++] = "--host", args[a++] = host_list;
    args[a++] = self, args[a++] = "launch-rank", args[a++] = nonce, args[a++] = "--";
    for (int k = 0; k < n_prog; k++) args[a++] = prog[k];
    int err[2];
    if (pipe(err) != 0) {
        perror("oar launch: pipe");
        free(args);
        return 1;
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("oar launch: fork");
        free(args);
        close(err[0]), close(err[1]);
        return 1;
    }
    if (pid == 0) { /* mpirun's stderr, the ranks' included, comes to us for their status lines */
        close(err[0]);
        if (dup2(err[1], STDERR_FILENO) < 0) _exit(127);
        close(err[1]);
        execv(mpirun, args);
        perror("oar launch: exec mpirun");
        _exit(127);
    }
    free(args);
    close(err[1]);
    return launch_collect(pid, err[0], nproc, nonce, grace_s);
}

int oar_cmd_launch(int argc, char **argv) {
    int nproc = 0, port = 0, grace = 0, dash = -1;
    const char *hosts = NULL;
    for (int i = 1; i < argc && dash < 0; i++)
        if (!strcmp(argv[i], "--")) dash = i;
    static const cli_flag flags[] = {
        {"--nproc", CLI_COUNT}, {"--hosts", CLI_TEXT}, {"--port", CLI_COUNT}, {"--grace", CLI_COUNT}};
    if (cli_check_flags("launch", dash < 0 ? argc : dash, argv, flags, CLI_N_FLAGS(flags), 0)) {
        usage();
        return 2;
    }
    if (dash < 0 || dash + 1 >= argc) {
        fprintf(stderr, "oar launch: expected '--' and the program to run after the options\n");
        usage();
        return 2;
    }
    for (int i = 1; i + 1 < dash; i++) {
        if (!strcmp(argv[i], "--nproc")) nproc = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hosts")) hosts = argv[++i];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--grace")) grace = atoi(argv[++i]);
    }
    if (nproc < 1 || port > 65000 || grace > 86400) {
        fprintf(stderr, "oar launch: expected --nproc N (N >= 1), --port below 65000 and --grace of at most 86400 s\n");
        usage();
        return 2;
    }
    return oar_cli_launch(nproc, hosts, port, grace, argv + dash + 1);
}
