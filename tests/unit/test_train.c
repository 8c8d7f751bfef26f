/* test_train.c — the training loop end to end on 400 QM9 molecules
 * (tests/data/train_qm9_400.extxyz.gz, every 23rd molecule of the shared
 * subset), ingested once per run: the loss falls, runs are deterministic, the
 * global batch is invariant to its split into replicas and micro-batches,
 * max_steps / early stopping / cancellation end training as documented, the
 * outputs are written, step lines carry phase times from the default
 * (emulated IPU) engine, and the errors say what is wrong.  Checkpoints and
 * resume: test_train_resume.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/model/bf16.h"
#include "engine/train/config.h"
#include "engine/data/ingest.h"
#include "engine/model/schnet.h"
#include "engine/pack/packing.h"
#include "engine/run/run.h"
#include "engine/train/train.h"
#include "engine/train/train_internal.h"
#include "tests/unit/train_fixture.h"

static pt_dataset qm9;
static char tmpdir[] = "/tmp/pt_test_train_" "XX" "XX" "XX"; /* mkdtemp pattern */

static int setup(void **state)
{
    (void)state;
    return trf_open_ingested(tmpdir, "tests/data/train_qm9_400.extxyz.gz", &qm9);
}

static int teardown(void **state)
{
    (void)state;
    pt_dataset_close(&qm9);
    tfx_rmtree(tmpdir);
    return 0;
}

/* A small model that trains in seconds: H=F=32, T=2, G=16, 5 Å. */
static void small_config(pt_job_config *cfg)
{
    pt_job_config_defaults(cfg);
    cfg->model.hidden = 32;
    cfg->model.filters = 32;
    cfg->model.interactions = 2;
    cfg->model.gaussians = 16;
    cfg->model.cutoff = 5.0;
    cfg->batching.model_batch_size = 4;
    cfg->training.epochs = 6;
    cfg->training.lr = 3e-3;
    cfg->training.log_every = 5;
    cfg->training.seed = 3;
    cfg->backend.threads = 1;
}

static int run(const pt_job_config *cfg, const char *out, trf_recorder *rec, pt_train_result *res)
{
    return trf_run(cfg, &qm9, out, rec, res);
}

/* Over 15 epochs the training loss must fall by at least 5x from the first
 * logged window (steps 1-5) to the last epoch (measured: 9x at this setting,
 * 18x after 30 epochs), and the best validation MAE must beat the first
 * epoch's. */
static void test_loss_falls(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.epochs = 15;
    trf_recorder *rec = calloc(1, sizeof *rec);
    pt_train_result res;
    assert_int_equal(run(&cfg, NULL, rec, &res), 0);
    assert_int_equal(res.epochs, 15);
    assert_string_equal(res.stop_reason, "epochs");
    assert_int_equal(res.n_train + res.n_val + res.n_test, 400);
    double first_epoch = NAN, last_epoch = NAN, first_mae = NAN;
    for (int i = 0; i < rec->n; i++) {
        if (strcmp(rec->m[i].kind, "epoch")) continue;
        if (isnan(first_epoch)) {
            first_epoch = rec->m[i].train_loss;
            first_mae = rec->m[i].val_mae;
        }
        last_epoch = rec->m[i].train_loss;
    }
    fprintf(stderr, "  first logged loss %.4g, epoch loss %.4g -> %.4g, best val MAE %.4g "
            "(first %.4g), test MAE %.4g\n", res.first_loss, first_epoch, last_epoch,
            res.best_val_mae, first_mae, res.test_mae);
    assert_true(res.first_loss / last_epoch > 5.0);
    assert_true(res.best_val_mae < first_mae);
    assert_true(isfinite(res.test_mae));
    free(rec);
}

/* Same seed, same thread count: the same loss sequence, bit for bit. */
static void test_deterministic(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.epochs = 1;
    cfg.training.log_every = 1;
    trf_recorder *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    pt_train_result ra, rb;
    assert_int_equal(run(&cfg, NULL, a, &ra), 0);
    assert_int_equal(run(&cfg, NULL, b, &rb), 0);
    assert_int_equal(a->n, b->n);
    assert_true(a->n > 10);
    for (int i = 0; i < a->n; i++) {
        assert_true(a->m[i].loss == b->m[i].loss);
        assert_true(a->m[i].val_mae == b->m[i].val_mae || isnan(a->m[i].val_mae));
    }
    /* and another seed trains differently */
    cfg.training.seed = 4;
    pt_train_result rc;
    trf_recorder *c = calloc(1, sizeof *c);
    assert_int_equal(run(&cfg, NULL, c, &rc), 0);
    assert_true(c->m[0].loss != a->m[0].loss);
    free(a);
    free(b);
    free(c);
}

/* The global batch (train_fixture.h): split into replicas and
 * micro-batches, the updates agree up to float summation order. */
static void test_global_batch_invariance(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    trf_check_global_batch_invariance(&cfg, &qm9);
}

/* Large packs (plan.h): the "auto" layout runs the global batch of 16 as
 * more, smaller micro-batches.  Packs of up to 8,000 edge slots (32 filters:
 * 1 MB per pack): 4 micro-batches of 4 packs on one core, 2 replicas x 2 on
 * two.  The loss curve is the one of a single micro-batch of 16 up to float
 * summation order, and the same updates on one core and two (the window
 * is halved by edges whatever R: balance.h). */
static void test_large_pack_layout(void **state)
{
    (void)state;
    pt_job_config one;
    small_config(&one);
    one.training.epochs = 1;
    one.training.max_steps = 6;
    one.training.log_every = 1;
    one.batching.max_edges = 8000;
    pt_job_config big = one, two = one;
    big.batching.model_batch_size = 16;   /* pinned: 1 replica x 1 micro-batch of 16 */
    one.batching.model_batch_size = 0;    /* auto */
    two.batching.model_batch_size = 0;
    two.backend.threads = 2;
    trf_recorder *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
    pt_train_result ra, rb, rc;
    assert_int_equal(run(&big, NULL, a, &ra), 0);
    assert_int_equal(run(&one, NULL, b, &rb), 0);
    assert_int_equal(run(&two, NULL, c, &rc), 0);
    assert_int_equal(ra.global_packs, 16);
    assert_int_equal(ra.layout.accumulation * 10 + ra.micro_packs, 26);
    assert_int_equal(rb.layout.replicas * 100 + rb.layout.accumulation * 10 + rb.micro_packs, 144);
    assert_int_equal(rc.layout.replicas * 100 + rc.layout.accumulation * 10 + rc.micro_packs, 224);
    assert_int_equal(rb.global_packs, 16);
    assert_int_equal(rc.global_packs, 16);
    assert_int_equal(a->n, b->n);
    assert_int_equal(b->n, c->n);
    for (int i = 0; i < a->n; i++) {
        assert_string_equal(a->m[i].kind, b->m[i].kind);
        assert_float_equal(a->m[i].loss, b->m[i].loss, 1e-5 * fabs(a->m[i].loss));
        /* the same gradients and updates: the losses differ only by the
         * order the replicas' double loss sums are added in (~1e-16), where
         * a float rounding difference in any update moves them by ~1e-7 */
        if (fabs(b->m[i].loss - c->m[i].loss) > 1e-12 * fabs(b->m[i].loss))
            fail_msg("line %d (%s): %.17g on one core, %.17g on two", i, b->m[i].kind,
                     b->m[i].loss, c->m[i].loss);
    }
    free(a);
    free(b);
    free(c);
}

static void test_max_steps_and_outputs(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.max_steps = 7;
    cfg.training.log_every = 3;
    char out[300];
    snprintf(out, sizeof out, "%s/run", tmpdir);
    trf_recorder *rec = calloc(1, sizeof *rec);
    pt_train_result res;
    assert_int_equal(run(&cfg, out, rec, &res), 0);
    assert_int_equal(res.steps, 7);
    assert_string_equal(res.stop_reason, "max_steps");
    /* step lines at 3 and 6, then the epoch line of the partial epoch */
    assert_int_equal(rec->n, 3);
    assert_string_equal(rec->m[2].kind, "epoch");
    assert_int_equal(rec->m[2].step, 7);
    assert_int_equal(rec->m[2].epoch, 1);

    char path[400];
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, f)) lines++;
    fclose(f);
    assert_int_equal(lines, 3);
    assert_non_null(strstr(line, "\"kind\":\"epoch\",\"step\":7,\"epoch\":1,"));
    assert_non_null(strstr(line, "\"val_rmse\":"));

    snprintf(path, sizeof path, "%s/result.json", out);
    json_error_t jerr;
    json_t *result = json_load_file(path, 0, &jerr);
    assert_non_null(result);
    assert_int_equal(json_integer_value(json_object_get(result, "steps")), 7);
    assert_string_equal(json_string_value(json_object_get(result, "stop_reason")), "max_steps");
    assert_int_equal(json_integer_value(json_object_get(result, "graphs")), res.graphs);
    assert_int_equal(json_integer_value(json_object_get(result, "resumed_step")), -1);
    assert_true(res.graphs > 0 && res.nodes > res.graphs && res.node_slots >= res.nodes);
    json_decref(result);

    /* the end of the (partial) epoch left a checkpoint, announced in the result */
    snprintf(path, sizeof path, "%s/checkpoints/ckpt-0000000007.safetensors", out);
    assert_int_equal(access(path, F_OK), 0);
    assert_string_equal(res.last_checkpoint, path);

    snprintf(path, sizeof path, "%s/model.safetensors", out);
    pt_schnet m;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_load(&m, path, &errs), 0);
    assert_int_equal(m.cfg.hidden, 32);
    assert_int_equal(m.cfg.interactions, 2);
    pt_schnet_close(&m);
    pt_errors_close(&errs);
    free(rec);
}

/* With a learning rate too small to move the validation loss by the 1e-4
 * relative threshold, patience 2 stops after epoch 3 (the best model is still
 * the lowest validation loss, however small the gain). */
static void test_early_stopping(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.lr = 1e-9;
    cfg.training.early_stopping_patience = 2;
    trf_recorder *rec = calloc(1, sizeof *rec);
    pt_train_result res;
    assert_int_equal(run(&cfg, NULL, rec, &res), 0);
    assert_string_equal(res.stop_reason, "early_stopping");
    assert_int_equal(res.epochs, 3);
    free(rec);
}

static void test_cancel_between_steps(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    trf_recorder *rec = calloc(1, sizeof *rec);
    rec->stop_after = 4;
    pt_train_result res;
    assert_int_equal(run(&cfg, NULL, rec, &res), 0);
    assert_string_equal(res.stop_reason, "cancelled");
    assert_int_equal(res.steps, 4);
    assert_int_equal(res.epochs, 0);
    free(rec);
}

/* Step lines carry phase times.  The default engine for backend kind
 * "ipu-emulated" is the emulated IPU backend, which measures forward and
 * backward; the built-in local engine (asked for explicitly) counts its
 * whole computation as "other".  The loop times the optimizer either way,
 * and the phases cover the same log_every steps as the line. */
static void test_phase_times(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.max_steps = 8;
    cfg.training.log_every = 4;
    for (int local = 0; local < 2; local++) {
        trf_recorder *rec = calloc(1, sizeof *rec);
        pt_errors errs;
        pt_errors_init(&errs, 0);
        pt_train_options opt = {.user = rec, .on_metrics = trf_record,
                                .engine_open = local ? pt_grad_engine_open_local : NULL};
        pt_train_result res;
        assert_int_equal(pt_run_train(&cfg, &qm9, NULL, &opt, &res, &errs), 0);
        pt_errors_close(&errs);
        assert_int_equal(rec->n, 3);
        for (int i = 0; i < 2; i++) {
            const pt_train_metrics *m = &rec->m[i];
            assert_string_equal(m->kind, "step");
            assert_int_equal(m->has_phases, 1);
            assert_int_equal(m->phases.steps, 4);
            assert_int_equal(m->total_steps, 8);
            const double *t = m->phases.seconds;
            assert_true(t[PT_PHASE_OPTIMIZER] > 0);
            if (local) {
                assert_true(t[PT_PHASE_FORWARD] == 0 && t[PT_PHASE_BACKWARD] == 0);
                assert_true(t[PT_PHASE_OTHER] > 0);
            } else {
                assert_true(t[PT_PHASE_FORWARD] > 0 && t[PT_PHASE_BACKWARD] > 0);
            }
        }
        assert_int_equal(rec->m[2].has_phases, 0);
        free(rec);
    }
}

/* The first epoch of cfg in fp32 and in bf16, with the default engine or
 * the local one: the recorded lines of each into a and b. */
static void run_both_precisions(pt_job_config *cfg, int local, trf_recorder *a, trf_recorder *b,
                                pt_train_result *ra, pt_train_result *rb)
{
    pt_train_options opt = {.on_metrics = trf_record,
                            .engine_open = local ? pt_grad_engine_open_local : NULL};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    cfg->training.precision = PT_PRECISION_FP32;
    opt.user = a;
    assert_int_equal(pt_run_train(cfg, &qm9, NULL, &opt, ra, &errs), 0);
    cfg->training.precision = PT_PRECISION_BF16;
    opt.user = b;
    assert_int_equal(pt_run_train(cfg, &qm9, NULL, &opt, rb, &errs), 0);
    pt_errors_close(&errs);
}

/* Apart by bf16 rounding: more than 1e-6 relative (measured 7e-5 to 6e-4),
 * less than 5%. */
static void assert_bf16_apart(double fp32, double bf16)
{
    assert_true(isfinite(fp32) && isfinite(bf16));
    double rel = fabs(fp32 - bf16) / fabs(fp32);
    assert_true(rel > 1e-6 && rel < 0.05);
}

/* training.precision reaches every pass of a job.  With lr = 1e-9 the
 * weights of the two runs drift apart by ~1e-8 relative in an epoch, so a
 * larger difference comes from the products themselves: the first step's
 * loss (the training forward, in the default backend and in the local
 * engine), the validation MAE and the test MAE (the evaluators) all differ
 * from fp32's by bf16 rounding.  Without AVX512-BF16 the job is refused. */
static void test_precision_reaches_every_pass(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.epochs = 1;
    cfg.training.log_every = 1;
    cfg.training.lr = 1e-9;
    if (!pt_cpu_has_bf16()) {
        pt_errors errs;
        pt_errors_init(&errs, 0);
        pt_train_result res;
        cfg.training.precision = PT_PRECISION_BF16;
        assert_int_equal(pt_run_train(&cfg, &qm9, NULL, NULL, &res, &errs), -1);
        assert_string_equal(errs.items[0].field, "training.precision");
        pt_errors_close(&errs);
        return;
    }
    for (int local = 0; local < 2; local++) {
        trf_recorder *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
        pt_train_result ra, rb;
        run_both_precisions(&cfg, local, a, b, &ra, &rb);
        assert_int_equal(a->n, b->n);
        assert_string_equal(a->m[0].kind, "step");
        assert_bf16_apart(a->m[0].loss, b->m[0].loss);
        assert_string_equal(a->m[a->n - 1].kind, "epoch");
        assert_bf16_apart(a->m[a->n - 1].val_mae, b->m[b->n - 1].val_mae);
        assert_bf16_apart(ra.test_mae, rb.test_mae);
        free(a);
        free(b);
    }
}

static void expect_error(const pt_job_config *cfg, const char *out, const char *field,
                         const char *message)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_result res;
    assert_int_equal(pt_run_train(cfg, &qm9, out, NULL, &res, &errs), -1);
    assert_true(errs.total >= 1);
    assert_string_equal(errs.items[0].field, field);
    assert_string_equal(errs.items[0].message, message);
    pt_errors_close(&errs);
}

static void test_error_unknown_target(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    snprintf(cfg.target, sizeof cfg.target, "energy");
    expect_error(&cfg, NULL, "target",
                 "the dataset has no numeric key 'energy'; its keys: qm9_id, energy_U0, energy_U, "
                 "enthalpy_H, free_energy, homo, lumo, gap, zpve, mu, alpha, cv");
}

static void test_error_output_directory(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.max_steps = 1;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_result res;
    assert_int_equal(pt_run_train(&cfg, &qm9, "/nonexistent/dir/out", NULL, &res, &errs), -1);
    assert_string_equal(errs.items[0].file, "/nonexistent/dir/out");
    assert_string_equal(errs.items[0].message,
                        "cannot create the output directory: No such file or directory");
    pt_errors_close(&errs);
}

static void test_error_diverged(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    cfg.training.lr = 10.0;
    cfg.training.normalize = PT_NORM_NONE;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_result res;
    int rc = pt_run_train(&cfg, &qm9, NULL, NULL, &res, &errs);
    assert_int_equal(rc, -1);
    assert_string_equal(errs.items[0].field, "training.lr");
    assert_non_null(strstr(errs.items[0].message, "training diverged: the loss is not finite"));
    pt_errors_close(&errs);
}

/* The batch fill lays packs out as engine/batch.h prescribes: the model's
 * own validator accepts it, real content is counted, padding is masked, the
 * last partial batch is padded with empty packs, an oversized pack is an
 * error. */
static void test_batch_fill_layout(void **state)
{
    (void)state;
    pt_job_config cfg;
    small_config(&cfg);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graph_params gp = {.cutoff = 5.0f, .max_neighbors = 32, .mode = PT_GRAPH_RADIUS};
    pt_graphs g;
    assert_int_equal(pt_graphs_build(&g, &qm9, &gp, &errs), 0);
    uint32_t n = qm9.n_structs;
    uint32_t *natoms = malloc(n * sizeof(uint32_t)), *nedges = malloc(n * sizeof(uint32_t));
    uint32_t *ids = malloc(n * sizeof(uint32_t));
    for (uint32_t s = 0; s < n; s++) {
        natoms[s] = pt_dataset_natoms(&qm9, s);
        nedges[s] = pt_graphs_nedges(&g, s);
        ids[s] = s;
    }
    pt_pack_request req = {.method = PT_PACK_LPFHP};
    pt_packer pk;
    assert_int_equal(pt_packer_init(&pk, &req, natoms, nedges, n, ids, n, &errs), 0);
    pt_packs packs = {0};
    assert_int_equal(pt_packer_epoch(&pk, 1, 0, &packs), 0);

    pt_schnet model;
    pt_schnet_config mc = pt_schnet_config_default();
    mc.cutoff = 5.0f;
    assert_int_equal(pt_schnet_init(&model, &mc, &errs), 0);
    pt_train_data d = {.cfg = &cfg, .ds = &qm9, .graphs = &g, .target_key = 1, .model = &model,
                       .limits = pk.limits,
                       .layout = {.ranks = 1, .replicas = 1, .accumulation = 1, .micro_packs = 4,
                                  .threads = 1}};
    pt_batch b;
    assert_int_equal(pt_train_batch_init(&b, &d, pk.limits, &errs), 0);
    pt_schnet_acts acts;
    assert_int_equal(pt_schnet_acts_init(&acts, &model, b.cap_nodes, b.cap_edges, b.cap_graphs,
                                         &errs), 0);
    /* the whole epoch in batches of 4 packs (the last one partial): every
     * graph lands in exactly one batch, every batch passes the model's check */
    int64_t graphs = 0;
    for (uint32_t at = 0; at < packs.n_packs; at += 4) {
        uint32_t k = packs.n_packs - at < 4 ? packs.n_packs - at : 4;
        uint32_t four[4] = {at, at + 1, at + 2, at + 3};
        assert_int_equal(pt_train_fill(&b, &d, &packs, four, k, &errs), 0);
        assert_int_equal(pt_schnet_batch_check(&model, &acts, &b, &errs), 0);
        graphs += b.n_real_graphs;
    }
    assert_int_equal(graphs, n);
    uint32_t three[3] = {0, 1, 2};
    assert_int_equal(pt_train_fill(&b, &d, &packs, three, 3, &errs), 0);
    assert_int_equal(pt_schnet_batch_check(&model, &acts, &b, &errs), 0);
    for (int32_t i = 3 * pk.limits.max_nodes; i < b.cap_nodes; i++) {
        assert_int_equal(b.z[i], 0);
        assert_int_equal(b.node_graph[i], -1);
    }
    for (int32_t i = 3 * pk.limits.max_graphs; i < b.cap_graphs; i++)
        assert_int_equal(b.graph_id[i], -1);
    /* a real graph's target is the dataset's value of the key */
    int32_t s0 = b.graph_id[0];
    assert_true(s0 >= 0);
    assert_float_equal(b.target[0], qm9.targets[(size_t)1 * qm9.n_structs + (uint32_t)s0], 0);
    assert_int_equal(b.graph_natoms[0], pt_dataset_natoms(&qm9, (uint32_t)s0));

    /* a pack over the limits of a smaller batch is refused, not overflowed */
    pt_batch small;
    pt_pack_limits tiny = {.max_nodes = 4, .max_edges = 4, .max_graphs = 1};
    assert_int_equal(pt_train_batch_init(&small, &d, tiny, &errs), 0);
    assert_int_equal(pt_train_fill(&small, &d, &packs, three, 1, &errs), -1);
    assert_string_equal(errs.items[errs.kept - 1].field, "batching");
    assert_non_null(strstr(errs.items[errs.kept - 1].message, "pack 0 holds"));
    assert_non_null(strstr(errs.items[errs.kept - 1].message, ": over its limits of 1, 4, 4"));
    assert_int_equal(pt_train_fill(&small, &d, &packs, three, 5, &errs), -1);
    assert_string_equal(errs.items[errs.kept - 1].message, "5 packs do not fit a batch of 4");

    pt_train_batch_close(&small);
    pt_train_batch_close(&b);
    pt_schnet_acts_close(&acts);
    pt_schnet_close(&model);
    pt_packs_close(&packs);
    pt_packer_close(&pk);
    pt_graphs_close(&g);
    free(natoms);
    free(nedges);
    free(ids);
    pt_errors_close(&errs);
}

static void test_metrics_json_format(void **state)
{
    (void)state;
    pt_train_metrics m = {.kind = "step", .step = 12, .epoch = 2, .loss = 0.5, .lr = 1e-3,
                          .graphs_per_s = 1234.5, .nodes_per_s = 22222, .padding_fraction = 0.0125,
                          .seconds = 3.25};
    char buf[512];
    pt_train_metrics_json(&m, buf, sizeof buf);
    assert_string_equal(buf, "{\"kind\":\"step\",\"step\":12,\"epoch\":2,\"loss\":0.5,\"lr\":0.001,"
                             "\"graphs_per_s\":1234.5,\"nodes_per_s\":22222,"
                             "\"padding_fraction\":0.0125,\"seconds\":3.25}");
    /* phase times: mean seconds per step, after the core fields */
    m.has_phases = 1;
    m.phases = (pt_phase_times){.seconds = {0.002, 0.2, 0.4, 0, 0.1, 0.05}, .steps = 2};
    pt_train_metrics_json(&m, buf, sizeof buf);
    assert_string_equal(buf, "{\"kind\":\"step\",\"step\":12,\"epoch\":2,\"loss\":0.5,\"lr\":0.001,"
                             "\"graphs_per_s\":1234.5,\"nodes_per_s\":22222,"
                             "\"padding_fraction\":0.0125,\"seconds\":3.25,\"phase_io_s\":0.001,"
                             "\"phase_forward_s\":0.1,\"phase_backward_s\":0.2,"
                             "\"phase_allreduce_s\":0,\"phase_optimizer_s\":0.05,"
                             "\"phase_other_s\":0.025}");
    m.kind = "epoch";
    m.train_loss = 0.5;
    m.val_mae = NAN;
    m.val_rmse = 0.25;
    pt_train_metrics_json(&m, buf, sizeof buf);
    /* epoch lines never carry phases */
    assert_non_null(strstr(buf, ",\"seconds\":3.25,\"train_loss\":0.5,\"val_mae\":null,"
                                "\"val_rmse\":0.25}"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_json_format),
        cmocka_unit_test(test_batch_fill_layout),
        cmocka_unit_test(test_loss_falls),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_global_batch_invariance),
        cmocka_unit_test(test_large_pack_layout),
        cmocka_unit_test(test_max_steps_and_outputs),
        cmocka_unit_test(test_early_stopping),
        cmocka_unit_test(test_cancel_between_steps),
        cmocka_unit_test(test_phase_times),
        cmocka_unit_test(test_precision_reaches_every_pass),
        cmocka_unit_test(test_error_unknown_target),
        cmocka_unit_test(test_error_output_directory),
        cmocka_unit_test(test_error_diverged),
    };
    return cmocka_run_group_tests_name("train", tests, setup, teardown);
}
