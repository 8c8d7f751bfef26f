/* mpi_launch.h — the command line that starts a job's ranks with Open MPI.
 *
 * A job with backend.kind "mpi" runs as `mpirun -np N ... PROGRAM ARGS`, one
 * process per rank.  That mpirun command line is built here, in one place;
 * what PROGRAM is (the packtrain command that runs a rank, and the launcher
 * in between) is the CLI's business (server/cli/cmd_mpirun.c):
 *
 *   mpirun -np N --oversubscribe --bind-to none --stdin none
 *          --mca mpi_yield_when_idle 1
 *          [--allow-run-as-root] [--hostfile F | --host h1,h2:2]
 *          [-x NAME]...  [operator words]...  PROGRAM ARGS...
 *
 *   --oversubscribe   more ranks than slots is allowed (one machine, tests)
 *   --bind-to none    each rank runs replica and BLAS threads: binding a
 *                     rank to one core (mpirun's default for np <= 2) would
 *                     serialise them
 *   --stdin none      a rank never reads the launcher's stdin
 *   mpi_yield_when_idle  a rank waiting in a collective yields its core
 *                     instead of spinning on it: its own loader and
 *                     replica threads need it (+15% graphs/s for 2 ranks on
 *                     2 shared cores, bench/bench_mpi.sh)
 *   -x NAME           exported to remote hosts, only when set here: PATH,
 *                     LD_LIBRARY_PATH, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS,
 *                     PACKTRAIN_MPI_CHECK_EVERY
 *
 * Hosts are the operator's choice, never a job's (a job submitted over REST
 * must not make the server ssh to machines of the submitter's choosing): the
 * `packtrain mpirun` flags, else PACKTRAIN_MPI_HOSTFILE or PACKTRAIN_MPI_HOSTS
 * in the server's environment, else mpirun's own discovery (localhost, or
 * the nodes of a Slurm allocation).  PACKTRAIN_MPI_ARGS adds operator words
 * (e.g. "--mca btl_tcp_if_include eth1"), PACKTRAIN_MPIRUN names the mpirun
 * binary (default: mpirun on PATH).
 *
 * The launcher in between (server/cli/cmd_mpirun.c) turns a SIGTERM into a
 * SIGUSR1 that mpirun forwards, so every rank stops after the same step and
 * rank 0 checkpoints (mpirun answers SIGTERM itself by killing the ranks
 * within a second). */
#ifndef PT_MPI_LAUNCH_H
#define PT_MPI_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/errors.h"

#define PT_MPI_LAUNCH_WORDS 128   /* words in one command line */
#define PT_MPI_LAUNCH_TEXT 16384  /* bytes of those words */

/* Rejection of kind "mpi" by a packtrain built without Open MPI. */
#define PT_MPI_MISSING_MSG                                                        \
    "backend.kind \"mpi\" needs packtrain built with Open MPI (apt-get install " \
    "openmpi-bin libopenmpi-dev, then make)"

/* A command line: argv[0..n) point into text, argv[n] is NULL. */
typedef struct pt_mpi_launch {
    int n;
    char *argv[PT_MPI_LAUNCH_WORDS + 1];
    char text[PT_MPI_LAUNCH_TEXT];
    size_t used;
} pt_mpi_launch;

typedef struct pt_mpi_launch_opts {
    const char *mpirun;        /* path of mpirun; NULL = "mpirun" */
    int32_t ranks;             /* -np, >= 1 */
    const char *hosts;         /* "h1,h2:2" (name or name:slots), NULL or "" = none */
    const char *hostfile;      /* readable file, NULL or "" = none; not with hosts */
    const char *extra;         /* operator words split at white space, NULL = none */
    const char *const *env;    /* NULL-terminated names for -x; NULL = the list above */
    int as_root;               /* adds --allow-run-as-root (Open MPI refuses root otherwise) */
} pt_mpi_launch_opts;

void pt_mpi_launch_init(pt_mpi_launch *l);

/* Appends one word.  Returns 0, or -1 with errs filled (too many words or
 * too long). */
int pt_mpi_launch_add(pt_mpi_launch *l, const char *word, pt_errors *errs);

/* Resets l to the mpirun prefix of o (see above).  Returns 0, or -1 with
 * every problem in errs: ranks < 1, a host name that is not a plain name
 * (letters, digits, '.', '-', '_', not starting with '-', optional ":slots"),
 * both hosts and hostfile, a hostfile that cannot be read. */
int pt_mpi_launch_build(pt_mpi_launch *l, const pt_mpi_launch_opts *o, pt_errors *errs);

/* o filled from the environment: PACKTRAIN_MPIRUN (else the mpirun found on
 * PATH), PACKTRAIN_MPI_HOSTFILE, PACKTRAIN_MPI_HOSTS, PACKTRAIN_MPI_ARGS, and
 * as_root when the effective user is root.  mpirun_buf holds the path found.
 * Returns 0, or -1 with errs filled when no mpirun can be found. */
int pt_mpi_launch_opts_from_env(pt_mpi_launch_opts *o, char *mpirun_buf, size_t len,
                                pt_errors *errs);

/* The most ranks a job may ask for on this server: the operator's
 * PACKTRAIN_MPI_MAX_RANKS when set, else the slots of the hosts
 * (PACKTRAIN_MPI_HOSTS "a,b:4": a host without ":slots" counts 1) or of the
 * hostfile (a line "name slots=N"; a line without slots counts 1; '#'
 * comments), else `cores`, this machine's.  A job submitted over REST
 * must not make a host run more ranks than its operator gave it slots
 * (mpirun runs with --oversubscribe, so nothing else stops it).  Returns
 * the count (>= 1) and says where it came from in `source`; -1 with errs
 * filled for a PACKTRAIN_MPI_MAX_RANKS that is not a positive integer or a
 * hostfile that cannot be read. */
int32_t pt_mpi_slots(const pt_mpi_launch_opts *o, const char *max_ranks, int cores, char *source,
                     size_t len, pt_errors *errs);

/* 1 when mpirun started this process (Open MPI's OMPI_COMM_WORLD_SIZE is
 * set): it is one rank of a job already. */
int pt_mpi_launched(void);

/* l as one shell-quoted line (for logs and `packtrain mpirun --print`). */
void pt_mpi_launch_format(const pt_mpi_launch *l, char *buf, size_t len);

#endif
