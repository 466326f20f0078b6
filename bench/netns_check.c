/* An MPI job's proof that it ran across bench/netns_hosts.sh's hosts: every rank on its own
 * host, an allreduce with the right sum, and an allreduce of BYTES no faster than links of
 * RATE_MBIT allow (bandwidth-optimal allreduce sends 2(n-1)/n of the buffer from every rank),
 * which holds only if the bytes crossed the shaped links rather than shared memory.
 * Usage: mpirun ... netns_check BYTES RATE_MBIT   (prints one JSON line from rank 0) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = argc > 1 ? atol(argv[1]) : 1 << 22;
    double rate_mbit = argc > 2 ? atof(argv[2]) : 0;
    char host[MPI_MAX_PROCESSOR_NAME] = {0}, *hosts = calloc((size_t)size, sizeof host);
    int len = 0;
    MPI_Get_processor_name(host, &len);
    MPI_Gather(host, (int)sizeof host, MPI_CHAR, hosts, (int)sizeof host, MPI_CHAR, 0, MPI_COMM_WORLD);

    long n = bytes / (long)sizeof(float);
    float *buf = malloc(sizeof(float) * (size_t)n);
    for (long i = 0; i < n; i++) buf[i] = (float)(rank + 1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double seconds = MPI_Wtime() - t0, slowest = 0;
    MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int wrong = 0, any_wrong = 0;
    float want = (float)size * (float)(size + 1) / 2;
    for (long i = 0; i < n; i++) wrong |= buf[i] != want;
    MPI_Reduce(&wrong, &any_wrong, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);

    int rc = 0;
    if (rank == 0) {
        int distinct = 1;
        for (int a = 0; a < size; a++)
            for (int b = a + 1; b < size; b++)
                if (!strcmp(hosts + a * sizeof host, hosts + b * sizeof host)) distinct = 0;
        /* the bound less the token bucket's burst (256 KB per link) */
        double sent = 2.0 * (size - 1) / size * (double)bytes - 256.0 * 1024;
        double bound = rate_mbit > 0 && sent > 0 ? sent * 8 / (rate_mbit * 1e6) : 0;
        printf("{\"ranks\": %d, \"hosts\": [", size);
        for (int r = 0; r < size; r++) printf("%s\"%s\"", r ? ", " : "", hosts + r * sizeof host);
        printf("], \"bytes\": %ld, \"seconds\": %.4f, \"bus_mbit_s\": %.1f, \"rate_mbit\": %.0f, "
               "\"lower_bound_s\": %.4f, \"sum_ok\": %s}\n",
               bytes, slowest, 2.0 * (size - 1) / size * (double)bytes * 8 / slowest / 1e6, rate_mbit, bound,
               any_wrong ? "false" : "true");
        if (!distinct) fprintf(stderr, "netns_check: expected every rank on its own host; two share one\n"), rc = 1;
        if (any_wrong) fprintf(stderr, "netns_check: the allreduce sum is wrong (expected %g)\n", want), rc = 1;
        if (slowest < 0.9 * bound)
            fprintf(stderr, "netns_check: the allreduce took %.4f s, under the %.4f s the links allow: the bytes did "
                            "not cross the shaped links\n", slowest, bound), rc = 1;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(buf);
    free(hosts);
    MPI_Finalize();
    return rc;
}
