/* app_metrics.c — the service's Prometheus metrics beyond HTTP's own:
 *   packtrain_build_info{version,commit}   1, the build's labels
 *   packtrain_jobs{state}            jobs by state (all owners), every state
 *   packtrain_worker_slots, packtrain_workers_active
 *   packtrain_workers_spawned_total, packtrain_workers_crashed_total
 *   packtrain_graphs_trained_total   training graphs processed by jobs whose
 *                                    worker finished a run (result.json)
 *   packtrain_job_graphs_per_second{job}, packtrain_job_loss{job},
 *   packtrain_job_progress_ratio{job}, packtrain_job_epoch{job}
 *                                    per running (or cancelling) job: its
 *                                    latest throughput, its latest logged
 *                                    step's loss, its progress and epoch;
 *                                    a job's series go when it ends
 *   packtrain_job_val_mae{job}, packtrain_job_val_forces_mae_ev_per_angstrom{job}
 *                                    per running job, its latest epoch's
 *                                    validation errors: the energy's (target
 *                                    units, eV when trained on forces) and,
 *                                    trained on forces, the force components'
 *   packtrain_job_target_val_mae{job,target}, packtrain_job_target_val_rmse{job,target}
 *                                    per running multi-task job and target,
 *                                    its latest epoch's validation errors
 *                                    (the target's units)
 * plus the process metrics (server/http/prom_process.c), refreshed by
 * collectors just before each scrape.
 *
 * Graphs trained: every finished run of a worker writes DIR/jobs/ID/
 * result.json with "graphs", the training graphs processed over the whole
 * job (a resumed run carries the count of the runs before it).  A job's
 * count is read once, when its result.json appears, and kept in a sorted
 * tally, so a scrape costs one directory listing plus a stat per job that
 * has not finished yet. */
#include "server/app.h"

#include "engine/core/version.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

typedef struct tally_entry {
    char id[PT_STORE_ID_MAX];
    int64_t graphs;
} tally_entry;

struct pt_graphs_tally {
    pthread_mutex_t mu;
    tally_entry *items;   /* sorted by id */
    size_t n, cap;
    int64_t total;
};

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tally_entry *)a)->id, ((const tally_entry *)b)->id);
}

static int tally_has(const struct pt_graphs_tally *t, const char *id)
{
    if (t->n == 0) return 0;
    tally_entry key;
    snprintf(key.id, sizeof key.id, "%.31s", id);
    return bsearch(&key, t->items, t->n, sizeof(tally_entry), cmp_entry) != NULL;
}

static void tally_add(struct pt_graphs_tally *t, const char *id, int64_t graphs)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        tally_entry *grown = realloc(t->items, cap * sizeof(tally_entry));
        if (!grown) return;   /* counted at a later scrape */
        t->items = grown;
        t->cap = cap;
    }
    size_t k = 0;
    while (k < t->n && strcmp(t->items[k].id, id) < 0) k++;
    memmove(t->items + k + 1, t->items + k, (t->n - k) * sizeof(tally_entry));
    snprintf(t->items[k].id, sizeof t->items[k].id, "%.31s", id);
    t->items[k].graphs = graphs;
    t->n++;
    t->total += graphs;
}

/* The "graphs" of DIR/ID/result.json; -1 while the job has none. */
static int64_t result_graphs(const char *jobs_dir, const char *id)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s/result.json", jobs_dir, id) >= (int)sizeof path) return -1;
    json_t *r = json_load_file(path, 0, NULL);
    json_t *g = json_object_get(r, "graphs");
    int64_t n = json_is_integer(g) ? (int64_t)json_integer_value(g) : -1;
    json_decref(r);
    return n;
}

/* Counters kept elsewhere (the scheduler's) are raised to their value. */
static void raise_to(pt_prom_metric *m, double v)
{
    pt_prom_add(m, NULL, v - pt_prom_value(m, NULL));
}

static void count_graphs(pt_app *app)
{
    struct pt_graphs_tally *t = app->graphs_tally;
    DIR *d = opendir(app->jobs_dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "job_", 4) != 0 || strlen(e->d_name) >= PT_STORE_ID_MAX || tally_has(t, e->d_name))
            continue;
        int64_t g = result_graphs(app->jobs_dir, e->d_name);
        if (g >= 0) tally_add(t, e->d_name, g);
    }
    raise_to(app->m_graphs, (double)t->total);   /* the tally only grows */
    closedir(d);
}

/* The series of the jobs running now; those of ended jobs are dropped. */
static void collect_running(pt_app *app, pt_store *s)
{
    pt_prom_metric *per_job[] = {app->m_job_rate, app->m_job_loss, app->m_job_progress, app->m_job_epoch,
                                 app->m_job_val_mae, app->m_job_val_forces_mae,
                                 app->m_job_target_val_mae, app->m_job_target_val_rmse};
    for (size_t i = 0; i < sizeof per_job / sizeof per_job[0]; i++) pt_prom_clear(per_job[i]);
    pt_store_job_array running;
    if (pt_store_job_list_unfinished(s, &running) != PT_STORE_OK) return;
    for (size_t i = 0; i < running.n; i++) {
        const pt_store_job *j = &running.items[i];
        const char *labels[] = {j->id};
        if (isfinite(j->latest_graphs_per_s)) pt_prom_set(app->m_job_rate, labels, j->latest_graphs_per_s);
        pt_prom_set(app->m_job_progress, labels, isfinite(j->progress) ? j->progress : 0.0);
        pt_prom_set(app->m_job_epoch, labels, (double)j->epoch);
        pt_store_step_metric last;
        if (pt_store_steps_last(s, NULL, j->id, &last) == PT_STORE_OK) {
            if (isfinite(last.loss)) pt_prom_set(app->m_job_loss, labels, last.loss);
            free(last.json);
        }
        pt_store_epoch_series ep = {0};
        if (pt_store_epochs_read(s, NULL, j->id, &ep) == PT_STORE_OK && ep.n) {
            const pt_store_epoch_metric *e = &ep.items[ep.n - 1];
            if (isfinite(e->val_mae)) pt_prom_set(app->m_job_val_mae, labels, e->val_mae);
            json_t *x = e->json ? json_loads(e->json, 0, NULL) : NULL;
            json_t *f = json_object_get(x, "val_forces_mae");
            if (json_is_number(f)) pt_prom_set(app->m_job_val_forces_mae, labels, json_number_value(f));
            const char *key;
            json_t *h;
            json_object_foreach(json_object_get(x, "heads"), key, h) {
                const char *lt[] = {j->id, key};
                json_t *mae = json_object_get(h, "val_mae"), *rmse = json_object_get(h, "val_rmse");
                if (json_is_number(mae)) pt_prom_set(app->m_job_target_val_mae, lt, json_number_value(mae));
                if (json_is_number(rmse)) pt_prom_set(app->m_job_target_val_rmse, lt, json_number_value(rmse));
            }
            json_decref(x);
        }
        pt_store_epoch_series_clear(&ep);
    }
    pt_store_job_array_clear(&running);
}

/* Under the tally's lock: two scrapes at once could otherwise both raise a
 * counter by the same increase, or one clear the other's running jobs. */
static void collect(pt_prom *p, void *ctx)
{
    (void)p;
    pt_app *app = ctx;
    pthread_mutex_lock(&app->graphs_tally->mu);
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    int64_t counts[PT_JOB_STATE_COUNT] = {0};
    if (s && pt_store_job_count_by_state(s, NULL, counts) == PT_STORE_OK) {
        for (int st = 0; st < PT_JOB_STATE_COUNT; st++) {
            const char *labels[] = {pt_job_state_name((pt_job_state)st)};
            pt_prom_set(app->m_jobs, labels, (double)counts[st]);
        }
    }
    if (s) collect_running(app, s);
    pt_app_store_release(app, s);
    pt_scheduler_stats st = {0};
    if (app->has_sched) pt_scheduler_stats_get(&app->sched, &st);
    pt_prom_set(app->m_slots, NULL, st.slots);
    pt_prom_set(app->m_active, NULL, st.active);
    raise_to(app->m_spawned, (double)st.spawned);
    raise_to(app->m_crashed, (double)st.crashed);
    count_graphs(app);
    pthread_mutex_unlock(&app->graphs_tally->mu);
}

int pt_app_metrics_init(pt_app *app, char *err, size_t errlen)
{
    pt_prom *p = &app->prom;
    app->graphs_tally = calloc(1, sizeof(*app->graphs_tally));
    if (!app->graphs_tally) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&app->graphs_tally->mu, NULL);
    pt_prom_metric *info = pt_prom_gauge(p, "packtrain_build_info", "The packtrain build: version and git commit.",
                                         "version,commit");
    const char *build[] = {pt_version(), pt_build_commit()};
    if (info) pt_prom_set(info, build, 1);
    app->m_jobs = pt_prom_gauge(p, "packtrain_jobs", "Jobs by state.", "state");
    app->m_slots = pt_prom_gauge(p, "packtrain_worker_slots", "Jobs that may run at once.", "");
    app->m_active = pt_prom_gauge(p, "packtrain_workers_active", "Worker processes alive.", "");
    app->m_spawned = pt_prom_counter(p, "packtrain_workers_spawned_total",
                                     "Worker processes started since the server started.", "");
    app->m_crashed = pt_prom_counter(p, "packtrain_workers_crashed_total",
                                     "Worker runs that ended in a crash since the server started.", "");
    app->m_graphs = pt_prom_counter(p, "packtrain_graphs_trained_total",
                                    "Training graphs processed by jobs whose worker finished a run.", "");
    app->m_job_rate = pt_prom_gauge(p, "packtrain_job_graphs_per_second",
                                    "Training throughput of a running job at its latest logged step.", "job");
    app->m_job_loss = pt_prom_gauge(p, "packtrain_job_loss", "Training loss of a running job's latest logged step.",
                                    "job");
    app->m_job_progress = pt_prom_gauge(p, "packtrain_job_progress_ratio",
                                        "Fraction of a running job's planned optimizer steps done.", "job");
    app->m_job_epoch = pt_prom_gauge(p, "packtrain_job_epoch", "Epoch a running job is in.", "job");
    app->m_job_val_mae = pt_prom_gauge(p, "packtrain_job_val_mae",
                                       "Validation MAE of a running job's (first) target at its latest epoch "
                                       "(target units; eV for jobs trained on forces; per atom when the "
                                       "first target is per atom).", "job");
    app->m_job_val_forces_mae = pt_prom_gauge(p, "packtrain_job_val_forces_mae_ev_per_angstrom",
                                              "Validation MAE of a running job's force components at its "
                                              "latest epoch, eV/Å (jobs trained on forces).", "job");
    app->m_job_target_val_mae = pt_prom_gauge(p, "packtrain_job_target_val_mae",
                                              "Validation MAE of each target of a running multi-task job at "
                                              "its latest epoch (the target's units; per atom for an atom-level "
                                              "target).", "job,target");
    app->m_job_target_val_rmse = pt_prom_gauge(p, "packtrain_job_target_val_rmse",
                                               "Validation RMSE of each target of a running multi-task job at "
                                               "its latest epoch (the target's units; per atom for an "
                                               "atom-level target).", "job,target");
    if (!info || !app->m_jobs || !app->m_slots || !app->m_active || !app->m_spawned || !app->m_crashed ||
        !app->m_graphs || !app->m_job_rate || !app->m_job_loss || !app->m_job_progress || !app->m_job_epoch ||
        !app->m_job_val_mae || !app->m_job_val_forces_mae || !app->m_job_target_val_mae ||
        !app->m_job_target_val_rmse ||
        pt_prom_process_metrics(p) != 0) {
        snprintf(err, errlen, "cannot register metrics: %s", p->error);
        return -1;
    }
    if (pt_prom_add_collector(p, collect, app) != 0) {
        snprintf(err, errlen, "cannot register the metrics collector");
        return -1;
    }
    return 0;
}

void pt_app_metrics_close(pt_app *app)
{
    struct pt_graphs_tally *t = app->graphs_tally;
    if (!t) return;
    pthread_mutex_destroy(&t->mu);
    free(t->items);
    free(t);
    app->graphs_tally = NULL;
}
