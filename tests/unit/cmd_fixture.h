/* cmd_fixture.h — running a command of the packtrain binary (server/cli) in
 * the test's own process, the way the binary's main would, with its stdout
 * and stderr captured into files of a temporary directory and read back.
 *
 *   char *out, *err;
 *   int rc = cfx_run(pt_cmd_pack, "pack", dir, &out, &err, "a.ptd", "--json", NULL);
 *   ...
 *   free(out); free(err);
 *
 * Header-only (static inline). */
#ifndef PT_CMD_FIXTURE_H
#define PT_CMD_FIXTURE_H

#include <fcntl.h>
#include <stdarg.h>

#include "tests/unit/tmp_fixture.h"

typedef int (*cfx_cmd_fn)(int argc, char **argv);

/* Runs cmd with argv = {name, the NULL-terminated words in ap}, stdout and
 * stderr to DIR/cmd.out and DIR/cmd.err, whose contents come back in *out
 * and *err (malloc'd).  Returns cmd's status. */
static inline int cfx_runv(cfx_cmd_fn cmd, const char *name, const char *dir, char **out, char **err,
                           va_list ap)
{
    char *argv[64] = {(char *)name};
    int argc = 1;
    for (char *s; argc < 63 && (s = va_arg(ap, char *)) != NULL;) argv[argc++] = s;
    argv[argc] = NULL;
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof out_path, "%s/cmd.out", dir);
    snprintf(err_path, sizeof err_path, "%s/cmd.err", dir);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fo, 1);
    dup2(fe, 2);
    close(fo);
    close(fe);
    int rc = cmd(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    *out = tfx_slurp(out_path);
    *err = tfx_slurp(err_path);
    return rc;
}

static inline int cfx_run(cfx_cmd_fn cmd, const char *name, const char *dir, char **out, char **err,
                          ...)
{
    va_list ap;
    va_start(ap, err);
    int rc = cfx_runv(cmd, name, dir, out, err, ap);
    va_end(ap);
    return rc;
}

#endif
