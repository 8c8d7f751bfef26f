/* scheduler_claim.c — claiming and preparing jobs, on the store writer
 * thread: one poll reads the states of the running jobs (for cancels) and
 * claims queued ones; for each claim it makes the job directory, writes
 * config.json atomically and picks the checkpoint to resume from.  File work
 * that belongs with a claim is done here, so the loop thread never blocks on
 * the disk beyond opening a log. */
#include "server/sched/scheduler_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/train/config.h"

typedef struct poll_op {
    pt_store_op op;
    pt_scheduler *sched;
    int claims;
    size_t n_ids, n_launches;
    char (*ids)[PT_STORE_ID_MAX];
    pt_job_state *states;
    pt_sched_launch *launches;   /* capacity `claims` */
} poll_op;

static int make_dir(const char *path, char *err, size_t errlen)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST) return 0;
    return pt_err_printf(err, errlen, "cannot create directory %s: %s", path, strerror(errno));
}

/* temp file + fsync + rename + fsync of the directory. */
static int write_atomic(const char *dir, const char *path, const char *text, char *err, size_t errlen)
{
    char tmp[PT_STORE_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return pt_err_printf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        off += (size_t)n;
    }
    int ok = off == len && fsync(fd) == 0;
    int saved = errno;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        if (ok) saved = errno;
        unlink(tmp);
        return pt_err_printf(err, errlen, "cannot write %s: %s", path, strerror(saved));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* config.json for the worker: the stored canonical text, untouched.  The
 * validator reads it here once (the text crossed the database, and may
 * predate this server) for the one value the scheduler enforces itself. */
static int write_config(pt_scheduler *s, const pt_store_job *job, pt_sched_launch *l, char *err, size_t errlen)
{
    const char *text = job->config_json ? job->config_json : "";
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 4);
    int rc = pt_job_config_parse(&cfg, text, strlen(text), NULL, &errs);
    if (rc) {
        char why[PT_ERR_FIELD_MAX + PT_ERR_MSG_MAX + 8];
        pt_errors_first(&errs, why, sizeof why);
        rc = pt_err_printf(err, errlen, "stored config: %s", why);
    }
    pt_errors_close(&errs);
    if (rc) return rc;
    l->max_runtime_s = cfg.max_runtime_seconds > 0 ? cfg.max_runtime_seconds : s->max_runtime_s;
    return write_atomic(l->out_dir, l->config_path, text, err, errlen);
}

/* Whether a recorded checkpoint can be resumed from: there, and whole by
 * the owner's check (the app's: the checkpoint format's own CRC).  A
 * checkpoint cut short by a full disk or damaged on it is passed over for
 * the one before it rather than failing the job. */
static int checkpoint_usable(pt_scheduler *s, const char *path, char *why, size_t len)
{
    if (access(path, F_OK) != 0) {
        snprintf(why, len, "missing");
        return 0;
    }
    return !s->checkpoint_ok || s->checkpoint_ok(s->checkpoint_ctx, path, why, len);
}

/* Picks the newest usable checkpoint to resume from and trims the metric
 * series to it, so the resumed run neither duplicates nor skips a step. */
static int choose_resume(pt_scheduler *s, pt_store *st, const pt_store_job *job, pt_sched_launch *l,
                         char *err, size_t errlen)
{
    l->resume_path[0] = '\0';
    l->resume_step = -1;
    pt_store_checkpoint recent[PT_SCHEDULER_CHECKPOINTS_MAX];
    size_t n = 0;
    int rc = pt_store_checkpoint_recent(st, NULL, job->id, recent, (size_t)s->checkpoints_kept, &n);
    if (rc != PT_STORE_OK)
        return pt_err_printf(err, errlen, "cannot read the latest checkpoints: %s", pt_store_errmsg(st));
    char log_path[PT_STORE_PATH_MAX + 16];
    snprintf(log_path, sizeof log_path, "%s/worker.log", l->out_dir);
    for (size_t i = 0; i < n && l->resume_step < 0; i++) {
        char why[512];
        if (checkpoint_usable(s, recent[i].path, why, sizeof why)) {
            snprintf(l->resume_path, sizeof(l->resume_path), "%s", recent[i].path);
            l->resume_step = recent[i].step;
            continue;
        }
        pt_sched_log(s, "job %s: checkpoint of step %lld cannot be resumed from (%s)%s", job->id,
                     (long long)recent[i].step, why, i + 1 < n ? "; trying the one before" : "");
        pt_sched_note_path(log_path, "checkpoint of step %lld cannot be resumed from (%s)%s",
                           (long long)recent[i].step, why, i + 1 < n ? "; trying the one before" : "");
    }
    if (n && l->resume_step < 0) pt_sched_note_path(log_path, "no usable checkpoint: starting over");
    if (l->resume_step < 0 && job->attempts <= 1) return 0;   /* first run: nothing to trim */
    if (pt_store_metrics_discard_after(st, job->id, l->resume_step) != PT_STORE_OK)
        return pt_err_printf(err, errlen, "cannot trim metrics to the checkpoint: %s", pt_store_errmsg(st));
    return 0;
}

static int prepare(pt_scheduler *s, pt_store *st, const pt_store_job *job, pt_sched_launch *l, char *err,
                   size_t errlen)
{
    memset(l, 0, sizeof(*l));
    snprintf(l->id, sizeof(l->id), "%s", job->id);
    l->attempt = job->attempts;
    char jobs_dir[PT_STORE_PATH_MAX];
    int n1 = snprintf(jobs_dir, sizeof(jobs_dir), "%s/jobs", s->data_dir);
    int n2 = snprintf(l->out_dir, sizeof(l->out_dir), "%s/%s", jobs_dir, job->id);
    int n3 = snprintf(l->config_path, sizeof(l->config_path), "%s/config.json", l->out_dir);
    if (n1 < 0 || n2 < 0 || n3 < 0 || (size_t)n3 >= sizeof(l->config_path))
        return pt_err_printf(err, errlen, "job directory path under %s is too long", s->data_dir);
    if (make_dir(s->data_dir, err, errlen) || make_dir(jobs_dir, err, errlen) ||
        make_dir(l->out_dir, err, errlen))
        return -1;
    if (!job->dataset_id[0]) return pt_err_printf(err, errlen, "its dataset no longer exists");
    pt_store_dataset ds;
    if (pt_store_dataset_get(st, NULL, job->dataset_id, &ds) != PT_STORE_OK)
        return pt_err_printf(err, errlen, "cannot read dataset %s: %s", job->dataset_id, pt_store_errmsg(st));
    snprintf(l->data_path, sizeof(l->data_path), "%s", ds.path);
    pt_store_dataset_clear(&ds);
    if (write_config(s, job, l, err, errlen)) return -1;
    return choose_resume(s, st, job, l, err, errlen);
}

/* Whether a worker may start: a full disk would end it at its first
 * checkpoint (issue 17 item 8), so queued jobs wait until there is room. */
static int room_to_start(pt_scheduler *s)
{
    char why[256] = "";
    int room = !s->has_room || s->has_room(s->room_ctx, why, sizeof why);
    if (!room && !s->no_room) pt_sched_log(s, "queued jobs wait until there is room: %s", why);
    else if (room && s->no_room) pt_sched_log(s, "there is room again: queued jobs start");
    s->no_room = !room;
    return room;
}

static void poll_work(pt_store *st, pt_store_op *op)
{
    poll_op *p = (poll_op *)op;
    pt_scheduler *s = p->sched;
    for (size_t i = 0; i < p->n_ids; i++) {
        int64_t version;
        if (pt_store_job_version(st, NULL, p->ids[i], &version, &p->states[i]) != PT_STORE_OK)
            p->states[i] = PT_JOB_ANY;
    }
    pt_sched_record_unrecorded(s, st);
    if (p->claims > 0 && !room_to_start(s)) return;
    while (p->n_launches < (size_t)p->claims) {
        pt_store_job job;
        int rc = pt_store_job_claim_next(st, "claimed by the scheduler", &job);
        if (rc == PT_STORE_NOT_FOUND) break;
        if (rc) {
            pt_sched_log(s, "cannot claim a queued job: %s", pt_store_errmsg(st));
            break;
        }
        pt_sched_announce(s, st, job.id);
        char err[PT_STORE_REASON_MAX - 64];
        if (prepare(s, st, &job, &p->launches[p->n_launches], err, sizeof(err)) == 0) {
            p->n_launches++;
        } else {
            char reason[PT_STORE_REASON_MAX];
            snprintf(reason, sizeof(reason), "could not prepare the worker: %s", err);
            pt_sched_transition(s, st, job.id, PT_JOB_FAILED, reason);
        }
        pt_store_job_clear(&job);
    }
}

static void poll_free(poll_op *p)
{
    free(p->ids);
    free(p->states);
    free(p->launches);
    free(p);
}

static void poll_done(pt_store_op *op)
{
    poll_op *p = (poll_op *)op;
    pt_sched_poll_done(p->sched, p->claims, (const char(*)[PT_STORE_ID_MAX])p->ids, p->states, p->n_ids,
                       p->launches, p->n_launches);
    poll_free(p);
}

void pt_sched_submit_poll(pt_scheduler *s, int claims, const char (*ids)[PT_STORE_ID_MAX], size_t n_ids)
{
    poll_op *p = calloc(1, sizeof(*p));
    if (p) {
        p->ids = calloc(n_ids + 1, sizeof(*p->ids));
        p->states = calloc(n_ids + 1, sizeof(*p->states));
        p->launches = calloc((size_t)claims + 1, sizeof(*p->launches));
    }
    if (!p || !p->ids || !p->states || !p->launches) {
        pt_sched_log(s, "out of memory: cannot poll the store");
        if (p) poll_free(p);
        pt_sched_poll_done(s, claims, NULL, NULL, 0, NULL, 0);
        return;
    }
    p->op.work = poll_work;
    p->op.done = poll_done;
    p->sched = s;
    p->claims = claims;
    p->n_ids = n_ids;
    if (n_ids) memcpy(p->ids, ids, n_ids * sizeof(*ids));
    pt_store_writer_submit(&s->writer, &p->op);
}
