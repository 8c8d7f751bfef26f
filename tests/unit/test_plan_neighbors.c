/* test_plan_neighbors.c — model.max_neighbors of a job (config.h, plan.h):
 * "auto" resolves to every neighbour within the cutoff for a job trained on
 * forces or stress and to PyG's 32 for an energy-only job (whose graphs and
 * model file are then those of the jobs before "auto" existed); the plan's
 * edge counts are the dataset's own at that setting, so the packers and the
 * memory plan budget every edge; a refusal of the memory plan says what the
 * untruncated lists cost; and on a dense periodic cell (a 32-atom EMT bulk
 * cell of emt_20k, more than 32 neighbours per atom within 6 Å) the forces
 * with untruncated lists are −∂E/∂r by central finite differences of the
 * model's own energy, neighbour lists rebuilt at every displaced geometry. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "engine/backend/memplan.h"
#include "engine/model/schnet.h"
#include "engine/pack/batch.h"
#include "engine/run/run.h"
#include "engine/train/plan.h"
#include "tests/unit/tmp_fixture.h"

static char dir[64], emt_ptd[128], qm9_ptd[128];
static pt_dataset emt, qm9;   /* EMT: energy, forces, stress; QM9: energies only */

static int setup(void **state)
{
    (void)state;
    char err[256];
    if (tfx_mkdtemp(dir, sizeof dir, "plan_nb")) return -1;
    snprintf(emt_ptd, sizeof emt_ptd, "%s/emt.ptd", dir);
    snprintf(qm9_ptd, sizeof qm9_ptd, "%s/qm9.ptd", dir);
    if (tfx_ingest("tests/data/emt_train_240.extxyz.gz", emt_ptd) ||
        pt_dataset_open(&emt, emt_ptd, err, sizeof err))
        return -1;
    if (tfx_ingest("tests/data/train_qm9_400.extxyz.gz", qm9_ptd) ||
        pt_dataset_open(&qm9, qm9_ptd, err, sizeof err))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_dataset_close(&emt);
    pt_dataset_close(&qm9);
    tfx_rmtree(dir);
    return 0;
}

static pt_job_config job(const char *text)
{
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_job_config_parse(&cfg, text, strlen(text), NULL, &errs);
    if (rc) {
        char buf[512];
        pt_errors_first(&errs, buf, sizeof buf);
        fail_msg("%s: %s", text, buf);
    }
    pt_errors_close(&errs);
    return cfg;
}

static void plan_of(pt_train_plan *p, const pt_job_config *cfg, const pt_dataset *ds)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_train_plan_init(p, cfg, ds, PT_PLAN_COUNT_EDGES, 1, &errs);
    if (rc) {
        char buf[512];
        pt_errors_first(&errs, buf, sizeof buf);
        fail_msg("plan: %s", buf);
    }
    pt_errors_close(&errs);
}

/* Edges per structure at the cutoff with cap k (PT_GRAPH_UNLIMITED: all). */
static uint32_t *count_edges(const pt_dataset *ds, double cutoff, int32_t k)
{
    uint32_t *n = malloc(ds->n_structs * sizeof(uint32_t));
    pt_graph_params gp = {.cutoff = (float)cutoff, .max_neighbors = k, .mode = PT_GRAPH_RADIUS};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_graphs_count(n, ds, &gp, &errs), 0);
    pt_errors_close(&errs);
    return n;
}

/* ---- "auto" resolved with the loss ------------------------------------------ */

static void test_auto_resolves_on_the_loss(void **state)
{
    (void)state;
    struct {
        const char *cfg;
        const pt_dataset *ds;
        int forces;
        int32_t k;
    } cases[] = {
        /* forces labels, forces_weight "auto": trained on forces, every neighbour */
        {"{\"target\":\"energy\"}", &emt, 1, PT_GRAPH_UNLIMITED},
        {"{\"target\":\"energy\",\"model\":{\"max_neighbors\":\"auto\"}}", &emt, 1,
         PT_GRAPH_UNLIMITED},
        /* stress alone is trained on positions' derivatives too */
        {"{\"target\":\"energy\",\"training\":{\"loss\":{\"forces_weight\":0,"
         "\"stress_weight\":1}}}", &emt, 1, PT_GRAPH_UNLIMITED},
        /* energies only on the same data: PyG's 32 */
        {"{\"target\":\"energy\",\"training\":{\"loss\":{\"forces_weight\":0}}}", &emt, 0, 32},
        {"{\"target\":\"energy_U0\"}", &qm9, 0, 32},
        /* given values are kept whatever the loss */
        {"{\"target\":\"energy\",\"model\":{\"max_neighbors\":32}}", &emt, 1, 32},
        {"{\"target\":\"energy\",\"model\":{\"max_neighbors\":12}}", &emt, 1, 12},
        {"{\"target\":\"energy_U0\",\"model\":{\"max_neighbors\":\"all\"}}", &qm9, 0,
         PT_GRAPH_UNLIMITED},
        {"{\"target\":\"energy_U0\",\"model\":{\"max_neighbors\":null}}", &qm9, 0,
         PT_GRAPH_UNLIMITED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_job_config cfg = job(cases[i].cfg);
        pt_train_plan p;
        plan_of(&p, &cfg, cases[i].ds);
        assert_int_equal(p.loss.forces, cases[i].forces);
        if (p.max_neighbors != cases[i].k)
            fail_msg("%s: max_neighbors %d, want %d", cases[i].cfg, p.max_neighbors, cases[i].k);
        assert_int_equal(pt_train_max_neighbors(&cfg, p.loss.forces), cases[i].k);
        /* the model file records what the graphs used (predict rebuilds them) */
        assert_int_equal(pt_train_model_config(&cfg, p.loss.forces).max_neighbors, cases[i].k);
        assert_int_equal(pt_memplan_job_model(&cfg, p.loss.forces).max_neighbors, cases[i].k);
        /* the plan's edges are the dataset's own at that setting */
        uint32_t *n = count_edges(cases[i].ds, cfg.model.cutoff, cases[i].k);
        assert_memory_equal(p.nedges, n, cases[i].ds->n_structs * sizeof(uint32_t));
        free(n);
        pt_train_plan_close(&p);
    }
}

/* An energy job of the defaults plans exactly as with the 32 it had before
 * "auto": same edges, same packs' limits, same model. */
static void test_energy_default_unchanged(void **state)
{
    (void)state;
    pt_job_config a = job("{\"target\":\"energy_U0\"}");
    pt_job_config b = job("{\"target\":\"energy_U0\",\"model\":{\"max_neighbors\":32}}");
    assert_int_equal(a.model.max_neighbors, PT_JOB_NEIGHBORS_AUTO);
    pt_train_plan pa, pb;
    plan_of(&pa, &a, &qm9);
    plan_of(&pb, &b, &qm9);
    assert_memory_equal(pa.nedges, pb.nedges, qm9.n_structs * sizeof(uint32_t));
    assert_memory_equal(&pa.train_pk.limits, &pb.train_pk.limits, sizeof(pt_pack_limits));
    pt_schnet_config ma = pt_train_model_config(&a, 0), mb = pt_train_model_config(&b, 0);
    assert_memory_equal(&ma, &mb, sizeof ma);
    pt_train_plan_close(&pa);
    pt_train_plan_close(&pb);
}

/* On the EMT slice at 6 Å some atoms have more than 32 neighbours: the cap
 * would cut there, and the forces job's packs hold the extra edges. */
static void test_forces_job_budgets_every_edge(void **state)
{
    (void)state;
    pt_job_config f = job("{\"target\":\"energy\"}");
    pt_job_config e = job("{\"target\":\"energy\",\"model\":{\"max_neighbors\":32}}");
    pt_train_plan pf, pe;
    plan_of(&pf, &f, &emt);
    plan_of(&pe, &e, &emt);
    uint64_t all = 0, capped = 0;
    double degree = 0.0;
    for (uint32_t s = 0; s < emt.n_structs; s++) {
        all += pf.nedges[s];
        capped += pe.nedges[s];
        degree = fmax(degree, (double)pf.nedges[s] / pf.natoms[s]);
    }
    assert_true(degree > 32.0);
    assert_true(all > capped);
    assert_true(pf.train_pk.limits.max_edges > pe.train_pk.limits.max_edges);
    /* every training graph fits its pack's edge slots */
    for (uint32_t i = 0; i < pf.split.n_train; i++)
        assert_true(pf.nedges[pf.split.train[i]] <= (uint32_t)pf.train_pk.limits.max_edges);
    /* and the memory plan sizes the arena for those slots */
    pt_memplan mf, me;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_memplan_for_job(&mf, &f, &pf.layout, pf.train_pk.limits, 1, &errs), 0);
    assert_int_equal(pt_memplan_for_job(&me, &e, &pe.layout, pe.train_pk.limits, 1, &errs), 0);
    assert_int_equal(mf.limits.max_edges, pf.train_pk.limits.max_edges);
    assert_true(mf.activations > me.activations);
    pt_errors_close(&errs);
    pt_train_plan_close(&pf);
    pt_train_plan_close(&pe);
}

/* The check before queueing (engine/run: the API's 422) refuses a forces job
 * that does not fit, and says what its untruncated lists cost. */
static void test_memory_refusal_names_the_neighbours(void **state)
{
    (void)state;
    struct {
        const char *cfg;
        const char *note;   /* NULL: no model.max_neighbors error */
    } cases[] = {
        {"{\"target\":\"energy\",\"backend\":{\"device_memory_mb\":1}}",
         "\"auto\" (a forces job) keeps every neighbour within 6 Å: "},
        {"{\"target\":\"energy\",\"model\":{\"max_neighbors\":\"all\"},\"training\":{\"loss\":"
         "{\"forces_weight\":0}},\"backend\":{\"device_memory_mb\":1}}",
         "\"all\" keeps every neighbour within 6 Å: "},
        {"{\"target\":\"energy\",\"model\":{\"max_neighbors\":32},\"backend\":"
         "{\"device_memory_mb\":1}}", NULL},
        {"{\"target\":\"energy\",\"training\":{\"loss\":{\"forces_weight\":0}},\"backend\":"
         "{\"device_memory_mb\":1}}", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_job_config cfg = job(cases[i].cfg);
        pt_errors errs;
        pt_errors_init(&errs, 0);
        assert_int_equal(pt_run_check(&cfg, &emt, NULL, NULL, &errs), -1);
        int device = 0;
        const pt_error *note = NULL;
        for (size_t k = 0; k < errs.kept; k++) {
            device |= !strcmp(errs.items[k].field, "backend.device_memory_mb");
            if (!strcmp(errs.items[k].field, "model.max_neighbors")) note = &errs.items[k];
        }
        assert_true(device);
        if (!cases[i].note) {
            assert_null(note);
        } else {
            assert_non_null(note);
            if (strncmp(note->message, cases[i].note, strlen(cases[i].note)))
                fail_msg("got: %s", note->message);
            assert_non_null(strstr(note->message, " per atom in the densest structure ("));
            assert_non_null(strstr(note->message, "lower model.cutoff or cap model.max_neighbors "
                                                  "(forces then stop being exactly -dE/dr)"));
        }
        pt_errors_close(&errs);
    }
}

/* ---- forces = −∂E/∂r with untruncated lists on a dense periodic cell ---------- */

enum { FD_ATOMS = 32, FD_MOVED = 6, FD_STRUCTS = 1 + 2 * 3 * FD_MOVED };

/* The first fully periodic 32-atom bulk cell of the slice (emt_20k's). */
static uint32_t bulk32(void)
{
    for (uint32_t s = 0; s < emt.n_structs; s++)
        if (pt_dataset_natoms(&emt, s) == FD_ATOMS && pt_dataset_pbc(&emt, s) == PT_PBC_ALL)
            return s;
    fail_msg("no 32-atom bulk cell in the slice");
    return 0;
}

/* Forces of cap k on the cell against central finite differences of the
 * energy; returns the worst |F − FD| as a fraction of the tolerance, and the
 * edges of the undisplaced cell in *edges. */
static double fd_check(const pt_job_config *cfg, int32_t k, uint32_t *edges)
{
    const uint32_t s0 = bulk32();
    /* the cell, then atoms 0..FD_MOVED-1 moved by ±h along x, y, z (a
     * caller's dataset: engine/data/dataset.h, version 0) */
    const double h = 1e-2;
    static uint64_t offset[FD_STRUCTS + 1];
    static uint8_t z[FD_STRUCTS * FD_ATOMS], pbc[FD_STRUCTS];
    static float pos[FD_STRUCTS * FD_ATOMS * 3];
    static double cell[FD_STRUCTS * 9];
    const float *p0 = emt.pos + 3 * emt.atom_offset[s0];
    for (int s = 0; s < FD_STRUCTS; s++) {
        offset[s + 1] = offset[s] + FD_ATOMS;
        memcpy(z + s * FD_ATOMS, emt.z + emt.atom_offset[s0], FD_ATOMS);
        memcpy(pos + 3 * s * FD_ATOMS, p0, 3 * FD_ATOMS * sizeof(float));
        memcpy(cell + 9 * s, emt.cell + 9 * (size_t)s0, 9 * sizeof(double));
        pbc[s] = PT_PBC_ALL;
        if (s == 0) continue;
        int c = (s - 1) / 2, a = c / 3, x = c % 3;
        pos[3 * (s * FD_ATOMS + a) + x] += (float)((s - 1) % 2 ? -h : h);
    }
    pt_dataset ds = {.n_structs = FD_STRUCTS, .n_atoms = FD_STRUCTS * FD_ATOMS,
                     .atom_offset = offset, .z = z, .pos = pos, .cell = cell, .pbc = pbc};

    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graphs g;
    pt_graph_params gp = {.cutoff = (float)cfg->model.cutoff, .max_neighbors = k,
                          .mode = PT_GRAPH_RADIUS};
    assert_int_equal(pt_graphs_build(&g, &ds, &gp, &errs), 0);
    *edges = pt_graphs_nedges(&g, 0);
    uint32_t most = 0;
    for (uint32_t s = 0; s < FD_STRUCTS; s++)
        most = pt_graphs_nedges(&g, s) > most ? pt_graphs_nedges(&g, s) : most;

    /* one structure per pack, one pack per batch */
    static uint32_t goff[FD_STRUCTS + 1], gid[FD_STRUCTS];
    for (uint32_t s = 0; s < FD_STRUCTS; s++) {
        goff[s + 1] = s + 1;
        gid[s] = s;
    }
    pt_pack_limits lim = {.max_nodes = FD_ATOMS, .max_edges = (int32_t)most, .max_graphs = 1};
    pt_packs packs = {.limits = lim, .n_packs = FD_STRUCTS, .graph_offset = goff, .graphs = gid};
    pt_batch b;
    assert_int_equal(pt_batch_init(&b, lim, 1, gp.cutoff), PT_BATCH_OK);

    pt_schnet_config mc = pt_train_model_config(cfg, 1);
    mc.max_neighbors = k;
    pt_schnet m;
    pt_schnet_acts acts;
    assert_int_equal(pt_schnet_init(&m, &mc, &errs), 0);
    pt_schnet_init_weights(&m, 5);
    assert_int_equal(pt_schnet_acts_init_mode(&acts, &m, lim.max_nodes, lim.max_edges, 1,
                                              PT_SCHNET_FORCES, &errs), 0);
    double energy[FD_STRUCTS], force[FD_ATOMS][3];
    for (uint32_t s = 0; s < FD_STRUCTS; s++) {
        assert_int_equal(pt_batch_fill_ids(&b, &ds, &g, &packs, &s, 1, -1), PT_BATCH_OK);
        assert_int_equal(pt_schnet_batch_check(&m, &acts, &b, &errs), 0);
        energy[s] = pt_schnet_forward(&m, &acts, &b)[0];
        if (s) continue;
        pt_schnet_forces(&m, &acts, &b);
        memcpy(force, acts.force, sizeof force);
    }
    /* central differences over the displacement the float positions really
     * hold; fp32 energies carry ~1e-7·|E| of rounding each */
    double fmax_abs = 0.0, worst = 0.0;
    for (int a = 0; a < FD_MOVED; a++)
        for (int x = 0; x < 3; x++) fmax_abs = fmax(fmax_abs, fabs(force[a][x]));
    assert_true(fmax_abs > 1e-3);   /* a test of something: the forces are not ~0 */
    for (int c = 0; c < 3 * FD_MOVED; c++) {
        int a = c / 3, x = c % 3, sp = 1 + 2 * c, sm = sp + 1;
        double dr = (double)pos[3 * (sp * FD_ATOMS + a) + x] - pos[3 * (sm * FD_ATOMS + a) + x];
        double fd = -(energy[sp] - energy[sm]) / dr;
        double tol = 2e-3 * fmax_abs + 4e-7 * fabs(energy[0]) / h;
        worst = fmax(worst, fabs(force[a][x] - fd) / tol);
        if (k == PT_GRAPH_UNLIMITED && fabs(force[a][x] - fd) > tol)
            fail_msg("atom %d axis %d: force %.8g, -dE/dr by finite differences %.8g (tol %.3g)",
                     a, x, force[a][x], fd, tol);
    }
    print_message("32-atom bulk cell, max_neighbors %d: %u edges (%.1f per atom), worst |F - FD| "
                  "%.3f of the tolerance, max |F| %.4g eV/Å, E %.6g eV\n", (int)k, *edges,
                  *edges / (double)FD_ATOMS, worst, fmax_abs, energy[0]);
    pt_schnet_acts_close(&acts);
    pt_schnet_close(&m);
    pt_batch_close(&b);
    pt_graphs_close(&g);
    pt_errors_close(&errs);
    return worst;
}

static void test_forces_are_energy_gradient_untruncated(void **state)
{
    (void)state;
    pt_job_config cfg = job("{\"target\":\"energy\",\"model\":{\"hidden\":24,\"filters\":24,"
                            "\"interactions\":2,\"gaussians\":16},\"training\":{\"normalize\":"
                            "\"none\"}}");
    /* what "auto" gives a forces job, and the model records */
    const int32_t k = pt_train_max_neighbors(&cfg, 1);
    assert_int_equal(k, PT_GRAPH_UNLIMITED);
    assert_int_equal(pt_train_model_config(&cfg, 1).max_neighbors, PT_GRAPH_UNLIMITED);
    uint32_t edges;
    assert_true(fd_check(&cfg, k, &edges) <= 1.0);
    /* dense: the old default cap of 32 would cut every atom's list here ... */
    assert_true(edges > 32u * FD_ATOMS);
    /* ... and then the forces are not the energy's gradient (the weak point
     * of issue 15): the cap falls inside a shell of near-equal distances, so
     * which 32 are kept changes as an atom moves by 0.01 Å, and the energy
     * jumps where the forces see nothing */
    uint32_t capped;
    assert_true(fd_check(&cfg, 32, &capped) > 1.0);
    assert_int_equal(capped, 32u * FD_ATOMS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_resolves_on_the_loss),
        cmocka_unit_test(test_energy_default_unchanged),
        cmocka_unit_test(test_forces_job_budgets_every_edge),
        cmocka_unit_test(test_memory_refusal_names_the_neighbours),
        cmocka_unit_test(test_forces_are_energy_gradient_untruncated),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
