/* cli_progress.c — the progress line of long data commands (ingest, pack, and
 * the ingest behind a DATA argument) on a terminal: the engine reports
 * through engine/core/progress.h, this file draws. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/progress.h"
#include "server/cli/commands.h"

/* 1234 -> "1234", 12345 -> "12.3k", 1234567 -> "1.23M". */
static void si(double v, char *buf, size_t len)
{
    if (v < 10000) snprintf(buf, len, "%.0f", v);
    else if (v < 1e6) snprintf(buf, len, "%.1fk", v / 1e3);
    else if (v < 1e9) snprintf(buf, len, "%.2fM", v / 1e6);
    else snprintf(buf, len, "%.2fG", v / 1e9);
}

static void duration(double s, char *buf, size_t len)
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, len, "%lds", t);
}

void pt_cli_progress_format(const pt_progress_info *info, char *buf, size_t len)
{
    char n[32], rate[32], tail[96] = "";
    si((double)info->structures, n, sizeof n);
    si(pt_progress_rate(info, info->structures), rate, sizeof rate);
    int bytes = info->unit && !strcmp(info->unit, "bytes");
    if (bytes && info->total)
        snprintf(tail, sizeof tail, "  %.1f of %.1f GB", (double)info->done / 1e9,
                 (double)info->total / 1e9);
    else if (info->total)
        snprintf(tail, sizeof tail, "  %.1f%%", 100.0 * (double)info->done / (double)info->total);
    char when[32];
    double eta = pt_progress_eta(info);
    if (info->final) {
        duration(info->seconds, when, sizeof when);
        snprintf(buf, len, "  %s  %s structures  %s/s%s  done in %s", info->phase, n, rate, tail,
                 when);
    } else if (eta >= 0) {
        duration(eta, when, sizeof when);
        snprintf(buf, len, "  %s  %s structures  %s/s%s  ETA %s", info->phase, n, rate, tail,
                 when);
    } else {
        snprintf(buf, len, "  %s  %s structures  %s/s%s", info->phase, n, rate, tail);
    }
}

static void draw(void *user, const pt_progress_info *info)
{
    (void)user;
    char line[256];
    pt_cli_progress_format(info, line, sizeof line);
    /* \r back to the start, the line, then clear what a longer one left */
    fprintf(stderr, "\r%s\033[K%s", line, info->final ? "\n" : "");
    fflush(stderr);
}

int pt_cli_progress_sink(pt_progress *sink, int json)
{
    memset(sink, 0, sizeof(*sink));
    const char *env = getenv("PACKTRAIN_PROGRESS");
    int on = env && env[0] ? strcmp(env, "0") != 0 : !json && isatty(STDERR_FILENO);
    if (!on) return 0;
    sink->fn = draw;
    return 1;
}
