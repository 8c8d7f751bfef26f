/* ase_db_fixture.h — what the ASE-database tests share: read a .db into
 * copies of its structures (ingest_test_util.h's itu_collect) with the info
 * JSON, find an error located at a row, and make small databases at run time
 * (ASE's own empty schema from tests/data, rows inserted with SQLite) for the
 * cases ASE will not write.  Header-only; include cmocka.h first. */
#ifndef PT_ASE_DB_FIXTURE_H
#define PT_ASE_DB_FIXTURE_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/ase_db.h"
#include "tests/unit/ingest_test_util.h"

#define ADB_DIR "tests/data/"

typedef struct adb_read {
    int rc;
    itu_collect *c;    /* calloc'ed */
    json_t *info;      /* the database's description, or NULL */
    pt_errors errs;
} adb_read;

static inline void adb_read_file(adb_read *r, const char *path, const char *forces_key, const char *stress_key)
{
    r->c = calloc(1, sizeof(*r->c));
    json_t *infos = json_array();
    pt_errors_init(&r->errs, 0);
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .forces_key = forces_key,
                         .stress_key = stress_key, .info = infos};
    r->rc = pt_ase_db_read(path, &o, itu_on_structure, r->c, &r->errs);
    r->info = json_incref(json_array_get(infos, 0));
    json_decref(infos);
}

static inline void adb_read_close(adb_read *r)
{
    free(r->c);
    json_decref(r->info);
    pt_errors_close(&r->errs);
}

/* 1 if errs holds an error at row `row` (0: none, file-level) in `field`
 * whose message contains msg; prints every error otherwise. */
static inline int adb_has_error(const pt_errors *errs, long row, const char *field, const char *msg)
{
    for (size_t i = 0; i < errs->kept; i++) {
        const pt_error *e = &errs->items[i];
        if (e->row == row && e->line == 0 && !strcmp(e->field, field) && strstr(e->message, msg)) return 1;
    }
    fprintf(stderr, "    expected an error at row %ld field '%s' containing '%s'; got:\n", row, field, msg);
    itu_print_errors(errs);
    return 0;
}

/* The candidate named `name` in an info object, or NULL. */
static inline const json_t *adb_candidate(const json_t *info, const char *name)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(info, "candidates"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return c;
    return NULL;
}

static inline const char *adb_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "(null)";
}

/* ---- databases made at run time ----------------------------------------- */

/* Copies tests/data/ase_db_empty.db (ASE 3.22's schema, no rows) to path
 * and opens it for writing. */
static inline sqlite3 *adb_make(const char *path)
{
    FILE *in = fopen(ADB_DIR "ase_db_empty.db", "rb"), *out = fopen(path, "wb");
    if (!in || !out) abort();
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) abort();
    fclose(in);
    fclose(out);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) abort();
    return db;
}

static inline void adb_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "sql failed: %s: %s\n", sql, msg);
        abort();
    }
}

/* One row; NULL/0 members are left NULL in the table. */
typedef struct adb_row {
    long id;                     /* 0: the next id */
    int n;                       /* atoms */
    const int32_t *z;
    const double *pos;           /* 3n */
    const double *cell;          /* 9, or NULL for zeros */
    int pbc;
    long natoms;                 /* -1: n */
    int numbers_bytes;           /* > 0: cut the numbers blob to this size */
    const double *energy;
    const void *magmom_blob;     /* schema-5 magmom: a float64 blob */
    const double *forces;        /* 3n */
    const double *stress;        /* 6 */
    const char *kv;              /* key_value_pairs JSON, NULL: "{}" */
    const void *data;            /* data column */
    size_t data_len;
    int data_text;               /* 1: bind data as text */
} adb_row;

static inline void adb_insert(sqlite3 *db, const adb_row *r)
{
    static const double zero[9] = {0};
    sqlite3_stmt *st;
    const char *sql = "INSERT INTO systems (id, unique_id, numbers, positions, cell, pbc, natoms, energy, magmom, "
                      "forces, stress, key_value_pairs, data, mass, charge) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, 0)";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) abort();
    if (r->id) sqlite3_bind_int64(st, 1, r->id);
    char uid[32];
    snprintf(uid, sizeof uid, "u%ld-%p", r->id, (const void *)r);
    sqlite3_bind_text(st, 2, uid, -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 3, r->z, r->numbers_bytes ? r->numbers_bytes : 4 * r->n, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 4, r->pos, 24 * r->n, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 5, r->cell ? r->cell : zero, 72, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 6, r->pbc);
    sqlite3_bind_int64(st, 7, r->natoms >= 0 ? r->natoms : r->n);
    if (r->energy) sqlite3_bind_double(st, 8, *r->energy);
    if (r->magmom_blob) sqlite3_bind_blob(st, 9, r->magmom_blob, 8, SQLITE_TRANSIENT);
    if (r->forces) sqlite3_bind_blob(st, 10, r->forces, 24 * r->n, SQLITE_TRANSIENT);
    if (r->stress) sqlite3_bind_blob(st, 11, r->stress, 48, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 12, r->kv ? r->kv : "{}", -1, SQLITE_TRANSIENT);
    if (r->data && r->data_text) sqlite3_bind_text(st, 13, r->data, (int)r->data_len, SQLITE_TRANSIENT);
    else if (r->data) sqlite3_bind_blob(st, 13, r->data, (int)r->data_len, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) {
        fprintf(stderr, "insert failed: %s\n", sqlite3_errmsg(db));
        abort();
    }
    sqlite3_finalize(st);
}

/* An ASE binary data column: header, the arrays' bytes at byte 8, JSON. */
static inline size_t adb_data_blob(unsigned char *buf, const void *arrays, size_t arrays_len, const char *json)
{
    uint64_t off = 8 + arrays_len;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(off >> (8 * i));
    if (arrays_len) memcpy(buf + 8, arrays, arrays_len);
    memcpy(buf + off, json, strlen(json));
    return off + strlen(json);
}

#endif
