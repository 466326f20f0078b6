/* Area under the ROC curve by ranks (the Mann-Whitney statistic): sort by score, give tied
 * scores their average rank, then AUC = (sum of the positives' ranks - P(P+1)/2) / (P N).
 * An evaluation metric over a whole split, computed on the host in double. */
#include "tensor/tensor.h"

#include <math.h>
#include <stdlib.h>

typedef struct scored {
    double score;
    bool positive;
} scored;

static int by_score(const void *a, const void *b) {
    double x = ((const scored *)a)->score, y = ((const scored *)b)->score;
    return (x > y) - (x < y);
}

oar_status oar_auc(oar_tensor *scores, oar_tensor *labels, double *out) {
    const char *who = "auc";
    if (!scores || !labels || !out)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected scores, labels and an output, got NULL", who);
    if (!OAR_HANDLE_OK(scores)) return oar_handle_error(who, "scores", -1, scores);
    if (!OAR_HANDLE_OK(labels)) return oar_handle_error(who, "labels", -1, labels);
    int64_t n = oar_numel(scores);
    if (oar_numel(labels) != n)
        return oar_error(OAR_ERR_SHAPE, "%s: expected as many labels as scores, got %lld labels for %lld scores", who,
                         (long long)oar_numel(labels), (long long)n);
    double *s = malloc(sizeof(double) * (size_t)(n ? n : 1)), *l = malloc(sizeof(double) * (size_t)(n ? n : 1));
    scored *v = malloc(sizeof(scored) * (size_t)(n ? n : 1));
    oar_status st = s && l && v ? OAR_OK : oar_error(OAR_ERR_OOM, "%s: out of memory for %lld scores", who, (long long)n);
    if (st == OAR_OK) st = oar_copy_to_buffer(scores, s, sizeof(double) * (size_t)n, OAR_F64);
    if (st == OAR_OK) st = oar_copy_to_buffer(labels, l, sizeof(double) * (size_t)n, OAR_F64);
    int64_t pos = 0;
    for (int64_t i = 0; st == OAR_OK && i < n; i++) {
        if (l[i] != 0 && l[i] != 1)
            st = oar_error(OAR_ERR_INVALID_ARG, "%s: expected labels 0 or 1, got %g at %lld", who, l[i], (long long)i);
        else if (isnan(s[i]))
            st = oar_error(OAR_ERR_INVALID_ARG, "%s: expected finite or infinite scores, got NaN at %lld", who,
                           (long long)i);
        else {
            v[i] = (scored){s[i], l[i] == 1};
            pos += l[i] == 1;
        }
    }
    if (st == OAR_OK && (pos == 0 || pos == n))
        st = oar_error(OAR_ERR_INVALID_ARG, "%s: expected both classes among the labels, got %lld positives of %lld", who,
                       (long long)pos, (long long)n);
    if (st == OAR_OK) {
        qsort(v, (size_t)n, sizeof *v, by_score);
        double rank_sum = 0;
        for (int64_t i = 0; i < n;) {
            int64_t j = i, tied_pos = 0;
            while (j < n && v[j].score == v[i].score) tied_pos += v[j++].positive;
            rank_sum += (double)tied_pos * ((double)(i + 1) + (double)j) / 2; /* ranks i+1..j averaged */
            i = j;
        }
        double p = (double)pos, q = (double)(n - pos);
        *out = (rank_sum - p * (p + 1) / 2) / (p * q);
    }
    free(s);
    free(l);
    free(v);
    return st;
}
