/* test_config.c — the job configuration: defaults, canonical JSON, and one
 * test per class of error, each asserting the JSON path and the message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/train/config.h"

static const char *defaults_json =
    "{\"backend\":{\"device_iterations\":1,\"device_memory_mb\":900,\"gradient_accumulation\":1,"
    "\"kind\":\"ipu-emulated\",\"merge_all_reduce\":true,\"prefetch_depth\":3,\"ranks\":1,"
    "\"replication_factor\":\"auto\",\"static_shapes\":false,\"threads\":\"auto\","
    "\"use_async_loader\":true},"
    "\"batching\":{\"max_edges\":\"auto\",\"max_graphs\":\"auto\",\"max_nodes\":\"auto\","
    "\"method\":\"lpfhp\",\"model_batch_size\":\"auto\"},"
    "\"forces_key\":\"forces\","
    "\"model\":{\"cutoff\":6.0,\"filters\":100,\"gaussians\":25,\"hidden\":100,"
    "\"interactions\":4,\"max_neighbors\":\"auto\",\"readout\":\"sum\"},"
    "\"target\":\"energy_U0\","
    "\"training\":{\"checkpoint_every\":200,\"clip_grad_norm\":null,"
    "\"early_stopping_patience\":null,\"epochs\":25,\"log_every\":10,"
    "\"loss\":{\"energy\":\"auto\",\"energy_weight\":1.0,\"forces_weight\":\"auto\","
    "\"stress_weight\":0.0},\"lr\":0.001,\"max_steps\":null,\"normalize\":\"atomref\","
    "\"optimizer\":\"adam\",\"precision\":\"fp32\",\"schedule\":{\"kind\":\"constant\"},\"seed\":0,"
    "\"split\":[0.8,0.1,0.1],\"weight_decay\":0.0}}";

static int parse(pt_job_config *cfg, const char *text, pt_errors *errs)
{
    pt_errors_init(errs, 0);
    return pt_job_config_parse(cfg, text, strlen(text), "job.json", errs);
}

/* Asserts `text` fails with exactly one error at `field` saying `message`. */
static void expect_one_error(const char *text, const char *field, const char *message)
{
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, text, &errs), -1);
    if (errs.total != 1) {
        for (size_t i = 0; i < errs.kept; i++)
            fprintf(stderr, "  got: %s: %s\n", errs.items[i].field, errs.items[i].message);
    }
    assert_int_equal(errs.total, 1);
    assert_string_equal(errs.items[0].file, "job.json");
    assert_string_equal(errs.items[0].field, field);
    assert_string_equal(errs.items[0].message, message);
    pt_errors_close(&errs);
}

static void assert_dump_equals(const pt_job_config *cfg, const char *expect)
{
    char *s = pt_job_config_dump(cfg);
    assert_non_null(s);
    assert_string_equal(s, expect);
    free(s);
}

static void test_empty_object_gives_defaults(void **state)
{
    (void)state;
    pt_job_config cfg, def;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{}", &errs), 0);
    assert_int_equal(errs.total, 0);
    pt_job_config_defaults(&def);
    assert_dump_equals(&cfg, defaults_json);
    assert_dump_equals(&def, defaults_json);
    assert_int_equal(cfg.model.hidden, 100);
    assert_int_equal(cfg.batching.max_nodes, 0);
    assert_float_equal(cfg.training.schedule.lr, 1e-3, 0);
    pt_errors_close(&errs);
}

/* The example job of issue 3 is the defaults but for the layout, which it
 * pins to one replica of 16 packs (the defaults are "auto": plan.h). */
static void test_issue_example_is_the_default(void **state)
{
    (void)state;
    const char *example =
        "{\"target\": \"energy_U0\",\n"
        " \"model\": {\"hidden\":100,\"filters\":100,\"interactions\":4,\"gaussians\":25,"
        "\"cutoff\":6.0,\"max_neighbors\":32,\"readout\":\"sum\"},\n"
        " \"batching\": {\"method\":\"lpfhp\",\"max_nodes\":\"auto\",\"max_edges\":\"auto\","
        "\"model_batch_size\":16},\n"
        " \"training\": {\"epochs\":25,\"max_steps\":null,\"optimizer\":\"adam\",\"lr\":0.001,"
        "\"split\":[0.8,0.1,0.1],\"seed\":0,\"normalize\":\"atomref\"},\n"
        " \"backend\": {\"kind\":\"ipu-emulated\",\"replication_factor\":1,"
        "\"gradient_accumulation\":1,\"device_iterations\":1}}";
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, example, &errs), 0);
    assert_int_equal(cfg.backend.replication_factor, 1);
    assert_int_equal(cfg.batching.model_batch_size, 16);
    cfg.backend.replication_factor = 0;
    cfg.batching.model_batch_size = 0;
    /* the example's 32 is what "auto" gives this energy job (plan.h) */
    assert_int_equal(cfg.model.max_neighbors, 32);
    cfg.model.max_neighbors = PT_JOB_NEIGHBORS_AUTO;
    assert_dump_equals(&cfg, defaults_json);
    pt_errors_close(&errs);
}

/* Every key set to a non-default value survives parse -> dump -> parse. */
static void test_all_keys_round_trip(void **state)
{
    (void)state;
    const char *full =
        "{\"target\":\"energy\",\"model\":{\"hidden\":32,\"filters\":48,\"interactions\":2,"
        "\"gaussians\":20,\"cutoff\":5.5,\"max_neighbors\":28,\"readout\":\"mean\"},"
        "\"batching\":{\"method\":\"tuple\",\"max_nodes\":64,\"max_edges\":1024,\"max_graphs\":4,"
        "\"model_batch_size\":8},\"training\":{\"epochs\":3,\"max_steps\":100,"
        "\"optimizer\":\"adamw\",\"lr\":0.0005,\"weight_decay\":0.05,\"clip_grad_norm\":10,"
        "\"schedule\":{\"kind\":\"plateau\",\"factor\":0.8,\"patience\":5,\"threshold\":0.001,"
        "\"cooldown\":1,\"min_lr\":1e-07},\"early_stopping_patience\":7,\"split\":[0.7,0.2,0.1],"
        "\"seed\":12345678901,\"normalize\":\"mean_std\",\"log_every\":1,"
        "\"checkpoint_every\":50,\"precision\":\"bf16\"},"
        "\"backend\":{\"kind\":\"mpi\",\"replication_factor\":4,\"gradient_accumulation\":2,"
        "\"device_iterations\":3,\"merge_all_reduce\":false,\"use_async_loader\":false,"
        "\"prefetch_depth\":5,\"device_memory_mb\":450,\"threads\":2,\"ranks\":2,"
        "\"static_shapes\":true}}";
    pt_job_config a, b;
    pt_errors errs;
    assert_int_equal(parse(&a, full, &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(a.model.filters, 48);
    assert_int_equal(a.model.readout, PT_JOB_READOUT_MEAN);
    assert_int_equal(a.batching.method, PT_JOB_BATCH_TUPLE);
    assert_int_equal(a.batching.max_edges, 1024);
    assert_int_equal(a.training.max_steps, 100);
    assert_int_equal(a.training.optimizer, PT_OPTIM_ADAMW);
    assert_float_equal(a.training.weight_decay, 0.05, 0);
    assert_float_equal(a.training.clip_grad_norm, 10.0, 0);
    assert_int_equal(a.training.schedule.kind, PT_SCHEDULE_PLATEAU);
    assert_float_equal(a.training.schedule.factor, 0.8, 0);
    assert_int_equal(a.training.schedule.patience, 5);
    assert_float_equal(a.training.schedule.min_lr, 1e-7, 0);
    assert_float_equal(a.training.schedule.lr, 5e-4, 0);
    assert_int_equal(a.training.early_stopping_patience, 7);
    assert_true(a.training.seed == 12345678901ULL);
    assert_int_equal(a.training.normalize, PT_NORM_MEAN_STD);
    assert_int_equal(a.backend.kind, PT_JOB_BACKEND_MPI);
    assert_false(a.backend.merge_all_reduce);
    assert_int_equal(a.backend.threads, 2);
    assert_int_equal(a.backend.ranks, 2);
    assert_true(a.backend.static_shapes);
    assert_int_equal(a.training.checkpoint_every, 50);
    assert_int_equal(a.training.precision, PT_PRECISION_BF16);

    char *text = pt_job_config_dump(&a);
    assert_int_equal(parse(&b, text, &errs), 0);
    pt_errors_close(&errs);
    assert_dump_equals(&b, text);
    /* (struct padding makes memcmp meaningless; the dump covers every field) */
    assert_true(b.training.seed == a.training.seed);
    assert_int_equal(b.training.precision, PT_PRECISION_BF16);
    assert_float_equal(b.training.schedule.threshold, a.training.schedule.threshold, 0);
    free(text);
}

/* Reals are kept to 15 significant digits: 0.1 + 0.2 prints as 0.3 and the
 * canonical text is a fixed point of parse + dump. */
static void test_reals_are_canonical(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"training\":{\"lr\":0.30000000000000004}}", &errs), 0);
    pt_errors_close(&errs);
    assert_float_equal(cfg.training.lr, 0.3, 0);
    char *s = pt_job_config_dump(&cfg);
    assert_non_null(strstr(s, "\"lr\":0.3,"));
    free(s);
}

/* training.precision: "fp32" unless asked, both names parse, and the
 * canonical form always says which (the stored job shows it). */
static void test_precision(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{}", &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(cfg.training.precision, PT_PRECISION_FP32);
    assert_int_equal(parse(&cfg, "{\"training\":{\"precision\":\"fp32\"}}", &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(cfg.training.precision, PT_PRECISION_FP32);
    assert_int_equal(parse(&cfg, "{\"training\":{\"precision\":\"bf16\"}}", &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(cfg.training.precision, PT_PRECISION_BF16);
    assert_string_equal(pt_job_precision_name(cfg.training.precision), "bf16");
    char *s = pt_job_config_dump(&cfg);
    assert_non_null(strstr(s, "\"precision\":\"bf16\","));
    pt_job_config again;
    assert_int_equal(parse(&again, s, &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(again.training.precision, PT_PRECISION_BF16);
    assert_dump_equals(&again, s);
    free(s);
}

static void test_adamw_weight_decay_default(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"training\":{\"optimizer\":\"adamw\"}}", &errs), 0);
    assert_float_equal(cfg.training.weight_decay, 0.01, 0);
    pt_errors_close(&errs);
}

static void test_schedule_defaults_per_kind(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"training\":{\"schedule\":{\"kind\":\"cosine\","
                                 "\"warmup_steps\":100}}}", &errs), 0);
    pt_errors_close(&errs);
    char *s = pt_job_config_dump(&cfg);
    assert_non_null(strstr(s, "\"schedule\":{\"kind\":\"cosine\",\"min_lr\":0.0,"
                              "\"warmup_steps\":100}"));
    free(s);
    assert_int_equal(parse(&cfg, "{\"training\":{\"schedule\":{\"kind\":\"plateau\"}}}", &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(cfg.training.schedule.patience, 25);
    assert_float_equal(cfg.training.schedule.factor, 0.5, 0);
    assert_float_equal(cfg.training.schedule.min_lr, 1e-6, 0);
}

/* --- errors, one class per test ------------------------------------------ */

static void test_error_invalid_json(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"model\":\n {\"hidden\": 10,}}", &errs), -1);
    assert_int_equal(errs.total, 1);
    assert_int_equal(errs.items[0].line, 2);
    assert_non_null(strstr(errs.items[0].message, "invalid JSON at column"));
    pt_errors_close(&errs);
}

static void test_error_duplicate_key(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"model\":{\"hidden\":10,\"hidden\":12}}", &errs), -1);
    assert_int_equal(errs.total, 1);
    assert_non_null(strstr(errs.items[0].message, "duplicate object key"));
    pt_errors_close(&errs);
}

static void test_error_root_not_object(void **state)
{
    (void)state;
    expect_one_error("[1, 2]", "", "the job configuration must be a JSON object, got an array");
}

static void test_error_unknown_keys(void **state)
{
    (void)state;
    expect_one_error("{\"model\":{\"hiden\":64}}", "model.hiden",
                     "unknown key; allowed here: hidden, filters, interactions, gaussians, "
                     "cutoff, max_neighbors, readout");
    expect_one_error("{\"modle\":{}}", "modle",
                     "unknown key; allowed here: target, targets, forces_key, model, batching, training, "
                     "backend, max_runtime_seconds");
    expect_one_error("{\"training\":{\"loss\":{\"force_weight\":1}}}", "training.loss.force_weight",
                     "unknown key; allowed here: energy_weight, forces_weight, stress_weight, "
                     "energy");
}

static void test_error_section_not_object(void **state)
{
    (void)state;
    expect_one_error("{\"backend\":\"mpi\"}", "backend", "must be an object, got a string");
}

static void test_error_integer_type(void **state)
{
    (void)state;
    expect_one_error("{\"model\":{\"hidden\":\"100\"}}", "model.hidden",
                     "must be an integer from 2 to 4096, got \"100\"");
    expect_one_error("{\"model\":{\"interactions\":2.5}}", "model.interactions",
                     "must be an integer from 1 to 16, got a real number");
}

static void test_error_integer_range(void **state)
{
    (void)state;
    expect_one_error("{\"model\":{\"hidden\":0}}", "model.hidden",
                     "must be an integer from 2 to 4096, got 0");
    expect_one_error("{\"backend\":{\"prefetch_depth\":65}}", "backend.prefetch_depth",
                     "must be an integer from 1 to 64, got 65");
}

static void test_error_auto_or_integer(void **state)
{
    (void)state;
    expect_one_error("{\"batching\":{\"max_nodes\":\"big\"}}", "batching.max_nodes",
                     "must be an integer from 1 to 1000000 or \"auto\", got \"big\"");
    expect_one_error("{\"backend\":{\"threads\":0}}", "backend.threads",
                     "must be an integer from 1 to 1024 or \"auto\", got 0");
}

static void test_error_null_or_integer(void **state)
{
    (void)state;
    expect_one_error("{\"training\":{\"max_steps\":\"auto\"}}", "training.max_steps",
                     "must be an integer from 1 to 9223372036854775807 or null, got \"auto\"");
    expect_one_error("{\"training\":{\"early_stopping_patience\":0}}",
                     "training.early_stopping_patience",
                     "must be an integer from 1 to 1000000 or null, got 0");
    expect_one_error("{\"training\":{\"checkpoint_every\":0}}", "training.checkpoint_every",
                     "must be an integer from 1 to 1000000000 or null, got 0");
}

/* checkpoint_every null: checkpoints only at epoch ends and when stopped. */
static void test_checkpoint_every_null(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"training\":{\"checkpoint_every\":null}}", &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(cfg.training.checkpoint_every, 0);
    char *s = pt_job_config_dump(&cfg);
    assert_non_null(strstr(s, "\"checkpoint_every\":null,"));
    free(s);
}

/* max_runtime_seconds: a limit of the run at the top level, in the
 * canonical text only when set; the server's scheduler enforces it. */
static void test_max_runtime_seconds(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"max_runtime_seconds\":90.5}", &errs), 0);
    pt_errors_close(&errs);
    assert_true(cfg.max_runtime_seconds == 90.5);
    char *s = pt_job_config_dump(&cfg);
    assert_non_null(strstr(s, "\"max_runtime_seconds\":90.5,"));
    pt_job_config again;
    assert_int_equal(parse(&again, s, &errs), 0);
    pt_errors_close(&errs);
    char *t = pt_job_config_dump(&again);
    assert_string_equal(s, t);
    free(s);
    free(t);
    assert_int_equal(parse(&cfg, "{\"max_runtime_seconds\":null}", &errs), 0);
    pt_errors_close(&errs);
    assert_true(cfg.max_runtime_seconds == 0);
    s = pt_job_config_dump(&cfg);
    assert_null(strstr(s, "max_runtime_seconds"));
    free(s);
    const char *bad[] = {"{\"max_runtime_seconds\":-1}", "{\"max_runtime_seconds\":0}",
                         "{\"max_runtime_seconds\":\"1h\"}", "{\"max_runtime_seconds\":[]}", NULL};
    for (int i = 0; bad[i]; i++)
        expect_one_error(bad[i], "max_runtime_seconds", "must be a number of seconds > 0, or null");
}

/* model.max_neighbors: "auto" by default; "all" (null, its older spelling,
 * reads the same) keeps every neighbour within the cutoff, stored as 0
 * (PT_GRAPH_UNLIMITED) and dumped as "all"; integers 1..1024 as given;
 * anything else is refused at model.max_neighbors, saying what it takes. */
static void test_max_neighbors(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int32_t k;
        const char *dump;
    } ok[] = {
        {"{}", PT_JOB_NEIGHBORS_AUTO, "\"max_neighbors\":\"auto\","},
        {"{\"model\":{\"max_neighbors\":\"auto\"}}", PT_JOB_NEIGHBORS_AUTO,
         "\"max_neighbors\":\"auto\","},
        {"{\"model\":{\"max_neighbors\":\"all\"}}", 0, "\"max_neighbors\":\"all\","},
        {"{\"model\":{\"max_neighbors\":null}}", 0, "\"max_neighbors\":\"all\","},
        {"{\"model\":{\"max_neighbors\":1}}", 1, "\"max_neighbors\":1,"},
        {"{\"model\":{\"max_neighbors\":1024}}", 1024, "\"max_neighbors\":1024,"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        pt_job_config cfg, again;
        pt_errors errs;
        assert_int_equal(parse(&cfg, ok[i].json, &errs), 0);
        pt_errors_close(&errs);
        assert_int_equal(cfg.model.max_neighbors, ok[i].k);
        char *s = pt_job_config_dump(&cfg);
        if (!strstr(s, ok[i].dump)) fail_msg("%s dumps as %s", ok[i].json, s);
        /* the canonical form is a fixed point */
        assert_int_equal(parse(&again, s, &errs), 0);
        pt_errors_close(&errs);
        assert_int_equal(again.model.max_neighbors, ok[i].k);
        free(s);
    }
    const char *what = "must be an integer from 1 to 1024, \"all\", \"auto\" or null, got ";
    static const struct {
        const char *json, *got;
    } bad[] = {
        {"{\"model\":{\"max_neighbors\":0}}", "0"},
        {"{\"model\":{\"max_neighbors\":-1}}", "-1"},
        {"{\"model\":{\"max_neighbors\":1025}}", "1025"},
        {"{\"model\":{\"max_neighbors\":\"unlimited\"}}", "\"unlimited\""},
        {"{\"model\":{\"max_neighbors\":\"ALL\"}}", "\"ALL\""},
        {"{\"model\":{\"max_neighbors\":32.5}}", "a real number"},
        {"{\"model\":{\"max_neighbors\":true}}", "a boolean"},
        {"{\"model\":{\"max_neighbors\":[32]}}", "an array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s%s", what, bad[i].got);
        expect_one_error(bad[i].json, "model.max_neighbors", msg);
    }
}

static void test_error_number(void **state)
{
    (void)state;
    expect_one_error("{\"training\":{\"lr\":0}}", "training.lr",
                     "must be a number above 0 and at most 10, got 0");
    expect_one_error("{\"training\":{\"lr\":\"fast\"}}", "training.lr",
                     "must be a number above 0 and at most 10, got a string");
    expect_one_error("{\"training\":{\"weight_decay\":-0.1}}", "training.weight_decay",
                     "must be a number of at least 0 and at most 1, got -0.1");
    expect_one_error("{\"training\":{\"clip_grad_norm\":0}}", "training.clip_grad_norm",
                     "must be a number above 0 and at most 1e+09, or null, got 0");
}

static void test_error_enum(void **state)
{
    (void)state;
    expect_one_error("{\"batching\":{\"method\":\"greedy\"}}", "batching.method",
                     "must be one of \"lpfhp\", \"tuple\", \"pad\", \"static64\", \"static2n\", "
                     "\"dynamic\", got \"greedy\"");
    expect_one_error("{\"training\":{\"optimizer\":1}}", "training.optimizer",
                     "must be one of \"adam\", \"adamw\", got an integer");
}

static void test_error_precision(void **state)
{
    (void)state;
    expect_one_error("{\"training\":{\"precision\":\"fp16\"}}", "training.precision",
                     "must be one of \"fp32\", \"bf16\", got \"fp16\"");
    expect_one_error("{\"training\":{\"precision\":\"BF16\"}}", "training.precision",
                     "must be one of \"fp32\", \"bf16\", got \"BF16\"");
    expect_one_error("{\"training\":{\"precision\":16}}", "training.precision",
                     "must be one of \"fp32\", \"bf16\", got an integer");
    expect_one_error("{\"training\":{\"precision\":null}}", "training.precision",
                     "must be one of \"fp32\", \"bf16\", got null");
}

static void test_error_boolean(void **state)
{
    (void)state;
    expect_one_error("{\"backend\":{\"use_async_loader\":\"yes\"}}", "backend.use_async_loader",
                     "must be true or false, got a string");
}

static void test_error_target(void **state)
{
    (void)state;
    const char *msg = "must be the name of a numeric per-structure key of the dataset "
                      "(1 to 63 characters, e.g. \"energy_U0\"), got ";
    char expect[256];
    snprintf(expect, sizeof expect, "%s%s", msg, "a string of the wrong length");
    expect_one_error("{\"target\":\"\"}", "target", expect);
    snprintf(expect, sizeof expect, "%s%s", msg, "null");
    expect_one_error("{\"target\":null}", "target", expect);
}

/* training.loss: defaults, every key, "auto", and the canonical form. */
static void test_loss(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{}", &errs), 0);
    pt_errors_close(&errs);
    assert_true(cfg.training.loss.energy_weight == 1.0);
    assert_true(cfg.training.loss.forces_weight == PT_JOB_WEIGHT_AUTO);
    assert_true(cfg.training.loss.stress_weight == 0.0);
    assert_int_equal(cfg.training.loss.energy, PT_JOB_ENERGY_AUTO);
    assert_string_equal(cfg.forces_key, "forces");
    const char *text = "{\"forces_key\":\"forces\",\"training\":{\"loss\":{\"energy_weight\":0.01,"
                       "\"forces_weight\":0.99,\"stress_weight\":2,\"energy\":\"total\"}}}";
    assert_int_equal(parse(&cfg, text, &errs), 0);
    pt_errors_close(&errs);
    assert_true(cfg.training.loss.energy_weight == 0.01);
    assert_true(cfg.training.loss.forces_weight == 0.99);
    assert_true(cfg.training.loss.stress_weight == 2.0);
    assert_int_equal(cfg.training.loss.energy, PT_JOB_ENERGY_TOTAL);
    char *dump = pt_job_config_dump(&cfg);
    assert_non_null(strstr(dump, "\"loss\":{\"energy\":\"total\",\"energy_weight\":0.01,"
                                 "\"forces_weight\":0.99,\"stress_weight\":2.0}"));
    pt_job_config again;
    assert_int_equal(parse(&again, dump, &errs), 0);
    pt_errors_close(&errs);
    assert_dump_equals(&again, dump);
    free(dump);
    /* energy alone without a forces weight is fine; "auto" and per_atom parse */
    assert_int_equal(parse(&cfg, "{\"training\":{\"loss\":{\"forces_weight\":\"auto\","
                                 "\"energy\":\"per_atom\"}}}", &errs), 0);
    pt_errors_close(&errs);
    assert_int_equal(cfg.training.loss.energy, PT_JOB_ENERGY_PER_ATOM);
    assert_true(cfg.training.loss.forces_weight == PT_JOB_WEIGHT_AUTO);
    assert_string_equal(pt_job_energy_loss_name(PT_JOB_ENERGY_PER_ATOM), "per_atom");
}

static void test_error_loss(void **state)
{
    (void)state;
    expect_one_error("{\"training\":{\"loss\":{\"forces_weight\":-1}}}",
                     "training.loss.forces_weight",
                     "must be a weight from 0 to 1e+06, or \"auto\", got -1");
    expect_one_error("{\"training\":{\"loss\":{\"energy_weight\":\"auto\"}}}",
                     "training.loss.energy_weight",
                     "must be a weight from 0 to 1e+06, got \"auto\"");
    expect_one_error("{\"training\":{\"loss\":{\"stress_weight\":2e6}}}",
                     "training.loss.stress_weight", "must be a weight from 0 to 1e+06, got 2e+06");
    expect_one_error("{\"training\":{\"loss\":{\"forces_weight\":null}}}",
                     "training.loss.forces_weight",
                     "must be a weight from 0 to 1e+06, or \"auto\", got null");
    expect_one_error("{\"training\":{\"loss\":{\"energy\":\"mean\"}}}", "training.loss.energy",
                     "must be one of \"auto\", \"total\", \"per_atom\", got \"mean\"");
    expect_one_error("{\"training\":{\"loss\":{\"energy_weight\":0,\"forces_weight\":0}}}",
                     "training.loss",
                     "every weight is 0: nothing would be trained; give energy_weight, "
                     "forces_weight or stress_weight a value above 0");
    expect_one_error("{\"training\":{\"loss\":[]}}", "training.loss",
                     "must be an object, got an array");
    expect_one_error("{\"forces_key\":7}", "forces_key",
                     "must be the name of the dataset's per-atom force labels (1 to 63 "
                     "characters, e.g. \"forces\"), got an integer");
}

static void test_error_split(void **state)
{
    (void)state;
    expect_one_error("{\"training\":{\"split\":[0.9,0.1]}}", "training.split",
                     "must be an array of 3 fractions [train, validation, test], got 2 elements");
    expect_one_error("{\"training\":{\"split\":0.8}}", "training.split",
                     "must be an array of 3 fractions [train, validation, test], "
                     "got a real number");
    expect_one_error("{\"training\":{\"split\":[0.8,0.1,0.2]}}", "training.split",
                     "fractions must sum to 1, got 1.1");
    expect_one_error("{\"training\":{\"split\":[1,0,0]}}", "training.split[1]",
                     "must be the validation fraction, above 0 and at most 1, got 0");
    expect_one_error("{\"training\":{\"split\":[0.9,0.1,\"x\"]}}", "training.split[2]",
                     "must be the test fraction, from 0 to 1, got a string");
}

static void test_error_schedule(void **state)
{
    (void)state;
    expect_one_error("{\"training\":{\"schedule\":{}}}", "training.schedule.kind",
                     "is required: one of \"constant\", \"plateau\", \"cosine\"");
    expect_one_error("{\"training\":{\"schedule\":{\"kind\":\"constant\",\"patience\":3}}}",
                     "training.schedule.patience", "does not apply to schedule kind \"constant\"");
    expect_one_error("{\"training\":{\"schedule\":{\"kind\":\"cosine\",\"min_lr\":0.01}}}",
                     "training.schedule.min_lr", "must be below training.lr (0.001), got 0.01");
    expect_one_error("{\"training\":{\"lr\":1e-7,\"schedule\":{\"kind\":\"plateau\"}}}",
                     "training.schedule.min_lr",
                     "must be below training.lr (1e-07), got 1e-06 (the default)");
    expect_one_error("{\"training\":{\"schedule\":{\"kind\":\"plateau\",\"factor\":1}}}",
                     "training.schedule.factor",
                     "must be a number above 0 and at most 0.999999, got 1");
}

static void test_error_atomref_needs_sum(void **state)
{
    (void)state;
    expect_one_error("{\"model\":{\"readout\":\"mean\"}}", "training.normalize",
                     "\"atomref\" needs model.readout \"sum\" (per-atom references add up over "
                     "atoms); use \"mean_std\" or \"none\" with readout \"mean\"");
}

/* backend.ranks: MPI only, dividing the replicas among the ranks. */
static void test_error_ranks(void **state)
{
    (void)state;
    expect_one_error("{\"backend\":{\"ranks\":2}}", "backend.ranks",
                     "more than one rank needs backend.kind \"mpi\", got 2 ranks with "
                     "\"ipu-emulated\"");
    expect_one_error("{\"backend\":{\"kind\":\"mpi\",\"ranks\":2,\"replication_factor\":3}}",
                     "backend.replication_factor",
                     "must be a multiple of backend.ranks (2): each rank runs replication_factor "
                     "/ ranks replicas; got 3");
    expect_one_error("{\"backend\":{\"kind\":\"mpi\",\"ranks\":0}}", "backend.ranks",
                     "must be an integer from 1 to 4096, got 0");
}

/* All problems are reported in one pass, in document order. */
static void test_error_step_too_large(void **state)
{
    (void)state;
    expect_one_error("{\"backend\":{\"replication_factor\":1024,\"gradient_accumulation\":65536},"
                     "\"batching\":{\"model_batch_size\":65536}}", "backend",
                     "replication_factor x gradient_accumulation x model_batch_size = "
                     "4398046511104 packs per step (with 67111936 batch buffers) is too large: at "
                     "most 1073741824 of each");
}

static void test_all_errors_reported(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    assert_int_equal(parse(&cfg, "{\"model\":{\"hidden\":-1,\"filters\":\"x\",\"color\":1},"
                                 "\"training\":{\"lr\":-1,\"split\":[1,1,1],\"seed\":-5},"
                                 "\"backend\":{\"replication_factor\":0}}", &errs), -1);
    const char *fields[] = {"model.color", "model.hidden", "model.filters", "training.lr",
                            "training.split", "training.seed", "backend.replication_factor"};
    assert_int_equal(errs.total, 7);
    for (int i = 0; i < 7; i++) assert_string_equal(errs.items[i].field, fields[i]);
    assert_string_equal(errs.items[4].message, "fractions must sum to 1, got 3");
    pt_errors_close(&errs);
}

static void test_load_file(void **state)
{
    (void)state;
    char path[] = "/tmp/pt_test_config_" "XX" "XX" "XX" /* mkstemp pattern */;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "{\"model\":{\"hidden\":64}}";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_job_config_load(&cfg, path, &errs), 0);
    assert_int_equal(cfg.model.hidden, 64);
    unlink(path);

    assert_int_equal(pt_job_config_load(&cfg, path, &errs), -1);
    assert_string_equal(errs.items[0].file, path);
    assert_string_equal(errs.items[0].message,
                        "cannot open the job configuration: No such file or directory");
    pt_errors_close(&errs);
}

static void test_load_too_large(void **state)
{
    (void)state;
    char path[] = "/tmp/pt_test_config_" "XX" "XX" "XX" /* mkstemp pattern */;
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < (1 << 20) + 1; i++) fputc(' ', f);
    fclose(f);
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_job_config_load(&cfg, path, &errs), -1);
    assert_string_equal(errs.items[0].message, "job configuration larger than 1048576 bytes");
    unlink(path);
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_object_gives_defaults),
        cmocka_unit_test(test_issue_example_is_the_default),
        cmocka_unit_test(test_all_keys_round_trip),
        cmocka_unit_test(test_reals_are_canonical),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_error_loss),
        cmocka_unit_test(test_precision),
        cmocka_unit_test(test_adamw_weight_decay_default),
        cmocka_unit_test(test_schedule_defaults_per_kind),
        cmocka_unit_test(test_error_invalid_json),
        cmocka_unit_test(test_error_duplicate_key),
        cmocka_unit_test(test_error_root_not_object),
        cmocka_unit_test(test_error_unknown_keys),
        cmocka_unit_test(test_error_section_not_object),
        cmocka_unit_test(test_error_integer_type),
        cmocka_unit_test(test_error_integer_range),
        cmocka_unit_test(test_error_auto_or_integer),
        cmocka_unit_test(test_error_null_or_integer),
        cmocka_unit_test(test_checkpoint_every_null),
        cmocka_unit_test(test_max_runtime_seconds),
        cmocka_unit_test(test_max_neighbors),
        cmocka_unit_test(test_error_number),
        cmocka_unit_test(test_error_enum),
        cmocka_unit_test(test_error_precision),
        cmocka_unit_test(test_error_boolean),
        cmocka_unit_test(test_error_target),
        cmocka_unit_test(test_error_split),
        cmocka_unit_test(test_error_schedule),
        cmocka_unit_test(test_error_atomref_needs_sum),
        cmocka_unit_test(test_error_ranks),
        cmocka_unit_test(test_error_step_too_large),
        cmocka_unit_test(test_all_errors_reported),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_load_too_large),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
