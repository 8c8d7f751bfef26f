/* ingest_test_util.h — helpers shared by the ingest tests (reader, xyz, qm9,
 * ingest): write a text to a temporary file (optionally gzip), read it with
 * pt_read_structures into copies, and look for an expected located error.
 * Header-only (static inline) so it is compiled into the tests that use it. */
#ifndef PT_INGEST_TEST_UTIL_H
#define PT_INGEST_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/core/errors.h"
#include "engine/data/reader.h"

#define ITU_MAX_ATOMS 128
#define ITU_MAX_ITEMS 64
#define ITU_NAME "in.xyz"   /* display name used in every error */

typedef struct itu_item {
    int valid;
    pt_format format;
    long line;
    uint32_t n_atoms;
    uint8_t z[ITU_MAX_ATOMS];
    float pos[3 * ITU_MAX_ATOMS];
    int has_forces;
    float forces[3 * ITU_MAX_ATOMS];
    int has_cell, has_stress;
    unsigned pbc;
    double cell[9], stress[9];
    uint32_t n_keys;
    pt_key_value keys[PT_READER_MAX_KEYS];
} itu_item;

typedef struct itu_collect {
    int n, n_valid;
    itu_item items[ITU_MAX_ITEMS];
} itu_collect;

static inline int itu_on_structure(void *ctx, const pt_structure *s)
{
    itu_collect *c = ctx;
    if (c->n == ITU_MAX_ITEMS) return 0;
    itu_item *it = &c->items[c->n++];
    it->valid = s->valid;
    c->n_valid += s->valid;
    it->format = s->format;
    it->line = s->line;
    it->n_atoms = s->n_atoms;
    if (s->valid && s->n_atoms <= ITU_MAX_ATOMS) {
        memcpy(it->z, s->z, s->n_atoms);
        memcpy(it->pos, s->pos, 3 * sizeof(float) * s->n_atoms);
        it->has_forces = s->forces != NULL;
        if (s->forces) memcpy(it->forces, s->forces, 3 * sizeof(float) * s->n_atoms);
    }
    it->has_cell = s->has_cell;
    it->has_stress = s->has_stress;
    it->pbc = s->pbc;
    memcpy(it->cell, s->cell, sizeof it->cell);
    memcpy(it->stress, s->stress, sizeof it->stress);
    it->n_keys = s->n_keys;
    memcpy(it->keys, s->keys, s->n_keys * sizeof(pt_key_value));
    return 0;
}

/* Writes text to a fresh temporary file; returns its malloc'ed path. */
static inline char *itu_write(const char *text, size_t len, int gz)
{
    char *path = strdup(gz ? "/tmp/pt_ingest_test_" "XX" "XX" "XX" ".gz" : "/tmp/pt_ingest_test_" "XX" "XX" "XX");
    int fd = mkstemps(path, gz ? 3 : 0);
    if (fd < 0) abort();
    close(fd);
    if (gz) {
        gzFile g = gzopen(path, "wb");
        if (!g || (len && gzwrite(g, text, (unsigned)len) != (int)len)) abort();
        gzclose(g);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(text, 1, len, f) != len) abort();
        fclose(f);
    }
    return path;
}

/* Reads text as a file of the given format; fills c (calloc'ed) and errs. */
/* Every read runs twice, decompressing on the reading thread and on a
 * thread of its own (linereader.h): both must give the same structures, the
 * same errors in the same order and the same result (aborts otherwise). */
static inline int itu_read_ex(const char *text, int gz, pt_format format, uint32_t max_atoms,
                              itu_collect **c, pt_errors *errs)
{
    char *path = itu_write(text, strlen(text), gz);
    *c = calloc(1, sizeof(**c));
    size_t before = errs->kept, total_before = errs->total;
    pt_read_options o = {.format = format, .max_atoms = max_atoms, .display_name = ITU_NAME,
                         .read_thread = -1};
    int rc = pt_read_structures(path, &o, itu_on_structure, *c, errs);
    itu_collect *again = calloc(1, sizeof(*again));
    pt_errors other;
    pt_errors_init(&other, errs->max_kept);
    o.read_thread = 1;
    int rc2 = pt_read_structures(path, &o, itu_on_structure, again, &other);
    if (rc != rc2 || memcmp(*c, again, sizeof(*again)) != 0 ||
        errs->kept - before != other.kept || errs->total - total_before != other.total)
        abort();
    for (size_t i = 0; i < other.kept; i++) {
        const pt_error *x = &errs->items[before + i], *y = &other.items[i];
        if (x->line != y->line || x->row != y->row || strcmp(x->file, y->file) ||
            strcmp(x->field, y->field) || strcmp(x->message, y->message))
            abort();
    }
    pt_errors_close(&other);
    free(again);
    unlink(path);
    free(path);
    return rc;
}

static inline int itu_read(const char *text, pt_format format, itu_collect **c, pt_errors *errs)
{
    return itu_read_ex(text, 0, format, 1000, c, errs);
}

static inline void itu_print_errors(const pt_errors *errs)
{
    char buf[700];
    for (size_t i = 0; i < errs->kept; i++) {
        pt_error_format(&errs->items[i], buf, sizeof buf);
        fprintf(stderr, "    error: %s\n", buf);
    }
}

/* 1 if errs holds an error at `line` (0 = any) in `field` whose message
 * contains `msg`; prints every error otherwise, to make failures readable. */
static inline int itu_has_error(const pt_errors *errs, long line, const char *field, const char *msg)
{
    for (size_t i = 0; i < errs->kept; i++) {
        const pt_error *e = &errs->items[i];
        if ((line == 0 || e->line == line) && !strcmp(e->field, field) && strstr(e->message, msg)) return 1;
    }
    fprintf(stderr, "    expected error at line %ld field '%s' containing '%s'; got:\n", line, field, msg);
    itu_print_errors(errs);
    return 0;
}

static inline const pt_key_value *itu_key(const itu_item *it, const char *name)
{
    for (uint32_t i = 0; i < it->n_keys; i++)
        if (!strcmp(it->keys[i].name, name)) return &it->keys[i];
    return NULL;
}

/* One expected-error case: text read as `format`; the error at line/field
 * with a message containing msg; rc and valid structures as given. */
typedef struct itu_err_case {
    const char *text;
    pt_format format;
    uint32_t max_atoms;   /* 0 = 1000 */
    long line;
    const char *field;
    const char *msg;
    int rc;               /* expected pt_read_structures result */
    int n_valid;          /* expected valid structures */
    int gz;
} itu_err_case;

/* Runs one itu_err_case passed as the cmocka initial state (include
 * cmocka.h before this header). */
static inline void itu_run_case(void **state)
{
    const itu_err_case *k = *state;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c;
    int rc = itu_read_ex(k->text, k->gz, k->format, k->max_atoms ? k->max_atoms : 1000, &c, &errs);
    assert_true(itu_has_error(&errs, k->line, k->field, k->msg));
    assert_int_equal(rc, k->rc);
    assert_int_equal(c->n_valid, k->n_valid);
    free(c);
    pt_errors_close(&errs);
}

#endif
