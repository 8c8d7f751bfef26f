/* ase_db_rows.c — the rows of an ASE database, read twice.
 *
 * The survey reads every row's labels (not its positions) to learn which
 * names exist and what they hold over the whole file: a shape (1,) array is a
 * per-structure scalar in SchNetPack's energy but a per-atom scalar in a
 * 1-atom row of charges, so a name's kind can only be decided from all rows.
 * The second pass then turns each row into a pt_structure, reading the names
 * ase_db.c chose, and reports every problem at its row id and field.  Both
 * passes share decode_row(), which presents calculator columns, key-value
 * pairs and data leaves alike as (name, source, value). */
#include "engine/data/ase_db_internal.h"

#include "engine/data/cell.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*leaf_fn)(ase_db *a, void *ctx, const char *name, int source, const pt_ase_value *v);

typedef struct row_view {
    sqlite3_stmt *st;
    int idx[N_COLS];       /* result column of each systems column, -1 if not selected */
    long id;
    uint64_t n_atoms;
    double *scratch;       /* arrays decoded from key-value JSON lists */
    size_t scratch_cap;
} row_view;

unsigned pt_ase_fits(const pt_ase_value *v, uint64_t n_atoms)
{
    if (v->kind == PT_ASE_NUMBER || v->kind == PT_ASE_NONFINITE) return 1u << FIT_SCALAR;
    if (v->kind != PT_ASE_ARRAY) return 0;
    const pt_ase_array *a = &v->array;
    unsigned f = 0;
    if (a->count == 1 && a->ndim <= 1) f |= 1u << FIT_SCALAR;
    /* one value per atom: (n,) or a column (n, 1), as extended XYZ's R:1 */
    if ((a->ndim == 1 || (a->ndim == 2 && a->shape[1] == 1)) && a->shape[0] == n_atoms)
        f |= 1u << FIT_ATOM_SCALAR;
    if (a->ndim == 2 && a->shape[0] == n_atoms && a->shape[1] == 3) f |= 1u << FIT_VEC3;
    if ((a->ndim == 1 && (a->count == 6 || a->count == 9)) ||
        (a->ndim == 2 && ((a->shape[0] == 3 && a->shape[1] == 3) || (a->shape[0] == 1 && a->shape[1] == 6))) ||
        (a->ndim == 3 && a->shape[0] == 1 && a->shape[1] == 3 && a->shape[2] == 3))
        f |= 1u << FIT_STRESS;
    return f;
}

static void describe_value(const pt_ase_value *v, char *buf, size_t cap)
{
    char shape[64];
    if (v->kind == PT_ASE_NUMBER || v->kind == PT_ASE_NONFINITE) {
        snprintf(buf, cap, "a number");
    } else if (v->kind == PT_ASE_ARRAY) {
        pt_ase_shape_format(&v->array, shape, sizeof shape);
        snprintf(buf, cap, "an array of shape %s", shape);
    } else {
        snprintf(buf, cap, "%s", v->what);
    }
}

/* ---- one row's values ---------------------------------------------------- */

static int col_type(const row_view *r, int col)
{
    return r->idx[col] < 0 ? SQLITE_NULL : sqlite3_column_type(r->st, r->idx[col]);
}

/* A REAL/INTEGER calculator column (or magmom as a float64 blob, schema 5). */
static int scalar_column(ase_db *a, row_view *r, int col, leaf_fn fn, void *ctx)
{
    int t = col_type(r, col);
    if (t == SQLITE_NULL) return 0;
    pt_ase_value v;
    memset(&v, 0, sizeof v);
    if (t == SQLITE_INTEGER || t == SQLITE_FLOAT) {
        v.number = sqlite3_column_double(r->st, r->idx[col]);
        v.kind = isfinite(v.number) ? PT_ASE_NUMBER : PT_ASE_NONFINITE;
    } else if (t == SQLITE_BLOB) {
        const void *b = sqlite3_column_blob(r->st, r->idx[col]);
        size_t n = (size_t)sqlite3_column_bytes(r->st, r->idx[col]);
        uint64_t shape[1] = {0};
        if (pt_ase_blob_array(b, n, PT_ASE_DT_F64, 1, shape, &v.array, v.what, sizeof v.what) < 0) v.kind = PT_ASE_BAD;
        else v.kind = PT_ASE_ARRAY;
    } else {
        v.kind = PT_ASE_TEXT;
        snprintf(v.what, sizeof v.what, "text");
    }
    return fn(a, ctx, pt_ase_col_names[col], SRC_CALC, &v);
}

/* A float64 blob calculator column; rows_of3: (n, 3) like forces. */
static int array_column(ase_db *a, row_view *r, int col, int rows_of3, leaf_fn fn, void *ctx)
{
    int t = col_type(r, col);
    if (t == SQLITE_NULL) return 0;
    pt_ase_value v;
    memset(&v, 0, sizeof v);
    if (t != SQLITE_BLOB) {
        v.kind = PT_ASE_BAD;
        snprintf(v.what, sizeof v.what, "is %s, not a blob of float64", t == SQLITE_TEXT ? "text" : "a number");
    } else {
        const void *b = sqlite3_column_blob(r->st, r->idx[col]);
        size_t n = (size_t)sqlite3_column_bytes(r->st, r->idx[col]);
        uint64_t shape[2] = {0, 3};
        char err[96];
        if (pt_ase_blob_array(b, n, PT_ASE_DT_F64, rows_of3 ? 2 : 1, shape, &v.array, err, sizeof err) == 0) {
            v.kind = PT_ASE_ARRAY;
        } else {
            v.kind = PT_ASE_BAD;
            snprintf(v.what, sizeof v.what, "%s (float64%s)", err, rows_of3 ? ", 3 per atom" : "");
        }
    }
    return fn(a, ctx, pt_ase_col_names[col], SRC_CALC, &v);
}

static int bad_container(ase_db *a, void *ctx, leaf_fn fn, const char *field, const char *msg)
{
    pt_ase_value v;
    memset(&v, 0, sizeof v);
    v.kind = PT_ASE_BAD;
    snprintf(v.what, sizeof v.what, "%.150s", msg);
    return fn(a, ctx, field, -1, &v);   /* source -1: the column itself, not a name */
}

static int kv_column(ase_db *a, row_view *r, leaf_fn fn, void *ctx)
{
    int t = col_type(r, COL_KEY_VALUE_PAIRS);
    if (t == SQLITE_NULL) return 0;
    const char *text = (const char *)sqlite3_column_text(r->st, r->idx[COL_KEY_VALUE_PAIRS]);
    size_t len = (size_t)sqlite3_column_bytes(r->st, r->idx[COL_KEY_VALUE_PAIRS]);
    char err[200];
    json_t *kv = text ? pt_ase_json_loads(text, len, err, sizeof err) : NULL;
    if (!kv || !json_is_object(kv)) {
        json_decref(kv);
        return bad_container(a, ctx, fn, "key_value_pairs", kv ? "is not a JSON object" : err);
    }
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(kv, key, val) {
        pt_ase_value v;
        pt_ase_value_classify(val, NULL, 0, &r->scratch, &r->scratch_cap, &v);
        if ((rc = fn(a, ctx, key, SRC_KV, &v)) != 0) break;
    }
    json_decref(kv);
    return rc;
}

typedef struct data_walk {
    ase_db *a;
    leaf_fn fn;
    void *ctx;
} data_walk;

static int on_data_leaf(void *ctx, const char *path, const pt_ase_value *v)
{
    data_walk *w = ctx;
    return w->fn(w->a, w->ctx, path, SRC_DATA, v);
}

static int data_column(ase_db *a, row_view *r, leaf_fn fn, void *ctx)
{
    int t = col_type(r, COL_DATA);
    if (t == SQLITE_NULL) return 0;
    pt_ase_data d;
    char err[200];
    int i = r->idx[COL_DATA], rc;
    /* ASE decodes bytes as the binary form and str as JSON text (SQLite3Database.decode) */
    if (t == SQLITE_BLOB)
        rc = pt_ase_data_decode_blob(&d, sqlite3_column_blob(r->st, i), (size_t)sqlite3_column_bytes(r->st, i),
                                     err, sizeof err);
    else
        rc = pt_ase_data_decode_text(&d, (const char *)sqlite3_column_text(r->st, i),
                                     (size_t)sqlite3_column_bytes(r->st, i), err, sizeof err);
    if (rc < 0) {
        pt_ase_data_close(&d);
        return bad_container(a, ctx, fn, "data", err);
    }
    data_walk w = {a, fn, ctx};
    rc = pt_ase_data_walk(&d, on_data_leaf, &w);
    pt_ase_data_close(&d);
    return rc;
}

static int decode_values(ase_db *a, row_view *r, leaf_fn fn, void *ctx)
{
    static const int scalars[] = {COL_ENERGY, COL_FREE_ENERGY, COL_MAGMOM};
    static const struct {
        int col, rows_of3;
    } arrays[] = {{COL_FORCES, 1}, {COL_STRESS, 0}, {COL_DIPOLE, 0}, {COL_CHARGES, 0}, {COL_MAGMOMS, 0}};
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof scalars / sizeof scalars[0]; i++) rc = scalar_column(a, r, scalars[i], fn, ctx);
    for (size_t i = 0; !rc && i < sizeof arrays / sizeof arrays[0]; i++)
        rc = array_column(a, r, arrays[i].col, arrays[i].rows_of3, fn, ctx);
    if (!rc) rc = kv_column(a, r, fn, ctx);
    if (!rc) rc = data_column(a, r, fn, ctx);
    return rc;
}

/* ---- statements ---------------------------------------------------------- */

static int prepare_rows(ase_db *a, row_view *r, const int *cols, size_t n_cols)
{
    char sql[1024] = "SELECT ";
    size_t len = strlen(sql);
    int k = 0;
    for (int c = 0; c < N_COLS; c++) r->idx[c] = -1;
    for (size_t i = 0; i < n_cols; i++) {
        if (!a->has_col[cols[i]]) continue;
        len += (size_t)snprintf(sql + len, sizeof sql - len, "%s%s", k ? ", " : "", pt_ase_col_names[cols[i]]);
        r->idx[cols[i]] = k++;
    }
    snprintf(sql + len, sizeof sql - len, " FROM systems ORDER BY id");
    if (sqlite3_prepare_v2(a->db, sql, -1, &r->st, NULL) != SQLITE_OK) {
        pt_errors_add(a->errs, a->file, 0, "", "SQLite: %s", sqlite3_errmsg(a->db));
        a->fatal = 1;
        return -1;
    }
    return 0;
}

/* sqlite3_step; 1 with a row, 0 at the end, -1 on an error (reported). */
static int next_row(ase_db *a, row_view *r)
{
    int rc = sqlite3_step(r->st);
    if (rc == SQLITE_ROW) {
        r->id = (long)sqlite3_column_int64(r->st, r->idx[COL_ID]);
        return 1;
    }
    if (rc == SQLITE_DONE) return 0;
    pt_errors_add(a->errs, a->file, 0, "", "SQLite: %s (the file is damaged)", sqlite3_errmsg(a->db));
    a->fatal = 1;
    return -1;
}

/* ---- survey -------------------------------------------------------------- */

static int survey_leaf(ase_db *a, void *ctx, const char *name, int source, const pt_ase_value *v)
{
    row_view *r = ctx;
    if (source < 0) return 0;   /* a damaged column: the second pass reports it */
    int c = pt_ase_cand_add(a, name, source);
    if (c < 0) {
        pt_errors_add(a->errs, a->file, 0, "", "out of memory");
        a->fatal = 1;
        return -1;
    }
    ase_cand *e = &a->cands[c];
    e->rows++;
    unsigned f = pt_ase_fits(v, r->n_atoms);
    for (int i = 0; i < N_FIT; i++) e->fits[i] += (f >> i) & 1;
    if (v->kind == PT_ASE_TEXT) e->text++;
    if (v->kind == PT_ASE_ARRAY) {
        if ((f & (1u << FIT_ATOM_SCALAR)) && v->array.dtype >= PT_ASE_DT_I64 && v->array.dtype <= PT_ASE_DT_U8)
            e->int_atom_rows++;
        if (!e->first_count) e->first_count = v->array.count ? v->array.count : UINT64_MAX;
        else if (e->first_count != (v->array.count ? v->array.count : UINT64_MAX)) e->count_varies = 1;
    }
    else if (!f && !e->example[0]) {
        describe_value(v, e->example, sizeof e->example);
        e->example_row = r->id;
    }
    return 0;
}

static void decide_kind(ase_cand *e)
{
    if (e->fits[FIT_SCALAR] == e->rows) e->kind = K_SCALAR;
    else if (e->fits[FIT_VEC3] == e->rows) e->kind = K_VEC3;
    else if (e->fits[FIT_STRESS] == e->rows) e->kind = K_STRESS;
    else if (e->fits[FIT_ATOM_SCALAR] == e->rows) e->kind = K_ATOM_SCALAR;
    else if (e->text == e->rows) e->kind = K_TEXT;
    else if (e->fits[FIT_SCALAR] || e->fits[FIT_VEC3] || e->fits[FIT_STRESS] || e->fits[FIT_ATOM_SCALAR] || e->text)
        e->kind = K_MIXED;
    else e->kind = K_OTHER;
}

int pt_ase_survey(ase_db *a)
{
    static const int cols[] = {COL_ID, COL_NUMBERS, COL_ENERGY, COL_FREE_ENERGY, COL_MAGMOM, COL_FORCES,
                               COL_STRESS, COL_DIPOLE, COL_CHARGES, COL_MAGMOMS, COL_KEY_VALUE_PAIRS,
                               COL_DATA, COL_CALCULATOR, COL_CONSTRAINTS};
    row_view r = {0};
    if (prepare_rows(a, &r, cols, sizeof cols / sizeof cols[0]) < 0) return -1;
    int rc;
    while ((rc = next_row(a, &r)) == 1) {
        a->n_rows++;
        const char *calc = col_type(&r, COL_CALCULATOR) == SQLITE_TEXT
                               ? (const char *)sqlite3_column_text(r.st, r.idx[COL_CALCULATOR]) : "none";
        json_object_set_new(a->calculators, calc,
                            json_integer(json_integer_value(json_object_get(a->calculators, calc)) + 1));
        if (col_type(&r, COL_CONSTRAINTS) == SQLITE_TEXT) a->n_constraints++;
        if (col_type(&r, COL_NUMBERS) != SQLITE_BLOB) continue;   /* the second pass reports it */
        size_t nb = (size_t)sqlite3_column_bytes(r.st, r.idx[COL_NUMBERS]);
        if (nb % 4) continue;
        r.n_atoms = nb / 4;
        if ((rc = decode_values(a, &r, survey_leaf, &r)) != 0) break;
    }
    sqlite3_finalize(r.st);
    free(r.scratch);
    for (uint32_t c = 0; c < a->n_cands; c++) decide_kind(&a->cands[c]);
    return rc == 0 ? 0 : -1;
}

/* ---- structures ---------------------------------------------------------- */

typedef struct build {
    row_view r;
    pt_structure *s;
} build;

static void bad(ase_db *a, build *b, const char *field, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void bad(ase_db *a, build *b, const char *field, const char *fmt, ...)
{
    char msg[PT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt_ase_row_error(a, b->r.id, field, "%s", msg);
    b->s->valid = 0;
}

static void add_target(ase_db *a, build *b, const ase_cand *e, const pt_ase_value *v)
{
    double x = v->kind == PT_ASE_ARRAY ? pt_ase_array_get(&v->array, 0) : v->number;
    if (!isfinite(x)) {
        bad(a, b, e->name, "NaN or Inf value (%g)", x);
        return;
    }
    pt_structure *s = b->s;
    if (s->n_keys == PT_READER_MAX_KEYS) {
        bad(a, b, e->name, "the row has more than %d per-structure numbers", PT_READER_MAX_KEYS);
        return;
    }
    pt_key_value *kv = &s->keys[s->n_keys++];
    snprintf(kv->name, sizeof kv->name, "%.*s", PT_KEY_MAX - 1, e->name);
    kv->numeric = 1;
    kv->value = x * e->factor;
}

static void add_forces(ase_db *a, build *b, const ase_cand *e, const pt_ase_value *v)
{
    pt_structure *s = b->s;
    if (pt_structure_reserve(s, s->n_atoms, 1) < 0) {
        bad(a, b, e->name, "out of memory");
        return;
    }
    for (uint64_t i = 0; i < 3 * (uint64_t)s->n_atoms; i++) {
        float f = (float)(pt_ase_array_get(&v->array, i) * e->factor);
        if (!isfinite(f)) {
            bad(a, b, e->name, "atom %llu: NaN or Inf value (%g)", (unsigned long long)(i / 3 + 1),
                pt_ase_array_get(&v->array, i));
            return;
        }
        s->forces_buf[i] = f;
    }
    s->forces = s->forces_buf;
}

static void add_stress(ase_db *a, build *b, const ase_cand *e, const pt_ase_value *v)
{
    static const int voigt[9] = {0, 5, 4, 5, 1, 3, 4, 3, 2};   /* xx yy zz yz xz xy -> 3x3 */
    for (int i = 0; i < 9; i++) {
        double x = pt_ase_array_get(&v->array, (uint64_t)(v->array.count == 6 ? voigt[i] : i)) * e->factor;
        if (!isfinite(x)) {
            bad(a, b, e->name, "NaN or Inf value (%g)", x);
            return;
        }
        b->s->stress[i] = x;
    }
    b->s->has_stress = 1;
}

/* One value per atom as column `name` of the structure (format.h atom_vals),
 * the way extended XYZ keeps a real R:1 column. */
static void add_atom_col(ase_db *a, build *b, const ase_cand *e, const pt_ase_value *v)
{
    pt_structure *s = b->s;
    if (s->n_atom_cols == PT_ATOM_COLS_MAX) {
        bad(a, b, e->name, "the row has more than %d per-atom columns", PT_ATOM_COLS_MAX);
        return;
    }
    if (pt_structure_reserve_values(s, s->n_atom_cols + 1) < 0) {
        bad(a, b, e->name, "out of memory");
        return;
    }
    float *dst = s->atom_vals + (size_t)s->n_atom_cols * s->n_atoms;
    for (uint32_t i = 0; i < s->n_atoms; i++) {
        double x = pt_ase_array_get(&v->array, i) * e->factor;
        dst[i] = (float)x;
        if (!isfinite(dst[i])) {
            bad(a, b, e->name, "atom %u: NaN or Inf value (%g)", i + 1, pt_ase_array_get(&v->array, i));
            return;
        }
    }
    snprintf(s->atom_col_names[s->n_atom_cols++], PT_KEY_MAX, "%.*s", PT_KEY_MAX - 1, e->name);
}

static int row_leaf(ase_db *a, void *ctx, const char *name, int source, const pt_ase_value *v)
{
    build *b = ctx;
    if (v->kind == PT_ASE_BAD) {
        bad(a, b, name, "%s", v->what);
        return 0;
    }
    if (source < 0) return 0;
    int c = pt_ase_cand_find(a, name);
    if (c < 0) return 0;
    const ase_cand *e = &a->cands[c];
    unsigned f = pt_ase_fits(v, b->s->n_atoms);
    char what[160];
    describe_value(v, what, sizeof what);
    switch (e->role) {
    case ROLE_TARGET:
        if (f & (1u << FIT_SCALAR)) add_target(a, b, e, v);
        else bad(a, b, name, "%s here, but a number in %llu other rows", what,
                 (unsigned long long)e->fits[FIT_SCALAR]);
        break;
    case ROLE_FORCES:
        if (f & (1u << FIT_VEC3)) add_forces(a, b, e, v);
        else if (v->kind == PT_ASE_ARRAY && v->array.ndim == 2 && v->array.shape[1] == 3)
            bad(a, b, name, "shape (%llu, 3) but the row has %u atoms", (unsigned long long)v->array.shape[0],
                b->s->n_atoms);
        else if (v->kind == PT_ASE_ARRAY) bad(a, b, name, "%s, not per-atom 3-vectors (%u, 3)", what, b->s->n_atoms);
        else bad(a, b, name, "%s", what);
        break;
    case ROLE_ATOM:
        if (f & (1u << FIT_ATOM_SCALAR)) add_atom_col(a, b, e, v);
        else bad(a, b, name, "%s here, not one value per atom (the row has %u atoms: shape (%u,) or (%u, 1)), "
                 "as in %llu other rows", what, b->s->n_atoms, b->s->n_atoms, b->s->n_atoms,
                 (unsigned long long)e->fits[FIT_ATOM_SCALAR]);
        break;
    case ROLE_STRESS:
        if (f & (1u << FIT_STRESS)) add_stress(a, b, e, v);
        else if (v->kind == PT_ASE_ARRAY) bad(a, b, name, "%s, not a stress (3x3 or Voigt 6)", what);
        else bad(a, b, name, "%s", what);
        break;
    default: break;
    }
    return 0;
}

/* The checks extended XYZ makes on a periodic structure (xyz_comment.c). */
static int check_cell(ase_db *a, build *b)
{
    pt_structure *s = b->s;
    if (!s->pbc) return 0;
    double measure;
    int singular;
    int n = pt_cell_periodic_measure(s->cell, s->pbc, &measure, &singular);
    if (!singular) return 0;
    static const char *const what[4] = {"", "length", "area", "volume"};
    static const char *const unit[4] = {"", "Å", "Å²", "Å³"};
    char shown[6];
    bad(a, b, "cell", "cell is singular along its periodic axes (pbc=\"%s\"): %s %g %s; the periodic lattice "
        "vectors must be non-zero and linearly independent", pt_pbc_text(s->pbc, shown), what[n], measure, unit[n]);
    return -1;
}

/* numbers, positions, cell, pbc: what defines the Atoms object. */
static int read_atoms(ase_db *a, build *b)
{
    row_view *r = &b->r;
    pt_structure *s = b->s;
    if (col_type(r, COL_NUMBERS) != SQLITE_BLOB) {
        bad(a, b, "numbers", "is %s, not a blob of int32", col_type(r, COL_NUMBERS) == SQLITE_NULL ? "null" : "not a blob");
        return -1;
    }
    pt_ase_array z, pos, cell;
    char err[96];
    uint64_t zshape[1] = {0}, pshape[2] = {0, 3}, cshape[2] = {3, 3};
    const void *blob = sqlite3_column_blob(r->st, r->idx[COL_NUMBERS]);
    if (pt_ase_blob_array(blob, (size_t)sqlite3_column_bytes(r->st, r->idx[COL_NUMBERS]), PT_ASE_DT_I32, 1, zshape,
                          &z, err, sizeof err) < 0) {
        bad(a, b, "numbers", "%s (int32)", err);
        return -1;
    }
    if (z.count == 0) {
        bad(a, b, "numbers", "the row has zero atoms");
        return -1;
    }
    if (z.count > a->opt->max_atoms) {
        bad(a, b, "numbers", "the row has %llu atoms, more than max_atoms %u", (unsigned long long)z.count,
            a->opt->max_atoms);
        return -1;
    }
    s->n_atoms = (uint32_t)z.count;
    r->n_atoms = z.count;
    if (pt_structure_reserve(s, s->n_atoms, 0) < 0) {
        bad(a, b, "", "out of memory for %u atoms", s->n_atoms);
        return -1;
    }
    if (col_type(r, COL_NATOMS) == SQLITE_INTEGER && sqlite3_column_int64(r->st, r->idx[COL_NATOMS]) != (long long)z.count)
        bad(a, b, "natoms", "says %lld atoms, but numbers holds %llu", sqlite3_column_int64(r->st, r->idx[COL_NATOMS]),
            (unsigned long long)z.count);
    for (uint32_t i = 0; i < s->n_atoms; i++) {
        double zi = pt_ase_array_get(&z, i);
        if (zi < 1 || zi > PT_Z_MAX) {
            bad(a, b, "numbers", "atom %u has atomic number %.0f; packtrain knows 1 to %d", i + 1, zi, PT_Z_MAX);
            return -1;
        }
        s->z[i] = (uint8_t)zi;
    }
    blob = sqlite3_column_blob(r->st, r->idx[COL_POSITIONS]);
    if (col_type(r, COL_POSITIONS) != SQLITE_BLOB ||
        pt_ase_blob_array(blob, (size_t)sqlite3_column_bytes(r->st, r->idx[COL_POSITIONS]), PT_ASE_DT_F64, 2, pshape,
                          &pos, err, sizeof err) < 0 || pos.shape[0] != z.count) {
        bad(a, b, "positions", "blob of %d bytes; %u atoms need %u bytes (float64, 3 per atom)",
            sqlite3_column_bytes(r->st, r->idx[COL_POSITIONS]), s->n_atoms, 24 * s->n_atoms);
        return -1;
    }
    for (uint64_t i = 0; i < 3 * z.count; i++) {
        s->pos[i] = (float)(pt_ase_array_get(&pos, i) * a->distance_factor);
        if (!isfinite(s->pos[i])) {
            bad(a, b, "positions", "atom %llu: NaN or Inf value (%g)", (unsigned long long)(i / 3 + 1),
                pt_ase_array_get(&pos, i));
            return -1;
        }
    }
    if (col_type(r, COL_CELL) != SQLITE_NULL) {
        blob = sqlite3_column_blob(r->st, r->idx[COL_CELL]);
        if (col_type(r, COL_CELL) != SQLITE_BLOB ||
            pt_ase_blob_array(blob, (size_t)sqlite3_column_bytes(r->st, r->idx[COL_CELL]), PT_ASE_DT_F64, 2, cshape,
                              &cell, err, sizeof err) < 0) {
            bad(a, b, "cell", "blob of %d bytes; a cell is 72 bytes (3x3 float64)",
                sqlite3_column_bytes(r->st, r->idx[COL_CELL]));
            return -1;
        }
        for (int i = 0; i < 9; i++) {
            s->cell[i] = pt_ase_array_get(&cell, (uint64_t)i) * a->distance_factor;
            if (!isfinite(s->cell[i])) {
                bad(a, b, "cell", "NaN or Inf value (%g)", s->cell[i]);
                return -1;
            }
            /* ASE stores a zero cell for a molecule; extended XYZ has no Lattice then */
            s->has_cell |= s->cell[i] != 0.0;
        }
    }
    int pt = col_type(r, COL_PBC);
    long long pbc = pt == SQLITE_INTEGER ? sqlite3_column_int64(r->st, r->idx[COL_PBC]) : 0;
    if ((pt != SQLITE_INTEGER && pt != SQLITE_NULL) || pbc < 0 || pbc > 7) {
        bad(a, b, "pbc", "is not a 3-bit integer (0 to 7)");
        return -1;
    }
    s->pbc = (uint8_t)pbc;   /* ASE's bits 1, 2, 4 for a, b, c are PT_PBC_A, _B, _C */
    return check_cell(a, b);
}

int pt_ase_rows(ase_db *a, pt_structure_fn fn, void *ctx)
{
    static const int cols[] = {COL_ID, COL_NUMBERS, COL_POSITIONS, COL_CELL, COL_PBC, COL_NATOMS, COL_ENERGY,
                               COL_FREE_ENERGY, COL_MAGMOM, COL_FORCES, COL_STRESS, COL_DIPOLE, COL_CHARGES,
                               COL_MAGMOMS, COL_KEY_VALUE_PAIRS, COL_DATA};
    build b;
    memset(&b, 0, sizeof b);
    b.s = calloc(1, sizeof(*b.s));
    if (!b.s) {
        pt_errors_add(a->errs, a->file, 0, "", "out of memory");
        return -1;
    }
    int rc = prepare_rows(a, &b.r, cols, sizeof cols / sizeof cols[0]);
    while (rc == 0 && (rc = next_row(a, &b.r)) == 1) {
        pt_structure *s = b.s;
        pt_structure_reset(s, b.r.id, PT_FORMAT_ASE_DB);
        s->file = a->file;
        s->row = b.r.id;
        if (read_atoms(a, &b) == 0) {
            decode_values(a, &b.r, row_leaf, &b);
            if (s->has_stress && s->pbc != PT_PBC_ALL) {
                char shown[6];
                bad(a, &b, a->cands[a->stress].name, "stress needs a structure periodic along a, b and c (a cell "
                    "volume), this one has pbc=\"%s\"", pt_pbc_text(s->pbc, shown));
            }
        }
        if ((rc = fn(ctx, s)) != 0) break;
    }
    sqlite3_finalize(b.r.st);
    free(b.r.scratch);
    pt_structure_free(b.s);
    free(b.s);
    return rc;
}
