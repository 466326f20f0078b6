/* oar_grad_set (torch's `p.grad = g`): the leaf keeps g, backward adds into g's storage, bad
 * shapes, dtypes and non-leaves are refused with a message naming both sides, NULL drops it.
 * The thread pool across fork (Python's DataLoader workers): a child forked while the pool's
 * workers run gets a working, serial pool (no deadlock on locks or workers it lacks), can grow
 * it again, and the parent's pool keeps working. */
#include "base/base.h"
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

static void mark(void *ctx, int64_t b, int64_t e) {
    int *hits = ctx;
    for (int64_t i = b; i < e; i++) __atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
}

static bool pool_covers_once(void) {
    enum { N = 50000 };
    static int hits[N];
    memset(hits, 0, sizeof hits);
    oar_parallel_for(N, 100, mark, hits);
    for (int i = 0; i < N; i++)
        if (hits[i] != 1) return false;
    return true;
}

static void grad_set(void) {
    oar_scope_begin(); /* releases every tensor made here */
    int64_t s[2] = {2, 3}, st[2] = {3, 2};
    oar_tensor *p = oar_ones(s, 2, OAR_F32);
    CHECK(oar_set_requires_grad(p, true) == OAR_OK);
    oar_tensor *g = oar_full(s, 2, 0.5, OAR_F32);
    CHECK(oar_grad_set(p, g) == OAR_OK);
    CHECK(oar_grad_get(p) == g);
    /* d(sum(3 p))/dp = 3, added into g itself */
    oar_tensor *three = oar_full(s, 2, 3.0, OAR_F32);
    CHECK(oar_backward(oar_sum(oar_mul(p, three), NULL, 0, false), NULL, false) == OAR_OK);
    CHECK(oar_grad_get(p) == g);
    CHECK_NEAR(t_at(g, 0), 3.5, 1e-6);
    CHECK_NEAR(t_at(g, 5), 3.5, 1e-6);
    /* a transposed view is copied (backward adds in place into a dense buffer) */
    oar_tensor *gt = oar_transpose(oar_full(st, 2, 2.0, OAR_F32), 0, 1);
    CHECK(oar_grad_set(p, gt) == OAR_OK);
    CHECK(oar_grad_get(p) != gt && t_at(oar_grad_get(p), 4) == 2.0);
    CHECK(oar_grad_set(p, oar_ones(st, 2, OAR_F32)) == OAR_ERR_SHAPE);
    CHECK(strstr(oar_last_error(), "expected [2, 3]") && strstr(oar_last_error(), "got [3, 2]"));
    CHECK(oar_grad_set(p, oar_ones(s, 2, OAR_F64)) == OAR_ERR_DTYPE);
    CHECK(strstr(oar_last_error(), "expected f32") && strstr(oar_last_error(), "got f64"));
    CHECK(oar_grad_set(oar_mul(p, three), g) == OAR_ERR_STATE);
    CHECK(strstr(oar_last_error(), "expected a leaf tensor") != NULL);
    CHECK(oar_grad_set(NULL, g) == OAR_ERR_INVALID_ARG);
    CHECK(oar_grad_set(p, NULL) == OAR_OK && oar_grad_get(p) == NULL);
    oar_scope_end();
}

static void fork_pool(void) {
    CHECK(oar_set_num_threads(4) == OAR_OK);
    CHECK(pool_covers_once()); /* the parent's workers exist and have run */
    for (int round = 0; round < 3; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* the child: serial at first, then a pool of its own */
            int ok = pool_covers_once() && oar_get_num_threads() == 1;
            ok = ok && oar_set_num_threads(3) == OAR_OK && pool_covers_once() && pool_covers_once();
            int64_t s[2] = {64, 64};
            oar_tensor *a = oar_randn(s, 2, OAR_F32);
            ok = ok && oar_matmul(a, a) != NULL;
            _exit(ok ? 0 : 3);
        }
        CHECK(pid > 0);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(pool_covers_once());
    }
    CHECK(oar_get_num_threads() == 4);
}

int main(void) {
    grad_set();
    fork_pool();
    return test_summary("test_grad_set_fork");
}
