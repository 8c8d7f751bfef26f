/* test_scheduler_memory.c — the measurements behind the workers' memory
 * ceiling (server/sched/scheduler_memory.c, issue 17 F3): the address-space
 * limit a budget gives, and the resident memory of a whole process group
 * read from /proc, on a real child process that holds a known amount.  The
 * kill at the budget and the job's `failed` end are exercised against a
 * real server in tests/integration/test_api_hardening.sh (F3). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/sched/scheduler_internal.h"

#define MIB (1ull << 20)

static void test_address_limit(void **state)
{
    (void)state;
    assert_int_equal(pt_sched_address_limit(0, 8), 0);   /* no budget, no limit */
    assert_int_equal(pt_sched_address_limit(1024 * MIB, 2),
                     1024 * MIB + PT_SCHED_AS_BASE + 2 * PT_SCHED_AS_PER_CORE);
    assert_int_equal(pt_sched_address_limit(1024 * MIB, 0), 1024 * MIB + PT_SCHED_AS_BASE + PT_SCHED_AS_PER_CORE);
}

/* A child in a group of its own that holds `mib` MiB written page by page
 * and a grandchild that holds the same: the group's resident memory counts
 * both. */
static pid_t start_group(size_t mib, int ready_fd)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0);
    pid_t grandchild = fork();
    char *p = malloc(mib * MIB);
    if (!p) _exit(1);
    memset(p, 1, mib * MIB);
    if (grandchild > 0) {
        char c = 1;   /* the leader says ready once its grandchild had time to fill */
        usleep(300000);
        if (write(ready_fd, &c, 1) != 1) _exit(1);
    }
    pause();
    _exit(0);
}

static void test_group_memory_counts_every_process(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t leader = start_group(48, fds[1]);
    assert_true(leader > 0);
    char c;
    assert_int_equal(read(fds[0], &c, 1), 1);
    uint64_t rss = 0, vsize = 0;
    assert_int_equal(pt_sched_group_memory(leader, &rss, &vsize), 0);
    assert_true(rss >= 2 * 48 * MIB);        /* leader and grandchild, each 48 MiB written */
    assert_true(rss < 2 * 48 * MIB + 64 * MIB);
    assert_true(vsize >= 48 * MIB);          /* the leader's own address space */
    kill(-leader, SIGKILL);
    waitpid(leader, NULL, 0);
    /* a group without any process (no pid is this high) */
    assert_int_equal(pt_sched_group_memory(0x7ffffff0, &rss, &vsize), -1);
    close(fds[0]);
    close(fds[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_limit),
        cmocka_unit_test(test_group_memory_counts_every_process),
    };
    return cmocka_run_group_tests_name("scheduler_memory", tests, NULL, NULL);
}
