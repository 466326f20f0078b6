/* The file readers: IDX (plain and gzip), CSV and text, on the real datasets under
 * $OAR_SHARED_DIR/data (skipped with a message when absent) and on small files written to a
 * temporary directory, including malformed ones that must be rejected with clear messages. */
#include "test_util.h"

#include <unistd.h>
#ifdef OAR_HAVE_ZLIB
#include <zlib.h>
#endif

static char tmpdir[256];
static char made[64][320];
static int n_made;

static const char *tmp_path(const char *name) {
    int k = n_made < 64 ? n_made++ : 63; /* the list is only for removing the files at the end */
    snprintf(made[k], sizeof made[0], "%s/%s", tmpdir, name);
    return made[k];
}

static const char *write_file(const char *name, const void *data, size_t n) {
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    return p;
}

static const char *write_text(const char *name, const char *text) {
    return write_file(name, text, strlen(text));
}

static char *shared_path(char *buf, size_t cap, const char *rel) {
    const char *shared = getenv("OAR_SHARED_DIR");
    if (!shared) return NULL;
    snprintf(buf, cap, "%s/data/%s", shared, rel);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

/* ---- IDX written by hand: 3 images of 2x3 and their labels */
static const unsigned char images3[16 + 18] = {
    0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3,
    0, 1, 2, 3, 4, 5, 255, 128, 64, 32, 16, 8, 10, 20, 30, 40, 50, 60};
static const unsigned char labels3[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 255};

static void check_small_idx(oar_dataset *d) {
    CHECK(d && oar_dataset_size(d) == 3);
    if (!d) return;
    oar_tensor *x, *y;
    CHECK(oar_dataset_get(d, 1, &x, &y) == OAR_OK);
    CHECK(oar_ndim(x) == 3 && oar_size(x, 0) == 1 && oar_size(x, 1) == 2 && oar_size(x, 2) == 3);
    CHECK(oar_dtype_of(x) == OAR_F32 && oar_dtype_of(y) == OAR_I64 && oar_ndim(y) == 0);
    const float *p = oar_data(x);
    CHECK(p[0] == 255.0f / 255.0f && p[1] == 128.0f / 255.0f && p[5] == 8.0f / 255.0f);
    CHECK(t_at(y, 0) == 0);
    oar_release(x);
    oar_release(y);
    CHECK(oar_dataset_get(d, 2, &x, &y) == OAR_OK && t_at(y, 0) == 255);
    oar_release(x);
    oar_release(y);
}

static void test_idx_small(void) {
    const char *img = write_file("img.idx", images3, sizeof images3);
    const char *lab = write_file("lab.idx", labels3, sizeof labels3);
    oar_dataset *d = oar_dataset_idx(img, lab);
    check_small_idx(d);
    oar_dataset_free(d);

    /* malformed files: each message names the file, the place and what was expected */
    unsigned char bad[sizeof images3 + 1];
    memcpy(bad, images3, sizeof images3);
    const char *cut = write_file("cut.idx", images3, sizeof images3 - 1);
    CHECK_ERR(oar_dataset_idx(cut, lab), "cut.idx' is truncated: the header says 3 images of 6 bytes each, "
                                         "so 34 bytes in all, but the data ends at byte 33");
    CHECK(oar_last_status() == OAR_ERR_FORMAT);
    bad[sizeof images3] = 9;
    const char *longer = write_file("long.idx", bad, sizeof bad);
    CHECK_ERR(oar_dataset_idx(longer, lab), "long.idx': 1 unexpected bytes after byte 34");
    bad[3] = 4;
    const char *magic = write_file("magic.idx", bad, sizeof images3);
    CHECK_ERR(oar_dataset_idx(magic, lab), "magic.idx': bad magic number 0x00000804 at byte 0; expected "
                                           "0x00000803 for images");
    CHECK_ERR(oar_dataset_idx(lab, img), "this is a label file: are the arguments swapped?");
    const char *text = write_text("text.idx", "hello, world");
    CHECK_ERR(oar_dataset_idx(text, lab), "not an IDX file");
    const char *head = write_file("head.idx", images3, 10);
    CHECK_ERR(oar_dataset_idx(head, lab), "head.idx' is truncated in its header: 10 bytes, expected 16");
    const char *tiny = write_file("tiny.idx", images3, 2);
    CHECK_ERR(oar_dataset_idx(tiny, lab), "expected at least a 4-byte magic number");
    unsigned char lab2[sizeof labels3 - 1] = {0, 0, 8, 1, 0, 0, 0, 2, 7, 0};
    const char *two = write_file("two.idx", lab2, sizeof lab2);
    CHECK_ERR(oar_dataset_idx(img, two), "holds 3 images but");
    CHECK_ERR(oar_dataset_idx(img, two), "holds 2 labels; expected one label per image");
    CHECK_ERR(oar_dataset_idx(tmp_path("absent.idx"), lab), "absent.idx': No such file");
    CHECK(oar_last_status() == OAR_ERR_IO);
    memcpy(bad, images3, sizeof images3);
    bad[11] = 0; /* rows = 0 */
    const char *zero = write_file("zero.idx", bad, sizeof images3);
    CHECK_ERR(oar_dataset_idx(zero, lab), "size 1 (at byte 8) is 0");
    memcpy(bad, images3, 16);
    memset(bad + 4, 0xff, 12); /* 2^32-1 images of (2^32-1)^2 bytes */
    const char *huge = write_file("huge.idx", bad, 16);
    CHECK_ERR(oar_dataset_idx(huge, lab), "huge.idx'");
    CHECK(oar_last_status() == OAR_ERR_FORMAT);
}

#ifdef OAR_HAVE_ZLIB
static const char *write_gz(const char *name, const void *data, size_t n) {
    const char *p = tmp_path(name);
    gzFile g = gzopen(p, "wb9");
    CHECK(g != NULL);
    if (g) {
        gzwrite(g, data, (unsigned)n);
        gzclose(g);
    }
    return p;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 16);
    *n = fread(b, 1, *n, f);
    fclose(f);
    return b;
}

static void test_gzip(void) {
    const char *img = write_gz("img.idx.gz", images3, sizeof images3);
    const char *lab = write_gz("lab.idx.gz", labels3, sizeof labels3);
    oar_dataset *d = oar_dataset_idx(img, lab);
    check_small_idx(d);
    oar_dataset_free(d);
    size_t n;
    unsigned char *gz = slurp(img, &n);
    CHECK(gz != NULL && n > 20);
    if (!gz) return;
    /* two gzip members one after the other are one valid gzip file */
    unsigned char *twice = malloc(2 * n);
    size_t n_lab;
    unsigned char *gz_lab = slurp(lab, &n_lab);
    const char *first = write_gz("part1.gz", images3, 20);
    size_t n1;
    unsigned char *p1 = slurp(first, &n1);
    const char *second = write_gz("part2.gz", images3 + 20, sizeof images3 - 20);
    size_t n2;
    unsigned char *p2 = slurp(second, &n2);
    memcpy(twice, p1, n1);
    memcpy(twice + n1, p2, n2);
    const char *multi = write_file("multi.idx.gz", twice, n1 + n2);
    d = oar_dataset_idx(multi, lab);
    check_small_idx(d);
    oar_dataset_free(d);
    /* a damaged checksum, a bad header, a cut stream, trailing garbage */
    unsigned char *bad = malloc(n + 4);
    memcpy(bad, gz, n);
    bad[n - 8] ^= 0x55; /* CRC-32 of the data */
    const char *crc = write_file("crc.idx.gz", bad, n);
    CHECK_ERR(oar_dataset_idx(crc, lab), "crc.idx.gz' has corrupted gzip data near compressed byte");
    CHECK_ERR(oar_dataset_idx(crc, lab), "incorrect data check");
    CHECK(oar_last_status() == OAR_ERR_FORMAT);
    memcpy(bad, gz, n);
    bad[2] = 7; /* compression method must be 8 (deflate) */
    const char *method = write_file("method.idx.gz", bad, n);
    CHECK_ERR(oar_dataset_idx(method, lab), "method.idx.gz' has corrupted gzip data near compressed byte");
    const char *cut = write_file("cut.idx.gz", gz, n / 2);
    CHECK_ERR(oar_dataset_idx(cut, lab), "cut.idx.gz' is truncated: the gzip data ends at compressed byte");
    memcpy(bad, gz, n);
    memcpy(bad + n, "junk", 4);
    const char *junk = write_file("junk.idx.gz", bad, n + 4);
    CHECK_ERR(oar_dataset_idx(junk, lab), "4 unexpected bytes after the end of the gzip data");
    /* a valid gzip whose content is a truncated IDX file: the IDX check still applies */
    const char *short_gz = write_gz("short.idx.gz", images3, sizeof images3 - 5);
    CHECK_ERR(oar_dataset_idx(short_gz, lab), "short.idx.gz' is truncated: the header says 3 images");
    free(bad);
    free(gz);
    free(gz_lab);
    free(p1);
    free(p2);
    free(twice);
}
#else
static void test_gzip(void) {
    unsigned char fake[20] = {0x1f, 0x8b, 8, 0};
    const char *gz = write_file("fake.idx.gz", fake, sizeof fake);
    const char *lab = write_file("lab2.idx", labels3, sizeof labels3);
    CHECK_ERR(oar_dataset_idx(gz, lab), "is gzip-compressed, but oar was built without zlib");
    CHECK(oar_last_status() == OAR_ERR_UNSUPPORTED);
}
#endif

#ifdef OAR_HAVE_ZLIB
/* Mean pixel over the whole set through a loader; checks labels on the way. */
static double mean_pixel(oar_dataset *d, int workers, int64_t *first_labels, int64_t *counts) {
    oar_loader_opts o = {.batch_size = 1000, .workers = workers};
    oar_loader *l = oar_loader_new(d, &o);
    double sum = 0;
    int64_t n = 0, k = 0;
    oar_tensor *x, *y;
    while (oar_loader_next(l, &x, &y, NULL)) {
        const float *p = oar_data(x);
        const int64_t *lab = oar_data(y);
        for (int64_t i = 0; i < oar_numel(x); i++) sum += p[i];
        for (int64_t i = 0; i < oar_numel(y); i++, k++) {
            if (k < 10) first_labels[k] = lab[i];
            if (lab[i] >= 0 && lab[i] < 10) counts[lab[i]]++;
        }
        n += oar_numel(x);
        oar_release(x);
        oar_release(y);
    }
    oar_loader_free(l);
    return n ? sum / (double)n : -1;
}

static const char *gunzip_to(const char *src, const char *name) {
    const char *dst = tmp_path(name);
    gzFile g = gzopen(src, "rb");
    FILE *f = fopen(dst, "wb");
    char buf[1 << 16];
    int n;
    while (g && f && (n = gzread(g, buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)n, f);
    if (g) gzclose(g);
    if (f) fclose(f);
    return dst;
}
#endif

static void test_fashion_mnist(void) {
    char ib[512], lb[512];
    const char *img = shared_path(ib, sizeof ib, "fashion-mnist/t10k-images-idx3-ubyte.gz");
    const char *lab = shared_path(lb, sizeof lb, "fashion-mnist/t10k-labels-idx1-ubyte.gz");
    if (!img || !lab) {
        printf("SKIP fashion-mnist: $OAR_SHARED_DIR/data/fashion-mnist not found\n");
        return;
    }
#ifndef OAR_HAVE_ZLIB
    printf("SKIP fashion-mnist: the files are gzip'd and oar was built without zlib\n");
    return;
#else
    oar_dataset *d = oar_dataset_idx(img, lab);
    CHECK(d && oar_dataset_size(d) == 10000);
    if (!d) return;
    int64_t first[10] = {0}, counts[10] = {0};
    double m = mean_pixel(d, 2, first, counts);
    CHECK_NEAR(m, 73.147 / 255.0, 2e-6); /* the README's mean pixel, 73.147 */
    const int64_t want_first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    CHECK(memcmp(first, want_first, sizeof first) == 0);
    for (int c = 0; c < 10; c++) CHECK(counts[c] == 1000);
    oar_tensor *x, *y;
    CHECK(oar_dataset_get(d, 0, &x, &y) == OAR_OK && oar_size(x, 1) == 28 && oar_size(x, 2) == 28);
    double s0 = 0;
    for (int k = 0; k < 784; k++) s0 += ((const float *)oar_data(x))[k] * 255.0;
    CHECK_NEAR(s0, 33456, 1e-2);
    /* the same files decompressed load identically */
    const char *pimg = gunzip_to(img, "t10k-images");
    const char *plab = gunzip_to(lab, "t10k-labels");
    oar_dataset *p = oar_dataset_idx(pimg, plab);
    CHECK(p && oar_dataset_size(p) == 10000);
    int64_t first2[10] = {0}, counts2[10] = {0};
    CHECK(p && mean_pixel(p, 0, first2, counts2) == m);
    oar_tensor *x2, *y2;
    CHECK(p && oar_dataset_get(p, 0, &x2, &y2) == OAR_OK && memcmp(oar_data(x), oar_data(x2), 784 * 4) == 0);
    oar_release(x2);
    oar_release(y2);
    oar_release(x);
    oar_release(y);
    oar_dataset_free(p);
    oar_dataset_free(d);

    img = shared_path(ib, sizeof ib, "fashion-mnist/train-first20000-images-idx3-ubyte.gz");
    lab = shared_path(lb, sizeof lb, "fashion-mnist/train-first20000-labels-idx1-ubyte.gz");
    d = img && lab ? oar_dataset_idx(img, lab) : NULL;
    CHECK(d && oar_dataset_size(d) == 20000);
    if (!d) return;
    memset(counts, 0, sizeof counts);
    mean_pixel(d, 4, first, counts);
    CHECK(first[0] == 9 && counts[0] == 1935 && counts[1] == 2025 && counts[9] == 2028);
    oar_dataset_free(d);
#endif
}

/* ---- CSV */
static void test_csv_small(void) {
    const char *ok = write_text("ok.csv", "a, label ,b\r\n1.5,2,-3\r\n4,0,5e-1\r\n\r\n7,2.0,8\n\n");
    oar_dataset *d = oar_dataset_csv(ok, "label");
    CHECK(d && oar_dataset_size(d) == 3);
    if (d) {
        oar_tensor *x, *y;
        CHECK(oar_dataset_get(d, 1, &x, &y) == OAR_OK);
        CHECK(oar_ndim(x) == 1 && oar_size(x, 0) == 2 && t_at(x, 0) == 4 && t_at(x, 1) == 0.5f);
        CHECK(oar_ndim(y) == 0 && oar_dtype_of(y) == OAR_I64 && t_at(y, 0) == 0);
        oar_release(x);
        oar_release(y);
        CHECK(oar_dataset_get(d, 2, &x, &y) == OAR_OK && t_at(y, 0) == 2 && t_at(x, 1) == 8);
        oar_release(x);
        oar_release(y);
    }
    oar_dataset_free(d);
    d = oar_dataset_csv(ok, NULL); /* the last column: b, which is -3, 5e-1 (not an integer) */
    CHECK(d == NULL && strstr(oar_last_error(), "line 3, column 3 ('b'): expected an integer label, got '5e-1'"));

    const char *cols = write_text("cols.csv", "x,y,target\n1,2,0\n3,4\n");
    CHECK_ERR(oar_dataset_csv(cols, NULL), "cols.csv' line 3: expected 3 comma-separated columns as in the header, got 2");
    CHECK(oar_last_status() == OAR_ERR_FORMAT);
    const char *word = write_text("word.csv", "x,y,target\n1,2,0\n3,abc,1\n");
    CHECK_ERR(oar_dataset_csv(word, NULL), "word.csv' line 3, column 2 ('y'): expected a finite number, got 'abc'");
    const char *empty_field = write_text("hole.csv", "x,y,target\n1,,0\n");
    CHECK_ERR(oar_dataset_csv(empty_field, NULL), "line 2, column 2 ('y'): expected a finite number, got ''");
    const char *inf = write_text("inf.csv", "x,target\ninf,0\n");
    CHECK_ERR(oar_dataset_csv(inf, NULL), "expected a finite number, got 'inf'");
    const char *half = write_text("half.csv", "x,target\n1,0\n2,1.5\n");
    CHECK_ERR(oar_dataset_csv(half, NULL), "half.csv' line 3, column 2 ('target'): expected an integer label, got '1.5'");
    CHECK_ERR(oar_dataset_csv(half, "class"), "has no column named 'class'; the header (line 1) has: x, target");
    const char *empty = write_text("empty.csv", "");
    CHECK_ERR(oar_dataset_csv(empty, NULL), "empty.csv' line 1: expected a header line with column names, got an empty file");
    const char *only = write_text("only.csv", "x,target\n\n");
    CHECK_ERR(oar_dataset_csv(only, NULL), "expected data rows after the header, got none");
    const char *one = write_text("one.csv", "target\n1\n");
    CHECK_ERR(oar_dataset_csv(one, NULL), "expected at least 2 columns");
    CHECK_ERR(oar_dataset_csv(tmp_path("none.csv"), NULL), "csv: cannot open");
}

static void test_csv_real(void) {
    char pb[512], ib[512], lb[512];
    const char *iris = shared_path(pb, sizeof pb, "sklearn/iris_train.csv");
    if (!iris) {
        printf("SKIP sklearn CSV: $OAR_SHARED_DIR/data/sklearn not found\n");
        return;
    }
    oar_dataset *d = oar_dataset_csv(iris, NULL), *byname = oar_dataset_csv(iris, "target");
    CHECK(d && byname && oar_dataset_size(d) == 120);
    if (d && byname) {
        oar_tensor *x, *y, *x2, *y2;
        CHECK(oar_dataset_get(d, 0, &x, &y) == OAR_OK && oar_dataset_get(byname, 0, &x2, &y2) == OAR_OK);
        CHECK(oar_size(x, 0) == 4 && t_at(x, 0) == 5.1f && t_at(x, 1) == 3.5f && t_at(x, 3) == 0.2f);
        CHECK(t_at(y, 0) == 0 && memcmp(oar_data(x), oar_data(x2), 16) == 0);
        oar_release(x);
        oar_release(y);
        oar_release(x2);
        oar_release(y2);
        int64_t counts[3] = {0};
        oar_loader_opts o = {.batch_size = 32, .shuffle = true, .seed = 1};
        oar_loader *l = oar_loader_new(d, &o);
        while (oar_loader_next(l, &x, &y, NULL)) {
            for (int64_t i = 0; i < oar_numel(y); i++) counts[((const int64_t *)oar_data(y))[i]]++;
            oar_release(x);
            oar_release(y);
        }
        oar_loader_free(l);
        CHECK(counts[0] == 40 && counts[1] == 40 && counts[2] == 40);
    }
    oar_dataset_free(d);
    oar_dataset_free(byname);

    /* digits: the CSV and the raw byte files hold the same images */
    const char *digits = shared_path(pb, sizeof pb, "sklearn/digits_train.csv");
    const char *raw = shared_path(ib, sizeof ib, "sklearn/digits_train_images.u8");
    const char *rawl = shared_path(lb, sizeof lb, "sklearn/digits_train_labels.u8");
    d = digits ? oar_dataset_csv(digits, "label") : NULL;
    CHECK(d && oar_dataset_size(d) == 1437);
    FILE *fi = raw ? fopen(raw, "rb") : NULL, *fl = rawl ? fopen(rawl, "rb") : NULL;
    CHECK(fi && fl);
    if (d && fi && fl) {
        unsigned char *px = malloc(1437 * 64), *lab = malloc(1437);
        CHECK(fread(px, 1, 1437 * 64, fi) == 1437 * 64 && fread(lab, 1, 1437, fl) == 1437);
        oar_loader_opts o = {.batch_size = 100, .workers = 2};
        oar_loader *l = oar_loader_new(d, &o);
        oar_tensor *x, *y;
        int64_t i = 0;
        bool same = true;
        while (oar_loader_next(l, &x, &y, NULL)) {
            CHECK(oar_ndim(x) == 2 && oar_size(x, 1) == 64);
            const float *p = oar_data(x);
            const int64_t *t = oar_data(y);
            for (int64_t j = 0; j < oar_size(x, 0); j++, i++) {
                for (int k = 0; k < 64; k++) same = same && p[j * 64 + k] == (float)px[i * 64 + k];
                same = same && t[j] == lab[i];
            }
            oar_release(x);
            oar_release(y);
        }
        CHECK(same && i == 1437);
        oar_loader_free(l);
        free(px);
        free(lab);
    }
    if (fi) fclose(fi);
    if (fl) fclose(fl);
    oar_dataset_free(d);
}

/* ---- text */
static void test_text_small(void) {
    const char *hello = write_text("hello.txt", "hello world");
    oar_dataset *d = oar_dataset_text(hello, 4, false);
    CHECK(d && oar_dataset_size(d) == 2); /* (11 - 1) / 4 */
    if (d) {
        oar_tensor *x, *y;
        CHECK(oar_dataset_get(d, 1, &x, &y) == OAR_OK);
        CHECK(oar_dtype_of(x) == OAR_I64 && oar_size(x, 0) == 4 && oar_size(y, 0) == 4);
        const char *want_x = "o wo", *want_y = " wor";
        for (int k = 0; k < 4; k++) CHECK(t_at(x, k) == want_x[k] && t_at(y, k) == want_y[k]);
        oar_release(x);
        oar_release(y);
    }
    oar_dataset_free(d);
    CHECK_ERR(oar_dataset_text(hello, 11, false), "hello.txt' has 11 bytes; windows of T=11 with targets "
                                                  "shifted by one need at least 12");
    CHECK_ERR(oar_dataset_text(hello, 0, true), "window length T >= 1, got 0");
    CHECK_ERR(oar_dataset_text(tmp_path("nope.txt"), 4, false), "text: cannot open");
}

static void test_austen(void) {
    char pb[512];
    const char *path = shared_path(pb, sizeof pb, "text/austen.txt");
    if (!path) {
        printf("SKIP austen: $OAR_SHARED_DIR/data/text/austen.txt not found\n");
        return;
    }
    FILE *f = fopen(path, "rb");
    unsigned char *corpus = malloc(4025039 + 1);
    size_t n = f ? fread(corpus, 1, 4025039 + 1, f) : 0;
    if (f) fclose(f);
    CHECK(n == 4025039);
    oar_dataset *seq = oar_dataset_text(path, 64, false), *rnd = oar_dataset_text(path, 64, true);
    CHECK(seq && rnd && oar_dataset_size(seq) == (4025039 - 1) / 64 && oar_dataset_size(rnd) == oar_dataset_size(seq));
    if (!seq || !rnd || n != 4025039) {
        free(corpus);
        oar_dataset_free(seq);
        oar_dataset_free(rnd);
        return;
    }
    oar_tensor *x, *y;
    CHECK(oar_dataset_get(seq, 3, &x, &y) == OAR_OK);
    bool ok = true;
    for (int k = 0; k < 64; k++) ok = ok && t_at(x, k) == corpus[3 * 64 + k] && t_at(y, k) == corpus[3 * 64 + k + 1];
    CHECK(ok && t_at(x, 0) == corpus[192]);
    oar_release(x);
    oar_release(y);
    /* random windows: each is a real window of the corpus, the target one byte later, the same
     * for any number of workers, and different in the next epoch */
    int64_t starts[2][32];
    for (int run = 0; run < 3; run++) {
        oar_loader_opts o = {.batch_size = 32, .seed = 8, .workers = run == 0 ? 0 : 3};
        oar_loader *l = oar_loader_new(rnd, &o);
        oar_loader_start_epoch(l, run == 2 ? 1 : 0);
        CHECK(oar_loader_next(l, &x, &y, NULL));
        const int64_t *xp = oar_data(x), *yp = oar_data(y);
        bool windows_ok = true;
        for (int j = 0; j < 32; j++) {
            unsigned char w[65];
            for (int k = 0; k < 64; k++) w[k] = (unsigned char)xp[j * 64 + k];
            w[64] = (unsigned char)yp[j * 64 + 63];
            const unsigned char *hit = memmem(corpus, n, w, 65);
            windows_ok = windows_ok && hit != NULL;
            for (int k = 0; k < 63; k++) windows_ok = windows_ok && yp[j * 64 + k] == xp[j * 64 + k + 1];
            int64_t start = hit ? (int64_t)(hit - corpus) : -1;
            if (run < 2) starts[run][j] = start;
            if (run == 2 && j == 0) {
                int same = 0;
                for (int q = 0; q < 32; q++) same += starts[0][q] == start;
                CHECK(same <= 1);
            }
        }
        CHECK(windows_ok);
        oar_release(x);
        oar_release(y);
        oar_loader_free(l);
    }
    CHECK(memcmp(starts[0], starts[1], sizeof starts[0]) == 0);
    free(corpus);
    oar_dataset_free(seq);
    oar_dataset_free(rnd);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/oar_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("test_data_files: cannot create a temporary directory\n");
        return 1;
    }
    oar_scope_begin();
    test_idx_small();
    test_gzip();
    test_fashion_mnist();
    test_csv_small();
    test_csv_real();
    test_text_small();
    test_austen();
    oar_scope_end();
    for (int k = 0; k < n_made; k++) remove(made[k]);
    rmdir(tmpdir);
    return test_summary("test_data_files");
}
