/* progress.c — rate-limited progress calls (see progress.h). */
#include "engine/core/progress.h"

#include <string.h>

#include "engine/core/phase.h"

#define DEFAULT_EVERY 0.25

void pt_progress_begin(pt_progress *p, const pt_progress *sink, const char *phase,
                       const char *unit, uint64_t total)
{
    memset(p, 0, sizeof(*p));
    if (sink) {
        p->fn = sink->fn;
        p->user = sink->user;
        p->every = sink->every;
    }
    if (!(p->every > 0)) p->every = DEFAULT_EVERY;
    p->info.phase = phase;
    p->info.unit = unit;
    p->info.total = total;
    p->started = p->last = pt_phase_clock();
}

static void call(pt_progress *p, uint64_t done, uint64_t structures, double now, int final)
{
    p->info.done = done;
    p->info.structures = structures;
    p->info.seconds = now - p->started;
    p->info.final = final;
    p->last = now;
    p->fn(p->user, &p->info);
}

void pt_progress_tick(pt_progress *p, uint64_t done, uint64_t structures)
{
    if (!p->fn) return;
    double now = pt_phase_clock();
    if (now - p->last >= p->every) call(p, done, structures, now, 0);
}

void pt_progress_end(pt_progress *p, uint64_t done, uint64_t structures)
{
    if (p->fn) call(p, done, structures, pt_phase_clock(), 1);
}

double pt_progress_rate(const pt_progress_info *info, uint64_t units)
{
    return info->seconds > 0 ? (double)units / info->seconds : 0.0;
}

double pt_progress_eta(const pt_progress_info *info)
{
    if (!info->total || !info->done || info->seconds <= 0) return -1.0;
    if (info->done >= info->total) return 0.0;
    return info->seconds * (double)(info->total - info->done) / (double)info->done;
}
