/* commands.h — the subcommands of the packtrain binary (server/cli, the top
 * room: it may use every other room; nothing includes it but the tests).
 *
 * Each command is `int pt_cmd_NAME(int argc, char **argv)` where argv[0] is the
 * command name; it returns the process exit status (0 success, 1 runtime
 * failure, 2 usage error) and handles --help itself.  main.c holds the
 * binary's table of commands; cli_common.c what the commands share. */
#ifndef PT_COMMANDS_H
#define PT_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/errors.h"

typedef struct pt_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} pt_command;

/* --- cli_common.c ------------------------------------------------------- */

/* true when argv has -h or --help */
int pt_cli_wants_help(int argc, char **argv);
/* Every kept error on stderr, one a line, as "PREFIX: file:line: field: message"
 * (prefix NULL: no prefix), then how many more were not kept. */
void pt_cli_print_errors(const char *prefix, const pt_errors *errs);
/* A whole decimal integer in lo..hi.  Returns 0, or -1 (out untouched). */
int pt_cli_parse_long(const char *s, long lo, long hi, long *out);

/* --- cli_progress.c ------------------------------------------------------ */

struct pt_progress;
/* A progress sink (engine/core/progress.h) that redraws one line on stderr —
 * "  ingest  1.2M structures  48.1k/s  2.1 of 6.0 GB  ETA 1m30s" — and ends
 * it with a newline when a phase finishes.  Drawn only when stderr is a
 * terminal and `json` is 0 (a command printing JSON is read by programs);
 * PACKTRAIN_PROGRESS=1 draws it anyway (tests), =0 never.  Returns 1 with
 * sink filled, 0 (sink cleared) when nothing is to be drawn. */
int pt_cli_progress_sink(struct pt_progress *sink, int json);

/* The line for one report, without the leading "\r" (tests). */
struct pt_progress_info;
void pt_cli_progress_format(const struct pt_progress_info *info, char *buf, size_t len);

/* --- dataset_arg.c -------------------------------------------------------- */

struct pt_dataset;
/* Opens the DATA argument `arg` of command `cmd` ("packtrain train"): a .ptd
 * dataset, or a file ingest reads, ingested once into the cache
 * ($XDG_CACHE_HOME/packtrain, else ~/.cache/packtrain) and reused while the
 * file, ingest's options and this program are unchanged.  ptd receives the
 * path of the .ptd opened.  Says on stderr what it ingested and where, and
 * what is wrong (then -1); 0 with ds open. */
int pt_cli_dataset_open(const char *cmd, const char *arg, struct pt_dataset *ds, char *ptd,
                        size_t len);
/* The same with ingest's forces_key (an ASE database's per-atom vectors to
 * keep as forces; NULL: the default) for an `arg` that is ingested; a .ptd
 * keeps the forces it was ingested with.  *ingested says which it was. */
int pt_cli_dataset_open_keys(const char *cmd, const char *arg, const char *forces_key,
                             struct pt_dataset *ds, char *ptd, size_t len, int *ingested);

/* --- cmd_mpirun.c --------------------------------------------------------- */

struct pt_mpi_launch;
/* The command line that runs argv[0..argc) (a packtrain command and its
 * arguments) as `ranks` MPI ranks: {self, "mpirun", ["--protocol",] "--ranks",
 * N, "--", argv...}.  Returns 0, or -1 with errs filled (too long). */
int pt_cli_mpi_relaunch_argv(struct pt_mpi_launch *l, const char *self, int32_t ranks,
                             int protocol, int argc, char **argv, pt_errors *errs);
/* Replaces this process with that command line (a job of kind "mpi" whose
 * ranks were not started yet: pt_mpi_needs_launch).  Returns only on
 * failure: -1 with errs filled. */
int pt_cli_mpi_relaunch(int32_t ranks, int protocol, int argc, char **argv, pt_errors *errs);

/* --- the commands --------------------------------------------------------- */

int pt_cmd_version(int argc, char **argv);
int pt_cmd_ingest(int argc, char **argv);
int pt_cmd_pack(int argc, char **argv);
int pt_cmd_train(int argc, char **argv);
int pt_cmd_eval(int argc, char **argv);
int pt_cmd_bench(int argc, char **argv);
int pt_cmd_serve(int argc, char **argv);
int pt_cmd_worker(int argc, char **argv);
int pt_cmd_token(int argc, char **argv);
int pt_cmd_mpirun(int argc, char **argv);
/* submit, status and cancel: argv[0] says which */
int pt_cmd_client(int argc, char **argv);

#endif
