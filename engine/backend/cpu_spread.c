/* cpu_spread.c — a replica thread leaves the host's CPU (cpu_spread.h). */
#include "engine/backend/cpu_spread.h"

#include <pthread.h>
#include <sched.h>

int pt_thread_leave_cpu(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE) return -1;
    /* sched_getcpu is a vDSO read: the common case (elsewhere) costs no syscall */
    if (sched_getcpu() != cpu) return 0;
    cpu_set_t old, away;
    if (pthread_getaffinity_np(pthread_self(), sizeof old, &old)) return -1;
    away = old;
    CPU_CLR(cpu, &away);
    if (CPU_COUNT(&away) == 0) return 0;
    if (pthread_setaffinity_np(pthread_self(), sizeof away, &away)) {
        pthread_setaffinity_np(pthread_self(), sizeof old, &old);
        return -1;
    }
    /* widening the mask again does not move a running thread back */
    if (pthread_setaffinity_np(pthread_self(), sizeof old, &old)) return -1;
    return 1;
}
