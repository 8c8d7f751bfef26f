/* commands.h — the subcommands of the packtrain binary.
 *
 * Each command is `int pt_cmd_NAME(int argc, char **argv)` where argv[0] is the
 * command name; it returns the process exit status (0 success, 1 runtime
 * failure, 2 usage error) and handles --help itself. */
#ifndef PT_COMMANDS_H
#define PT_COMMANDS_H

typedef struct pt_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} pt_command;

/* true when argv has -h or --help */
int pt_cli_wants_help(int argc, char **argv);

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
