/* child_run.h — shared by the tests that check what a process sees when
 * the CPU detection is told to hide a feature (test_bf16.c, test_bf16_amx.c):
 * the detection runs once per process, so the test runs its own binary
 * again with one more environment variable and a flag its main() answers,
 * and reads what the child prints.  Header-only, static inline.  Include
 * after <cmocka.h>. */
#ifndef PT_TEST_CHILD_RUN_H
#define PT_TEST_CHILD_RUN_H

#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Runs this binary as `argv0 flag` with this process' environment plus
 * `var` ("NAME=value"), its stdout into text (cap bytes, NUL-terminated);
 * asserts the child exited 0. */
static inline void child_run(const char *argv0, const char *flag, const char *var, char *text,
                             size_t cap)
{
    int out[2];
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof(char *));
    assert_non_null(env);
    memcpy(env, environ, n * sizeof(char *));
    env[n] = (char *)var;
    char *argv[] = {(char *)argv0, (char *)flag, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env), 0);
    close(out[1]);
    size_t got = 0;
    ssize_t r;
    while ((r = read(out[0], text + got, cap - 1 - got)) > 0) got += (size_t)r;
    text[got] = '\0';
    close(out[0]);
    int status;
    waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#endif
