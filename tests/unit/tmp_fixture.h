/* tmp_fixture.h — what many unit tests need around the code they test: a
 * temporary directory removed with everything in it, a small text file
 * written, a file read back whole, a dataset ingested from tests/data.
 *
 * Header-only (static inline), so a test includes what it uses. */
#ifndef PT_TMP_FIXTURE_H
#define PT_TMP_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/ingest.h"

/* A fresh directory /tmp/pt_TAG_XXXXXX written into dir (len >= 64).
 * Returns 0 or -1. */
static inline int tfx_mkdtemp(char *dir, size_t len, const char *tag)
{
    snprintf(dir, len, "/tmp/pt_%s_XXXXXX", tag);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int tfx_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Removes dir and everything below it (no-op for "" or a missing dir). */
static inline void tfx_rmtree(const char *dir)
{
    if (dir && dir[0]) nftw(dir, tfx_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes text to path (truncating).  Returns 0 or -1. */
static inline int tfx_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The whole file as a malloc'd string ("" when it cannot be read). */
static inline char *tfx_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    for (size_t got; s && (got = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            char *t = realloc(s, cap *= 2);
            if (!t) break;
            s = t;
        }
    }
    fclose(f);
    if (s) s[n] = '\0';
    return s ? s : strdup("");
}

/* Ingests the structure file src (tests/data/...) into the dataset file ptd
 * with ingest's defaults; problems go to stderr.  Returns 0 or -1. */
static inline int tfx_ingest(const char *src, const char *ptd)
{
    pt_ingest_options opt;
    pt_ingest_options_init(&opt);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_ingest_files(&src, 1, ptd, &opt, &rep, &errs);
    if (rc) {
        char buf[PT_ERR_FILE_MAX + PT_ERR_FIELD_MAX + PT_ERR_MSG_MAX + 16];
        pt_errors_first(&errs, buf, sizeof buf);
        fprintf(stderr, "ingest %s: %s\n", src, buf);
    }
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
    return rc;
}

#endif
