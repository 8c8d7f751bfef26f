/* dataset_arg.c — the DATA argument of `train`, `pack`, `eval` and `bench`:
 * a .ptd dataset, or any file `packtrain ingest` reads (XYZ, extended XYZ,
 * raw QM9, plain or gzip, and whatever else ingest's reader dispatch
 * learns), ingested on first use into a cache and reused after.
 *
 * The cache: $XDG_CACHE_HOME/packtrain, else ~/.cache/packtrain, one file
 * NAME-KEY.ptd per input, KEY being 16 hex digits of a SHA-256 over what the
 * result depends on — the input's real path, size and modification time
 * (nanoseconds), ingest's options, and this program's own size and
 * modification time (a rebuilt packtrain may ingest differently) — so a
 * changed file, option or program never reuses a stale .ptd.  Ingest writes
 * through a temporary file and a rename, so two commands ingesting the same
 * input at once both end with a whole file.  Each use says on stderr what
 * was ingested and where the cache is. */
#include "engine/core/progress.h"
#include "server/cli/commands.h"

#include <errno.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data/ingest.h"

/* $XDG_CACHE_HOME/packtrain or $HOME/.cache/packtrain, created. */
static int cache_dir(char *out, size_t len, pt_errors *errs)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[PATH_MAX];
    if (xdg && xdg[0] == '/') snprintf(base, sizeof base, "%s", xdg);
    else if (home && home[0]) snprintf(base, sizeof base, "%s/.cache", home);
    else {
        pt_errors_add(errs, NULL, 0, "", "no cache directory for ingested datasets: set "
                      "XDG_CACHE_HOME or HOME, or ingest first (packtrain ingest FILE --out X.ptd)");
        return -1;
    }
    if ((size_t)snprintf(out, len, "%s/packtrain", base) >= len) {
        pt_errors_add(errs, base, 0, "", "cache directory path too long");
        return -1;
    }
    if ((mkdir(base, 0755) != 0 && errno != EEXIST) || (mkdir(out, 0755) != 0 && errno != EEXIST)) {
        pt_errors_add(errs, out, 0, "", "cannot create the cache directory: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* NAME-KEY.ptd for the input at real path `real` (see the top). */
static void cache_name(const char *real, const struct stat *st, const pt_ingest_options *o,
                       char *out, size_t len)
{
    struct stat self = {0};
    stat("/proc/self/exe", &self);
    char key[PATH_MAX + 256];
    int n = snprintf(key, sizeof key, "%s\n%lld\n%lld.%09ld\n%d %d %u %s\n%lld %lld.%09ld\n", real,
                     (long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
                     (int)o->format, o->skip_invalid, (unsigned)o->max_atoms,
                     o->forces_key ? o->forces_key : "-",
                     (long long)self.st_size, (long long)self.st_mtim.tv_sec,
                     self.st_mtim.tv_nsec);
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, (size_t)n, (const uint8_t *)key);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
    /* the file's name up to its first '.', for a reader of the directory */
    const char *base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    size_t stem = strcspn(base, ".");
    if (stem == 0) stem = strlen(base);
    if (stem > 64) stem = 64;
    int w = snprintf(out, len, "%.*s-", (int)stem, base);
    for (int i = 0; i < 8 && w > 0 && (size_t)w + 2 < len; i++, w += 2)
        snprintf(out + w, len - (size_t)w, "%02x", digest[i]);
    snprintf(out + w, len - (size_t)w, ".ptd");
}

static int ingest_into(const char *cmd, const char *arg, const char *ptd,
                       const pt_ingest_options *o, pt_errors *errs)
{
    pt_ingest_report rep;
    const char *inputs[1] = {arg};
    pt_ingest_options with = *o;
    pt_progress sink;
    if (pt_cli_progress_sink(&sink, 0)) with.progress = &sink;
    int rc = pt_ingest_files(inputs, 1, ptd, &with, &rep, errs);
    if (rc == 0)
        fprintf(stderr, "%s: ingested %s (%llu structures, %llu atoms) into %s\n", cmd, arg,
                (unsigned long long)rep.n_structs, (unsigned long long)rep.n_atoms, ptd);
    pt_ingest_report_close(&rep);
    return rc;
}

int pt_cli_dataset_open(const char *cmd, const char *arg, pt_dataset *ds, char *ptd, size_t len)
{
    int ingested;
    return pt_cli_dataset_open_keys(cmd, arg, NULL, ds, ptd, len, &ingested);
}

int pt_cli_dataset_open_keys(const char *cmd, const char *arg, const char *forces_key, pt_dataset *ds,
                             char *ptd, size_t len, int *ingested)
{
    char err[PT_ERR_FILE_MAX + PT_ERR_MSG_MAX];
    memset(ds, 0, sizeof(*ds));
    snprintf(ptd, len, "%s", arg);
    *ingested = 0;
    if (pt_dataset_open(ds, arg, err, sizeof err) == 0) return 0;
    *ingested = 1;
    size_t n = strlen(arg);
    struct stat st;
    /* a .ptd that does not open is a damaged dataset, not a structure file */
    if ((n > 4 && !strcmp(arg + n - 4, ".ptd")) || stat(arg, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_ingest_options o;
    pt_ingest_options_init(&o);
    o.forces_key = forces_key;
    char real[PATH_MAX], dir[PATH_MAX], name[128];
    int rc = realpath(arg, real) ? 0 : -1;
    if (rc) pt_errors_add(&errs, arg, 0, "", "cannot resolve the path: %s", strerror(errno));
    if (rc == 0) rc = cache_dir(dir, sizeof dir, &errs);
    if (rc == 0) {
        cache_name(real, &st, &o, name, sizeof name);
        if ((size_t)snprintf(ptd, len, "%s/%s", dir, name) >= len) {
            pt_errors_add(&errs, dir, 0, "", "cache path too long");
            rc = -1;
        }
    }
    if (rc == 0 && pt_dataset_open(ds, ptd, err, sizeof err) == 0)
        fprintf(stderr, "%s: %s was ingested before: using %s\n", cmd, arg, ptd);
    else if (rc == 0 && (rc = ingest_into(cmd, arg, ptd, &o, &errs)) == 0 &&
             pt_dataset_open(ds, ptd, err, sizeof err) != 0) {
        pt_errors_add(&errs, ptd, 0, "", "%s", err);
        rc = -1;
    }
    if (rc) {
        fprintf(stderr, "%s: %s is not a .ptd dataset, and ingesting it failed:\n", cmd, arg);
        pt_cli_print_errors(cmd, &errs);
    }
    pt_errors_close(&errs);
    return rc;
}
