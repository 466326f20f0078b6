/* Subcommands of the oar command; each lives in its own file. */
#ifndef OAR_CLI_H
#define OAR_CLI_H

int oar_cmd_ops(int argc, char **argv);
int oar_cmd_bench(int argc, char **argv);
int oar_cmd_train(int argc, char **argv);
int oar_cmd_eval(int argc, char **argv);
int oar_cmd_sample(int argc, char **argv);
/* One eager training step of a reference workload (tiny, mlp, lenet, resnet20, gpt-mini,
 * lstm-lm), timed: --threads N --steps N --mode eager. */
int oar_bench_train(int argc, char **argv);
int oar_bench_dispatch(int argc, char **argv);
/* GFLOP/s of oar_matmul and of the BLAS library on the same buffers, one JSON object per
 * shape: [--threads N] [--quick] [--reps N] [--shape NAME]. */
int oar_bench_gemm(int argc, char **argv);

/* Small argument helpers shared by the subcommands. */
const char *cli_flag_value(int argc, char **argv, const char *flag); /* "--x V" or "--x=V", else NULL */
int cli_has_flag(int argc, char **argv, const char *flag);

#endif
