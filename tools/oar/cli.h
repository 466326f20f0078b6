/* Subcommands of the oar command; each lives in its own file. */
#ifndef OAR_CLI_H
#define OAR_CLI_H

#include "oar.h"

int oar_cmd_ops(int argc, char **argv);
/* cmd_info.c: the CPU, the ISA in use, the libraries and their versions, threads. */
int oar_cmd_info(int argc, char **argv);
int oar_cmd_bench(int argc, char **argv);
int oar_cmd_train(int argc, char **argv);
int oar_cmd_eval(int argc, char **argv);
int oar_cmd_sample(int argc, char **argv);
int oar_cmd_profile(int argc, char **argv);
/* Export and inference (cmd_export.c, cmd_infer.c, cmd_inspect.c). */
int oar_cmd_export(int argc, char **argv);
int oar_cmd_infer(int argc, char **argv);
int oar_cmd_inspect(int argc, char **argv);
/* cmd_launch.c: runs prog (NULL-terminated argv) as nproc ranks under mpirun (hosts "h1:n,h2:n"
 * or NULL for this host; port 0 finds free ones; grace_s: how long the other ranks may run on
 * after one fails, 0 for the default); returns the job's exit status (the first failed rank's). */
int oar_cmd_launch(int argc, char **argv);
int oar_cli_launch(int nproc, const char *hosts, int port, int grace_s, char **prog);
#define LAUNCH_DEFAULT_GRACE_S 10
/* launch_rank.c: `oar launch-rank NONCE -- PROGRAM`, how oar launch starts each rank: runs
 * PROGRAM and writes its status to stderr as LAUNCH_STATUS_MARK "oar-launch-status NONCE RANK
 * exit|signal VALUE\n". launch_status.c: relays the job's stderr (err_fd) without those lines,
 * stops the job (SIGTERM to mpirun) when ranks still run grace_s after the first failure, waits
 * for mpirun and returns the job's status. */
#define LAUNCH_STATUS_MARK '\036'
int oar_cmd_launch_rank(int argc, char **argv);
int launch_collect(int mpirun, int err_fd, int nproc, const char *nonce, int grace_s);
int oar_cmd_quantize(int argc, char **argv);
int oar_bench_quant(int argc, char **argv); /* bench_quant.c: oar bench --workload quant-infer */ /* cmd_quantize.c: post-training quantization */
/* ONNX (cmd_onnx.c): the conformance runner, and `oar infer` / `oar inspect` on a .onnx file. */
int oar_cmd_onnx_test(int argc, char **argv);
int oar_cmd_onnx_bench(int argc, char **argv); /* cmd_onnx_bench.c */
int cli_onnx_infer(const char *path, const char *const *inputs, int n_inputs, const char *out_file,
                   const char *out_dir);
int cli_onnx_inspect(const char *path);
/* Whether path names an ONNX model (ends in .onnx). */
bool cli_is_onnx(const char *path);
/* An exported model's path as given ("dir/m", "dir/m.json", "dir/m.safetensors") -> "dir/m". */
void cli_model_path(const char *arg, char *buf, size_t size);
/* One training step of a reference workload (tiny, mlp, lenet, resnet20, gpt-mini, lstm-lm),
 * timed: --threads N --steps N --mode eager|static --batch N (--context T for the language
 * models) --disable-pass A,B --profile timer|full. */
int oar_bench_train(int argc, char **argv);
bool bench_train_known(const char *name); /* a training workload oar_bench_train times */
int oar_bench_dispatch(int argc, char **argv);
/* ResNet-20 inference, eval mode, no grad (bench_infer.c): --batch N --mode eager|static
 * --threads N --steps N --disable-pass pass,pass --profile timer|full. */
int oar_bench_infer(int argc, char **argv);
/* GFLOP/s of oar_matmul and of the BLAS library on the same buffers, one JSON object per
 * shape: [--threads N] [--quick] [--reps N] [--shape NAME]. */
int oar_bench_gemm(int argc, char **argv);
int oar_bench_peak(int argc, char **argv); /* bench_peak.c: measured fp32 FMA peak */

/* What a benchmark ran with (bench_settings.c): every JSON line of `oar bench` prints all of
 * it, after "workload", through bench_print_settings (threads are read from the library). */
typedef struct bench_settings {
    const char *mode;            /* "eager" or "static" (NULL: eager) */
    int64_t batch;               /* samples per step; -1: the workload has none (printed null) */
    int64_t context;             /* language models: tokens per sequence; 0: not printed */
    const char *dtype;           /* NULL: f32 */
    const char *disabled_passes; /* --disable-pass as given; NULL: none */
    const char *device;          /* "cpu" or "cuda" (NULL: cpu) */
} bench_settings;
/* The instruction set the CPU kernels use here ("avx512", "avx2" or "portable"). */
const char *bench_isa(void);
/* Prints `"mode": ..., "threads": ..., "batch": ..., ["context": ...,] "dtype": ...,
 * "disabled_passes": ..., "isa": ..., "device": ...` (no braces, no trailing comma). */
void bench_print_settings(const bench_settings *s);

/* The profiler for a command's run of total_steps steps (cmd_profile.c): mode "timer" or
 * "full"; the trace directory (full; NULL: oar-profile); the recorded steps "A:B" (NULL: from
 * step min(5, total/5), 20 steps in full mode, to the end in timer mode); the unit of items
 * ("samples", "tokens"). cli_profile_finish stops it, prints the tables and the trace's path. */
oar_status cli_profile_start(const char *mode, const char *dir, const char *steps, int64_t total_steps,
                             const char *unit);
oar_status cli_profile_finish(const char *sort, int rows);
/* A reference workload of `oar bench` (bench_train.c) to run step by step: items per step and
 * their unit ("samples" or "tokens"). */
typedef struct bench_state bench_state;
bench_state *bench_workload_open(const char *name, int64_t *items, const char **unit);
oar_status bench_workload_step(bench_state *b);
void bench_workload_close(bench_state *b);

/* The flags a subcommand accepts (cli_args.c): each with the value it takes. */
typedef enum cli_value {
    CLI_NONE = 0, /* a switch: --json */
    CLI_TEXT,     /* any word: --model lenet */
    CLI_INT,      /* a whole number: --seed 0 */
    CLI_COUNT,    /* a whole number >= 1: --batch 32 */
    CLI_NUMBER    /* a finite number: --lr 0.01 */
} cli_value;
typedef struct cli_flag {
    const char *name;
    cli_value value;
} cli_flag;
/* Checks argv[1..] ("--x V" or "--x=V") against flags, with at most n_positional words that
 * are not flags. On an unknown flag, a missing or malformed value or an extra word, prints
 * "oar CMD: ..." and the valid flags to stderr and returns 2; else 0. */
int cli_check_flags(const char *cmd, int argc, char **argv, const cli_flag *flags, int n_flags, int n_positional);
#define CLI_N_FLAGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Small argument helpers shared by the subcommands. */
const char *cli_flag_value(int argc, char **argv, const char *flag); /* "--x V" or "--x=V", else NULL */
/* Switches off in s the passes named in a comma-separated list (--disable-pass); prints the
 * error and returns 2 for an unknown name, else 0. NULL list: nothing. */
int cli_disable_passes(oar_build_strategy *s, const char *list);
int cli_has_flag(int argc, char **argv, const char *flag);

#endif
