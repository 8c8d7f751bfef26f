/* test_ase_db.c — ASE databases read as structures: every layout of
 * tests/data/make_ase_db.py (calculator columns, key-value pairs,
 * SchNetPack's data dict, total_energy/atomic_forces, schema 8 JSON text)
 * gives exactly the structures, cells, pbc and labels of the same
 * structures as extended XYZ, through the reader and through ingest into a
 * .ptd; SchNetPack units are converted; forces/stress keys are chosen by
 * the documented rule; the info JSON lists every candidate. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/dataset.h"
#include "engine/data/ingest.h"
#include "engine/model/schnet.h"
#include "tests/unit/ase_db_fixture.h"
#include "server/cli/commands.h"
#include "tests/unit/cmd_fixture.h"

#define REF ADB_DIR "ase_db_ref.extxyz"
#define N_REF 10

/* One layout: the file, the keys to pass, and where its labels end up. */
typedef struct layout {
    const char *file;
    const char *forces_key, *stress_key;
    const char *energy;        /* the target holding the energy */
    const char *forces, *stress;   /* the candidates chosen (info "forces"/"stress") */
} layout;

static const layout layouts[] = {
    {"ase_db_calc.db", NULL, NULL, "energy", "forces", "stress"},
    {"ase_db_kv.db", NULL, NULL, "ref_energy", "data.forces", "data.stress"},
    {"ase_db_schnetpack.db", NULL, NULL, "data.energy", "data.forces", NULL},
    {"ase_db_named.db", "atomic_forces", "dft.stress", "data.total_energy", "data.atomic_forces",
     "data.dft.stress"},
    {"ase_db_v8.db", NULL, NULL, "data.energy", "data.forces", NULL},
};

static itu_collect *read_ref(void)
{
    itu_collect *c = calloc(1, sizeof(*c));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 1000};
    assert_int_equal(pt_read_structures(REF, &o, itu_on_structure, c, &errs), 0);
    if (errs.total) itu_print_errors(&errs);
    assert_int_equal(errs.total, 0);
    assert_int_equal(c->n_valid, N_REF);
    pt_errors_close(&errs);
    return c;
}

/* The reader: every structure of every layout equals the extended XYZ one,
 * floats and doubles bit for bit (both hold the text's decimals). */
static void test_layouts_equal_extxyz(void **state)
{
    (void)state;
    itu_collect *ref = read_ref();
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        const layout *L = &layouts[l];
        char path[256];
        snprintf(path, sizeof path, ADB_DIR "%s", L->file);
        adb_read r;
        adb_read_file(&r, path, L->forces_key, L->stress_key);
        if (r.errs.total) itu_print_errors(&r.errs);
        assert_int_equal(r.rc, 0);
        assert_int_equal(r.errs.total, 0);
        assert_int_equal(r.c->n_valid, N_REF);
        assert_string_equal(adb_str(r.info, "forces"), L->forces ? L->forces : "(null)");
        assert_string_equal(adb_str(r.info, "stress"), L->stress ? L->stress : "(null)");
        int n_stress = 0, n_periodic = 0;
        for (int s = 0; s < N_REF; s++) {
            const itu_item *a = &r.c->items[s], *b = &ref->items[s];
            assert_int_equal(a->format, PT_FORMAT_ASE_DB);
            assert_int_equal(a->line, s + 1);   /* the row id */
            assert_int_equal(a->n_atoms, b->n_atoms);
            assert_memory_equal(a->z, b->z, a->n_atoms);
            assert_memory_equal(a->pos, b->pos, 3 * sizeof(float) * a->n_atoms);
            assert_int_equal(a->has_cell, b->has_cell);
            assert_memory_equal(a->cell, b->cell, sizeof a->cell);
            assert_int_equal(a->pbc, b->pbc);
            n_periodic += a->pbc != 0;
            assert_true(a->has_forces && b->has_forces);
            assert_memory_equal(a->forces, b->forces, 3 * sizeof(float) * a->n_atoms);
            if (L->stress) {
                assert_int_equal(a->has_stress, b->has_stress);
                if (b->has_stress) assert_memory_equal(a->stress, b->stress, sizeof a->stress);
                n_stress += a->has_stress;
            } else {
                assert_false(a->has_stress);
            }
            const pt_key_value *e = itu_key(a, L->energy), *e_ref = itu_key(b, "energy");
            assert_non_null(e);
            assert_true(e->numeric && e->value == e_ref->value);
            const pt_key_value *w = itu_key(a, "n_waters"), *w_ref = itu_key(b, "n_waters");
            assert_int_equal(w != NULL, w_ref != NULL);
            if (w) assert_true(w->value == w_ref->value);
            assert_int_equal(a->n_keys, b->n_keys);   /* nothing else became a target */
        }
        assert_int_equal(n_periodic, 7);
        if (L->stress) assert_int_equal(n_stress, 5);
        adb_read_close(&r);
    }
    free(ref);
}

/* Through ingest: the .ptd from each database equals the .ptd from the
 * extended XYZ file in every column, and the report describes the database. */
static void test_ingest_equals_extxyz(void **state)
{
    (void)state;
    char dir[64], ref_out[128], out[128];
    assert_int_equal(tfx_mkdtemp(dir, sizeof dir, "asedb"), 0);
    snprintf(ref_out, sizeof ref_out, "%s/ref.ptd", dir);
    snprintf(out, sizeof out, "%s/db.ptd", dir);
    pt_ingest_options o;
    pt_ingest_options_init(&o);
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const char *in = REF;
    assert_int_equal(pt_ingest_files(&in, 1, ref_out, &o, &rep, &errs), 0);
    pt_ingest_report_close(&rep);
    pt_dataset ref = {0}, ds = {0};
    char err[256];
    assert_int_equal(pt_dataset_open(&ref, ref_out, err, sizeof err), 0);
    int e_ref = pt_dataset_find_target(&ref, "energy");
    assert_true(e_ref >= 0);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        const layout *L = &layouts[l];
        char path[256];
        snprintf(path, sizeof path, ADB_DIR "%s", L->file);
        in = path;
        o.forces_key = L->forces_key;
        o.stress_key = L->stress_key;
        int rc = pt_ingest_files(&in, 1, out, &o, &rep, &errs);
        if (rc) itu_print_errors(&errs);
        assert_int_equal(rc, 0);
        assert_int_equal(rep.n_by_format[PT_FORMAT_ASE_DB], N_REF);
        json_t *j = pt_ingest_report_json(&rep);
        const json_t *db = json_array_get(json_object_get(j, "ase_db"), 0);
        assert_non_null(db);
        assert_string_equal(adb_str(db, "file"), path);
        assert_int_equal(json_integer_value(json_object_get(db, "rows")), N_REF);
        json_decref(j);
        pt_ingest_report_close(&rep);
        assert_int_equal(pt_dataset_open(&ds, out, err, sizeof err), 0);
        assert_int_equal(ds.n_structs, ref.n_structs);
        assert_int_equal(ds.n_atoms, ref.n_atoms);
        assert_memory_equal(ds.atom_offset, ref.atom_offset, 8 * (ref.n_structs + 1));
        assert_memory_equal(ds.z, ref.z, ref.n_atoms);
        assert_memory_equal(ds.pos, ref.pos, 12 * ref.n_atoms);
        assert_memory_equal(ds.forces, ref.forces, 12 * ref.n_atoms);
        assert_memory_equal(ds.cell, ref.cell, 72 * ref.n_structs);
        assert_memory_equal(ds.pbc, ref.pbc, ref.n_structs);
        if (L->stress) assert_memory_equal(ds.stress, ref.stress, 72 * ref.n_structs);
        else assert_null(ds.stress);
        /* the energy under its own name, and under "energy" by the lookup rule
         * (a data entry is found without its "data." prefix) */
        int e = pt_dataset_find_target(&ds, L->energy);
        assert_true(e >= 0);
        assert_memory_equal(ds.targets + (size_t)e * ds.n_structs, ref.targets + (size_t)e_ref * ref.n_structs,
                            8 * ref.n_structs);
        if (!strncmp(L->energy, "data.", 5)) assert_int_equal(pt_dataset_find_target(&ds, L->energy + 5), e);
        for (uint32_t s = 0; s < ds.n_structs; s++) assert_int_equal(ds.source_line[s], s + 1);   /* row ids */
        pt_dataset_close(&ds);
    }
    pt_dataset_close(&ref);
    pt_errors_close(&errs);
    tfx_rmtree(dir);
}

/* SchNetPack metadata in kcal/mol, kcal/mol/Bohr and Bohr: converted to eV,
 * eV/Å and Å by the factors SchNetPack itself uses; "arb. unit" is kept. */
static void test_units(void **state)
{
    (void)state;
    itu_collect *ref = read_ref();
    adb_read r;
    adb_read_file(&r, ADB_DIR "ase_db_units.db", NULL, NULL);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.c->n_valid, 4);
    for (int s = 0; s < 4; s++) {
        const itu_item *a = &r.c->items[s], *b = &ref->items[s];
        for (uint32_t i = 0; i < 3 * a->n_atoms; i++) {
            assert_float_equal(a->pos[i], b->pos[i], 1e-6 * (1 + fabsf(b->pos[i])));
            assert_float_equal(a->forces[i], b->forces[i], 1e-6 * (1 + fabsf(b->forces[i])));
        }
        for (int i = 0; i < 9; i++) assert_float_equal(a->cell[i], b->cell[i], 1e-12 * (1 + fabs(b->cell[i])));
        double e = itu_key(a, "data.energy")->value, e_ref = itu_key(b, "energy")->value;
        assert_float_equal(e, e_ref, 1e-12 * (1 + fabs(e_ref)));
        assert_true(itu_key(a, "data.charge")->value == 0.0);
    }
    const json_t *u = json_object_get(r.info, "units");
    assert_true(json_real_value(json_object_get(json_object_get(u, "positions"), "factor")) == 0.5291772105638411);
    assert_true(json_real_value(json_object_get(json_object_get(u, "data.energy"), "factor")) ==
                0.04336410390059322);
    assert_string_equal(adb_str(json_object_get(u, "data.forces"), "to"), "eV/Ang");
    assert_true(json_real_value(json_object_get(json_object_get(u, "data.forces"), "factor")) ==
                0.08194628006445806);
    assert_non_null(strstr(adb_str(json_object_get(u, "data.charge"), "note"), "no unit"));
    assert_string_equal(adb_str(adb_candidate(r.info, "data.energy"), "unit"), "kcal/mol");
    /* the metadata itself is in the report, atomrefs included (not applied) */
    assert_non_null(json_object_get(json_object_get(json_object_get(r.info, "metadata"), "atomrefs"), "energy"));
    adb_read_close(&r);
    free(ref);
}

/* Which per-atom vectors are the forces: as written, else data.KEY; a name
 * that is absent or holds something else is an error listing candidates. */
static void test_key_choice(void **state)
{
    (void)state;
    adb_read r;
    adb_read_file(&r, ADB_DIR "ase_db_named.db", NULL, NULL);   /* no "forces" here: none stored */
    assert_int_equal(r.rc, 0);
    assert_false(r.c->items[0].has_forces);
    assert_true(json_is_null(json_object_get(r.info, "forces")));
    assert_true(json_is_null(json_object_get(adb_candidate(r.info, "data.atomic_forces"), "used_as")));
    adb_read_close(&r);
    adb_read_file(&r, ADB_DIR "ase_db_named.db", "data.atomic_forces", "data.dft.stress");
    assert_int_equal(r.rc, 0);
    assert_true(r.c->items[0].has_forces && r.c->items[0].has_stress);
    assert_string_equal(adb_str(adb_candidate(r.info, "data.atomic_forces"), "used_as"), "forces");
    adb_read_close(&r);
    adb_read_file(&r, ADB_DIR "ase_db_named.db", "nope", NULL);
    assert_int_equal(r.rc, -1);
    assert_int_equal(r.c->n, 0);   /* nothing read */
    assert_true(adb_has_error(&r.errs, 0, "forces_key",
                              "'nope' names nothing in this database; candidates holding per-atom 3-vectors: "
                              "data.atomic_forces (data)"));
    adb_read_close(&r);
    adb_read_file(&r, ADB_DIR "ase_db_kv.db", "kind", NULL);
    assert_int_equal(r.rc, -1);
    assert_true(adb_has_error(&r.errs, 0, "forces_key", "'kind' is text (key-value pair), not per-atom 3-vectors"));
    adb_read_close(&r);
    adb_read_file(&r, ADB_DIR "ase_db_calc.db", NULL, "energy");
    assert_int_equal(r.rc, -1);
    assert_true(adb_has_error(&r.errs, 0, "stress_key", "candidates: stress (calculator column)"));
    adb_read_close(&r);
    /* the text formats have one forces column: another name is refused */
    pt_errors errs;
    pt_errors_init(&errs, 0);
    itu_collect *c = calloc(1, sizeof(*c));
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .forces_key = "atomic_forces"};
    assert_int_equal(pt_read_structures(REF, &o, itu_on_structure, c, &errs), -1);
    assert_true(adb_has_error(&errs, 0, "forces_key", "in (extended) XYZ the forces are the Properties column"));
    pt_errors_close(&errs);
    free(c);
}

/* The description of a database: schema, calculators, and every candidate
 * with its source, kind, row count and use. */
static void test_info(void **state)
{
    (void)state;
    adb_read r;
    adb_read_file(&r, ADB_DIR "ase_db_kv.db", NULL, NULL);
    assert_int_equal(r.rc, 0);
    assert_string_equal(adb_str(r.info, "format"), "ase-db");
    assert_int_equal(json_integer_value(json_object_get(r.info, "schema_version")), 9);
    assert_int_equal(json_integer_value(json_object_get(r.info, "rows")), N_REF);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.info, "calculators"), "none")), N_REF);
    static const struct {
        const char *name, *source, *kind, *used_as;
        int rows;
    } want[] = {
        {"ref_energy", "key-value pair", "per-structure scalar", "target", 10},
        {"kind", "key-value pair", "text", "(null)", 10},
        {"relaxed", "key-value pair", "text", "(null)", 10},
        {"data.forces", "data", "per-atom 3-vector", "forces", 10},
        {"data.stress", "data", "stress (3x3 or Voigt 6)", "stress", 5},
        {"n_waters", "key-value pair", "per-structure scalar", "target", 3},
    };
    assert_int_equal(json_array_size(json_object_get(r.info, "candidates")), 6);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const json_t *c = adb_candidate(r.info, want[i].name);
        assert_non_null(c);
        assert_string_equal(adb_str(c, "source"), want[i].source);
        assert_string_equal(adb_str(c, "kind"), want[i].kind);
        assert_string_equal(adb_str(c, "used_as"), want[i].used_as);
        assert_int_equal(json_integer_value(json_object_get(c, "rows")), want[i].rows);
    }
    adb_read_close(&r);
    adb_read_file(&r, ADB_DIR "ase_db_calc.db", NULL, NULL);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.info, "calculators"), "unknown")), N_REF);
    assert_true(json_is_null(json_object_get(r.info, "metadata")));
    assert_string_equal(adb_str(adb_candidate(r.info, "energy"), "source"), "calculator column");
    adb_read_close(&r);
    adb_read_file(&r, ADB_DIR "ase_db_v8.db", NULL, NULL);
    assert_int_equal(json_integer_value(json_object_get(r.info, "schema_version")), 8);
    assert_string_equal(adb_str(json_object_get(r.info, "metadata"), "_distance_unit"), "Ang");
    adb_read_close(&r);
}

/* The dispatch: a .db is recognised by its SQLite header under any name, and
 * --format ase-db / db name it. */
static void test_dispatch(void **state)
{
    (void)state;
    pt_format f;
    assert_int_equal(pt_format_parse("ase-db", &f), 0);
    assert_int_equal(f, PT_FORMAT_ASE_DB);
    assert_int_equal(pt_format_parse("db", &f), 0);
    assert_int_equal(f, PT_FORMAT_ASE_DB);
    assert_string_equal(pt_format_name(PT_FORMAT_ASE_DB), "ase-db");
    char dir[64], path[128];
    assert_int_equal(tfx_mkdtemp(dir, sizeof dir, "asedb"), 0);
    /* any file name: the server's upload-XXXXXX, or one that URIs need escaped */
    snprintf(path, sizeof path, "%s/upload a%%3F?#b", dir);
    FILE *in = fopen(ADB_DIR "ase_db_calc.db", "rb"), *out = fopen(path, "wb");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    itu_collect *c = calloc(1, sizeof(*c));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_read_options o = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .display_name = "mine.db"};
    assert_int_equal(pt_read_structures(path, &o, itu_on_structure, c, &errs), 0);
    assert_int_equal(c->n_valid, N_REF);
    assert_int_equal(c->items[0].format, PT_FORMAT_ASE_DB);
    /* an ASE database asked for by name, given a text file */
    o.format = PT_FORMAT_ASE_DB;
    assert_int_equal(pt_read_structures(REF, &o, itu_on_structure, c, &errs), -1);
    assert_true(adb_has_error(&errs, 0, "", "not an SQLite database"));
    pt_errors_close(&errs);
    free(c);
    tfx_rmtree(dir);
}

/* packtrain ingest on a database: the keys, the report, the exit codes. */
static void test_cli(void **state)
{
    (void)state;
    char dir[64], out_ptd[128];
    assert_int_equal(tfx_mkdtemp(dir, sizeof dir, "asedb_cli"), 0);
    snprintf(out_ptd, sizeof out_ptd, "%s/d.ptd", dir);
    char *out, *err;
    int rc = cfx_run(pt_cmd_ingest, "ingest", dir, &out, &err, ADB_DIR "ase_db_named.db", "--out", out_ptd,
                     "--forces-key", "atomic_forces", "--stress-key", "dft.stress", "--require", "total_energy",
                     NULL);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "formats     extxyz 0, xyz 0, qm9 0, ase-db 10"));
    assert_non_null(strstr(out, "forces data.atomic_forces, stress data.dft.stress"));
    assert_non_null(strstr(out, "  data.atomic_forces     data               per-atom 3-vector"));
    free(out);
    free(err);
    rc = cfx_run(pt_cmd_ingest, "ingest", dir, &out, &err, ADB_DIR "ase_db_named.db", "--out", out_ptd,
                 "--forces-key", "nope", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, ADB_DIR "ase_db_named.db: forces_key: 'nope' names nothing in this database"));
    free(out);
    free(err);
    rc = cfx_run(pt_cmd_ingest, "ingest", dir, &out, &err, ADB_DIR "ase_db_named.db", "--out", out_ptd,
                 "--forces-key", "", NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "--forces-key needs a name"));
    free(out);
    free(err);
    /* --require by the naming rule: n_waters is on 3 rows only */
    rc = cfx_run(pt_cmd_ingest, "ingest", dir, &out, &err, ADB_DIR "ase_db_named.db", "--out", out_ptd,
                 "--require", "n_waters", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, ADB_DIR "ase_db_named.db: row 1: n_waters: required key is missing"));
    free(out);
    free(err);
    tfx_rmtree(dir);
}

/* packtrain eval takes a database as DATA, its --forces-key choosing the
 * forces: every number it prints equals eval on the extended XYZ file. */
static void test_eval(void **state)
{
    (void)state;
    char dir[64], model[128], ptd[128];
    assert_int_equal(tfx_mkdtemp(dir, sizeof dir, "asedb_eval"), 0);
    snprintf(model, sizeof model, "%s/m.safetensors", dir);
    setenv("XDG_CACHE_HOME", dir, 1);   /* ingested DATA is cached here */
    pt_schnet m;
    pt_schnet_config cfg = pt_schnet_config_default();
    cfg.hidden = 16;
    cfg.filters = 12;
    cfg.interactions = 2;
    cfg.gaussians = 8;
    cfg.cutoff = 5.0f;
    assert_int_equal(pt_schnet_init(&m, &cfg, NULL), 0);
    pt_schnet_init_weights(&m, 4);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_save(&m, model, &errs), 0);
    pt_errors_close(&errs);
    pt_schnet_close(&m);
    char *out_db, *out_ref, *err;
    int rc = cfx_run(pt_cmd_eval, "eval", dir, &out_db, &err, "--model", model, "--data", ADB_DIR "ase_db_named.db",
                     "--target", "total_energy", "--forces-weight", "1", "--forces-key",
                     "atomic_forces", NULL);
    if (rc) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(err, "ingested " ADB_DIR "ase_db_named.db (10 structures, 167 atoms)"));
    free(err);
    rc = cfx_run(pt_cmd_eval, "eval", dir, &out_ref, &err, "--model", model, "--data", REF, "--target", "energy",
                 "--forces-weight", "1", NULL);
    assert_int_equal(rc, 0);
    free(err);
    json_t *a = json_loads(out_db, 0, NULL), *b = json_loads(out_ref, 0, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(adb_str(a, "target"), "data.total_energy");
    json_object_del(a, "data");
    json_object_del(b, "data");
    json_object_del(a, "target");
    json_object_del(b, "target");
    assert_true(json_array_size(json_object_get(a, "predictions")) == N_REF);
    assert_true(json_equal(a, b));   /* loss, forces, stress, every prediction */
    json_decref(a);
    json_decref(b);
    free(out_db);
    free(out_ref);
    /* a .ptd keeps the forces it was ingested with: no other key */
    snprintf(ptd, sizeof ptd, "%s/named.ptd", dir);
    assert_int_equal(tfx_ingest(ADB_DIR "ase_db_named.db", ptd), 0);
    rc = cfx_run(pt_cmd_eval, "eval", dir, &out_db, &err, "--model", model, "--data", ptd, "--target", "total_energy",
                 "--forces-weight", "1", "--forces-key", "atomic_forces", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "a dataset holds one forces column"));
    free(out_db);
    free(err);
    unsetenv("XDG_CACHE_HOME");
    tfx_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts_equal_extxyz),
        cmocka_unit_test(test_ingest_equals_extxyz),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_key_choice),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_eval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
