/* prom_process.c — the standard process metrics every Prometheus client
 * exports (the names the Go and Python clients use, so dashboards made for
 * them work here):
 *   process_cpu_seconds_total          user + system CPU time (getrusage)
 *   process_resident_memory_bytes      resident set size  (/proc/self/statm)
 *   process_virtual_memory_bytes       virtual memory size (/proc/self/statm)
 *   process_open_fds                   entries of /proc/self/fd
 *   process_max_fds                    RLIMIT_NOFILE's soft limit
 *   process_start_time_seconds         Unix time the process started
 *                                      (/proc/self/stat's start time after
 *                                      boot + /proc/stat's btime)
 * refreshed by a collector before each scrape.  A value Linux does not give
 * (no /proc) is left out rather than reported as 0. */
#include "server/http/prom.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct pt_prom_process {
    pt_prom_metric *cpu, *rss, *vsz, *fds, *max_fds, *start;
} process_metrics;

static long page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? p : 4096;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1;   /* the directory stream's own descriptor */
}

/* Field 22 of /proc/self/stat (start time in clock ticks after boot); the
 * fields after the command name, which may hold spaces and ')', are read
 * from its last ')'. */
static double start_time_s(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long long ticks = 0;
    /* after ')': state (3) then fields 4..21, then starttime (22) */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                     &ticks) != 1)
        return -1;
    f = fopen("/proc/stat", "r");
    unsigned long long btime = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1) break;
    if (f) fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (!btime || hz <= 0) return -1;
    return (double)btime + (double)ticks / (double)hz;
}

static void collect(pt_prom *p, void *ctx)
{
    (void)p;
    process_metrics *m = ctx;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                     ru.ru_stime.tv_usec * 1e-6;
        pt_prom_add(m->cpu, NULL, cpu - pt_prom_value(m->cpu, NULL));
    }
    unsigned long long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%llu %llu", &size, &resident) == 2) {
        pt_prom_set(m->vsz, NULL, (double)size * (double)page_size());
        pt_prom_set(m->rss, NULL, (double)resident * (double)page_size());
    }
    if (f) fclose(f);
    int fds = count_fds();
    if (fds >= 0) pt_prom_set(m->fds, NULL, fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) pt_prom_set(m->max_fds, NULL, (double)rl.rlim_cur);
    double start = start_time_s();
    if (start > 0) pt_prom_set(m->start, NULL, start);
}

int pt_prom_process_metrics(pt_prom *p)
{
    if (p->process) return 0;
    process_metrics *m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(p->error, sizeof p->error, "out of memory");
        return -1;
    }
    p->process = m;   /* freed by pt_prom_close */
    m->cpu = pt_prom_counter(p, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "");
    m->rss = pt_prom_gauge(p, "process_resident_memory_bytes", "Resident memory size in bytes.", "");
    m->vsz = pt_prom_gauge(p, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "");
    m->fds = pt_prom_gauge(p, "process_open_fds", "Number of open file descriptors.", "");
    m->max_fds = pt_prom_gauge(p, "process_max_fds", "Maximum number of open file descriptors.", "");
    m->start = pt_prom_gauge(p, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                             "");
    if (!m->cpu || !m->rss || !m->vsz || !m->fds || !m->max_fds || !m->start) return -1;
    return pt_prom_add_collector(p, collect, m);
}
