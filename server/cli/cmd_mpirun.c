/* cmd_mpirun.c — `packtrain mpirun [options] -- COMMAND [ARGS...]`: runs a
 * packtrain command as the ranks of an MPI job, with the command line of
 * engine/mpi/mpi_launch.h.  `packtrain train` and `packtrain worker` run a job
 * of backend kind "mpi" with more than one rank through it by themselves
 * (pt_cli_mpi_relaunch: the same command again, as `packtrain mpirun
 * [--protocol] --ranks N -- COMMAND ARGS`), and a user runs the same by hand
 * or inside a Slurm allocation (docs/multinode.md).
 *
 * Why a launcher in between, rather than exec'ing mpirun: mpirun answers
 * SIGTERM by killing the ranks about a second later, too soon for the step
 * in flight and a checkpoint.  This process keeps mpirun in a process group
 * of its own and turns the first SIGTERM/SIGINT/SIGHUP into SIGUSR1, which
 * mpirun forwards: every rank then stops after the same step and rank 0
 * writes the checkpoint (pt_mpi_train_run).  A second signal is passed on as
 * SIGTERM.  mpirun dies with this process (PR_SET_PDEATHSIG), so SIGKILL of
 * the launcher's group — the scheduler's last resort — takes the job down. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/train/config.h"
#include "engine/core/errors.h"
#include "engine/mpi/mpi_backend.h"
#include "engine/mpi/mpi_launch.h"
#include "server/cli/commands.h"

static const char usage_text[] =
    "usage: packtrain mpirun [--config JOB.json] [--ranks N] [--hostfile FILE | --host H1,H2]\n"
    "                        [--print] [--protocol] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND as the N ranks of an MPI job: mpirun -np N --oversubscribe --bind-to none\n"
    "--stdin none --mca mpi_yield_when_idle 1 [...] COMMAND ARGS.  COMMAND is a packtrain\n"
    "command (train, worker), run by this binary, or a program path.  Example, a job with\n"
    "backend.kind \"mpi\":\n"
    "  packtrain mpirun --config job.json -- train data.ptd --config job.json --out run1\n"
    "\n"
    "  --config FILE    job configuration; N is its backend.ranks\n"
    "  --ranks N        N, overriding the configuration's\n"
    "  --hostfile FILE  Open MPI hostfile (else $PACKTRAIN_MPI_HOSTFILE)\n"
    "  --host LIST      host[:slots],... (else $PACKTRAIN_MPI_HOSTS); with neither,\n"
    "                   mpirun's default: this host, or the nodes of a Slurm allocation\n"
    "  --print          print the mpirun command line and exit\n"
    "  --protocol       report a failure to start as a worker-protocol line\n"
    "                   {\"kind\":\"error\",\"message\":...} on stdout (the server uses it)\n"
    "\n"
    "Environment: PACKTRAIN_MPIRUN (mpirun binary), PACKTRAIN_MPI_ARGS (more mpirun words,\n"
    "e.g. \"--mca btl_tcp_if_include eth0\"), PACKTRAIN_MPI_CHECK_EVERY (steps between\n"
    "checks that the ranks' parameters agree; default 100, 0 = never).\n"
    "\n"
    "The first SIGTERM, SIGINT or SIGHUP reaches the ranks as SIGUSR1: they stop after the\n"
    "same step and rank 0 checkpoints.  A second one reaches mpirun as SIGTERM.\n"
    "Exit status: mpirun's (128+N when it died of signal N); 1 when it cannot start;\n"
    "2 bad arguments.\n";

typedef struct launch_args {
    const char *config, *hostfile, *host;
    int32_t ranks;              /* 0 = from the configuration */
    int print, protocol;
    int cmd;                    /* index of COMMAND in argv */
} launch_args;

static volatile sig_atomic_t g_child, g_signals;

static void on_signal(int sig)
{
    (void)sig;
    g_signals++;
    if (g_child > 0) kill(g_child, g_signals == 1 ? SIGUSR1 : SIGTERM);
}

/* A failure to start: as a protocol line with --protocol, always on stderr. */
static int fail(const launch_args *a, int status, const char *msg)
{
    fprintf(stderr, "packtrain mpirun: %s\n", msg);
    if (a->protocol) {
        json_t *o = json_pack("{s:s, s:s}", "kind", "error", "message", msg);
        char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (line) printf("%s\n", line);
        fflush(stdout);
        free(line);
        json_decref(o);
    }
    return status;
}

static int fail_errs(const launch_args *a, int status, const pt_errors *errs)
{
    char buf[PT_ERR_FILE_MAX + PT_ERR_FIELD_MAX + PT_ERR_MSG_MAX + 16];
    pt_errors_first(errs, buf, sizeof buf);
    return fail(a, status, buf);
}

static int parse_args(launch_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof(*a));
    static const struct option opts[] = {
        {"print", no_argument, NULL, 'p'},         {"protocol", no_argument, NULL, 'P'},
        {"config", required_argument, NULL, 'c'},  {"hostfile", required_argument, NULL, 'f'},
        {"host", required_argument, NULL, 'H'},    {"ranks", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0}};
    /* "+": options end at "--" or the first operand; nothing after them is
     * reordered (it is the command to run) */
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
        char *end;
        long n;
        switch (c) {
        case 'p': a->print = 1; break;
        case 'P': a->protocol = 1; break;
        case 'c': a->config = optarg; break;
        case 'f': a->hostfile = optarg; break;
        case 'H': a->host = optarg; break;
        case 'r':
            n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < 1 || n > 65536) {
                fprintf(stderr, "packtrain mpirun: --ranks must be an integer from 1 to 65536, got '%s'\n", optarg);
                return -1;
            }
            a->ranks = (int32_t)n;
            break;
        default:
            fprintf(stderr, c == ':' ? "packtrain mpirun: %s needs a value\n"
                                     : "packtrain mpirun: unexpected argument '%s'\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind > 1 && optind <= argc && !strcmp(argv[optind - 1], "--")) a->cmd = optind;
    else if (optind < argc) {
        fprintf(stderr, "packtrain mpirun: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (a->cmd == 0 || a->cmd >= argc) {
        fprintf(stderr, "packtrain mpirun: missing '-- COMMAND [ARGS...]'\n");
        return -1;
    }
    if (!a->config && !a->ranks) {
        fprintf(stderr, "packtrain mpirun: give --config JOB.json or --ranks N\n");
        return -1;
    }
    return 0;
}

/* This program's path, for running it again. */
static int self_path(char *buf, size_t len, pt_errors *errs)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0) {
        pt_errors_add(errs, "", 0, "", "cannot find this program (/proc/self/exe): %s",
                      strerror(errno));
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

/* The full command line: mpirun prefix, then COMMAND (this binary for a
 * packtrain command) and its arguments. */
static int build(pt_mpi_launch *l, const launch_args *a, int argc, char **argv, pt_errors *errs)
{
    int32_t ranks = a->ranks;
    if (a->config) {
        pt_job_config cfg;
        if (pt_job_config_load(&cfg, a->config, errs)) return -1;
        if (cfg.backend.kind != PT_JOB_BACKEND_MPI) {
            pt_errors_add(errs, a->config, 0, "backend.kind", "is not \"mpi\": this job runs in "
                          "one process, without mpirun");
            return -1;
        }
        if (!ranks) ranks = cfg.backend.ranks;
    }
    if (!pt_mpi_available()) {
        pt_errors_add(errs, "", 0, "backend.kind", "%s", PT_MPI_MISSING_MSG);
        return -1;
    }
    pt_mpi_launch_opts o;
    char mpirun[4096];
    if (pt_mpi_launch_opts_from_env(&o, mpirun, sizeof mpirun, errs)) return -1;
    o.ranks = ranks;
    if (a->hostfile || a->host) {
        o.hostfile = a->hostfile;
        o.hosts = a->host;
    }
    if (pt_mpi_launch_build(l, &o, errs)) return -1;
    const char *cmd = argv[a->cmd];
    if (!strchr(cmd, '/')) {
        char self[4096];
        if (self_path(self, sizeof self, errs) || pt_mpi_launch_add(l, self, errs)) return -1;
    }
    for (int i = a->cmd; i < argc; i++)
        if (pt_mpi_launch_add(l, argv[i], errs)) return -1;
    return 0;
}

static void child_exec(const pt_mpi_launch *l, pid_t parent, const sigset_t *old)
{
    setpgid(0, 0);   /* terminal and scheduler signals reach the launcher only */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigprocmask(SIG_SETMASK, old, NULL);
    execv(l->argv[0], l->argv);
    fprintf(stderr, "packtrain mpirun: cannot run %s: %s\n", l->argv[0], strerror(errno));
    _exit(127);
}

static int run(const pt_mpi_launch *l, const launch_args *a)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) child_exec(l, parent, &old);
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        char msg[256];
        snprintf(msg, sizeof msg, "cannot start mpirun: %s", strerror(errno));
        return fail(a, 1, msg);
    }
    g_child = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);   /* a signal that came meanwhile runs now */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            char msg[256];
            snprintf(msg, sizeof msg, "waiting for mpirun: %s", strerror(errno));
            return fail(a, 1, msg);
        }
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

int pt_cmd_mpirun(int argc, char **argv)
{
    launch_args a;
    int dashdash = 0;
    for (int i = 1; i < argc && !dashdash; i++) dashdash = !strcmp(argv[i], "--");
    if (!dashdash && pt_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (parse_args(&a, argc, argv)) {
        fputs(usage_text, stderr);
        return 2;
    }
    pt_errors errs;
    pt_errors_init(&errs, 4);
    static pt_mpi_launch l;
    int rc = build(&l, &a, argc, argv, &errs);
    if (rc) {
        rc = fail_errs(&a, 1, &errs);
    } else if (a.print) {
        static char line[PT_MPI_LAUNCH_TEXT * 2];
        pt_mpi_launch_format(&l, line, sizeof line);
        printf("%s\n", line);
    } else {
        rc = run(&l, &a);
    }
    pt_errors_close(&errs);
    return rc;
}

int pt_cli_mpi_relaunch_argv(pt_mpi_launch *l, const char *self, int32_t ranks, int protocol,
                             int argc, char **argv, pt_errors *errs)
{
    char np[16];
    snprintf(np, sizeof np, "%d", (int)ranks);
    pt_mpi_launch_init(l);
    const char *head[] = {self, "mpirun", "--protocol", "--ranks", np, "--"};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        if ((i != 2 || protocol) && pt_mpi_launch_add(l, head[i], errs)) return -1;
    for (int i = 0; i < argc; i++)
        if (pt_mpi_launch_add(l, argv[i], errs)) return -1;
    return 0;
}

int pt_cli_mpi_relaunch(int32_t ranks, int protocol, int argc, char **argv, pt_errors *errs)
{
    static pt_mpi_launch l;
    char self[4096];
    if (self_path(self, sizeof self, errs) ||
        pt_cli_mpi_relaunch_argv(&l, self, ranks, protocol, argc, argv, errs))
        return -1;
    fflush(NULL);
    execv(l.argv[0], l.argv);
    pt_errors_add(errs, "", 0, "", "cannot run %s mpirun: %s", self, strerror(errno));
    return -1;
}
