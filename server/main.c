/* main.c — the packtrain binary: one program, subcommands for every role
 * (server, worker, local training, packing reports, ingest, CI client). */
#include "server/commands.h"

#include <stdio.h>
#include <string.h>

#define PT_VERSION "0.1.0"

static const pt_command commands[] = {
    {"ingest", "parse xyz/extxyz/QM9 files into a .ptd dataset", pt_cmd_ingest},
    {"pack", "packing report: efficiency of each packing method on a dataset", pt_cmd_pack},
    {"train", "train SchNet on a .ptd dataset locally (no server)", pt_cmd_train},
    {"eval", "evaluate a model on a dataset (predictions, loss, gradients)", pt_cmd_eval},
    {"bench", "training throughput of a job configuration (JSON)", pt_cmd_bench},
    {"serve", "run the REST API server and its training workers", pt_cmd_serve},
    {"worker", "run one training job for the server's scheduler (JSON lines)", pt_cmd_worker},
    {"token", "create, list or revoke API tokens", pt_cmd_token},
    {"submit", "upload a dataset, submit a job, optionally wait for it (CI)", pt_cmd_client},
    {"status", "show a job of a server, optionally wait for its end", pt_cmd_client},
    {"cancel", "cancel a job on a server", pt_cmd_client},
    {"mpirun", "run a command as the ranks of an Open MPI job (backend.kind \"mpi\")", pt_cmd_mpirun},
    {"version", "print the version", pt_cmd_version},
};

static const size_t n_commands = sizeof(commands) / sizeof(commands[0]);

static void print_usage(FILE *out)
{
    fprintf(out, "usage: packtrain COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < n_commands; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'packtrain COMMAND --help' describes each command.\n");
}

int pt_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

int pt_cmd_version(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        printf("usage: packtrain version\n\nPrints the packtrain version.\n");
        return 0;
    }
    printf("packtrain %s\n", PT_VERSION);
    return 0;
}

int main(int argc, char **argv)
{
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
