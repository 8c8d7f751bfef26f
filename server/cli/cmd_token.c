/* cmd_token.c — `packtrain token create|list|revoke`: API tokens, made and
 * revoked directly in the server's database (no server needs to run; a
 * running one sees the change at once, since it verifies against the same
 * SQLite file).  A token is printed once, at creation; only its hash is kept. */
#include "server/cli/commands.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "server/app.h"
#include "store/store.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: packtrain token create --owner NAME [--name LABEL (default cli)] [--data-dir DIR]\n"
            "       packtrain token list --owner NAME [--data-dir DIR]\n"
            "       packtrain token revoke TOKEN_ID --owner NAME [--data-dir DIR]\n"
            "\n"
            "Manages the bearer tokens of a packtrain server (`serve --auth on`).\n"
            "create prints the new token on stdout, once: only its SHA-256 is stored.\n"
            "Datasets and jobs belong to the token's owner; other owners cannot see them.\n"
            "The data directory defaults to $PACKTRAIN_DATA_DIR, else 'var'.\n");
}

typedef struct token_args {
    const char *action, *owner, *name, *id, *data_dir;
} token_args;

static int parse(int argc, char **argv, token_args *a)
{
    memset(a, 0, sizeof(*a));
    a->data_dir = getenv("PACKTRAIN_DATA_DIR");
    if (!a->data_dir || !a->data_dir[0]) a->data_dir = "var";
    static const struct option opts[] = {{"owner", required_argument, NULL, 'o'},
                                         {"name", required_argument, NULL, 'n'},
                                         {"data-dir", required_argument, NULL, 'd'},
                                         {NULL, 0, NULL, 0}};
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == '?' || c == ':') {
            fprintf(stderr, c == '?' ? "packtrain token: unknown option '%s'\n" : "packtrain token: %s needs a value\n",
                    argv[optind - 1]);
            return -1;
        }
        *(c == 'o' ? &a->owner : c == 'n' ? &a->name : &a->data_dir) = optarg;
    }
    for (int i = optind; i < argc; i++) {
        if (!a->action) {
            a->action = argv[i];
        } else if (!a->id) {
            a->id = argv[i];
        } else {
            fprintf(stderr, "packtrain token: unexpected argument '%s'\n", argv[i]);
            return -1;
        }
    }
    if (!a->action) {
        fprintf(stderr, "packtrain token: which action? create, list or revoke\n");
        return -1;
    }
    if (strcmp(a->action, "create") && strcmp(a->action, "list") && strcmp(a->action, "revoke")) {
        fprintf(stderr, "packtrain token: unknown action '%s'; use create, list or revoke\n", a->action);
        return -1;
    }
    if (!a->owner || !a->owner[0]) {
        fprintf(stderr, "packtrain token %s: --owner NAME is required\n", a->action);
        return -1;
    }
    if (!strcmp(a->action, "revoke") && !a->id) {
        fprintf(stderr, "packtrain token revoke: which token? give its id (tok_...), see 'token list'\n");
        return -1;
    }
    if (strcmp(a->action, "revoke") && a->id) {
        fprintf(stderr, "packtrain token %s: unexpected argument '%s'\n", a->action, a->id);
        return -1;
    }
    return 0;
}

static void print_time(FILE *out, int64_t us)
{
    time_t sec = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char buf[32];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fputs(buf, out);
}

static int run(pt_store *s, const token_args *a)
{
    int rc;
    if (!strcmp(a->action, "create")) {
        char secret[PT_STORE_SECRET_MAX];
        pt_store_token row;
        rc = pt_store_token_create(s, a->owner, a->name ? a->name : "cli", secret, &row);
        if (rc != PT_STORE_OK) goto failed;
        printf("%s\n", secret);
        fprintf(stderr, "packtrain token: created %s for owner '%s'; it is shown only this once\n", row.id, row.owner);
        return 0;
    }
    if (!strcmp(a->action, "revoke")) {
        rc = pt_store_token_revoke(s, a->owner, a->id);
        if (rc != PT_STORE_OK) goto failed;
        fprintf(stderr, "packtrain token: revoked %s\n", a->id);
        return 0;
    }
    pt_store_token_array list;
    rc = pt_store_token_list(s, a->owner, &list);
    if (rc != PT_STORE_OK) goto failed;
    for (size_t i = 0; i < list.n; i++) {
        const pt_store_token *t = &list.items[i];
        printf("%s  ", t->id);
        print_time(stdout, t->created_at);
        printf("  %-7s  %s\n", t->revoked ? "revoked" : "active", t->name);
    }
    pt_store_token_array_clear(&list);
    return 0;
failed:
    fprintf(stderr, "packtrain token %s: %s\n", a->action, pt_store_errmsg(s));
    return 1;
}

int pt_cmd_token(int argc, char **argv)
{
    if (pt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    token_args a;
    if (parse(argc, argv, &a) != 0) {
        usage(stderr);
        return 2;
    }
    char db[PATH_MAX], err[512];
    if (snprintf(db, sizeof db, "%s/%s", a.data_dir, PT_APP_DB_NAME) >= (int)sizeof db) {
        fprintf(stderr, "packtrain token: data directory path too long\n");
        return 2;
    }
    /* Creating a token for a server that was never started is fine: the
     * directory and database are created (and migrated) here. */
    if (mkdir(a.data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "packtrain token: cannot create %s: %s\n", a.data_dir, strerror(errno));
        return 1;
    }
    pt_store *s = NULL;
    if (pt_store_open(&s, db, err, sizeof err) != PT_STORE_OK) {
        fprintf(stderr, "packtrain token: cannot open %s: %s\n", db, err);
        return 1;
    }
    int rc = run(s, &a);
    pt_store_close(s);
    return rc;
}
