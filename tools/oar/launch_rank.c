/* `oar launch-rank NONCE -- PROGRAM ARGS` (internal to oar launch): mpirun starts this as each
 * rank. It runs PROGRAM as its child and, when PROGRAM ends, writes one status line to stderr,
 * which oar launch takes out of the job's output (launch_status.c). oar launch needs it because
 * it runs the job with Open MPI's recovery on, so that a dead rank does not get the survivors torn
 * down before they report it, and then mpirun's own status is 0 whatever the ranks did. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

static volatile sig_atomic_t g_child;
static const int g_forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (int)(sizeof g_forwarded / sizeof *g_forwarded)

static void forward(int sig) {
    if (g_child > 0) kill((pid_t)g_child, sig);
}

/* Waits (at most 2 s) until whoever reads our stderr has taken everything PROGRAM wrote, so the
 * status line, one write below PIPE_BUF, is read whole and never split around another rank's
 * output. FIONREAD on a pipe's write end gives the bytes still in it. */
static void drain_stderr(void) {
    for (int i = 0; i < 2000; i++) {
        int n = 0;
        if (ioctl(STDERR_FILENO, FIONREAD, &n) != 0 || n <= 0) return;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

static const char *rank_name(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    return r && *r ? r : "-1";
}

int oar_cmd_launch_rank(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") || strspn(argv[1], "0123456789abcdef") != strlen(argv[1])) {
        fprintf(stderr, "oar launch-rank: this is how oar launch starts each rank, not a command to run by hand; "
                        "expected 'launch-rank NONCE -- PROGRAM [ARGS...]'\n");
        return 2;
    }
#ifdef __linux__
    /* mpirun gone (killed, or ended without stopping us): SIGTERM, which goes on to PROGRAM. The
     * signal follows the thread that forked us, Open MPI's event loop, which lives as long as the job */
    pid_t launcher = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) return 128 + SIGTERM;
#endif
    signal(SIGPIPE, SIG_IGN); /* our stderr may be gone when the status is written */
    /* the handlers forward to the child; signals wait until its id is known */
    sigset_t block, old;
    sigemptyset(&block);
    for (int k = 0; k < N_FORWARDED; k++) sigaddset(&block, g_forwarded[k]);
    sigprocmask(SIG_BLOCK, &block, &old);
    struct sigaction sa = {.sa_handler = forward, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < N_FORWARDED; k++) sigaction(g_forwarded[k], &sa, NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        for (int k = 0; k < N_FORWARDED; k++) sigaction(g_forwarded[k], &dfl, NULL);
        sigaction(SIGPIPE, &dfl, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
#ifdef __linux__
        /* PROGRAM goes when this wrapper does (say, SIGKILLed), as a rank would */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(128 + SIGKILL);
#endif
        execvp(argv[3], argv + 3);
        int e = errno;
        fprintf(stderr, "oar launch: rank %s cannot run '%s': %s\n", rank_name(), argv[3], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    if (pid < 0) {
        fprintf(stderr, "oar launch: rank %s cannot start '%s': fork: %s\n", rank_name(), argv[3], strerror(errno));
        return 1;
    }
    g_child = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    struct timespec ended; /* the launcher ranks failures by when they happened, not by arrival */
    clock_gettime(CLOCK_REALTIME, &ended);
    bool sig = WIFSIGNALED(status);
    int value = sig ? WTERMSIG(status) : WEXITSTATUS(status);
    drain_stderr();
    char line[160];
    int len = snprintf(line, sizeof line, "%coar-launch-status %s %s %s %d %lld\n", LAUNCH_STATUS_MARK, argv[1],
                       rank_name(), sig ? "signal" : "exit", value,
                       (long long)ended.tv_sec * 1000000 + ended.tv_nsec / 1000);
    if (len > 0 && len < (int)sizeof line && write(STDERR_FILENO, line, (size_t)len) < 0) return 1;
    return sig ? 128 + value : value;
}
