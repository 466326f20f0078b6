/* oar launch's side of the ranks' status lines (launch_rank.c): relays the job's stderr without
 * them, gives the other ranks a grace period after the first failure, and computes the job's
 * exit status from what each rank reported (mpirun's own is 0 under Open MPI's recovery). */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char prefix[64]; /* MARK "oar-launch-status NONCE " */
    size_t prefix_len;
    char pending[192]; /* a line that may be a status line, held back until it ends */
    size_t n_pending;
    int nproc, *status, *is_signal, *known;
    long long *ended_us; /* when each rank ended (realtime, as its host saw it) */
    int first_failed;    /* the failed rank that ended first, -1 while none */
    double failed_at;    /* when the first failure arrived: seconds, monotonic */
} collector;

static volatile sig_atomic_t g_stop_signal;

static void on_signal(int sig) {
    g_stop_signal = sig;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void put(const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* stderr gone: keep collecting the statuses anyway */
        p += w, n -= (size_t)w;
    }
}

static void describe(const collector *c, int r, char *buf, size_t size) {
    if (!c->known[r])
        snprintf(buf, size, "rank %d gave no status (mpirun ended first, its host was lost, or its oar launch-rank "
                            "was killed)", r);
    else if (c->is_signal[r])
        snprintf(buf, size, "rank %d was killed by signal %d (%s)", r, c->status[r], strsignal(c->status[r]));
    else
        snprintf(buf, size, "rank %d exited with %d", r, c->status[r]);
}

static void record(collector *c, const char *line) {
    int r = -1, v = 0;
    long long t = 0;
    char kind[16];
    if (sscanf(line + c->prefix_len, "%d %15s %d %lld", &r, kind, &v, &t) != 4 || r < 0 || r >= c->nproc) {
        put(line, strlen(line)); /* not ours after all */
        return;
    }
    c->known[r] = 1;
    c->is_signal[r] = !strcmp(kind, "signal");
    c->status[r] = v;
    c->ended_us[r] = t;
    if (v == 0 && !c->is_signal[r]) return;
    if (c->first_failed < 0) c->failed_at = now_s(); /* the grace period starts */
    if (c->first_failed < 0 || t < c->ended_us[c->first_failed]) c->first_failed = r;
}

/* Passes a chunk of the job's stderr on, holding back what may be a status line until it ends. */
static void feed(collector *c, const char *p, size_t n) {
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (!c->n_pending) {
            if (p[i] != LAUNCH_STATUS_MARK) continue;
            put(p + start, i - start);
        }
        c->pending[c->n_pending++] = p[i];
        start = i + 1;
        size_t k = c->n_pending;
        bool differs = k <= c->prefix_len && c->pending[k - 1] != c->prefix[k - 1];
        if (differs || k == sizeof c->pending - 1) { /* someone else's bytes: pass them on */
            put(c->pending, k);
            c->n_pending = 0;
        } else if (p[i] == '\n') {
            c->pending[k] = 0;
            record(c, c->pending);
            c->n_pending = 0;
        }
    }
    if (!c->n_pending) put(p + start, n - start);
}

/* The job's status: the first failure's (exit code, or 128 + signal), else 128 + the signal that
 * stopped oar launch, else mpirun's own when not 0, else 1 when a rank gave no status, else 0;
 * with a line on stderr for each rank that failed or gave no status. */
static int job_status(const collector *c, int mpirun_status, int stop_signal) {
    int missing = 0, failed = 0;
    for (int r = 0; r < c->nproc; r++) {
        missing += !c->known[r];
        failed += c->known[r] && (c->status[r] != 0 || c->is_signal[r]);
    }
    if (!failed && !missing) return mpirun_status;
    char buf[256];
    for (int r = 0; r < c->nproc; r++) {
        if (c->known[r] && !c->status[r] && !c->is_signal[r]) continue;
        describe(c, r, buf, sizeof buf);
        fprintf(stderr, "oar launch: %s\n", buf);
    }
    if (failed) {
        int r = c->first_failed;
        return c->is_signal[r] ? 128 + c->status[r] : c->status[r];
    }
    if (stop_signal) return 128 + stop_signal;
    return mpirun_status ? mpirun_status : 1;
}

int launch_collect(int mpirun, int err_fd, int nproc, const char *nonce, int grace_s) {
    collector c = {.nproc = nproc, .first_failed = -1};
    c.prefix_len = (size_t)snprintf(c.prefix, sizeof c.prefix, "%coar-launch-status %s ", LAUNCH_STATUS_MARK, nonce);
    c.status = calloc((size_t)nproc, sizeof(int));
    c.is_signal = calloc((size_t)nproc, sizeof(int));
    c.known = calloc((size_t)nproc, sizeof(int));
    c.ended_us = calloc((size_t)nproc, sizeof(long long));
    /* a signal to oar launch stops the job through mpirun, which ends its ranks */
    struct sigaction sa = {.sa_handler = on_signal}, ign = {.sa_handler = SIG_IGN}, old[4];
    sigemptyset(&sa.sa_mask);
    sigemptyset(&ign.sa_mask);
    const int sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE}; /* SIGPIPE: a closed stderr ends no job */
    for (int k = 0; k < 4; k++) sigaction(sigs[k], k < 3 ? &sa : &ign, &old[k]);
    bool stopping = false;
    char buf[4096];
    for (bool open = c.status && c.is_signal && c.known && c.ended_us; open;) {
        if (g_stop_signal && !stopping) {
            fprintf(stderr, "oar launch: %s; stopping the job\n", strsignal(g_stop_signal));
            kill(mpirun, SIGTERM);
            stopping = true;
        }
        int timeout = -1;
        if (c.first_failed >= 0 && !stopping) {
            double left = c.failed_at + grace_s - now_s();
            if (left <= 0) {
                char what[256];
                describe(&c, c.first_failed, what, sizeof what);
                fprintf(stderr, "oar launch: %s, and the job has not ended %d s later; stopping it (--grace)\n",
                        what, grace_s);
                kill(mpirun, SIGTERM);
                stopping = true;
            } else {
                timeout = (int)(left * 1000) + 1;
            }
        }
        struct pollfd pfd = {.fd = err_fd, .events = POLLIN};
        int ready = poll(&pfd, 1, timeout);
        if (ready < 0 && errno != EINTR) break;
        if (ready <= 0) continue;
        ssize_t n = read(err_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) open = false;
        else feed(&c, buf, (size_t)n);
    }
    if (c.n_pending) put(c.pending, c.n_pending);
    close(err_fd);
    int status = 0;
    while (waitpid(mpirun, &status, 0) < 0) {
        if (errno != EINTR) break;
        if (g_stop_signal && !stopping) kill(mpirun, SIGTERM), stopping = true;
    }
    for (int k = 0; k < 4; k++) sigaction(sigs[k], &old[k], NULL);
    int mpirun_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    int rc = c.status && c.is_signal && c.known && c.ended_us ? job_status(&c, mpirun_status, g_stop_signal) : 1;
    free(c.status);
    free(c.is_signal);
    free(c.known);
    free(c.ended_us);
    return rc;
}
