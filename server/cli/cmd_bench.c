/* cmd_bench.c — `packtrain bench`: training throughput of one job
 * configuration on the emulated IPU backend (or the built-in local engine),
 * measured the way seed 000 reports it: graphs per second over optimizer
 * steps, after a warm-up, with the step time split into phases.
 *
 * It runs the real training loop (pt_train_run) for warm-up + N steps, one
 * metrics line per step, and wraps the gradient engine to learn each step's
 * real graphs, nodes and slots.  A step's time is its graphs over the loop's
 * graphs_per_s for that step (the loop's own timing, evaluation excluded).
 * bench/bench_backend.sh runs it over the configurations of the ablation,
 * batching and scaling tables and computes the ratios. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/backend/backend.h"
#include "engine/train/config.h"
#include "engine/data/dataset.h"
#include "engine/backend/memplan.h"
#include "engine/train/train.h"
#include "server/cli/commands.h"

static const char usage_text[] =
    "usage: packtrain bench DATA.ptd --config JOB.json [--steps N] [--warmup W]\n"
    "                       [--engine backend|local] [--set SECTION.KEY=VALUE]...\n"
    "\n"
    "Trains the job for W + N optimizer steps and prints one JSON object:\n"
    "{\"graphs_per_s\",\"nodes_per_s\",\"padding_fraction\",\"edge_padding_fraction\",\n"
    "\"steps\",\"graphs\",\"seconds\",\"step_ms\",\"cpu_ms_per_step\",\"phases_ms\":{io,forward,\n"
    "backward,allreduce,other,outside},\"backend\":{...,\"replicas_ms\":{busy,wait,\n"
    "busy_cpu,wait_cpu,start_lag},\"host_ms\":{prep,join,post,gap,update},\n"
    "\"fills\":{thread,consumer,helper},\"fused_updates\"},\"limits\":{...},\"memplan\":{...},\n"
    "\"config\":{...},\"per_step\":{graphs,ms}} measured over the N steps after the W\n"
    "warm-up steps.  per_step: each measured step's graphs and wall-clock ms, in\n"
    "order (graphs_per_s is their sums' ratio; bench_speed.sh reads windows).\n"
    "cpu_ms_per_step is the process's CPU time (all its threads) per step: on a\n"
    "loaded machine it moves less than the wall clock.  phases_ms are means per\n"
    "step; \"outside\" is the time the loop spends outside the gradient engine\n"
    "(optimizer update and bookkeeping).  replicas_ms: a replica's compute per\n"
    "step (wall clock, its thread's CPU time), its mean wait at the all-reduce\n"
    "for the slowest replica, and the time to wake replicas 1..R-1.  host_ms: the\n"
    "host thread's serial work per step (backend.h): prep before the dispatch,\n"
    "join (waiting for replicas 1..R-1 after its own part), post (stats merge),\n"
    "gap (between steps: the loop's update and bookkeeping) and the update in it.\n"
    "fills: the measured steps' batches filled by the loader's (background)\n"
    "thread, by their consumer, by a waiting replica.  fused_updates: measured\n"
    "steps whose Adam update the replicas applied inside the all-reduce.\n"
    "DATA is a .ptd, or a file 'packtrain ingest' reads, ingested on first use\n"
    "into $XDG_CACHE_HOME/packtrain.\n"
    "\n"
    "  --config FILE     job configuration (JSON, as for the REST API)\n"
    "  --set K=V         override one key of the configuration, e.g.\n"
    "                    --set backend.replication_factor=4 --set batching.method=pad\n"
    "                    (V is parsed as JSON, else taken as a string)\n"
    "  --steps N         measured steps (default 100)\n"
    "  --warmup W        steps run before measuring (default 10)\n"
    "  --engine E        backend (default): the emulated IPU backend; local: the\n"
    "                    training loop's built-in single-thread engine\n"
    "\n"
    "Exit status: 0 done, 1 failure (data, configuration, training), 2 usage error.\n";

#define MAX_SETS 32

typedef struct bench_args {
    const char *data, *config;
    const char *sets[MAX_SETS];
    int n_sets;
    long steps, warmup;
    int local;
    int help;
} bench_args;

/* What the wrapped engine and the metrics callback record, per step. */
typedef struct bench_state {
    pt_grad_engine inner;
    int local;
    int64_t cap, n;                 /* steps recorded */
    pt_step_stats *st;              /* [cap] per compute call */
    double *rate;                   /* [cap] graphs_per_s of step k+1 */
    int64_t warmup;
    pt_phase_times phases;          /* backend phases of the measured steps */
    pt_backend_stats bstats;
    pt_backend_stats bstats0;       /* at the end of the warm-up */
    int phases_ok;
    /* process CPU time (every thread: replicas, loader, spinning waits) at
     * the end of the warm-up and of the last step: under load the wall
     * clock measures the other users too, this only the bench's work */
    double cpu_start, cpu_end;
} bench_state;

static double process_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* pt_grad_engine_open_fn has no user pointer; one bench per process. */
static bench_state g_bench;

static int bench_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                         const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                         pt_errors *errs)
{
    bench_state *b = self;
    int rc = b->inner.compute(b->inner.self, packs, ids, n, norm, grads, st, errs);
    if (rc == 0 && b->n < b->cap) b->st[b->n++] = *st;
    return rc;
}

/* ZeRO: the wrapped engine updates its own shards (backend_zero.h) */
static int bench_update(void *self, pt_optim *opt, float *grads, double lr, double clip,
                        pt_errors *errs)
{
    bench_state *b = self;
    return b->inner.update(b->inner.self, opt, grads, lr, clip, errs);
}

static int bench_arm_update(void *self, pt_optim *opt, double lr, double clip)
{
    bench_state *b = self;
    return b->inner.arm_update(b->inner.self, opt, lr, clip);
}

static void bench_close(void *self)
{
    bench_state *b = self;
    b->phases_ok = b->inner.phases != NULL;
    if (b->inner.phases) b->inner.phases(b->inner.self, &b->phases, 0);
    pt_backend_stats_get(&b->inner, &b->bstats);
    if (b->inner.close) b->inner.close(b->inner.self);
    memset(&b->inner, 0, sizeof(b->inner));
}

static int bench_open(pt_grad_engine *eng, const pt_train_data *d, pt_errors *errs)
{
    bench_state *b = &g_bench;
    int rc = b->local ? pt_grad_engine_open_local(&b->inner, d, errs)
                      : pt_backend_open(&b->inner, d, errs);
    if (rc) return rc;
    if (b->warmup == 0) b->cpu_start = process_cpu_seconds();
    /* no phases(): the loop's step lines would reset the inner engine's
     * window, which the bench reads once, from the end of the warm-up */
    eng->self = b;
    eng->kind = b->inner.kind;
    eng->compute = bench_compute;
    eng->close = bench_close;
    if (b->inner.update) eng->update = bench_update;
    if (b->inner.arm_update) eng->arm_update = bench_arm_update;
    return 0;
}

static void on_metrics(void *user, const pt_train_metrics *m, const char *json)
{
    bench_state *b = user;
    (void)json;
    if (strcmp(m->kind, "step") || m->step < 1 || m->step > b->cap) return;
    b->rate[m->step - 1] = m->graphs_per_s;
    if (m->step == b->cap) b->cpu_end = process_cpu_seconds();
    if (m->step == b->warmup) {
        b->cpu_start = process_cpu_seconds();
        pt_backend_stats_get(&b->inner, &b->bstats0);
        pt_phase_times drop;
        if (b->inner.phases) b->inner.phases(b->inner.self, &drop, 1);   /* measured window starts now */
    }
}

static int parse_args(int argc, char **argv, bench_args *a)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"set", required_argument, 0, 's'},
        {"steps", required_argument, 0, 'n'},  {"warmup", required_argument, 0, 'w'},
        {"engine", required_argument, 0, 'e'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    memset(a, 0, sizeof(*a));
    a->steps = 100;
    a->warmup = 10;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            a->help = 1;
            return 0;
        case 'c': a->config = optarg; break;
        case 's':
            if (a->n_sets == MAX_SETS) {
                fprintf(stderr, "packtrain bench: at most %d --set options\n", MAX_SETS);
                return -1;
            }
            a->sets[a->n_sets++] = optarg;
            break;
        case 'n':
            if (pt_cli_parse_long(optarg, 1, 1000000, &a->steps)) {
                fprintf(stderr, "packtrain bench: --steps: '%s' is not in 1..1000000\n", optarg);
                return -1;
            }
            break;
        case 'w':
            if (pt_cli_parse_long(optarg, 0, 1000000, &a->warmup)) {
                fprintf(stderr, "packtrain bench: --warmup: '%s' is not in 0..1000000\n", optarg);
                return -1;
            }
            break;
        case 'e':
            if (strcmp(optarg, "backend") && strcmp(optarg, "local")) {
                fprintf(stderr, "packtrain bench: --engine: '%s' is not backend or local\n",
                        optarg);
                return -1;
            }
            a->local = !strcmp(optarg, "local");
            break;
        default:
            fprintf(stderr, "packtrain bench: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) a->data = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "packtrain bench: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!a->data || !a->config) {
        fprintf(stderr, "packtrain bench: DATA.ptd and --config are required\n");
        return -1;
    }
    return 0;
}

/* Applies "section.key=value" to the JSON configuration. */
static int apply_set(json_t *root, const char *set)
{
    const char *dot = strchr(set, '.'), *eq = strchr(set, '=');
    if (!dot || !eq || dot > eq || dot == set || eq == dot + 1) {
        fprintf(stderr, "packtrain bench: --set '%s' is not SECTION.KEY=VALUE\n", set);
        return -1;
    }
    char section[64], key[64];
    if ((size_t)(dot - set) >= sizeof section || (size_t)(eq - dot - 1) >= sizeof key) {
        fprintf(stderr, "packtrain bench: --set '%s': name too long\n", set);
        return -1;
    }
    memcpy(section, set, (size_t)(dot - set));
    section[dot - set] = '\0';
    memcpy(key, dot + 1, (size_t)(eq - dot - 1));
    key[eq - dot - 1] = '\0';
    json_t *value = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
    if (!value) value = json_string(eq + 1);
    json_t *sec = json_object_get(root, section);
    if (!sec) {
        sec = json_object();
        json_object_set_new(root, section, sec);
    }
    if (!value) {
        fprintf(stderr, "packtrain bench: --set '%s': out of memory\n", set);
        return -1;
    }
    if (!json_is_object(sec)) {
        json_decref(value);
        fprintf(stderr, "packtrain bench: --set '%s': section '%s' is not an object\n", set,
                section);
        return -1;
    }
    if (json_object_set_new(sec, key, value)) {
        fprintf(stderr, "packtrain bench: --set '%s': out of memory\n", set);
        return -1;
    }
    return 0;
}

static int load_config(const bench_args *a, pt_job_config *cfg)
{
    json_error_t jerr;
    json_t *root = json_load_file(a->config, 0, &jerr);
    if (!root) {
        fprintf(stderr, "packtrain bench: %s:%d:%d: %s\n", a->config, jerr.line, jerr.column,
                jerr.text);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < a->n_sets && !rc; i++) rc = apply_set(root, a->sets[i]);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    if (!rc && pt_job_config_from_json(cfg, root, a->config, &errs)) {
        pt_cli_print_errors("packtrain bench", &errs);
        rc = -1;
    }
    pt_errors_close(&errs);
    json_decref(root);
    return rc;
}

/* The measured window as JSON. */
static json_t *report(const bench_state *b, const pt_job_config *cfg, const pt_train_result *res)
{
    int64_t graphs = 0, nodes = 0, slots = 0, edges = 0, eslots = 0, rows = 0, steps = 0;
    double seconds = 0.0;
    json_t *step_graphs = json_array(), *step_ms = json_array();
    for (int64_t k = b->warmup; k < b->n; k++) {
        if (!(b->rate[k] > 0.0)) continue;
        const pt_step_stats *s = &b->st[k];
        json_array_append_new(step_graphs, json_integer((json_int_t)s->graphs));
        json_array_append_new(step_ms, json_real(1000.0 * (double)s->graphs / b->rate[k]));
        graphs += s->graphs;
        nodes += s->nodes;
        slots += s->node_slots;
        edges += s->edges;
        eslots += s->edge_slots;
        rows += s->filter_rows;
        seconds += (double)s->graphs / b->rate[k];
        steps++;
    }
    double per = steps ? 1000.0 / (double)steps : 0.0;
    /* the local engine has no phases: null, and "outside" is then everything */
    json_t *ph = json_object();
    double inside = 0.0;
    for (int p = 0; p < PT_PHASE_COUNT; p++) {
        if (p == PT_PHASE_OPTIMIZER) continue;
        double s = b->phases.seconds[p];
        inside += s;
        json_object_set_new(ph, pt_phase_name((pt_phase)p),
                            b->phases_ok ? json_real(s * per) : json_null());
    }
    json_object_set_new(ph, "outside", json_real((seconds - inside) * per));
    const pt_backend_stats *bs = &b->bstats;
    json_t *be = json_pack("{s:s, s:i, s:i, s:i, s:i, s:b, s:b, s:i, s:i, s:i, s:i, s:i, s:I, "
                           "s:I}", "engine",
                           b->local ? "local" : "backend", "replication_factor",
                           (int)res->layout.replicas, "gradient_accumulation",
                           (int)res->layout.accumulation, "device_iterations",
                           (int)cfg->backend.device_iterations, "micro_packs",
                           (int)res->micro_packs, "merge_all_reduce",
                           cfg->backend.merge_all_reduce, "use_async_loader",
                           cfg->backend.use_async_loader, "prefetch_depth",
                           (int)cfg->backend.prefetch_depth, "global_packs",
                           (int)res->global_packs, "blas_threads", (int)bs->blas_threads,
                           "loader_threads", (int)bs->loader_threads, "slots", (int)bs->slots,
                           "queued_ahead", (json_int_t)bs->queued_ahead, "mispredicted",
                           (json_int_t)bs->mispredicted);
    /* ZeRO (backend_zero.h): allocated bytes of one replica, offload traffic */
    if (be && !b->local)
        json_object_update_new(be, json_pack("{s:i, s:b, s:I, s:I, s:f}", "zero_stage",
                                             (int)cfg->backend.zero_stage, "offload_optimizer",
                                             cfg->backend.offload_optimizer, "replica_bytes",
                                             (json_int_t)bs->replica_bytes, "offload_bytes",
                                             (json_int_t)bs->offload_bytes, "offload_s",
                                             bs->offload_seconds));
    /* the replicas' compute and their wait for the slowest, per step */
    if (be && !b->local) {
        const pt_backend_stats *b0 = &b->bstats0;
        const double R = res->layout.replicas > 0 ? res->layout.replicas : 1;
        const double busy = bs->busy_seconds - b0->busy_seconds;
        const double cpu = bs->busy_cpu_seconds - b0->busy_cpu_seconds;
        json_object_set_new(be, "replicas_ms", json_pack(
            "{s:f, s:f, s:f, s:f, s:f}",
            "busy", busy / R * per,
            "wait", (bs->busy_max_seconds - b0->busy_max_seconds - busy / R) * per,
            "busy_cpu", cpu / R * per,
            "wait_cpu", (bs->busy_cpu_max_seconds - b0->busy_cpu_max_seconds - cpu / R) * per,
            "start_lag", (bs->start_lag_seconds - b0->start_lag_seconds) * per));
        json_object_set_new(be, "host_ms", json_pack(
            "{s:f, s:f, s:f, s:f, s:f}",
            "prep", (bs->host_prep_seconds - b0->host_prep_seconds) * per,
            "join", (bs->host_join_seconds - b0->host_join_seconds) * per,
            "post", (bs->host_post_seconds - b0->host_post_seconds) * per,
            "gap", (bs->host_gap_seconds - b0->host_gap_seconds) * per,
            "update", (bs->update_seconds - b0->update_seconds) * per));
        json_object_set_new(be, "fills", json_pack(
            "{s:I, s:I, s:I}", "thread", (json_int_t)(bs->fills_thread - b0->fills_thread),
            "consumer", (json_int_t)(bs->fills_consumer - b0->fills_consumer),
            "helper", (json_int_t)(bs->fills_helper - b0->fills_helper)));
        json_object_set_new(be, "fused_updates",
                            json_integer((json_int_t)(bs->fused_updates - b0->fused_updates)));
    }
    pt_memplan plan;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    json_t *mp = pt_memplan_for_job(&plan, cfg, &res->layout, res->limits, res->loss.forces, &errs)
                     ? json_null() : pt_memplan_json(&plan);
    pt_errors_close(&errs);
    json_t *cj = pt_job_config_to_json(cfg);
    const double cpu = b->cpu_end > b->cpu_start ? b->cpu_end - b->cpu_start : 0.0;
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:o, s:o, s:{s:i, s:i, s:i}, "
                     "s:o, s:o, s:f, s:f, s:s, s:{s:o, s:o}}",
                     "graphs_per_s", seconds > 0 ? (double)graphs / seconds : 0.0,
                     "nodes_per_s", seconds > 0 ? (double)nodes / seconds : 0.0,
                     "padding_fraction", slots ? 1.0 - (double)nodes / (double)slots : 0.0,
                     "edge_padding_fraction", eslots ? 1.0 - (double)edges / (double)eslots : 0.0,
                     "filter_rows_per_graph", graphs ? (double)rows / (double)graphs : 0.0,
                     "steps", (json_int_t)steps, "graphs", (json_int_t)graphs, "seconds", seconds,
                     "step_ms", steps ? seconds * per : 0.0, "cpu_ms_per_step", cpu * per,
                     "phases_ms", ph, "backend", be,
                     "limits", "max_nodes", (int)res->limits.max_nodes, "max_edges",
                     (int)res->limits.max_edges, "max_graphs", (int)res->limits.max_graphs,
                     "memplan", mp, "config", cj ? cj : json_null(), "first_loss",
                     res->first_loss, "last_loss", res->last_loss, "stop_reason",
                     res->stop_reason ? res->stop_reason : "", "per_step", "graphs", step_graphs,
                     "ms", step_ms);
}

int pt_cmd_bench(int argc, char **argv)
{
    bench_args a;
    if (parse_args(argc, argv, &a)) return 2;
    if (a.help) {
        fputs(usage_text, stdout);
        return 0;
    }
    pt_job_config cfg;
    if (load_config(&a, &cfg)) return 1;
    cfg.training.max_steps = a.warmup + a.steps;
    cfg.training.log_every = 1;
    cfg.training.epochs = 100000;
    cfg.training.early_stopping_patience = 0;

    pt_dataset ds = {0};
    char ptd[4096];
    if (pt_cli_dataset_open("packtrain bench", a.data, &ds, ptd, sizeof ptd)) return 1;
    bench_state *b = &g_bench;
    memset(b, 0, sizeof(*b));
    b->local = a.local;
    b->warmup = a.warmup;
    b->cap = a.warmup + a.steps;
    b->st = calloc((size_t)b->cap, sizeof(*b->st));
    b->rate = calloc((size_t)b->cap, sizeof(*b->rate));
    int rc = 1;
    if (!b->st || !b->rate) {
        fprintf(stderr, "packtrain bench: out of memory\n");
        goto done;
    }
    pt_train_options opt = {.user = b, .on_metrics = on_metrics, .engine_open = bench_open};
    pt_train_result res;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    if (pt_train_run(&cfg, &ds, NULL, &opt, &res, &errs)) {
        pt_cli_print_errors("packtrain bench", &errs);
        pt_errors_close(&errs);
        goto done;
    }
    pt_errors_close(&errs);
    if (b->n < b->cap)
        fprintf(stderr, "packtrain bench: training stopped after %lld of %lld steps (%s)\n",
                (long long)b->n, (long long)b->cap, res.stop_reason ? res.stop_reason : "?");
    json_t *out = report(b, &cfg, &res);
    if (!out) {
        fprintf(stderr, "packtrain bench: out of memory\n");
        goto done;
    }
    char *text = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(out);
    if (text) printf("%s\n", text);
    free(text);
    rc = text ? 0 : 1;
done:
    free(b->st);
    free(b->rate);
    memset(b, 0, sizeof(*b));
    pt_dataset_close(&ds);
    return rc;
}
