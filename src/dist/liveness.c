/* The liveness mesh (see liveness.h). Rank r connects to every lower rank and accepts every
 * higher one, so setup cannot deadlock; then one thread polls all sockets, sends 'H' every
 * heartbeat, reads peers' bytes ('H' heartbeat, 'B' goodbye) and judges silence and EOF. */
#include "dist/liveness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct endpoint {
    uint32_t ip;       /* network order */
    uint16_t port;     /* host order */
    char host[64];
} endpoint;

static struct {
    oar_liveness_opts o;
    endpoint *eps;
    char (*ep_text)[96];
    int *fd;                 /* per peer; -1 for self */
    double *last_heard;
    bool *said_bye;
    int *notice_left;        /* per peer: bytes of a 'D' notice still to read (rank, 4 bytes LE) */
    uint32_t *notice_rank;
    pthread_t thread;
    bool running;
    atomic_bool stop;
    atomic_bool ending;      /* every rank passed the final barrier: closing is expected */
    atomic_int claimed;      /* -1, or the first dead rank while its message is being written */
    atomic_int dead;         /* -1 or the first dead rank, set once dead_msg is complete */
    char dead_msg[256];
} L = {.claimed = -1, .dead = -1};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The address peers reach this rank at: loopback when the whole job is on this host, else
 * the first IPv4 address of an interface that is up and not loopback. */
static uint32_t pick_address(bool all_local) {
    uint32_t ip = htonl(INADDR_LOOPBACK);
    if (all_local) return ip;
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0) return ip;
    for (struct ifaddrs *a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
        if (!(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK)) continue;
        ip = ((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr;
        break;
    }
    freeifaddrs(list);
    return ip;
}

/* The first death wins; the survivors are told at once ('D' and the rank), so a rank that
 * sees a peer leave because that peer stopped on the death names the rank that died first. */
static void record_death(int peer, const char *fmt, const char *detail) {
    int expected = -1;
    if (atomic_load(&L.ending)) return;
    if (!atomic_compare_exchange_strong(&L.claimed, &expected, peer)) return;
    snprintf(L.dead_msg, sizeof L.dead_msg, fmt, peer, L.ep_text[peer], detail);
    atomic_store(&L.dead, peer); /* published after the message: readers see it whole */
    unsigned char notice[5] = {'D', (unsigned char)peer, (unsigned char)(peer >> 8), (unsigned char)(peer >> 16),
                               (unsigned char)(peer >> 24)};
    for (int p = 0; p < L.o.size; p++)
        if (L.fd[p] >= 0 && p != peer) send(L.fd[p], notice, sizeof notice, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (L.o.on_death) L.o.on_death();
}

/* A peer's bytes: 'H' heartbeats, 'B' its goodbye, 'D' + rank: a death it saw. */
static void read_bytes(int p, const unsigned char *buf, ssize_t n) {
    for (ssize_t i = 0; i < n; i++) {
        if (L.notice_left[p]) {
            L.notice_rank[p] |= (uint32_t)buf[i] << (8 * (4 - L.notice_left[p]));
            if (--L.notice_left[p] == 0 && (int)L.notice_rank[p] < L.o.size) {
                char detail[64];
                snprintf(detail, sizeof detail, " (rank %d saw it go)", p);
                record_death((int)L.notice_rank[p], "rank %d (%s) died%s", detail);
            }
        } else if (buf[i] == 'B') {
            L.said_bye[p] = true;
        } else if (buf[i] == 'D') {
            L.notice_left[p] = 4;
            L.notice_rank[p] = 0;
        }
    }
}

static void *liveness_main(void *arg) {
    (void)arg;
    int n = L.o.size;
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    if (!pf) return NULL;
    double last_sent = 0, timeout = L.o.timeout_ms / 1000.0, beat = L.o.heartbeat_ms / 1000.0;
    while (!atomic_load(&L.stop)) {
        double t = now_s();
        if (t - last_sent >= beat) {
            for (int p = 0; p < n; p++)
                if (L.fd[p] >= 0) send(L.fd[p], "H", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            last_sent = t;
        }
        int np = 0;
        for (int p = 0; p < n; p++)
            if (L.fd[p] >= 0) pf[np++] = (struct pollfd){.fd = L.fd[p], .events = POLLIN};
        poll(pf, (nfds_t)np, L.o.heartbeat_ms / 2 + 1);
        t = now_s();
        for (int p = 0; p < n; p++) {
            if (L.fd[p] < 0) continue;
            unsigned char buf[256];
            ssize_t got = recv(L.fd[p], buf, sizeof buf, MSG_DONTWAIT);
            if (got > 0) {
                L.last_heard[p] = t;
                read_bytes(p, buf, got);
            } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                close(L.fd[p]);
                L.fd[p] = -1;
                if (!L.said_bye[p])
                    record_death(p, "rank %d (%s) died: its liveness connection closed without a goodbye "
                                    "(the process was killed, crashed or exited early)%s", "");
            } else if (!L.said_bye[p] && t - L.last_heard[p] > timeout) {
                char detail[96];
                snprintf(detail, sizeof detail, " for %.0f ms (peer timeout %d ms, OAR_DIST_PEER_TIMEOUT_MS)",
                         1000.0 * (t - L.last_heard[p]), L.o.timeout_ms);
                record_death(p, "rank %d (%s) is unresponsive: no heartbeat%s", detail);
            }
        }
    }
    free(pf);
    return NULL;
}

static oar_status fail(const char *what) {
    return oar_error(OAR_ERR_IO, "dist_init: liveness channel: %s failed (%s)", what, strerror(errno));
}

static int connect_to(const endpoint *e, double deadline) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(e->port)};
    a.sin_addr.s_addr = e->ip;
    while (now_s() < deadline) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
        close(fd);
        usleep(20000);
    }
    return -1;
}

static bool write_all(int fd, const void *p, size_t n) {
    return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n;
}

static bool read_all(int fd, void *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

static oar_status build_mesh(int lfd) {
    int n = L.o.size, me = L.o.rank;
    double deadline = now_s() + 30.0;
    for (int p = 0; p < me; p++) {
        int fd = connect_to(&L.eps[p], deadline);
        if (fd < 0)
            return oar_error(OAR_ERR_IO, "dist_init: liveness channel: could not connect to rank %d at %s within "
                                         "30 s (%s); is a firewall between the hosts?", p, L.ep_text[p], strerror(errno));
        int32_t id = me;
        if (!write_all(fd, &id, sizeof id)) return fail("sending the rank");
        L.fd[p] = fd;
    }
    for (int k = me + 1; k < n; k++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) return fail("accept");
        int32_t id = -1;
        if (!read_all(fd, &id, sizeof id) || id <= me || id >= n || L.fd[id] >= 0) {
            close(fd);
            return oar_error(OAR_ERR_IO, "dist_init: liveness channel: a connection did not identify as a higher "
                                         "rank (got %d); is another job using port %d?", (int)id, L.eps[me].port);
        }
        L.fd[id] = fd;
    }
    for (int p = 0; p < n; p++) {
        if (L.fd[p] < 0) continue;
        int one = 1;
        setsockopt(L.fd[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        L.last_heard[p] = now_s();
    }
    return OAR_OK;
}

oar_status oar_liveness_start(const oar_liveness_opts *o) {
    L.o = *o;
    int n = o->size;
    atomic_store(&L.dead, -1);
    atomic_store(&L.claimed, -1);
    atomic_store(&L.stop, false);
    atomic_store(&L.ending, false);
    L.eps = calloc((size_t)n, sizeof *L.eps);
    L.ep_text = calloc((size_t)n, sizeof *L.ep_text);
    L.fd = malloc(sizeof(int) * (size_t)n);
    L.last_heard = calloc((size_t)n, sizeof(double));
    L.said_bye = calloc((size_t)n, sizeof(bool));
    L.notice_left = calloc((size_t)n, sizeof(int));
    L.notice_rank = calloc((size_t)n, sizeof(uint32_t));
    if (!L.eps || !L.ep_text || !L.fd || !L.last_heard || !L.said_bye || !L.notice_left || !L.notice_rank)
        return oar_error(OAR_ERR_OOM, "dist_init: liveness channel: out of memory");
    for (int p = 0; p < n; p++) L.fd[p] = -1;

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) return fail("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    a.sin_port = htons((uint16_t)(o->port_base ? o->port_base + o->local_rank : 0));
    socklen_t len = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) != 0) {
        oar_status st = oar_error(OAR_ERR_IO, "dist_init: liveness channel: cannot listen on port %d (%s); set "
                                  "OAR_DIST_PORT to a free base port, or unset it for any free port",
                                  ntohs(a.sin_port), strerror(errno));
        close(lfd);
        return st;
    }
    if (listen(lfd, n) != 0 || getsockname(lfd, (struct sockaddr *)&a, &len) != 0) {
        close(lfd);
        return fail("listen");
    }
    endpoint mine = {.port = ntohs(a.sin_port)};
    gethostname(mine.host, sizeof mine.host - 1);
    oar_status st = o->allgather(&mine, L.eps, sizeof mine);
    bool all_local = true;
    for (int p = 0; st == OAR_OK && p < n; p++) all_local &= strcmp(L.eps[p].host, mine.host) == 0;
    mine.ip = pick_address(all_local);
    if (st == OAR_OK) st = o->allgather(&mine, L.eps, sizeof mine); /* again, with the address */
    for (int p = 0; st == OAR_OK && p < n; p++) {
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &L.eps[p].ip, ip, sizeof ip);
        snprintf(L.ep_text[p], sizeof L.ep_text[p], "%s:%d on %s", ip, L.eps[p].port, L.eps[p].host);
    }
    if (st == OAR_OK) st = build_mesh(lfd);
    close(lfd);
    if (st != OAR_OK) {
        oar_liveness_stop();
        return st;
    }
    if (pthread_create(&L.thread, NULL, liveness_main, NULL) != 0) {
        oar_liveness_stop();
        return oar_error(OAR_ERR_INTERNAL, "dist_init: could not start the liveness thread");
    }
    L.running = true;
    return OAR_OK;
}

void oar_liveness_stop(void) {
    if (L.running) {
        atomic_store(&L.stop, true);
        pthread_join(L.thread, NULL);
        L.running = false;
    }
    for (int p = 0; L.fd && p < L.o.size; p++)
        if (L.fd[p] >= 0) {
            send(L.fd[p], "B", 1, MSG_NOSIGNAL);
            shutdown(L.fd[p], SHUT_WR);
        }
    for (int p = 0; L.fd && p < L.o.size; p++)
        if (L.fd[p] >= 0) close(L.fd[p]);
    free(L.eps);
    free(L.ep_text);
    free(L.fd);
    free(L.last_heard);
    free(L.said_bye);
    free(L.notice_left);
    free(L.notice_rank);
    L.notice_left = NULL;
    L.notice_rank = NULL;
    L.eps = NULL;
    L.ep_text = NULL;
    L.fd = NULL;
    L.last_heard = NULL;
    L.said_bye = NULL;
}

void oar_liveness_ending(void) { atomic_store(&L.ending, true); }

int oar_liveness_dead(char *msg, size_t size) {
    int d = atomic_load(&L.dead);
    if (d >= 0 && msg) snprintf(msg, size, "%s", L.dead_msg);
    return d;
}

const char *oar_liveness_endpoint(int r) {
    return L.ep_text && r >= 0 && r < L.o.size ? L.ep_text[r] : "";
}
