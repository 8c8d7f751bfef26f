/* main.c — the packtrain binary: one program, subcommands for every role
 * (server, worker, local training, packing reports, ingest, CI client). */
#include "server/cli/commands.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "engine/core/version.h"
#include "engine/model/bf16.h"

static const pt_command commands[] = {
    {"version", "print the version", pt_cmd_version},
    {"ingest", "read XYZ / extended XYZ / QM9 files into a .ptd dataset", pt_cmd_ingest},
    {"pack", "packing report of a .ptd dataset (efficiency per method)", pt_cmd_pack},
    {"train", "train SchNet on a .ptd dataset locally (no server)", pt_cmd_train},
    {"serve", "run the REST API server and its training workers", pt_cmd_serve},
    {"worker", "run one training job for the server's scheduler (JSON lines)", pt_cmd_worker},
    {"token", "create, list or revoke API tokens", pt_cmd_token},
    {"submit", "upload a dataset, submit a job, optionally wait for it (CI)", pt_cmd_client},
    {"status", "show a job of a server, optionally wait for its end", pt_cmd_client},
    {"wait", "wait for a job of a server to end; exit with its outcome", pt_cmd_client},
    {"logs", "print a job's log, or follow it as it is written", pt_cmd_client},
    {"cancel", "cancel a job on a server", pt_cmd_client},
    {"eval", "evaluate a model file on a dataset (predictions, loss, gradients)", pt_cmd_eval},
    {"bench", "training throughput of a job on the emulated IPU backend (JSON)", pt_cmd_bench},
    {"mpirun", "run a command as the ranks of an Open MPI job (backend.kind \"mpi\")", pt_cmd_mpirun},
};

static const size_t n_commands = sizeof(commands) / sizeof(commands[0]);

static void print_usage(FILE *out)
{
    fprintf(out, "usage: packtrain COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < n_commands; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'packtrain COMMAND --help' describes each command.\n");
}

int pt_cmd_version(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        printf("usage: packtrain version\n\nPrints the packtrain version, and whether this CPU can\n"
               "train jobs with training.precision \"bf16\" (\"bf16: yes\" or \"bf16: no (why)\").\n");
        return 0;
    }
    printf("packtrain %s (commit %s)\n", pt_version(), pt_build_commit());
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    char why[256];
    if (pt_bf16_cpu_explain(&f, why, sizeof why))
        printf("bf16: yes (%s)\n", pt_cpu_has_amx() ? "AMX-BF16" : "AVX512-BF16");
    else printf("bf16: no (%s)\n", why);
    return 0;
}

/* OpenBLAS picks its kernels when the library is loaded, before main().
 * Debian 12's OpenBLAS (0.3.21) does not know AMD Zen 4/5 and runs its
 * Haswell (AVX2) kernels there, although the CPU has AVX-512; its SkylakeX
 * kernels are 1.5-3x faster on SchNet's products (docs/performance.md).  The
 * only way to choose for the user is OPENBLAS_CORETYPE, read at load time:
 * so when it is unset, the CPU (and OS) support AVX-512 and OpenBLAS chose
 * a kernel without it, set it and run this same program again, once — the
 * variable being set is what stops a second round.  If the exec fails, the
 * program goes on with OpenBLAS's own choice.  PACKTRAIN_BLAS_REEXEC=0 turns
 * this off (e.g. under valgrind, where /proc/self/exe is the tool). */
static void openblas_coretype_reexec(char **argv)
{
    const char *opt = getenv("PACKTRAIN_BLAS_REEXEC");
    if (getenv("OPENBLAS_CORETYPE") || (opt && !strcmp(opt, "0"))) return;
    pt_cpu_features f;
    pt_cpu_features_get(&f);
    if (!f.avx512f || !f.avx512bw || !f.avx512vl || !f.os_avx512) return;
    static const char *const avx512_cores[] = {"skylakex", "cooperlake", "sapphirerapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof avx512_cores / sizeof *avx512_cores; i++)
        if (!strcasecmp(core, avx512_cores[i])) return;
    if (setenv("OPENBLAS_CORETYPE", "SkylakeX", 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
}

int main(int argc, char **argv)
{
    openblas_coretype_reexec(argv);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        print_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < n_commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "packtrain: unknown command '%s'\n", argv[1]);
    print_usage(stderr);
    return 2;
}
