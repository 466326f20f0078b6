/* The batching loader: every sample once per epoch, order from (seed, epoch) only, identical
 * batches with 0, 1 or 4 workers, transforms, wait-time accounting, worker errors, stopping
 * mid-epoch, and the in-memory and custom datasets. File readers: test_data_files.c. */
#include "test_util.h"

#include <time.h>

/* x[i] = {i, -i} (f32), y[i] = i (i64): a batch says which samples it holds. */
static oar_dataset *index_dataset(int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)(2 * n));
    int64_t *y = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        x[2 * i] = (float)i;
        x[2 * i + 1] = -(float)i;
        y[i] = i;
    }
    oar_tensor *tx = oar_from_data(x, (int64_t[]){n, 2}, 2, OAR_F32);
    oar_tensor *ty = oar_from_data(y, &n, 1, OAR_I64);
    oar_dataset *d = oar_dataset_tensors(tx, ty);
    oar_release(tx); /* the dataset keeps its own references */
    oar_release(ty);
    free(x);
    free(y);
    return d;
}

/* Runs one epoch; order[] gets the targets in delivery order. Returns how many, or -1. */
static int64_t run_epoch(oar_loader *l, int64_t epoch, int64_t *order, int64_t cap, int64_t batch,
                         bool drop_last, int64_t n) {
    if (oar_loader_start_epoch(l, epoch) != OAR_OK) return -1;
    int64_t count = 0, batches = 0;
    oar_tensor *x, *y;
    oar_status st;
    while (oar_loader_next(l, &x, &y, &st)) {
        int64_t b = oar_size(y, 0);
        bool last = batches == oar_loader_num_batches(l) - 1;
        CHECK(b == batch || (!drop_last && last && b == n % batch));
        CHECK(oar_ndim(x) == 2 && oar_size(x, 0) == b && oar_size(x, 1) == 2 && oar_is_contiguous(x));
        const float *xp = oar_data(x);
        const int64_t *yp = oar_data(y);
        for (int64_t j = 0; j < b && count < cap; j++) {
            CHECK(xp[2 * j] == (float)yp[j] && xp[2 * j + 1] == -(float)yp[j]); /* pairs stay together */
            order[count++] = yp[j];
        }
        batches++;
        oar_release(x);
        oar_release(y);
    }
    CHECK(st == OAR_OK);
    CHECK(batches == oar_loader_num_batches(l));
    return count;
}

static void test_every_sample_once(void) {
    const int64_t sizes[] = {10, 12, 1};
    const int64_t batches[] = {1, 3, 4, 5, 10, 12, 13};
    for (int si = 0; si < 3; si++) {
        int64_t n = sizes[si];
        oar_dataset *d = index_dataset(n);
        CHECK(d && oar_dataset_size(d) == n);
        for (int bi = 0; bi < 7; bi++)
            for (int mode = 0; mode < 8; mode++) {
                int64_t B = batches[bi];
                bool shuffle = mode & 1, drop_last = mode & 2;
                oar_loader_opts o = {.batch_size = B, .shuffle = shuffle, .drop_last = drop_last,
                                     .seed = 11, .workers = (mode & 4) ? 2 : 0};
                oar_loader *l = oar_loader_new(d, &o);
                CHECK(l != NULL);
                if (!l) continue;
                int64_t want = drop_last ? n / B * B : n;
                CHECK(oar_loader_num_batches(l) == (drop_last ? n / B : (n + B - 1) / B));
                for (int64_t epoch = 0; epoch < 2; epoch++) {
                    int64_t order[16], seen[16] = {0};
                    int64_t got = run_epoch(l, epoch, order, 16, B, drop_last, n);
                    CHECK(got == want);
                    for (int64_t k = 0; k < got; k++) {
                        CHECK(order[k] >= 0 && order[k] < n);
                        if (order[k] >= 0 && order[k] < n) seen[order[k]]++;
                        if (!shuffle) CHECK(order[k] == k);
                    }
                    int64_t once = 0;
                    for (int64_t i = 0; i < n; i++) {
                        CHECK(seen[i] <= 1);
                        once += seen[i];
                    }
                    CHECK(once == want);
                }
                oar_loader_free(l);
            }
        oar_dataset_free(d);
    }
}

static void epoch_order(oar_dataset *d, uint64_t seed, int64_t epoch, int64_t *order) {
    oar_loader_opts o = {.batch_size = 7, .shuffle = true, .seed = seed};
    oar_loader *l = oar_loader_new(d, &o);
    run_epoch(l, epoch, order, 100, 7, false, 100);
    oar_loader_free(l);
}

static void test_order_determinism(void) {
    oar_dataset *d = index_dataset(100);
    int64_t a[100], b[100], c[100], e[100];
    epoch_order(d, 5, 0, a);
    epoch_order(d, 5, 0, b);
    CHECK(memcmp(a, b, sizeof a) == 0);   /* same (seed, epoch): same order */
    epoch_order(d, 5, 1, c);
    CHECK(memcmp(a, c, sizeof a) != 0);   /* a new epoch reshuffles */
    epoch_order(d, 6, 0, e);
    CHECK(memcmp(a, e, sizeof a) != 0);   /* and so does another seed */
    int64_t fixed = 0;
    for (int i = 0; i < 100; i++) fixed += a[i] == i;
    CHECK(fixed < 10);                    /* a real shuffle, not nearly the identity */
    /* one loader going back to epoch 0 after epoch 1 repeats epoch 0 */
    oar_loader_opts o = {.batch_size = 7, .shuffle = true, .seed = 5};
    oar_loader *l = oar_loader_new(d, &o);
    run_epoch(l, 1, b, 100, 7, false, 100);
    CHECK(memcmp(b, c, sizeof b) == 0);
    run_epoch(l, 0, b, 100, 7, false, 100);
    CHECK(memcmp(a, b, sizeof a) == 0);
    oar_loader_free(l);
    oar_dataset_free(d);
}

/* Concatenates every batch's bytes of epochs 0 and 1 (inputs then targets). */
static unsigned char *digest(oar_dataset *d, const oar_loader_opts *o, size_t *size) {
    oar_loader *l = oar_loader_new(d, o);
    CHECK(l != NULL);
    if (!l) return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        CHECK(oar_loader_start_epoch(l, epoch) == OAR_OK);
        oar_tensor *x, *y;
        oar_status st;
        while (oar_loader_next(l, &x, &y, &st)) {
            size_t bx = (size_t)oar_numel(x) * oar_dtype_size(oar_dtype_of(x));
            size_t by = (size_t)oar_numel(y) * oar_dtype_size(oar_dtype_of(y));
            while (n + bx + by > cap) buf = realloc(buf, cap *= 2);
            memcpy(buf + n, oar_data(x), bx);
            memcpy(buf + n + bx, oar_data(y), by);
            n += bx + by;
            oar_release(x);
            oar_release(y);
        }
        CHECK(st == OAR_OK);
    }
    oar_loader_free(l);
    *size = n;
    return buf;
}

static oar_dataset *image_dataset(int64_t n, int64_t c, int64_t h, int64_t w) {
    oar_manual_seed(42);
    oar_tensor *x = oar_rand((int64_t[]){n, c, h, w}, 4, OAR_F32);
    oar_tensor *y = oar_arange(0, (double)n, 1, OAR_I64);
    oar_dataset *d = oar_dataset_tensors(x, y);
    oar_release(x);
    oar_release(y);
    return d;
}

static void test_workers_identical(void) {
    oar_dataset *d = image_dataset(203, 3, 6, 5);
    oar_transform tf[3] = {
        {.kind = OAR_TF_RANDOM_CROP, .padding = 2},
        {.kind = OAR_TF_HFLIP, .p = 0.5},
        {.kind = OAR_TF_NORMALIZE, .n_channels = 3, .mean = {0.5, 0.4, 0.3}, .std = {0.2, 0.25, 0.3}},
    };
    oar_loader_opts o = {.batch_size = 16, .shuffle = true, .seed = 3, .transforms = tf, .n_transforms = 3};
    size_t n0, n;
    unsigned char *ref = digest(d, &o, &n0);
    const int workers[] = {1, 4, 4, 4, 3};
    const int prefetch[] = {0, 0, 1, 16, 2};
    for (int k = 0; k < 5; k++) {
        o.workers = workers[k];
        o.prefetch = prefetch[k];
        unsigned char *got = digest(d, &o, &n);
        CHECK(ref && got && n == n0 && memcmp(ref, got, n) == 0);
        free(got);
    }
    free(ref);
    oar_dataset_free(d);
}

/* All inputs of one epoch, as one f32 array. */
static float *epoch_inputs(oar_dataset *d, const oar_loader_opts *o, int64_t epoch) {
    oar_loader *l = oar_loader_new(d, o);
    CHECK(l != NULL);
    if (!l) return NULL;
    oar_loader_start_epoch(l, epoch);
    float *out = NULL;
    size_t n = 0;
    oar_tensor *x, *y;
    while (oar_loader_next(l, &x, &y, NULL)) {
        out = realloc(out, sizeof(float) * (n + (size_t)oar_numel(x)));
        memcpy(out + n, oar_data(x), sizeof(float) * (size_t)oar_numel(x));
        n += (size_t)oar_numel(x);
        oar_release(x);
        oar_release(y);
    }
    oar_loader_free(l);
    return out;
}

static void test_normalize(void) {
    oar_dataset *d = image_dataset(10, 3, 4, 4);
    oar_tensor *raw, *t;
    oar_transform tf = {.kind = OAR_TF_NORMALIZE, .n_channels = 3, .mean = {0.5, 0.25, -1.0},
                        .std = {2.0, 0.3, 4.0}};
    oar_loader_opts o = {.batch_size = 4, .transforms = &tf, .n_transforms = 1};
    float *got = epoch_inputs(d, &o, 0);
    bool exact = got != NULL;
    for (int64_t i = 0; i < 10 && got; i++) {
        oar_dataset_get(d, i, &raw, &t);
        const float *r = oar_data(raw);
        for (int64_t k = 0; k < 48; k++) {
            int c = (int)(k / 16);
            float want = (r[k] - (float)tf.mean[c]) / (float)tf.std[c];
            exact = exact && got[i * 48 + k] == want;
        }
        oar_release(raw);
        oar_release(t);
    }
    CHECK(exact);
    free(got);
    /* one channel's statistics apply to every channel; n_channels 0 means 1 */
    oar_transform one = {.kind = OAR_TF_NORMALIZE, .mean = {0.5}, .std = {0.5}};
    o.transforms = &one;
    got = epoch_inputs(d, &o, 0);
    oar_dataset_get(d, 9, &raw, &t);
    CHECK(got && got[9 * 48 + 40] == (((const float *)oar_data(raw))[40] - 0.5f) / 0.5f);
    oar_release(raw);
    oar_release(t);
    free(got);
    oar_dataset_free(d);
}

static void test_flip(void) {
    oar_dataset *d = image_dataset(64, 2, 3, 5);
    oar_transform tf = {.kind = OAR_TF_HFLIP, .p = 1.0};
    oar_loader_opts o = {.batch_size = 64, .seed = 9, .transforms = &tf, .n_transforms = 1};
    float *always = epoch_inputs(d, &o, 0);
    tf.p = 0.0;
    float *never = epoch_inputs(d, &o, 0);
    tf.p = 0.5;
    float *half = epoch_inputs(d, &o, 0), *half2 = epoch_inputs(d, &o, 0), *half3 = epoch_inputs(d, &o, 1);
    bool rev = true, same = true;
    int flipped = 0, kept = 0, both = 0;
    for (int64_t i = 0; i < 64 && always && never && half; i++) {
        oar_tensor *raw, *t;
        oar_dataset_get(d, i, &raw, &t);
        const float *r = oar_data(raw);
        bool is_flip = true, is_same = true;
        for (int64_t row = 0; row < 6; row++)
            for (int64_t c = 0; c < 5; c++) {
                float src = r[row * 5 + c], mirrored = r[row * 5 + 4 - c];
                rev = rev && always[i * 30 + row * 5 + c] == mirrored;  /* each row reversed */
                same = same && never[i * 30 + row * 5 + c] == src;
                is_flip = is_flip && half[i * 30 + row * 5 + c] == mirrored;
                is_same = is_same && half[i * 30 + row * 5 + c] == src;
            }
        flipped += is_flip;
        kept += is_same;
        both += is_flip || is_same;
        oar_release(raw);
        oar_release(t);
    }
    CHECK(rev && same);
    CHECK(both == 64 && flipped > 10 && kept > 10);      /* p = 0.5 flips some, not all */
    CHECK(half2 && memcmp(half, half2, sizeof(float) * 64 * 30) == 0); /* fixed per (seed, epoch) */
    CHECK(half3 && memcmp(half, half3, sizeof(float) * 64 * 30) != 0); /* redrawn next epoch */
    free(always);
    free(never);
    free(half);
    free(half2);
    free(half3);
    oar_dataset_free(d);
}

static void test_crop(void) {
    /* distinct non-zero pixels, so a zero can only be padding */
    const int64_t n = 40, H = 5, W = 6, P = 2;
    float *x = malloc(sizeof(float) * (size_t)(n * H * W));
    for (int64_t k = 0; k < n * H * W; k++) x[k] = (float)(k + 1);
    oar_tensor *tx = oar_from_data(x, (int64_t[]){n, 1, H, W}, 4, OAR_F32);
    oar_tensor *ty = oar_zeros(&n, 1, OAR_I64);
    oar_dataset *d = oar_dataset_tensors(tx, ty);
    oar_release(tx);
    oar_release(ty);
    oar_transform tf = {.kind = OAR_TF_RANDOM_CROP, .padding = P};
    oar_loader_opts o = {.batch_size = 8, .seed = 21, .transforms = &tf, .n_transforms = 1};
    float *a = epoch_inputs(d, &o, 0), *b = epoch_inputs(d, &o, 0), *c = epoch_inputs(d, &o, 3);
    CHECK(a && b && c && memcmp(a, b, sizeof(float) * (size_t)(n * H * W)) == 0);
    CHECK(a && c && memcmp(a, c, sizeof(float) * (size_t)(n * H * W)) != 0);
    int shifts_seen[5][5] = {{0}};
    int matched = 0;
    for (int64_t i = 0; i < n && a; i++) {
        const float *src = x + i * H * W, *out = a + i * H * W;
        for (int64_t dy = -P; dy <= P; dy++)
            for (int64_t dx = -P; dx <= P; dx++) {
                bool ok = true;
                for (int64_t r = 0; r < H; r++)
                    for (int64_t q = 0; q < W; q++) {
                        int64_t sr = r + dy, sq = q + dx;
                        float want = sr >= 0 && sr < H && sq >= 0 && sq < W ? src[sr * W + sq] : 0.0f;
                        ok = ok && out[r * W + q] == want;
                    }
                if (ok) {
                    matched++;
                    shifts_seen[dy + P][dx + P] = 1;
                }
            }
    }
    CHECK(matched == n); /* each output is the padded image cropped at exactly one place */
    int distinct = 0;
    for (int k = 0; k < 25; k++) distinct += shifts_seen[k / 5][k % 5];
    CHECK(distinct >= 8);
    free(a);
    free(b);
    free(c);
    free(x);
    oar_dataset_free(d);
}

static void test_transform_errors(void) {
    oar_dataset *img = image_dataset(4, 3, 4, 4), *vec = index_dataset(4);
    oar_tensor *xi = oar_zeros((int64_t[]){4, 2, 2}, 3, OAR_I32), *yi = oar_zeros((int64_t[]){4}, 1, OAR_I64);
    oar_dataset *ints = oar_dataset_tensors(xi, yi);
    oar_transform norm2 = {.kind = OAR_TF_NORMALIZE, .n_channels = 2, .mean = {0, 0}, .std = {1, 1}};
    oar_transform zero_std = {.kind = OAR_TF_NORMALIZE, .n_channels = 1, .std = {0}};
    oar_transform crop = {.kind = OAR_TF_RANDOM_CROP, .padding = 1};
    oar_transform bad_pad = {.kind = OAR_TF_RANDOM_CROP, .padding = -1};
    oar_transform flip = {.kind = OAR_TF_HFLIP, .p = 1.5};
    oar_transform odd = {.kind = (oar_transform_kind)7};
    oar_loader_opts o = {.n_transforms = 1};
    o.transforms = &norm2;
    CHECK_ERR(oar_loader_new(img, &o), "expected n_channels 1 or 3");
    o.transforms = &zero_std;
    CHECK_ERR(oar_loader_new(img, &o), "finite non-zero std");
    o.transforms = &crop;
    CHECK_ERR(oar_loader_new(vec, &o), "at least 2 dims (..., H, W), got 1");
    o.transforms = &bad_pad;
    CHECK_ERR(oar_loader_new(img, &o), "0 <= padding");
    o.transforms = &flip;
    CHECK_ERR(oar_loader_new(img, &o), "probability 0 <= p <= 1, got 1.5");
    o.transforms = &odd;
    CHECK_ERR(oar_loader_new(img, &o), "unknown kind 7");
    o.transforms = &crop;
    CHECK_ERR(oar_loader_new(ints, &o), "transforms expect f32 inputs, got i32");
    o.transforms = NULL;
    CHECK_ERR(oar_loader_new(img, &o), "NULL array");
    oar_loader_opts bad = {.batch_size = -1};
    CHECK_ERR(oar_loader_new(img, &bad), "batch_size >= 0");
    bad = (oar_loader_opts){.workers = -2};
    CHECK_ERR(oar_loader_new(img, &bad), "0 <= workers");
    bad = (oar_loader_opts){.prefetch = -1};
    CHECK_ERR(oar_loader_new(img, &bad), "0 <= prefetch");
    CHECK_ERR(oar_loader_new(NULL, NULL), "dataset is NULL");
    oar_release(xi);
    oar_release(yi);
    oar_dataset_free(img);
    oar_dataset_free(vec);
    oar_dataset_free(ints);
}

/* ---- custom datasets: slow ones and failing ones */
typedef struct slow_ctx {
    long sleep_ns;
    int64_t fail_at; /* -1: never */
} slow_ctx;

static oar_status slow_get(void *user, int64_t i, void *input, void *target, char *msg, size_t cap) {
    slow_ctx *c = user;
    if (c->sleep_ns) nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = c->sleep_ns}, NULL);
    if (i == c->fail_at) {
        snprintf(msg, cap, "disk on fire while reading record %lld", (long long)i);
        return OAR_ERR_IO;
    }
    float *x = input;
    x[0] = (float)i;
    x[1] = 2.0f * (float)i;
    *(int64_t *)target = i;
    return OAR_OK;
}

static oar_dataset *slow_dataset(slow_ctx *c, int64_t n) {
    oar_dataset_fns f = {.size = n, .input_dtype = OAR_F32, .target_dtype = OAR_I64, .input_ndim = 1,
                         .input_shape = {2}, .target_ndim = 0, .get = slow_get, .user = c};
    return oar_dataset_custom(&f);
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_wait_time(void) {
    slow_ctx c = {.sleep_ns = 1000000, .fail_at = -1}; /* 1 ms per sample */
    oar_dataset *d = slow_dataset(&c, 24);
    /* without workers the caller builds every batch: all of the reading is waiting */
    oar_loader_opts o = {.batch_size = 4};
    oar_loader *l = oar_loader_new(d, &o);
    oar_loader_start_epoch(l, 0);
    CHECK(oar_loader_wait_seconds(l) == 0.0);
    oar_tensor *x, *y;
    int64_t got = 0;
    while (oar_loader_next(l, &x, &y, NULL)) {
        CHECK(((const float *)oar_data(x))[1] == 2.0f * (float)((const int64_t *)oar_data(y))[0]);
        got += oar_size(y, 0);
        oar_release(x);
        oar_release(y);
    }
    double w0 = oar_loader_wait_seconds(l);
    CHECK(got == 24 && w0 >= 0.024);  /* 24 sleeps of at least 1 ms each */
    oar_loader_start_epoch(l, 1);
    CHECK(oar_loader_wait_seconds(l) == 0.0); /* counted per epoch */
    oar_loader_free(l);
    /* with workers and a caller that computes between batches, reading overlaps the compute */
    o.workers = 2;
    l = oar_loader_new(d, &o);
    oar_loader_start_epoch(l, 0);
    double t0 = seconds();
    while (oar_loader_next(l, &x, &y, NULL)) {
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 8000000}, NULL);
        oar_release(x);
        oar_release(y);
    }
    double total = seconds() - t0, w2 = oar_loader_wait_seconds(l);
    CHECK(w2 >= 0.0 && w2 <= total);
    printf("wait: %.4f s with 0 workers; %.4f s of %.4f s with 2 workers and 8 ms compute per batch\n",
           w0, w2, total);
    oar_loader_free(l);
    oar_dataset_free(d);
}

static void test_worker_errors(void) {
    slow_ctx c = {.sleep_ns = 0, .fail_at = 13};
    oar_dataset *d = slow_dataset(&c, 30);
    for (int workers = 0; workers <= 4; workers += 2) {
        oar_loader_opts o = {.batch_size = 4, .workers = workers};
        oar_loader *l = oar_loader_new(d, &o);
        for (int epoch = 0; epoch < 2; epoch++) {
            oar_loader_start_epoch(l, epoch);
            oar_tensor *x, *y;
            oar_status st = OAR_OK;
            int delivered = 0;
            while (oar_loader_next(l, &x, &y, &st)) {
                delivered++;
                oar_release(x);
                oar_release(y);
            }
            CHECK(delivered == 3);  /* batches 0..2 come; batch 3 holds sample 13 */
            CHECK(st == OAR_ERR_IO && x == NULL && y == NULL);
            CHECK(strstr(oar_last_error(), "loader: batch 3: dataset: sample 13: disk on fire") != NULL);
            oar_clear_error();
            CHECK(!oar_loader_next(l, &x, &y, &st) && st == OAR_ERR_IO); /* stays failed */
            CHECK(strstr(oar_last_error(), "disk on fire") != NULL);
        }
        oar_loader_free(l);
    }
    oar_dataset_free(d);
    /* a failure without a message still names the status */
    oar_dataset_fns f = {.size = 2, .input_dtype = OAR_F32, .target_dtype = OAR_I64, .get = slow_get,
                         .user = &(slow_ctx){.fail_at = 0}, .input_ndim = 1, .input_shape = {2}};
    d = oar_dataset_custom(&f);
    oar_tensor *x, *y;
    CHECK(oar_dataset_get(d, 0, &x, &y) == OAR_ERR_IO && x == NULL && y == NULL);
    CHECK(strstr(oar_last_error(), "dataset: sample 0: disk on fire") != NULL);
    CHECK(oar_dataset_get(d, 1, &x, &y) == OAR_OK && oar_ndim(x) == 1 && oar_ndim(y) == 0);
    oar_release(x);
    oar_release(y);
    CHECK(oar_dataset_get(d, 2, &x, &y) == OAR_ERR_INVALID_ARG &&
          strstr(oar_last_error(), "index 2 is out of range for a dataset of 2 samples"));
    oar_dataset_free(d);
    f.input_ndim = OAR_MAX_DIMS;
    CHECK_ERR(oar_dataset_custom(&f), "0..7 dims");
    f.get = NULL;
    CHECK_ERR(oar_dataset_custom(&f), "get function");
}

static void test_stop_mid_epoch(void) {
    slow_ctx c = {.sleep_ns = 200000, .fail_at = -1};
    oar_dataset *d = slow_dataset(&c, 400);
    for (int round = 0; round < 3; round++) {
        oar_loader_opts o = {.batch_size = 8, .shuffle = true, .workers = 4, .prefetch = 8};
        oar_loader *l = oar_loader_new(d, &o);
        oar_tensor *x, *y;
        if (round > 0) { /* round 0 frees before any epoch starts */
            oar_loader_start_epoch(l, 0);
            for (int k = 0; k < round * 2; k++) {
                CHECK(oar_loader_next(l, &x, &y, NULL));
                oar_release(x);
                oar_release(y);
            }
        }
        if (round == 2) { /* restarting mid-epoch drops the prefetched batches */
            oar_loader_start_epoch(l, 1);
            CHECK(oar_loader_next(l, &x, &y, NULL) && oar_size(y, 0) == 8);
            oar_release(x);
            oar_release(y);
        }
        oar_loader_free(l); /* workers are mid-batch here; they stop and join */
    }
    oar_dataset_free(d);
}

static void test_restart_matches_fresh(void) {
    oar_dataset *d = index_dataset(50);
    oar_loader_opts o = {.batch_size = 5, .shuffle = true, .seed = 77, .workers = 3, .prefetch = 4};
    oar_loader *l = oar_loader_new(d, &o);
    oar_tensor *x, *y;
    oar_loader_start_epoch(l, 1);
    for (int k = 0; k < 3; k++) {
        oar_loader_next(l, &x, &y, NULL);
        oar_release(x);
        oar_release(y);
    }
    int64_t a[50], b[50];
    CHECK(run_epoch(l, 2, a, 50, 5, false, 50) == 50); /* restarted mid-epoch 1 */
    oar_loader_free(l);
    o.workers = 0;
    l = oar_loader_new(d, &o);
    CHECK(run_epoch(l, 2, b, 50, 5, false, 50) == 50);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* next() before start_epoch runs epoch 0; after the end it keeps returning false */
    oar_loader_free(l);
    l = oar_loader_new(d, &o);
    int64_t n = 0;
    oar_status st = OAR_ERR_INTERNAL;
    while (oar_loader_next(l, &x, &y, &st)) {
        n += oar_size(y, 0);
        oar_release(x);
        oar_release(y);
    }
    CHECK(n == 50 && st == OAR_OK);
    CHECK(!oar_loader_next(l, &x, &y, &st) && st == OAR_OK && x == NULL);
    CHECK_ERR(oar_loader_start_epoch(l, -1), "epoch >= 0");
    oar_loader_free(l);
    oar_dataset_free(d);
}

static void test_tensor_dataset(void) {
    oar_tensor *base = oar_arange(0, 12, 1, OAR_F64);
    oar_tensor *m = oar_reshape(base, (int64_t[]){3, 4}, 2);
    oar_tensor *xt = oar_transpose(m, 0, 1); /* [4, 3], not contiguous: copied once */
    oar_tensor *y = oar_arange(10, 14, 1, OAR_I32);
    oar_dataset *d = oar_dataset_tensors(xt, y);
    CHECK(d && oar_dataset_size(d) == 4);
    oar_tensor *s, *t;
    CHECK(oar_dataset_get(d, 2, &s, &t) == OAR_OK);
    CHECK(oar_ndim(s) == 1 && oar_size(s, 0) == 3 && oar_dtype_of(s) == OAR_F64);
    CHECK(t_at(s, 0) == 2 && t_at(s, 1) == 6 && t_at(s, 2) == 10);
    CHECK(oar_ndim(t) == 0 && oar_dtype_of(t) == OAR_I32 && t_at(t, 0) == 12);
    oar_release(s);
    oar_release(t);
    /* batches stack samples: [B, 3] and [B]; they belong to the caller's scope */
    oar_loader_opts o = {.batch_size = 3};
    oar_loader *l = oar_loader_new(d, &o);
    oar_scope_begin();
    CHECK(oar_loader_next(l, &s, &t, NULL));
    CHECK(oar_ndim(s) == 2 && oar_size(s, 0) == 3 && oar_size(s, 1) == 3 && t_at(s, 5) == 9);
    CHECK(oar_ndim(t) == 1 && t_at(t, 2) == 12);
    oar_scope_end(); /* releases the batch */
    oar_loader_free(l);
    CHECK_ERR(oar_dataset_tensors(xt, oar_arange(0, 3, 1, OAR_I64)), "expected x.shape[0] == y.shape[0], got 4 != 3");
    CHECK_ERR(oar_dataset_tensors(oar_scalar(1, OAR_F32), y), "at least 1 dim");
    CHECK_ERR(oar_dataset_tensors(NULL, y), "x is NULL");
    oar_dataset_free(d);
}

int main(void) {
    oar_scope_begin(); /* catches the tensors made inline by CHECK_ERR calls */
    test_every_sample_once();
    test_order_determinism();
    test_workers_identical();
    test_normalize();
    test_flip();
    test_crop();
    test_transform_errors();
    test_wait_time();
    test_worker_errors();
    test_stop_mid_epoch();
    test_restart_matches_fresh();
    test_tensor_dataset();
    oar_scope_end();
    return test_summary("test_data");
}
