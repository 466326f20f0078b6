/* `oar train --nproc N`: the data-parallel pieces of the command. Without a launcher the
 * command starts itself under `oar launch`; inside the job every rank trains its shard of
 * each global batch (--batch is the global batch, so a run means the same for any N and a
 * checkpoint resumes with another N), and only rank 0 prints and writes files. */
#include "cli.h"
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool in_job(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE");
}

int train_dist_relaunch(int argc, char **argv, int nproc) {
    if (nproc <= 1 || in_job()) return -1;
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "oar train: cannot find the oar binary to launch (/proc/self/exe)\n");
        return 1;
    }
    self[n] = 0;
    char **prog = calloc((size_t)argc + 2, sizeof(char *));
    if (!prog) return 1;
    int k = 0;
    prog[k++] = self;
    prog[k++] = "train";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nproc") && i + 1 < argc) {
            i++;
            continue;
        }
        prog[k++] = argv[i];
    }
    int rc = oar_cli_launch(nproc, NULL, 0, 0, prog);
    free(prog);
    return rc;
}

oar_status train_dist_begin(train_opts *o, int *world, int *rank) {
    if (oar_dist_init(NULL) != OAR_OK) return oar_last_status();
    *world = oar_dist_world_size();
    *rank = oar_dist_rank();
    if (o->nproc && o->nproc != *world)
        return oar_set_error(OAR_ERR_INVALID_ARG, "train: --nproc %d, but the job has %d ranks", o->nproc, *world);
    if (*world > 1 && o->batch % *world)
        return oar_set_error(OAR_ERR_INVALID_ARG, "train: the global batch %lld does not split over %d ranks; use a "
                             "multiple of %d", (long long)o->batch, *world, *world);
    if (*rank != 0) { /* only rank 0 reports and writes; errors still reach stderr */
        o->quiet = true;
        o->metrics = NULL;
        if (!freopen("/dev/null", "w", stdout)) return oar_set_error(OAR_ERR_IO, "train: cannot silence rank %d", *rank);
    }
    return OAR_OK;
}
