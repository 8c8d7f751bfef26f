/* scheduler.h — runs queued jobs in worker processes on a libuv loop.
 *
 * Room server/sched: the libuv scheduler, its store writer, worker processes
 * and their JSON-lines protocol, job directories.  Uses the store and the
 * engine's validator (config.h); knows no HTTP and no backend kind (a worker
 * of kind "mpi" starts its own ranks).
 *
 * The scheduler owns a thread running a uv_loop and a store-writer thread
 * (server/sched/store_writer.h) that does all its SQLite work.  The HTTP server only
 * talks to it through pt_scheduler_notify() (after queueing or cancelling a
 * job in the store), pt_scheduler_stats_get() and the change callback.
 *
 * Each job runs as `<worker_argv...> --job ID --config DIR/jobs/ID/config.json
 * --data DATASET --out DIR/jobs/ID [--resume CHECKPOINT]` in its own process
 * group.  The worker's stdout is the JSON-lines protocol of worker_proto.h;
 * its stderr, and the scheduler's notes about it (rejected lines, exits,
 * signals sent), are appended to DIR/jobs/ID/worker.log.
 *
 * Outcomes: `done` + exit 0 -> succeeded; an `error` line -> failed with its
 * message; any other exit (signal, or non-zero status) is a crash: the job is
 * re-queued and resumes from its latest checkpoint until it has crashed
 * max_attempts times, then fails with "worker crashed N times: last exit
 * signal 11 (SIGSEGV)".  Crashes are counted from the job's transition rows,
 * so the count survives server restarts.  A job being cancelled gets SIGTERM,
 * SIGKILL after cancel_grace_s, then `cancelled`.  max_runtime_seconds (the
 * config's top-level key, else the default) bounds each run of a worker; when
 * it passes the worker is stopped the same way and the job fails with
 * "exceeded max_runtime_seconds=N".
 *
 * config.json, the worker's --config, is the job's stored canonical text,
 * untouched; the scheduler reads it once through the engine's validator for
 * max_runtime_seconds, and a stored text the validator refuses fails the
 * job before a worker starts.  The scheduler knows no backend kind: a job of
 * kind "mpi" starts its ranks itself (server/cli/cmd_worker.c).
 * A checkpoint path the worker reports relative is taken relative to its
 * --out directory and stored absolute.  The checkpoints_kept newest are kept
 * (older ones deleted once a newer one is recorded); --resume gets the
 * newest that is on disk and passes checkpoint_ok, so a damaged latest
 * checkpoint falls back to the one before, and the job's metrics after its
 * step are discarded first so the resumed run neither duplicates nor skips
 * a step.
 *
 * worker_argv should name the program absolutely (the serve command can use
 * the readlink of /proc/self/exe): workers inherit the server's cwd and
 * environment.  A server killed without a drain leaves its workers running;
 * the next start kills them (after checking /proc/PID/cmdline really names
 * "--job ID") before re-queueing their jobs. */
#ifndef PT_SCHEDULER_H
#define PT_SCHEDULER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "server/sched/store_writer.h"

#define PT_SCHEDULER_DEFAULT_GRACE_S 10.0
#define PT_SCHEDULER_DEFAULT_MAX_ATTEMPTS 3
#define PT_SCHEDULER_DEFAULT_POLL_MS 1000
#define PT_SCHEDULER_ARGV_MAX 32         /* words in worker_argv */
#define PT_SCHEDULER_SLOTS_MAX 1024
#define PT_SCHEDULER_CHECKPOINTS_KEPT 2  /* default: a damaged newest one leaves another */
#define PT_SCHEDULER_CHECKPOINTS_MAX 16

/* Called after the scheduler changed a job (state, progress, metrics,
 * checkpoint) with the job's new version.  Runs on the store-writer thread:
 * keep it short and thread-safe (e.g. pt_watch_bump). */
typedef void (*pt_scheduler_change_fn)(void *ctx, const char *job_id, int64_t version);
/* Whether the checkpoint file at path can be resumed from (whole, readable);
 * 0 with the reason in why.  Runs on the store-writer thread. */
typedef int (*pt_scheduler_checkpoint_fn)(void *ctx, const char *path, char *why, size_t len);
/* Whether there is room to start a worker (the data directory's free space):
 * 1, or 0 with the reason in why.  While there is none, queued jobs stay
 * queued.  Runs on the store-writer thread. */
typedef int (*pt_scheduler_room_fn)(void *ctx, char *why, size_t len);
/* One line about something that went wrong or a job's fate; runs on the
 * scheduler's threads.  NULL logs to stderr. */
typedef void (*pt_scheduler_log_fn)(void *ctx, const char *line);

typedef struct pt_scheduler_options {
    const char *db_path;
    const char *data_dir;               /* jobs live in data_dir/jobs/ID */
    int slots;                          /* workers at once, 1..PT_SCHEDULER_SLOTS_MAX */
    const char *const *worker_argv;     /* NULL-terminated prefix, e.g. {"/bin/packtrain", "worker", NULL} */
    double max_runtime_s;               /* per run, when the config sets none; 0 = unlimited */
    double cancel_grace_s;              /* SIGTERM -> SIGKILL; 0 = PT_SCHEDULER_DEFAULT_GRACE_S */
    int max_attempts;                   /* crashes before failing; 0 = PT_SCHEDULER_DEFAULT_MAX_ATTEMPTS */
    int poll_interval_ms;               /* safety re-scan of the store; 0 = PT_SCHEDULER_DEFAULT_POLL_MS */
    uint64_t worker_memory_bytes;       /* resident memory of one job's processes; 0 = no limit
                                           (scheduler_memory.c) */
    int checkpoints_kept;               /* newest checkpoints kept per job, 2..PT_SCHEDULER_CHECKPOINTS_MAX;
                                           0 = PT_SCHEDULER_CHECKPOINTS_KEPT */
    pt_scheduler_checkpoint_fn checkpoint_ok;   /* NULL: a file that exists is usable */
    void *checkpoint_ctx;
    pt_scheduler_room_fn has_room;      /* NULL: always */
    void *room_ctx;
    pt_scheduler_change_fn on_change;   /* may be NULL */
    void *change_ctx;
    pt_scheduler_log_fn log;            /* may be NULL */
    void *log_ctx;
} pt_scheduler_options;

typedef struct pt_scheduler_stats {
    int slots;
    int active;             /* worker processes alive now */
    int peak_active;        /* most alive at once since start */
    int64_t spawned;        /* worker processes started */
    int64_t crashed;        /* worker runs that ended as a crash */
    int draining;
} pt_scheduler_stats;

typedef struct pt_sched_job pt_sched_job;

/* Everything below is private; the struct is public so callers can own it. */
typedef struct pt_scheduler {
    /* configuration, copied by init */
    char *db_path, *data_dir;
    char **worker_argv;
    int n_worker_argv;
    int slots, max_attempts, poll_ms, checkpoints_kept;
    double max_runtime_s, grace_s;
    uint64_t worker_memory_bytes, address_limit;
    pt_scheduler_checkpoint_fn checkpoint_ok;
    void *checkpoint_ctx;
    pt_scheduler_room_fn has_room;
    void *room_ctx;
    pt_scheduler_change_fn on_change;
    void *change_ctx;
    pt_scheduler_log_fn log;
    void *log_ctx;
    char errmsg[512];

    /* loop thread only */
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t poll_timer;
    pt_store_writer writer;
    pt_sched_job *jobs;     /* workers alive or finishing */
    int n_reserved;         /* slots taken by workers and by claims in flight */
    int poll_in_flight, poll_again, draining, drain_barrier, stopping;

    /* store-writer thread only */
    int no_room;                    /* the last poll found no room to start workers */
    struct pt_sched_exit *unrecorded;   /* workers' ends the store could not take yet */
    size_t n_unrecorded;

    /* shared with callers' threads, under mu */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int state;              /* new, running, drained, stopped (scheduler.c) */
    int req_notify, req_drain, req_stop;
    double req_grace_s;
    pt_scheduler_stats stats;
} pt_scheduler;

/* Validates and copies the options.  Returns 0, or -1 with the reason in
 * pt_scheduler_errmsg(). */
int pt_scheduler_init(pt_scheduler *s, const pt_scheduler_options *opt);
/* Opens the store, re-queues what a previous server left running (cancelling
 * ones become cancelled), then starts claiming.  Returns 0 or -1 (errmsg). */
int pt_scheduler_start(pt_scheduler *s);
/* Thread-safe: "look at the store again" (a job was queued or cancelled). */
void pt_scheduler_notify(pt_scheduler *s);
/* Thread-safe and blocking (so not from a signal handler: let the handler
 * wake a thread that calls this): stop claiming, SIGTERM every worker,
 * SIGKILL those still alive after grace_s, wait for them and for every
 * pending write.  Their jobs stay `running` in the store, so the next start
 * resumes them.  Returns 0; later calls, and calls before start, return at
 * once. */
int pt_scheduler_drain(pt_scheduler *s, double grace_s);
/* Drains (with cancel_grace_s) if needed, stops the threads and frees. */
void pt_scheduler_close(pt_scheduler *s);
const char *pt_scheduler_errmsg(const pt_scheduler *s);
/* Thread-safe snapshot. */
void pt_scheduler_stats_get(pt_scheduler *s, pt_scheduler_stats *out);

#endif
