/* The thread pool: loops cover every index once at any thread count, and the pool can grow
 * and shrink between loops (new workers must not re-run an old loop). */
#include "base/base.h"
#include "test_util.h"

static void mark(void *ctx, int64_t b, int64_t e) {
    int *hits = ctx;
    for (int64_t i = b; i < e; i++) __atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
}

int main(void) {
    enum { N = 100000 };
    static int hits[N];
    const int counts[] = {1, 4, 2, 8, 1, 3, 3, 6};
    for (int round = 0; round < 50; round++) {
        CHECK(oar_set_num_threads(counts[round % 8]) == OAR_OK);
        memset(hits, 0, sizeof hits);
        oar_parallel_for(N, 1000, mark, hits);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += hits[i] != 1;
        CHECK(bad == 0);
    }
    CHECK(oar_get_num_threads() == counts[49 % 8]);
    return test_summary("test_threads");
}
