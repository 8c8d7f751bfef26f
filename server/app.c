/* app.c — wiring of the service: data directory, store pool, auth, the
 * scheduler's change callback into the jobs watch (metrics: app_metrics.c);
 * see app.h.
 *
 * pt_app_init opens the database first (a schema too new or an unwritable
 * file must stop the server before it accepts anything); the caller then
 * registers the routes (server/serve.c: the API's table), and pt_app_start
 * starts the scheduler (it re-queues what a previous server left running),
 * then HTTP.  pt_app_close stops in the reverse order, so no request ever
 * sees a closed scheduler and no worker outlives the store it reports to. */
#include "server/app.h"

#include "engine/train/checkpoint.h"

#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>


#define IDEMPOTENCY_RETENTION_US (24LL * 3600 * 1000000)

void pt_app_options_defaults(pt_app_options *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->workers = 1;
    o->http_threads = 4;
    o->upload_max = 2ull << 30;
    o->min_free_bytes = 256ull << 20;
    o->limits = (pt_app_limits){.upload_decompressed_bytes = 8ull << 30, .upload_structures = 5000000,
                                .upload_atoms = 100000000, .owner_storage_bytes = 20ull << 30,
                                .owner_jobs = 8, .predict_atoms = 100000, .predict_edges = 5000000,
                                .heavy_threads = 2, .heavy_queue = 8, .heavy_deadline_s = 600,
                                .connections_per_client = 256, .header_timeout_s = 30,
                                .body_min_rate = 4096};
    o->stop_grace_s = 5;
}

/* ---- store pool ------------------------------------------------------------ */

int pt_store_pool_init(pt_store_pool *p, const char *db_path, int max_open)
{
    memset(p, 0, sizeof(*p));
    if (snprintf(p->db_path, sizeof p->db_path, "%s", db_path) >= (int)sizeof p->db_path) return -1;
    p->max_open = max_open < 1 ? 1 : max_open > PT_APP_POOL_MAX ? PT_APP_POOL_MAX : max_open;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    return 0;
}

/* Handles are opened lazily and kept; a thread waits only when max_open
 * handles are all in use at once. */
pt_store *pt_store_pool_acquire(pt_store_pool *p, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    while (p->n_idle == 0 && p->n_open >= p->max_open) pthread_cond_wait(&p->cond, &p->mu);
    if (p->n_idle > 0) {
        pt_store *s = p->idle[--p->n_idle];
        pthread_mutex_unlock(&p->mu);
        return s;
    }
    p->n_open++;
    pthread_mutex_unlock(&p->mu);
    pt_store *s = NULL;
    if (pt_store_open(&s, p->db_path, err, errlen) != PT_STORE_OK) {
        pthread_mutex_lock(&p->mu);
        p->n_open--;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->mu);
        return NULL;
    }
    return s;
}

void pt_store_pool_release(pt_store_pool *p, pt_store *s)
{
    if (!s) return;
    pthread_mutex_lock(&p->mu);
    p->idle[p->n_idle++] = s;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

/* Every handle must have been released. */
void pt_store_pool_close(pt_store_pool *p)
{
    for (int i = 0; i < p->n_idle; i++) pt_store_close(p->idle[i]);
    p->n_idle = p->n_open = 0;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
}

pt_store *pt_app_store_acquire(pt_app *app, char *err, size_t errlen)
{
    return pt_store_pool_acquire(&app->pool, err, errlen);
}

void pt_app_store_release(pt_app *app, pt_store *s)
{
    pt_store_pool_release(&app->pool, s);
}

/* ---- identity -------------------------------------------------------------- */

const char *pt_app_owner(const pt_request *req)
{
    return req->auth.owner[0] ? req->auth.owner : PT_APP_LOCAL_OWNER;
}

static pt_auth_result verify_token(void *ctx, const char *token, pt_auth_info *out, char *why, size_t whylen)
{
    pt_app *app = ctx;
    char err[256];
    pt_store *s = pt_app_store_acquire(app, err, sizeof err);
    if (!s) {
        snprintf(why, whylen, "the database is unavailable: %s", err);
        return PT_AUTH_ERROR;
    }
    pt_store_token row;
    int rc = pt_store_token_verify(s, token, &row);
    if (rc != PT_STORE_OK && rc != PT_STORE_NOT_FOUND && rc != PT_STORE_INVALID)
        snprintf(why, whylen, "%s", pt_store_errmsg(s));
    pt_app_store_release(app, s);
    if (rc == PT_STORE_OK) {
        snprintf(out->owner, sizeof out->owner, "%s", row.owner);
        return PT_AUTH_OK;
    }
    if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID) {
        snprintf(why, whylen, "the token is unknown or revoked");
        return PT_AUTH_DENIED;
    }
    return PT_AUTH_ERROR;
}

/* ---- paths ------------------------------------------------------------------ */

static int make_dirs(const char *path, char *err, size_t errlen)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return pt_err_printf(err, errlen, "path %s is too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return pt_err_printf(err, errlen, "cannot create directory %s: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return pt_err_printf(err, errlen, "%s is not a directory", path);
    return 0;
}

int pt_app_job_dir(const pt_app *app, const char *job_id, char *out, size_t cap)
{
    return snprintf(out, cap, "%s/%s", app->jobs_dir, job_id) < (int)cap ? 0 : -1;
}

int pt_app_dataset_dir(const pt_app *app, const char *dataset_id, char *out, size_t cap)
{
    return snprintf(out, cap, "%s/%s", app->datasets_dir, dataset_id) < (int)cap ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

int pt_app_remove_tree(const char *dir, char *err, size_t errlen)
{
    /* depth first, not following links: a link inside is removed, never its target */
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        return pt_err_printf(err, errlen, "cannot remove %s: %s", dir, strerror(errno));
    return 0;
}

static int layout(pt_app *app, const char *data_dir, char *err, size_t errlen)
{
    if (!data_dir || !data_dir[0]) return pt_err_printf(err, errlen, "the data directory is not set");
    if (make_dirs(data_dir, err, errlen) != 0) return -1;
    if (!realpath(data_dir, app->data_dir))
        return pt_err_printf(err, errlen, "cannot resolve data directory %s: %s", data_dir, strerror(errno));
    if (strlen(app->data_dir) > PT_STORE_PATH_MAX - 128)
        return pt_err_printf(err, errlen, "data directory path %s is too long", app->data_dir);
    const struct {
        char *dst;
        const char *leaf;
    } paths[] = {{app->db_path, PT_APP_DB_NAME}, {app->datasets_dir, "datasets"}, {app->jobs_dir, "jobs"},
                 {app->tmp_dir, "tmp"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (snprintf(paths[i].dst, PATH_MAX, "%s/%s", app->data_dir, paths[i].leaf) >= PATH_MAX)
            return pt_err_printf(err, errlen, "data directory path %s is too long", app->data_dir);
    if (make_dirs(app->datasets_dir, err, errlen) || make_dirs(app->jobs_dir, err, errlen) ||
        make_dirs(app->tmp_dir, err, errlen))
        return -1;
    return 0;
}

static int copy_worker_argv(pt_app *app, char *err, size_t errlen)
{
    static char self[PATH_MAX];
    const char *fallback[] = {self, "worker", NULL};
    const char *const *argv = app->opt.worker_argv;
    if (!argv) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return pt_err_printf(err, errlen, "cannot find this program's path: %s", strerror(errno));
        self[n] = '\0';
        argv = fallback;
    }
    int n = 0;
    while (argv[n]) n++;
    app->worker_argv = calloc((size_t)n + 1, sizeof(char *));
    if (!app->worker_argv) return pt_err_printf(err, errlen, "out of memory");
    for (int i = 0; i < n; i++)
        if (!(app->worker_argv[i] = strdup(argv[i]))) return pt_err_printf(err, errlen, "out of memory");
    return 0;
}

static void free_worker_argv(pt_app *app)
{
    for (int i = 0; app->worker_argv && app->worker_argv[i]; i++) free(app->worker_argv[i]);
    free(app->worker_argv);
    app->worker_argv = NULL;
}

/* ---- scheduler hooks and metrics ------------------------------------------- */

void pt_app_jobs_changed(pt_app *app)
{
    pt_watch_bump(&app->jobs_watch);
}

void pt_app_notify_scheduler(pt_app *app)
{
    if (app->has_sched) pt_scheduler_notify(&app->sched);
}

static void on_job_change(void *ctx, const char *job_id, int64_t version)
{
    (void)job_id;
    (void)version;
    pt_app_jobs_changed(ctx);
}

static void on_scheduler_log(void *ctx, const char *line)
{
    pt_app *app = ctx;
    FILE *f = app->opt.log ? app->opt.log : stderr;
    fprintf(f, "packtrain scheduler: %s\n", line);
    fflush(f);
}

/* ---- start / stop ----------------------------------------------------------- */

static int open_database(pt_app *app, char *err, size_t errlen)
{
    /* every HTTP thread and heavy-work thread may hold two at once */
    int max = (int)(app->opt.http_threads + app->opt.limits.heavy_threads) * 2 + 4;
    if (pt_store_pool_init(&app->pool, app->db_path, max) != 0) return pt_err_printf(err, errlen, "database path too long");
    char why[512];
    pt_store *s = pt_app_store_acquire(app, why, sizeof why);
    if (!s) return pt_err_printf(err, errlen, "cannot open the database %s: %s", app->db_path, why);
    /* Keys older than the retention no longer dedupe; the check doubles as
     * proof the database is writable before anything is accepted. */
    int rc = pt_store_idempotency_prune(s, pt_store_now_us() - IDEMPOTENCY_RETENTION_US, NULL);
    if (rc != PT_STORE_OK) pt_err_printf(err, errlen, "the database %s is not writable: %s", app->db_path, pt_store_errmsg(s));
    pt_app_store_release(app, s);
    return rc == PT_STORE_OK ? 0 : -1;
}

/* The scheduler resumes only from a checkpoint that is whole: its own
 * format check (every state key, CRC over state and tensors). */
static int checkpoint_ok(void *ctx, const char *path, char *why, size_t len)
{
    (void)ctx;
    pt_errors errs;
    pt_errors_init(&errs, 1);
    pt_checkpoint ck;
    int ok = pt_checkpoint_open(&ck, path, &errs) == 0;
    if (ok) pt_checkpoint_close(&ck);
    else pt_errors_first(&errs, why, len);
    pt_errors_close(&errs);
    return ok;
}

/* Queued jobs start only while the data directory has its minimum free
 * (--min-free): a worker on a full disk would fail at its first checkpoint. */
static int has_room(void *ctx, char *why, size_t len)
{
    const pt_app *app = ctx;
    uint64_t free_bytes;
    if (!pt_app_disk_low(app, &free_bytes)) return 1;
    snprintf(why, len, "the data directory has %.1f MiB free, below its minimum of %.1f MiB (--min-free)",
             free_bytes / 1048576.0, app->opt.min_free_bytes / 1048576.0);
    return 0;
}

static int start_scheduler(pt_app *app, char *err, size_t errlen)
{
    if (app->opt.workers <= 0) return 0;
    pt_scheduler_options so = {
        .db_path = app->db_path,
        .data_dir = app->data_dir,
        .slots = app->opt.workers,
        .worker_argv = (const char *const *)app->worker_argv,
        .max_runtime_s = app->opt.max_runtime_s,
        .cancel_grace_s = app->opt.cancel_grace_s,
        .max_attempts = app->opt.max_attempts,
        .worker_memory_bytes = app->worker_memory_bytes,
        .checkpoints_kept = app->opt.checkpoints_kept,
        .checkpoint_ok = checkpoint_ok,
        .has_room = has_room,
        .room_ctx = app,
        .on_change = on_job_change,
        .change_ctx = app,
        .log = on_scheduler_log,
        .log_ctx = app,
    };
    if (pt_scheduler_init(&app->sched, &so) != 0)
        return pt_err_printf(err, errlen, "cannot set up the scheduler: %s", pt_scheduler_errmsg(&app->sched));
    if (pt_scheduler_start(&app->sched) != 0) {
        pt_err_printf(err, errlen, "cannot start the scheduler: %s", pt_scheduler_errmsg(&app->sched));
        pt_scheduler_close(&app->sched);
        return -1;
    }
    app->has_sched = 1;
    return 0;
}

/* Everything pt_app_init and pt_app_start set up: after a failure, and at
 * the end of pt_app_close (HTTP stopped and jobs drained first). */
static void release(pt_app *app, int pool_ready)
{
    if (app->has_sched) pt_scheduler_close(&app->sched);
    app->has_sched = 0;
    if (app->has_web) pt_static_close(&app->web);
    pt_router_close(&app->router);
    pt_prom_close(&app->prom);
    pt_app_metrics_close(app);
    if (pool_ready) pt_store_pool_close(&app->pool);
    pt_watch_close(&app->jobs_watch);
    pt_watch_close(&app->datasets_watch);
    pt_app_tasks_close(&app->tasks);
    free_worker_argv(app);
    if (app->lock_fd >= 0) close(app->lock_fd);
    app->lock_fd = -1;
    pthread_mutex_destroy(&app->quota_mu);
    app->closed = 1;
}

/* The default memory budget of a job: the machine's RAM shared by the
 * worker slots, an eighth kept for the server and the system. */
static uint64_t default_worker_memory(int workers)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 8ull << 30;
    return ram / 8 * 7 / (uint64_t)(workers > 0 ? workers : 1);
}

int pt_app_disk_low(const pt_app *app, uint64_t *free_bytes)
{
    struct statvfs vfs;
    *free_bytes = 0;
    if (statvfs(app->data_dir, &vfs) != 0) return 1;
    *free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return *free_bytes < app->opt.min_free_bytes;
}

int pt_app_init(pt_app *app, const pt_app_options *opt, char *err, size_t errlen)
{
    memset(app, 0, sizeof(*app));
    app->lock_fd = -1;
    app->opt = *opt;
    app->started_us = pt_store_now_us();
    snprintf(app->host, sizeof app->host, "%s", opt->host ? opt->host : "127.0.0.1");
    app->opt.host = app->host;
    if (!app->opt.http_threads) app->opt.http_threads = 4;
    if (!app->opt.upload_max) app->opt.upload_max = 2ull << 30;
    app->worker_memory_bytes = opt->worker_memory_bytes ? opt->worker_memory_bytes
                                                        : default_worker_memory(opt->workers);
    pt_watch_init(&app->jobs_watch);
    pt_watch_init(&app->datasets_watch);
    pt_app_tasks_init(&app->tasks);
    pthread_mutex_init(&app->quota_mu, NULL);
    pt_prom_init(&app->prom);
    pt_router_init(&app->router);
    int pool_ready = 0;
    if (layout(app, opt->data_dir, err, errlen) != 0 || pt_app_lock_data_dir(app, err, errlen) != 0 ||
        copy_worker_argv(app, err, errlen) != 0)
        goto fail;
    if (open_database(app, err, errlen) != 0) {
        pool_ready = 1;
        goto fail;
    }
    pool_ready = 1;
    if (pt_app_sweep(app, err, errlen) != 0) goto fail;
    if (opt->web_dir) {
        char why[256];
        struct stat st;
        if (stat(opt->web_dir, &st) == 0 && pt_static_init(&app->web, opt->web_dir, why, sizeof why) == 0)
            app->has_web = 1;
    }
    if (pt_app_metrics_init(app, err, errlen) != 0) goto fail;
    if (opt->auth) pt_router_set_auth(&app->router, verify_token, app);
    return 0;

fail:
    release(app, pool_ready);
    return -1;
}

int pt_app_start(pt_app *app, char *err, size_t errlen)
{
    if (start_scheduler(app, err, errlen) != 0) goto fail;
    pt_http_config hc;
    pt_http_config_defaults(&hc);
    hc.bind_address = app->host;
    hc.port = app->opt.port;
    hc.threads = app->opt.http_threads;
    hc.upload_dir = app->tmp_dir;
    hc.upload_max = app->opt.upload_max;
    hc.access_log = app->opt.access_log;
    hc.cors_origins = app->opt.cors_origins;
    hc.prom = &app->prom;
    hc.heavy_threads = app->opt.limits.heavy_threads ? app->opt.limits.heavy_threads : 2;
    hc.heavy_queue = app->opt.limits.heavy_queue;
    hc.heavy_deadline_s = app->opt.limits.heavy_deadline_s;
    hc.max_per_ip = app->opt.limits.connections_per_client;
    hc.header_timeout_ms = app->opt.limits.header_timeout_s * 1000;
    hc.body_min_rate = app->opt.limits.body_min_rate;
    /* without tokens, the browser is the only guard: same-origin only */
    hc.same_origin_only = !app->opt.auth;
    hc.host_name = app->host;
    if (app->opt.stop_grace_s) hc.stop_grace_ms = app->opt.stop_grace_s * 1000;
    char why[512];
    if (pt_http_init(&app->http, &hc, &app->router, why, sizeof why) != 0) {
        pt_err_printf(err, errlen, "%s", why);
        goto fail;
    }
    app->http_started = 1;
    return 0;

fail:
    release(app, 1);
    return -1;
}

unsigned pt_app_port(const pt_app *app)
{
    return pt_http_port(&app->http);
}

void pt_app_close(pt_app *app)
{
    if (app->closed) return;
    app->closed = 1;
    if (app->http_started) pt_http_close(&app->http);
    /* running jobs get their grace before the scheduler closes */
    if (app->has_sched)
        pt_scheduler_drain(&app->sched, app->opt.cancel_grace_s > 0 ? app->opt.cancel_grace_s
                                                                    : PT_SCHEDULER_DEFAULT_GRACE_S);
    release(app, 1);
}
