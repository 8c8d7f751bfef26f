/* phase.c — per-step phase time accounting (see phase.h). */
#include "engine/core/phase.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const phase_names[PT_PHASE_COUNT] = {
    "io", "forward", "backward", "allreduce", "optimizer", "other"};

double pt_phase_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pt_phase_timer_start(pt_phase_timer *t)
{
    t->last = pt_phase_clock();
}

double pt_phase_lap(pt_phase_timer *t, pt_phase_times *acc, pt_phase p)
{
    double now = pt_phase_clock();
    double dt = now - t->last;
    t->last = now;
    if (p >= 0 && p < PT_PHASE_COUNT) acc->seconds[p] += dt;
    return dt;
}

void pt_phase_times_clear(pt_phase_times *t)
{
    memset(t, 0, sizeof(*t));
}

void pt_phase_times_add(pt_phase_times *dst, const pt_phase_times *src)
{
    for (int p = 0; p < PT_PHASE_COUNT; p++) dst->seconds[p] += src->seconds[p];
    dst->steps += src->steps;
}

const char *pt_phase_name(pt_phase p)
{
    return p >= 0 && p < PT_PHASE_COUNT ? phase_names[p] : NULL;
}

int pt_phase_json_fields(const pt_phase_times *t, char *buf, size_t len)
{
    int total = 0;
    for (int p = 0; p < PT_PHASE_COUNT; p++) {
        double mean = t->steps > 0 ? t->seconds[p] / (double)t->steps : 0.0;
        size_t used = (size_t)total < len ? (size_t)total : len;
        int k = snprintf(buf ? buf + used : NULL, buf ? len - used : 0, "%s\"phase_%s_s\":%.6g",
                         p ? "," : "", phase_names[p], mean);
        if (k < 0) return k;
        total += k;
    }
    return total;
}
