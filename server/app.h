/* app.h — server/app, the packtrain service as one object: the HTTP server
 * and its router, a pool of store handles for its threads, the scheduler that
 * runs jobs in worker processes, the watch that wakes long-polls and event
 * streams, the Prometheus registry and the dashboard's static files.
 *
 * The room sits on server/http, server/sched and the store and knows no
 * route: the API (server/api) registers its table on app->router between
 * pt_app_init and pt_app_start, which server/serve.c does in that order:
 *
 *   pt_app_options o;
 *   pt_app_options_defaults(&o);
 *   o.data_dir = "var";
 *   pt_app app;
 *   if (pt_app_init(&app, &o, err, sizeof err) != 0) ...
 *   if (pt_api_register(&app, err, sizeof err) != 0 ||
 *       pt_app_start(&app, err, sizeof err) != 0) ...   // (pt_app_close on failure)
 *   printf("listening on %u\n", pt_app_port(&app));
 *   ...                         // until SIGTERM
 *   pt_app_close(&app);         // stop accepting, drain workers, close
 *
 * Files under data_dir: packtrain.db (SQLite), packtrain.lock (one server
 * per directory), datasets/ID/data.ptd, jobs/ID/ (the worker's --out:
 * config.json, worker.log, checkpoints, model.safetensors) and tmp/
 * (uploads in flight, same file system so a finished upload is renamed, not
 * copied).  What a killed server left half-done is swept at the next start
 * (app_sweep.c).
 *
 * Identity: with auth on every /v1 route needs a bearer token made by
 * `packtrain token create`, and acts for the token's owner; with auth off
 * every request acts for the owner "local".  Rows of another owner answer
 * 404, exactly like rows that do not exist. */
#ifndef PT_APP_H
#define PT_APP_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "server/http/http.h"
#include "server/http/prom.h"
#include "server/http/router.h"
#include "server/sched/scheduler.h"
#include "server/http/static.h"
#include "server/http/watch.h"
#include "store/store.h"
#include "engine/core/progress.h"

#define PT_APP_LOCAL_OWNER "local"
#define PT_APP_DB_NAME "packtrain.db"
#define PT_APP_POOL_MAX 64
#define PT_APP_ROUTES_MAX 48

/* What one request or one owner may take; 0 = no limit.  Defaults in
 * pt_app_options_defaults; `packtrain serve --help` lists the flags. */
typedef struct pt_app_limits {
    uint64_t upload_decompressed_bytes;  /* text of one upload once decompressed: 8 GiB */
    uint64_t upload_structures;          /* structures in one upload: 5,000,000 */
    uint64_t upload_atoms;               /* atoms in one upload: 100,000,000 */
    uint64_t owner_storage_bytes;        /* stored datasets of one owner: 20 GiB */
    int owner_jobs;                      /* queued, running and cancelling jobs of one owner: 8 */
    uint64_t predict_atoms;              /* atoms in one predict request: 100,000 */
    uint64_t predict_edges;              /* neighbour edges of one predict request: 5,000,000 */
    unsigned heavy_threads;              /* uploads, packing reports, predictions at once: 2 */
    unsigned heavy_queue;                /* ... waiting for a thread; past it 503: 8 */
    unsigned heavy_deadline_s;           /* one of them is given up after: 600 s */
    unsigned connections_per_client;     /* open connections of one client address: 256 (half
                                            of the server's 512), so one cannot take them all */
    unsigned header_timeout_s;           /* a request's headers must be in within: 30 s (trickling
                                            bytes does not extend it; http.h) */
    uint64_t body_min_rate;              /* ... and its body within that + length / this: 4096 B/s */
} pt_app_limits;

typedef struct pt_app_options {
    const char *host;                /* bind address; default "127.0.0.1" */
    unsigned port;                   /* 0: any free port */
    const char *data_dir;            /* required */
    int workers;                     /* job slots; 0 runs no scheduler (jobs stay queued) */
    int auth;                        /* 1: bearer tokens required */
    unsigned http_threads;           /* default 4 */
    uint64_t upload_max;             /* dataset/predict body limit; default 2 GiB */
    const char *web_dir;             /* static files at /; NULL or missing dir: none */
    const char *cors_origins;        /* CORS: allowed origins (comma-separated, "*"); NULL: off */
    const char *const *worker_argv;  /* NULL-terminated; default {this binary, "worker"} */
    double max_runtime_s;            /* per worker run when the job sets none; 0 = unlimited */
    double cancel_grace_s;           /* SIGTERM -> SIGKILL; 0 = scheduler default */
    int max_attempts;                /* crashes before a job fails; 0 = scheduler default */
    uint64_t min_free_bytes;         /* /readyz fails below this free space; default 256 MiB */
    unsigned stop_grace_s;           /* SIGTERM: in-flight requests finish or are answered within it;
                                        default 5 */
    uint64_t worker_memory_bytes;    /* memory of one job's processes (admission, and the
                                        scheduler's ceiling); 0 = 7/8 of RAM / workers */
    int checkpoints_kept;            /* newest checkpoints kept per job (>= 2); 0 = 2 */
    pt_app_limits limits;
    FILE *access_log;                /* one line per request; NULL: none */
    FILE *log;                       /* scheduler notes; NULL: stderr */
} pt_app_options;

typedef struct pt_store_pool {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    char db_path[PATH_MAX];
    pt_store *idle[PT_APP_POOL_MAX];
    int n_idle, n_open, max_open;
} pt_store_pool;

/* Data work in flight (app_progress.c): an upload being ingested, a packing
 * report being planned, known by its dataset's id. */
enum { PT_TASK_RUNNING = 1, PT_TASK_DONE = 2, PT_TASK_FAILED = 3 };
#define PT_APP_TASKS_MAX 64

typedef struct pt_app_task {
    char id[40];
    char owner[PT_STORE_OWNER_MAX];
    char name[PT_STORE_NAME_MAX];
    char phase[24];                  /* "ingest", "count_edges", "pack" */
    char unit[16];                   /* of done and total: "bytes" or "structures" */
    char message[256];               /* why it failed */
    int state;                       /* PT_TASK_* */
    uint64_t done, total, structures;
    double seconds, rate, eta;       /* eta < 0: unknown */
    int64_t started_us;
    uint64_t seq;                    /* of its last change; 0 = free slot */
} pt_app_task;

typedef struct pt_app_tasks {
    pthread_mutex_t mu;
    pt_app_task items[PT_APP_TASKS_MAX];
    uint64_t seq;
} pt_app_tasks;

/* A registered route, kept so tests can hold the set against the OpenAPI
 * document. */
typedef struct pt_app_route {
    char method[8];
    char pattern[64];
} pt_app_route;

typedef struct pt_app {
    pt_app_options opt;
    char data_dir[PATH_MAX];         /* absolute */
    char db_path[PATH_MAX];
    char datasets_dir[PATH_MAX];
    char jobs_dir[PATH_MAX];
    char tmp_dir[PATH_MAX];
    char host[256];
    char **worker_argv;              /* owned copy */
    uint64_t worker_memory_bytes;    /* resolved opt.worker_memory_bytes */
    int lock_fd;                     /* flock on data_dir/packtrain.lock, -1 before */
    pthread_mutex_t quota_mu;        /* the last check of an owner's quota and the insert
                                        it allows (server/api/quota.c) */

    pt_store_pool pool;
    pt_watch jobs_watch;             /* bumped on any job change */
    pt_watch datasets_watch;         /* bumped when data work in flight moves */
    pt_app_tasks tasks;
    pt_prom prom;
    pt_router router;
    pt_app_route routes[PT_APP_ROUTES_MAX];
    int n_routes;
    pt_static web;
    int has_web;
    pt_scheduler sched;
    int has_sched;
    pt_http http;
    int http_started, closed;
    pt_prom_metric *m_jobs, *m_slots, *m_active, *m_spawned, *m_crashed, *m_graphs;
    pt_prom_metric *m_job_rate, *m_job_loss, *m_job_progress, *m_job_epoch;   /* per running job */
    pt_prom_metric *m_job_val_mae, *m_job_val_forces_mae;                      /* per running job */
    pt_prom_metric *m_job_target_val_mae, *m_job_target_val_rmse;              /* per job and target */
    struct pt_graphs_tally *graphs_tally;   /* app_metrics.c */
    int64_t started_us;
} pt_app;

void pt_app_options_defaults(pt_app_options *o);
/* Creates the data directory layout, opens (and migrates) the database,
 * the dashboard's files, the metrics and auth; nothing runs yet.  Returns 0,
 * or -1 with the reason in err (nothing left to close). */
int pt_app_init(pt_app *app, const pt_app_options *opt, char *err, size_t errlen);
/* After the routes are on app->router: starts the scheduler (re-queueing
 * jobs a previous server left running) and the HTTP server.  Returns 0, or
 * -1 with the reason in err; everything is then closed (pt_app_close is a
 * no-op). */
int pt_app_start(pt_app *app, char *err, size_t errlen);
unsigned pt_app_port(const pt_app *app);
/* Graceful stop: stop accepting, let requests finish, end long-polls and
 * streams, SIGTERM the workers (their jobs stay `running` and resume from
 * their checkpoint at the next start), then free everything. */
void pt_app_close(pt_app *app);

/* Something changed a job (HTTP create/cancel, the scheduler): wake every
 * long-poll and event stream so they look again.  Thread-safe. */
void pt_app_jobs_changed(pt_app *app);
/* Asks the scheduler to look at the store again (no-op without workers). */
void pt_app_notify_scheduler(pt_app *app);

/* A store handle for the calling thread, to give back with release.  NULL
 * with a message when the database cannot be opened. */
pt_store *pt_app_store_acquire(pt_app *app, char *err, size_t errlen);
void pt_app_store_release(pt_app *app, pt_store *s);

/* The owner a request acts for (its token's owner, or "local"). */
const char *pt_app_owner(const pt_request *req);

/* Directory of a job (data_dir/jobs/ID) and of a dataset. */
int pt_app_job_dir(const pt_app *app, const char *job_id, char *out, size_t cap);
int pt_app_dataset_dir(const pt_app *app, const char *dataset_id, char *out, size_t cap);
/* Removes a directory and everything under it (links themselves, never what
 * they point at); a missing directory is fine.  -1 with a message. */
int pt_app_remove_tree(const char *dir, char *err, size_t errlen);

/* --- app_progress.c: data work in flight ------------------------------------
 * The engine's progress (engine/core/progress.h) of a task known by its
 * dataset's id; callable from any thread.  Each change gets the next sequence
 * number (the id of its event on GET /v1/datasets/events) and wakes the
 * streams.  Finished tasks stay listed until PT_APP_TASKS_MAX newer ones. */
int pt_app_tasks_init(pt_app_tasks *t);
void pt_app_tasks_close(pt_app_tasks *t);
void pt_app_task_begin(pt_app *app, const char *id, const char *owner, const char *name,
                       const char *phase);
void pt_app_task_progress(pt_app *app, const char *id, const pt_progress_info *info);
void pt_app_task_end(pt_app *app, const char *id, int ok, const char *message);
/* The task of dataset id for owner: 0 with *out, or -1. */
int pt_app_task_get(pt_app *app, const char *owner, const char *id, pt_app_task *out);
/* owner's tasks changed after sequence number `after`, oldest change first:
 * up to cap into out; returns how many. */
size_t pt_app_tasks_since(pt_app *app, const char *owner, uint64_t after, pt_app_task *out,
                          size_t cap);
/* {"phase","done","total","unit","structures","seconds","structures_per_second",
 *  "eta_seconds"} (new reference; rates null when not known yet). */
json_t *pt_app_task_progress_json(const pt_app_task *t);
/* "running", "done", "failed". */
const char *pt_app_task_state_name(int state);
/* Free bytes of the data directory's file system into *free_bytes; 1 when
 * they are below opt.min_free_bytes (or cannot be read): /readyz then
 * fails, and uploads, predictions and new jobs are refused up front. */
int pt_app_disk_low(const pt_app *app, uint64_t *free_bytes);

/* One server per data directory: an exclusive flock on
 * data_dir/packtrain.lock, held until close (app_sweep.c).  -1 with the
 * reason when another server holds it. */
int pt_app_lock_data_dir(pt_app *app, char *err, size_t errlen);
/* Removes what a server killed mid-work left behind (app_sweep.c): every
 * entry of tmp/, dataset directories without a row, half-written files of
 * recorded datasets; each removal logged.  -1 only without a store. */
int pt_app_sweep(pt_app *app, char *err, size_t errlen);

/* Registers the service's Prometheus metrics and their collector
 * (app_metrics.c); close frees the collector's cache. */
int pt_app_metrics_init(pt_app *app, char *err, size_t errlen);
void pt_app_metrics_close(pt_app *app);

/* Store pool, exposed for the CLI commands that open the database too. */
int pt_store_pool_init(pt_store_pool *p, const char *db_path, int max_open);
pt_store *pt_store_pool_acquire(pt_store_pool *p, char *err, size_t errlen);
void pt_store_pool_release(pt_store_pool *p, pt_store *s);
void pt_store_pool_close(pt_store_pool *p);

#endif
