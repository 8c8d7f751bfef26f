/* test_config_targets.c — `targets` of a job configuration (config.h,
 * config_targets.c): defaults filled from model.readout and
 * training.normalize, the canonical form and its fixed point, the
 * one-element list as the single target, one test per error (JSON path and
 * message), and the plan's resolution against a dataset (plan.h: keys that
 * exist, atom targets, the model it builds). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/config.h"
#include "engine/train/plan.h"

static int parse(pt_job_config *cfg, const char *text, pt_errors *errs)
{
    pt_errors_init(errs, 0);
    return pt_job_config_parse(cfg, text, strlen(text), "job.json", errs);
}

static void expect_one_error(const char *text, const char *field, const char *message)
{
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, text, &errs), -1);
    for (size_t i = 0; errs.total != 1 && i < errs.kept; i++)
        fprintf(stderr, "  got: %s: %s\n", errs.items[i].field, errs.items[i].message);
    assert_int_equal(errs.total, 1);
    assert_string_equal(errs.items[0].field, field);
    assert_string_equal(errs.items[0].message, message);
    pt_errors_close(&errs);
}

static void test_defaults_and_canonical_form(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg,
                           "{\"targets\":[{\"key\":\"gap\"},{\"key\":\"homo\",\"weight\":2,"
                           "\"readout\":\"mean\",\"normalize\":\"mean_std\"},{\"key\":\"q\","
                           "\"level\":\"atom\"}],\"model\":{\"readout\":\"sum\"}}",
                           &errs),
                     0);
    assert_int_equal(cfg.n_targets, 3);
    assert_string_equal(cfg.target, "gap");
    assert_true(cfg.targets[0].weight == 1.0);
    assert_int_equal(cfg.targets[0].normalize, PT_NORM_ATOMREF);   /* training.normalize's */
    assert_int_equal(cfg.targets[0].readout, PT_JOB_READOUT_SUM);
    assert_int_equal(cfg.targets[1].readout, PT_JOB_READOUT_MEAN);
    assert_int_equal(cfg.targets[2].level, PT_JOB_LEVEL_ATOM);
    assert_int_equal(cfg.targets[2].normalize, PT_NORM_MEAN_STD);  /* no atomref per atom */
    assert_true(cfg.training.loss.energy_weight == 1.0);
    assert_true(pt_job_config_multi_head(&cfg));
    char *s = pt_job_config_dump(&cfg);
    assert_non_null(strstr(s, "\"targets\":[{\"key\":\"gap\",\"level\":\"graph\",\"normalize\":"
                              "\"atomref\",\"readout\":\"sum\",\"weight\":1.0},{\"key\":\"homo\""));
    assert_null(strstr(s, "\"target\":"));
    /* the canonical form is a fixed point */
    pt_job_config again;
    assert_int_equal(parse(&again, s, &errs), 0);
    char *s2 = pt_job_config_dump(&again);
    assert_string_equal(s, s2);
    free(s);
    free(s2);
    pt_errors_close(&errs);
}

/* One graph target in a list is the single-target job: PyG's head, the
 * weight as the energy weight; a job of `target` prints as before. */
static void test_one_element_list_is_the_single_target(void **state)
{
    (void)state;
    pt_job_config a, b;
    pt_errors errs;
    assert_int_equal(parse(&a, "{\"targets\":[{\"key\":\"gap\",\"weight\":0.5}]}", &errs), 0);
    assert_int_equal(parse(&b, "{\"target\":\"gap\"}", &errs), 0);
    assert_false(pt_job_config_multi_head(&a));
    assert_int_equal(pt_job_config_n_targets(&b), 1);
    assert_true(a.training.loss.energy_weight == 0.5);
    pt_schnet_config ma = pt_train_model_config(&a, 0), mb = pt_train_model_config(&b, 0);
    assert_int_equal(ma.n_heads, 0);
    assert_int_equal(mb.n_heads, 0);
    assert_int_equal(ma.use_atomref, mb.use_atomref);
    pt_job_target t = pt_job_config_target(&b, 0);
    assert_string_equal(t.key, "gap");
    assert_true(t.weight == 1.0);
    char *s = pt_job_config_dump(&b);
    assert_non_null(strstr(s, "\"target\":\"gap\""));
    assert_null(strstr(s, "targets"));
    free(s);
    pt_errors_close(&errs);
}

static void test_model_of_several_targets(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg,
                           "{\"targets\":[{\"key\":\"gap\"},{\"key\":\"mu\",\"readout\":\"mean\","
                           "\"normalize\":\"none\"}]}",
                           &errs),
                     0);
    pt_schnet_config m = pt_train_model_config(&cfg, 0);
    assert_int_equal(m.n_heads, 2);
    assert_string_equal(m.heads[0].key, "gap");
    assert_int_equal(m.heads[0].use_atomref, 1);
    assert_int_equal(m.heads[1].readout, PT_READOUT_MEAN);
    assert_int_equal(m.heads[1].use_atomref, 0);
    assert_int_equal(pt_schnet_config_check(&m, NULL), 0);
    pt_errors_close(&errs);
}

static void test_errors(void **state)
{
    (void)state;
    expect_one_error("{\"target\":\"gap\",\"targets\":[{\"key\":\"gap\"}]}", "targets",
                     "give \"target\" (one) or \"targets\" (a list), not both");
    expect_one_error("{\"targets\":[]}", "targets",
                     "must be a list of 1 to 16 targets {\"key\", ...}, got a list of another "
                     "length");
    expect_one_error("{\"targets\":{\"key\":\"gap\"}}", "targets",
                     "must be a list of 1 to 16 targets {\"key\", ...}, got an object");
    expect_one_error("{\"targets\":[\"gap\"]}", "targets[0]",
                     "must be an object {\"key\", \"level\", \"weight\", \"normalize\", "
                     "\"readout\"}, got a string");
    expect_one_error("{\"targets\":[{\"weight\":1}]}", "targets[0].key",
                     "is required: the dataset key this target is trained on, e.g. \"gap\"");
    expect_one_error("{\"targets\":[{\"key\":\"h o\"}]}", "targets[0].key",
                     "must be a dataset key of 1 to 63 letters, digits, '_', '.' or '-' (it "
                     "names the head's tensors), got \"h o\"");
    expect_one_error("{\"targets\":[{\"key\":\"gap\"},{\"key\":\"gap\"}]}", "targets[1].key",
                     "'gap' is targets[0] already: one head per key");
    expect_one_error("{\"targets\":[{\"key\":\"gap\",\"lvl\":\"atom\"}]}", "targets[0].lvl",
                     "unknown key; allowed here: key, level, weight, normalize, readout");
    expect_one_error("{\"targets\":[{\"key\":\"gap\",\"level\":\"node\"}]}", "targets[0].level",
                     "must be one of \"graph\", \"atom\", got \"node\"");
    expect_one_error("{\"targets\":[{\"key\":\"gap\",\"weight\":-1}]}", "targets[0].weight",
                     "must be a number of at least 0 and at most 1e+06, got -1");
    expect_one_error("{\"targets\":[{\"key\":\"q\",\"level\":\"atom\",\"readout\":\"mean\"}]}",
                     "targets[0].readout",
                     "an atom-level target is not read out (one prediction per atom): leave "
                     "readout out, or \"sum\"");
    expect_one_error("{\"targets\":[{\"key\":\"q\",\"level\":\"atom\",\"normalize\":\"atomref\"}]}",
                     "targets[0].normalize",
                     "an atom-level target has no per-element sum to fit: use \"mean_std\" or "
                     "\"none\"");
    expect_one_error("{\"targets\":[{\"key\":\"gap\",\"readout\":\"mean\"}]}", "targets[0].readout",
                     "\"atomref\" normalisation needs readout \"sum\" (per-atom references add "
                     "up over atoms); use normalize \"mean_std\" or \"none\" with readout "
                     "\"mean\"");
    expect_one_error("{\"targets\":[{\"key\":\"gap\"},{\"key\":\"homo\"}],"
                     "\"training\":{\"loss\":{\"energy_weight\":0.5}}}",
                     "training.loss.energy_weight",
                     "with targets, the energy is the first target ('gap') and its weight is "
                     "targets[0].weight (1); leave energy_weight out, or give it the same value, "
                     "got 0.5");
    expect_one_error("{\"targets\":[{\"key\":\"q\",\"level\":\"atom\"},{\"key\":\"energy\"}],"
                     "\"training\":{\"loss\":{\"forces_weight\":1}}}",
                     "targets[0].level",
                     "forces and stress are -d/dr of the first target, which must then be a "
                     "graph-level energy, not per atom");
    expect_one_error("{\"targets\":[{\"key\":\"a\",\"weight\":0},{\"key\":\"b\",\"weight\":0}],"
                     "\"training\":{\"loss\":{\"forces_weight\":0}}}",
                     "targets",
                     "every target's weight is 0 and training.loss trains no forces or stress: "
                     "nothing would be trained");
    /* the energy weight given equal to the first target's is accepted */
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"targets\":[{\"key\":\"e\",\"weight\":2},{\"key\":\"g\"}],"
                                 "\"training\":{\"loss\":{\"energy_weight\":2}}}", &errs), 0);
    pt_errors_close(&errs);
}

/* ---- the plan on a small dataset ------------------------------------------- */

enum { NS = 12 };
static uint64_t offs[NS + 1];
static uint8_t zs[NS * 3];
static float pos[NS * 9];
static double targets[3 * NS];
static const char names[3][PT_KEY_MAX] = {"gap", "homo", "holey"};
static float atom_cols[2 * NS * 3];
static const char atom_names[2][PT_KEY_MAX] = {"charges", "partial"};

static void make_dataset(pt_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    for (int s = 0; s <= NS; s++) offs[s] = 3u * (uint64_t)s;
    for (int a = 0; a < NS * 3; a++) {
        zs[a] = a % 3 ? 1 : 8;
        for (int c = 0; c < 3; c++) pos[3 * a + c] = (float)(0.9 * (a % 3) * (c == a % 3));
    }
    for (int s = 0; s < NS; s++) {
        targets[s] = 5.0 + 0.1 * s;
        targets[NS + s] = -6.0 - 0.05 * s;
        targets[2 * NS + s] = s == 7 ? NAN : 1.0;
    }
    ds->n_structs = NS;
    ds->n_atoms = 3 * NS;
    ds->atom_offset = offs;
    ds->z = zs;
    ds->pos = pos;
    ds->n_targets = 3;
    ds->target_names = names;
    ds->targets = targets;
    for (int a = 0; a < NS * 3; a++) {   /* "partial" is missing on structure 4 */
        atom_cols[a] = a % 3 ? 0.4f : -0.8f;
        atom_cols[NS * 3 + a] = a / 3 == 4 ? NAN : 0.1f * (float)a;
    }
    ds->n_atom_cols = 2;
    ds->atom_col_names = atom_names;
    ds->atom_cols = atom_cols;
}

static int plan_on(const char *job, const pt_dataset *ds, pt_errors *errs, pt_train_plan *p)
{
    pt_job_config cfg;
    pt_errors_init(errs, 0);
    if (pt_job_config_parse(&cfg, job, strlen(job), "job.json", errs) != 0) return -2;
    return pt_train_plan_init(p, &cfg, ds, PT_PLAN_COUNT_EDGES, 1, errs);
}

static int plan_of(const char *job, pt_errors *errs, pt_train_plan *p)
{
    pt_dataset ds;
    make_dataset(&ds);
    pt_job_config cfg;
    pt_errors_init(errs, 0);
    if (pt_job_config_parse(&cfg, job, strlen(job), "job.json", errs) != 0) return -2;
    return pt_train_plan_init(p, &cfg, &ds, PT_PLAN_COUNT_EDGES, 1, errs);
}

static void test_plan_resolves_every_target(void **state)
{
    (void)state;
    pt_train_plan p;
    pt_errors errs;
    assert_int_equal(plan_of("{\"targets\":[{\"key\":\"homo\",\"weight\":3},{\"key\":\"gap\","
                             "\"weight\":0.25}]}", &errs, &p), 0);
    assert_int_equal(p.n_heads, 2);
    assert_int_equal(p.head_key[0], 1);
    assert_int_equal(p.head_key[1], 0);
    assert_int_equal(p.target_key, 1);
    assert_int_equal(p.loss.heads, 2);
    assert_true(p.loss.head_weight[0] == 3.0 && p.loss.w.energy == 3.0);
    assert_true(p.loss.head_weight[1] == 0.25);
    pt_train_plan_close(&p);
    pt_errors_close(&errs);
}

static void test_plan_errors_name_the_target(void **state)
{
    (void)state;
    pt_train_plan p;
    pt_errors errs;
    assert_int_equal(plan_of("{\"targets\":[{\"key\":\"gap\"},{\"key\":\"lumo\"},"
                             "{\"key\":\"holey\"},{\"key\":\"q\",\"level\":\"atom\"}]}",
                             &errs, &p), -1);
    assert_int_equal(errs.total, 3);
    assert_string_equal(errs.items[0].field, "targets[1].key");
    assert_string_equal(errs.items[0].message,
                        "the dataset has no numeric key 'lumo'; its keys: gap, homo, holey");
    assert_string_equal(errs.items[1].field, "targets[2].key");
    assert_string_equal(errs.items[1].message,
                        "1 of 12 structures have no 'holey' value (the first is structure 7); "
                        "choose another target or ingest only structures that have it");
    assert_string_equal(errs.items[2].field, "targets[3].key");
    assert_string_equal(errs.items[2].message,
                        "'q' is not a per-atom column of this dataset; its per-atom columns: "
                        "charges, partial");
    pt_errors_close(&errs);
    /* the single target keeps its field name */
    assert_int_equal(plan_of("{\"target\":\"lumo\"}", &errs, &p), -1);
    assert_string_equal(errs.items[0].field, "target");
    pt_errors_close(&errs);
}

/* Atom-level targets name per-atom columns (dataset.h atom_cols): found by
 * name, refused where a structure lacks them (located); the first target
 * may be one. */
static void test_plan_atom_targets(void **state)
{
    (void)state;
    pt_train_plan p;
    pt_errors errs;
    assert_int_equal(plan_of("{\"targets\":[{\"key\":\"gap\"},{\"key\":\"charges\",\"level\":"
                             "\"atom\",\"weight\":2}]}", &errs, &p), 0);
    assert_int_equal(p.n_heads, 2);
    assert_int_equal(p.head_key[1], 0);
    assert_int_equal(p.loss.head_atom[0], 0);
    assert_int_equal(p.loss.head_atom[1], 1);
    assert_true(p.loss.head_weight[1] == 2.0);
    pt_train_plan_close(&p);
    pt_errors_close(&errs);
    assert_int_equal(plan_of("{\"targets\":[{\"key\":\"gap\"},{\"key\":\"partial\",\"level\":"
                             "\"atom\"}]}", &errs, &p), -1);
    assert_int_equal(errs.total, 1);
    assert_string_equal(errs.items[0].field, "targets[1].key");
    assert_string_equal(errs.items[0].message,
                        "1 of 12 structures have no per-atom 'partial' column (the first is "
                        "structure 4); ingest only structures that have it");
    pt_errors_close(&errs);
    /* a per-atom first target: its column on every structure (located
     * otherwise), no forces even on data with force labels ("auto" is 0),
     * and a dataset of per-atom labels only is enough */
    pt_dataset ds;
    make_dataset(&ds);
    ds.n_targets = 0;
    float forces[NS * 9];
    for (int i = 0; i < NS * 9; i++) forces[i] = 0.01f * (float)(i % 7);
    ds.forces = forces;
    assert_int_equal(plan_on("{\"targets\":[{\"key\":\"charges\",\"level\":\"atom\","
                             "\"weight\":0.5}]}", &ds, &errs, &p), 0);
    assert_int_equal(p.n_heads, 1);
    assert_int_equal(p.head_key[0], 0);
    assert_int_equal(p.target_key, 0);
    assert_int_equal(p.loss.head_atom[0], 1);
    assert_int_equal(p.loss.with_forces, NS);
    assert_int_equal(p.loss.forces, 0);
    assert_true(p.loss.w.forces == 0.0 && p.loss.w.stress == 0.0 && !p.loss.w.energy_per_atom);
    assert_true(p.loss.w.energy == 0.5 && p.loss.head_weight[0] == 0.5);
    pt_train_plan_close(&p);
    pt_errors_close(&errs);
    assert_int_equal(plan_of("{\"targets\":[{\"key\":\"charges\",\"level\":\"atom\"},"
                             "{\"key\":\"gap\"}]}", &errs, &p), 0);
    assert_int_equal(p.loss.head_atom[0], 1);
    assert_int_equal(p.loss.head_atom[1], 0);
    assert_int_equal(p.head_key[1], 0);
    pt_train_plan_close(&p);
    pt_errors_close(&errs);
    assert_int_equal(plan_of("{\"targets\":[{\"key\":\"partial\",\"level\":\"atom\"}]}",
                             &errs, &p), -1);
    assert_int_equal(errs.total, 1);
    assert_string_equal(errs.items[0].field, "targets[0].key");
    assert_non_null(strstr(errs.items[0].message, "have no per-atom 'partial' column"));
    pt_errors_close(&errs);
    assert_int_equal(plan_of("{\"targets\":[{\"key\":\"gap\",\"level\":\"atom\"}]}",
                             &errs, &p), -1);
    assert_string_equal(errs.items[0].field, "targets[0].key");
    assert_string_equal(errs.items[0].message, "'gap' is not a per-atom column of this dataset; "
                                               "its per-atom columns: charges, partial");
    pt_errors_close(&errs);
}

/* What a per-atom first target refuses in the configuration: forces,
 * stress (-d/dr of an energy it is not) and the energy's per-atom form. */
static void test_atom_first_target_config(void **state)
{
    (void)state;
    expect_one_error("{\"targets\":[{\"key\":\"q\",\"level\":\"atom\"}],"
                     "\"training\":{\"loss\":{\"forces_weight\":1}}}", "targets[0].level",
                     "forces and stress are -d/dr of the first target, which must then be a "
                     "graph-level energy, not per atom");
    expect_one_error("{\"targets\":[{\"key\":\"q\",\"level\":\"atom\"}],"
                     "\"training\":{\"loss\":{\"energy\":\"per_atom\"}}}",
                     "training.loss.energy",
                     "\"per_atom\" divides a structure's energy error by its atoms; the first "
                     "target 'q' is per atom already (its loss is the mean over atoms): leave "
                     "energy out");
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    static const char ok[] = "{\"targets\":[{\"key\":\"q\",\"level\":\"atom\"}],"
                             "\"training\":{\"loss\":{\"energy\":\"total\",\"forces_weight\":0}}}";
    assert_int_equal(pt_job_config_parse(&cfg, ok, strlen(ok), "job.json", &errs), 0);
    assert_int_equal(cfg.targets[0].level, PT_JOB_LEVEL_ATOM);
    assert_int_equal(pt_job_config_multi_head(&cfg), 1);
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_canonical_form),
        cmocka_unit_test(test_one_element_list_is_the_single_target),
        cmocka_unit_test(test_model_of_several_targets),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_plan_resolves_every_target),
        cmocka_unit_test(test_plan_errors_name_the_target),
        cmocka_unit_test(test_plan_atom_targets),
        cmocka_unit_test(test_atom_first_target_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
