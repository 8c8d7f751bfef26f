/* app_progress.c — data work in flight on the server: an upload being
 * ingested, a packing report being planned.  The engine reports through
 * engine/core/progress.h from whichever thread runs the work (today the
 * HTTP thread of the request; the same calls serve a background thread),
 * this file keeps the latest state of each task, numbers every change, and
 * bumps app->datasets_watch so event streams look again.
 *
 * A task is known by its dataset's id.  Finished tasks are kept (the last
 * PT_APP_TASKS_MAX in all) so a stream that connects late, or reconnects,
 * still sees how they ended. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "server/app.h"

static int64_t now_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

int pt_app_tasks_init(pt_app_tasks *t)
{
    memset(t, 0, sizeof(*t));
    return pthread_mutex_init(&t->mu, NULL) == 0 ? 0 : -1;
}

void pt_app_tasks_close(pt_app_tasks *t)
{
    pthread_mutex_destroy(&t->mu);
}

/* The slot of id, or a free or the oldest finished one for a new task;
 * NULL when every slot is busy.  Lock held. */
static pt_app_task *slot_for(pt_app_tasks *t, const char *id, int create)
{
    pt_app_task *victim = NULL;
    for (int i = 0; i < PT_APP_TASKS_MAX; i++) {
        pt_app_task *k = &t->items[i];
        if (k->seq && !strcmp(k->id, id)) return k;
        if (!create) continue;
        if (!k->seq) {
            if (!victim || victim->seq) victim = k;
        } else if (k->state != PT_TASK_RUNNING && (!victim || (victim->seq && k->seq < victim->seq))) {
            victim = k;
        }
    }
    return create ? victim : NULL;
}

void pt_app_task_begin(pt_app *app, const char *id, const char *owner, const char *name,
                       const char *phase)
{
    pt_app_tasks *t = &app->tasks;
    pthread_mutex_lock(&t->mu);
    pt_app_task *k = slot_for(t, id, 1);
    if (k) {
        memset(k, 0, sizeof(*k));
        snprintf(k->id, sizeof k->id, "%s", id);
        snprintf(k->owner, sizeof k->owner, "%s", owner);
        snprintf(k->name, sizeof k->name, "%s", name);
        snprintf(k->phase, sizeof k->phase, "%s", phase);
        k->state = PT_TASK_RUNNING;
        k->started_us = now_us();
        k->seq = ++t->seq;
    }
    pthread_mutex_unlock(&t->mu);
    pt_watch_bump(&app->datasets_watch);
}

void pt_app_task_progress(pt_app *app, const char *id, const pt_progress_info *info)
{
    pt_app_tasks *t = &app->tasks;
    pthread_mutex_lock(&t->mu);
    pt_app_task *k = slot_for(t, id, 0);
    if (k && k->state == PT_TASK_RUNNING) {
        snprintf(k->phase, sizeof k->phase, "%s", info->phase);
        snprintf(k->unit, sizeof k->unit, "%s", info->unit ? info->unit : "");
        k->done = info->done;
        k->total = info->total;
        k->structures = info->structures;
        k->seconds = info->seconds;
        k->rate = pt_progress_rate(info, info->structures);
        k->eta = pt_progress_eta(info);
        k->seq = ++t->seq;
    }
    pthread_mutex_unlock(&t->mu);
    if (k) pt_watch_bump(&app->datasets_watch);
}

void pt_app_task_end(pt_app *app, const char *id, int ok, const char *message)
{
    pt_app_tasks *t = &app->tasks;
    pthread_mutex_lock(&t->mu);
    pt_app_task *k = slot_for(t, id, 0);
    if (k) {
        k->state = ok ? PT_TASK_DONE : PT_TASK_FAILED;
        snprintf(k->message, sizeof k->message, "%s", message ? message : "");
        k->seconds = (double)(now_us() - k->started_us) / 1e6;
        k->eta = 0;
        k->seq = ++t->seq;
    }
    pthread_mutex_unlock(&t->mu);
    if (k) pt_watch_bump(&app->datasets_watch);
}

int pt_app_task_get(pt_app *app, const char *owner, const char *id, pt_app_task *out)
{
    pt_app_tasks *t = &app->tasks;
    pthread_mutex_lock(&t->mu);
    pt_app_task *k = slot_for(t, id, 0);
    int found = k && !strcmp(k->owner, owner);
    if (found) *out = *k;
    pthread_mutex_unlock(&t->mu);
    return found ? 0 : -1;
}

size_t pt_app_tasks_since(pt_app *app, const char *owner, uint64_t after, pt_app_task *out,
                          size_t cap)
{
    pt_app_tasks *t = &app->tasks;
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < PT_APP_TASKS_MAX && n < cap; i++) {
        const pt_app_task *k = &t->items[i];
        if (k->seq > after && !strcmp(k->owner, owner)) out[n++] = *k;
    }
    pthread_mutex_unlock(&t->mu);
    /* in the order they changed: event ids must increase */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && out[j - 1].seq > out[j].seq; j--) {
            pt_app_task x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    return n;
}

static json_t *number_or_null(double v)
{
    return isfinite(v) && v >= 0 ? json_real(v) : json_null();
}

json_t *pt_app_task_progress_json(const pt_app_task *k)
{
    return json_pack("{s:s, s:I, s:I, s:s, s:I, s:o, s:o, s:o}", "phase", k->phase,
                     "done", (json_int_t)k->done, "total", (json_int_t)k->total, "unit", k->unit,
                     "structures", (json_int_t)k->structures, "seconds", number_or_null(k->seconds),
                     "structures_per_second", number_or_null(k->rate), "eta_seconds",
                     number_or_null(k->state == PT_TASK_RUNNING ? k->eta : 0.0));
}

const char *pt_app_task_state_name(int state)
{
    return state == PT_TASK_RUNNING ? "running" : state == PT_TASK_DONE ? "done" : "failed";
}
