/* scheduler_memory.c — the memory ceiling of workers: the operator's budget
 * per job (pt_scheduler_options.worker_memory_bytes), enforced twice.
 *
 *   1. RLIMIT_AS on the worker right after it is spawned (prlimit; its MPI
 *      ranks inherit it): a hard stop for a burst of allocation, set to the
 *      budget plus the address space a process reserves without using it
 *      (glibc arenas, thread stacks, OpenBLAS's per-thread buffers:
 *      pt_sched_address_limit), since the limit counts reservations, not
 *      memory.
 *   2. A watch every PT_SCHED_MEMORY_MS on the resident memory of the
 *      worker's whole process group (its ranks too): over the budget, the
 *      group is killed with SIGKILL.  It also catches a worker stuck at its
 *      address-space limit: OpenBLAS retries a failed buffer allocation
 *      forever instead of failing, so a worker whose address space stays
 *      at the limit for PT_SCHED_MEMORY_STUCK samples is killed the same way.
 *
 * Either way the job ends `failed` with the numbers in its reason and is not
 * retried (scheduler_ops.c): running it again would end the same.  A worker
 * the kernel killed (SIGKILL the scheduler did not send) counts as out of
 * memory only when its last sample was near the budget; any other kill is
 * a crash and is retried.  Workers also get a high oom_score_adj, so that
 * when the host runs short the kernel picks a worker before the server. */
#include "server/sched/scheduler_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)

uint64_t pt_sched_address_limit(uint64_t budget, int cores)
{
    if (!budget) return 0;
    return budget + PT_SCHED_AS_BASE + (uint64_t)(cores > 0 ? cores : 1) * PT_SCHED_AS_PER_CORE;
}

/* Best effort: an unprivileged server can always raise its children's score. */
static void set_oom_score(int64_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/oom_score_adj", (long long)pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (write(fd, "800", 3) < 0) {
    }
    close(fd);
}

int pt_sched_memory_limit(pt_sched_job *j)
{
    pt_scheduler *s = j->sched;
    if (!s->worker_memory_bytes || j->pid <= 0) return 0;
    set_oom_score(j->pid);
    struct rlimit rl = {.rlim_cur = s->address_limit, .rlim_max = s->address_limit};
    if (prlimit((pid_t)j->pid, RLIMIT_AS, &rl, NULL) != 0) {
        pt_sched_note_fd(j->log_fd, "cannot limit the worker's address space: %s", strerror(errno));
        return -1;
    }
    pt_sched_note_fd(j->log_fd, "memory budget %.0f MiB resident (address space limit %.0f MiB)",
                     s->worker_memory_bytes / MIB, s->address_limit / MIB);
    return 0;
}

/* Fields 5 (pgrp), 23 (vsize, bytes) and 24 (rss, pages) of /proc/PID/stat;
 * the command name (field 2) may hold spaces and parentheses, so parsing
 * starts after its last ')'. */
static int read_stat(const char *pid, long long *pgrp, unsigned long long *vsize, long long *rss_pages)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    /* after ')': state(3) ppid(4) pgrp(5) ... vsize(23) rss(24) */
    char state;
    long long ppid;
    if (sscanf(p + 1, " %c %lld %lld", &state, &ppid, pgrp) != 3) return -1;
    int field = 3;
    char *q = p + 1;
    while (*q && field < 23) {
        while (*q == ' ') q++;
        while (*q && *q != ' ') q++;
        field++;
    }
    return sscanf(q, " %llu %lld", vsize, rss_pages) == 2 ? 0 : -1;
}

int pt_sched_group_memory(int64_t leader, uint64_t *rss, uint64_t *leader_vsize)
{
    *rss = 0;
    *leader_vsize = 0;
    DIR *d = opendir("/proc");
    if (!d) return -1;
    long page = sysconf(_SC_PAGESIZE);
    int found = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        long long pgrp, rss_pages;
        unsigned long long vsize;
        if (read_stat(e->d_name, &pgrp, &vsize, &rss_pages) != 0 || pgrp != leader) continue;
        found = 1;
        *rss += (uint64_t)(rss_pages > 0 ? rss_pages : 0) * (uint64_t)page;
        if (strtoll(e->d_name, NULL, 10) == leader) *leader_vsize = vsize;
    }
    closedir(d);
    return found ? 0 : -1;
}

static void kill_for_memory(pt_sched_job *j, const char *why)
{
    pt_scheduler *s = j->sched;
    j->exit.out_of_memory = 1;
    snprintf(j->exit.memory_why, sizeof j->exit.memory_why, "%s", why);
    pt_sched_note_fd(j->log_fd, "%s; killing the worker's process group (SIGKILL)", why);
    pt_sched_log(s, "job %s: %s; worker killed", j->launch.id, why);
    uv_timer_stop(&j->memory_timer);
    if (j->pid > 0) uv_kill(-(int)j->pid, SIGKILL);
}

void pt_sched_memory_sample(pt_sched_job *j)
{
    pt_scheduler *s = j->sched;
    if (j->exited || j->pid <= 0 || j->exit.out_of_memory) return;
    uint64_t rss, vsize;
    if (pt_sched_group_memory(j->pid, &rss, &vsize) != 0) return;
    j->memory_last = rss;
    if (rss > j->exit.memory_peak) j->exit.memory_peak = rss;
    char why[256];
    if (rss > s->worker_memory_bytes) {
        snprintf(why, sizeof why, "its processes hold %.0f MiB, over the memory budget of %.0f MiB",
                 rss / MIB, s->worker_memory_bytes / MIB);
        kill_for_memory(j, why);
        return;
    }
    /* at the address-space limit and staying there: allocations fail and
     * something in the worker keeps retrying instead of giving up */
    if (vsize + PT_SCHED_AS_SLACK >= s->address_limit) {
        if (++j->memory_stuck >= PT_SCHED_MEMORY_STUCK) {
            snprintf(why, sizeof why, "its address space stayed at the limit of %.0f MiB for %d s "
                     "(allocations failing)", s->address_limit / MIB,
                     PT_SCHED_MEMORY_STUCK * PT_SCHED_MEMORY_MS / 1000);
            kill_for_memory(j, why);
        }
    } else {
        j->memory_stuck = 0;
    }
}

void pt_sched_memory_exit(pt_sched_job *j, int term_signal)
{
    pt_sched_exit *e = &j->exit;
    if (e->out_of_memory || !e->memory_budget || term_signal != SIGKILL || e->killed) return;
    if ((double)j->memory_last < 0.9 * (double)e->memory_budget) return;
    e->out_of_memory = 1;
    snprintf(e->memory_why, sizeof e->memory_why,
             "it was killed (SIGKILL, not sent by the scheduler) holding %.0f MiB, near its memory "
             "budget of %.0f MiB: the system ran out of memory", j->memory_last / MIB, e->memory_budget / MIB);
}
