/* cli_common.c — what the commands of the packtrain binary share: the help
 * flag, printing an error list, integer flags (declared in commands.h).
 * Here, not in main.c, so that the unit tests can call any command without
 * the binary's main. */
#include "server/cli/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

void pt_cli_print_errors(const char *prefix, const pt_errors *errs)
{
    char buf[PT_ERR_FILE_MAX + PT_ERR_FIELD_MAX + PT_ERR_MSG_MAX + 32];
    const char *sep = prefix ? ": " : "";
    if (!prefix) prefix = "";
    for (size_t i = 0; i < errs->kept; i++) {
        pt_error_format(&errs->items[i], buf, sizeof buf);
        fprintf(stderr, "%s%s%s\n", prefix, sep, buf);
    }
    if (errs->total > errs->kept)
        fprintf(stderr, "%s%s... and %zu more errors\n", prefix, sep, errs->total - errs->kept);
}

int pt_cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}
