/* scheduler_internal.h — what the scheduler's files share:
 *   scheduler.c         lifetime, the loop thread, claiming, drain;
 *   scheduler_worker.c  one worker process: spawn, stdout lines, signals, exit;
 *   scheduler_memory.c  a worker's memory budget and watch;
 *   scheduler_ops.c     the store operations run on the store-writer thread:
 *                       recovery, worker bookkeeping, a worker's end;
 *   scheduler_claim.c   the poll operation: cancels seen, jobs claimed and
 *                       prepared (also on the store-writer thread).
 * Everything here runs on the loop thread unless it says otherwise. */
#ifndef PT_SCHEDULER_INTERNAL_H
#define PT_SCHEDULER_INTERNAL_H

#include "server/sched/scheduler.h"
#include "server/sched/worker_proto.h"

/* Why the scheduler is stopping a worker (first reason wins). */
typedef enum pt_sched_stop {
    PT_SCHED_STOP_NONE = 0,
    PT_SCHED_STOP_CANCEL,     /* the job is cancelling */
    PT_SCHED_STOP_RUNTIME,    /* max_runtime_seconds passed */
    PT_SCHED_STOP_DRAIN       /* the server is shutting down */
} pt_sched_stop;

/* Everything needed to start a claimed job, prepared on the writer thread. */
typedef struct pt_sched_launch {
    char id[PT_STORE_ID_MAX];
    char out_dir[PT_STORE_PATH_MAX];
    char config_path[PT_STORE_PATH_MAX];
    char data_path[PT_STORE_PATH_MAX];
    char resume_path[PT_STORE_PATH_MAX];  /* "" = start from scratch */
    int64_t resume_step;                  /* -1 without a checkpoint */
    int attempt;                          /* this run's number (jobs.attempts) */
    double max_runtime_s;                 /* 0 = unlimited */
} pt_sched_launch;

/* How a worker run ended, handed to the finish operation. */
typedef struct pt_sched_exit {
    char id[PT_STORE_ID_MAX];
    char log_path[PT_STORE_PATH_MAX];
    int spawned;                          /* 0: the process never started */
    char spawn_error[256];
    int64_t exit_status;
    int term_signal;
    int saw_done, saw_error;
    char error_message[PT_STORE_REASON_MAX];
    pt_sched_stop stop;
    double max_runtime_s, grace_s;
    int killed;                           /* SIGKILL was needed */
    int out_of_memory;                    /* killed for memory (scheduler_memory.c) */
    char memory_why[256];
    uint64_t memory_peak, memory_budget;  /* bytes; budget 0 = none */
} pt_sched_exit;

/* The ends of workers the store could not record (a full disk fails its
 * commits too), tried again at every poll: the job would stay `running`
 * without a worker otherwise.  Store-writer thread. */
void pt_sched_record_unrecorded(pt_scheduler *s, pt_store *st);

#define PT_SCHED_READ_BUF 65536
#define PT_SCHED_FLUSH_MS 100
#define PT_SCHED_FLUSH_LINES 200
#define PT_SCHED_EOF_WAIT_MS 2000
#define PT_SCHED_MEMORY_MS 500                 /* memory watch period */
#define PT_SCHED_MEMORY_STUCK 4                /* samples at the address-space limit */
#define PT_SCHED_AS_BASE (512ull << 20)        /* address space reserved, not used ... */
#define PT_SCHED_AS_PER_CORE (256ull << 20)    /* ... and per core (arenas, BLAS buffers) */
#define PT_SCHED_AS_SLACK (64ull << 20)        /* "at the limit" */

struct pt_sched_job {
    pt_scheduler *sched;
    pt_sched_job *next;
    pt_sched_launch launch;
    uv_process_t proc;
    uv_pipe_t out;
    uv_timer_t kill_timer, runtime_timer, flush_timer, eof_timer, memory_timer;
    int open_handles;
    int log_fd;
    int64_t pid;
    char readbuf[PT_SCHED_READ_BUF];
    /* the line being assembled across reads */
    char *line;
    size_t line_len, line_cap, line_dropped;
    int64_t line_no;
    /* metrics waiting for the next flush */
    pt_store_step_metric *steps;
    size_t n_steps, cap_steps;
    int has_progress;
    pt_store_progress progress;
    double last_graphs_per_s;
    /* memory watch (scheduler_memory.c) */
    uint64_t memory_last;
    int memory_stuck;
    /* how it ends */
    pt_sched_exit exit;
    int exited, eof, finalized;
};

/* scheduler.c */
void pt_sched_log(pt_scheduler *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pt_sched_request_poll(pt_scheduler *s);
/* A job's handles are closed and its slot is free again. */
void pt_sched_job_released(pt_scheduler *s);

/* scheduler_worker.c */
void pt_sched_job_spawn(pt_scheduler *s, const pt_sched_launch *launch);
void pt_sched_job_stop(pt_sched_job *j, pt_sched_stop why, double grace_s);
pt_sched_job *pt_sched_job_find(pt_scheduler *s, const char *id);
/* Appends "[time scheduler] text" to a worker.log (any thread). */
void pt_sched_note_fd(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pt_sched_note_path(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "signal 11 (SIGSEGV)" or "status 3". */
void pt_sched_describe_exit(int64_t status, int term_signal, char *buf, size_t len);

/* scheduler_memory.c */
/* RLIMIT_AS for a budget: the budget plus what a process reserves unused. */
uint64_t pt_sched_address_limit(uint64_t budget, int cores);
/* After spawn: the address-space limit and oom_score_adj (0, or -1 noted). */
int pt_sched_memory_limit(pt_sched_job *j);
/* One sample of the worker's group; kills it over the budget. */
void pt_sched_memory_sample(pt_sched_job *j);
/* At exit: a SIGKILL nobody here sent, near the budget, was for memory. */
void pt_sched_memory_exit(pt_sched_job *j, int term_signal);
/* Resident bytes of every process in group `leader`, and the leader's
 * address space; -1 when no process of the group is left. */
int pt_sched_group_memory(int64_t leader, uint64_t *rss, uint64_t *leader_vsize);

/* scheduler_ops.c — submit functions (loop thread); their work runs on the
 * writer thread, their results come back to the loop thread. */
void pt_sched_submit_recover(pt_scheduler *s);
/* Writer thread: records a job's state change (logged) and announces it. */
int pt_sched_transition(pt_scheduler *s, pt_store *st, const char *id, pt_job_state to,
                        const char *reason);
/* Writer thread: tells the server's change listener the job's new version. */
void pt_sched_announce(pt_scheduler *s, pt_store *st, const char *id);
/* scheduler_claim.c: reads the states of `ids` (cancel detection) and claims up to `claims`
 * queued jobs; the result goes to pt_sched_poll_done. */
void pt_sched_submit_poll(pt_scheduler *s, int claims, const char (*ids)[PT_STORE_ID_MAX], size_t n_ids);
void pt_sched_poll_done(pt_scheduler *s, int claims, const char (*ids)[PT_STORE_ID_MAX],
                        const pt_job_state *states, size_t n_ids, const pt_sched_launch *launches,
                        size_t n_launches);
void pt_sched_submit_set_worker(pt_scheduler *s, const char *id, int64_t pid);
/* Takes ownership of steps (and their json), of epoch->json and of
 * result_json (a done line's result, stored with the job; may be NULL). */
void pt_sched_submit_record(pt_scheduler *s, const char *id, pt_store_step_metric *steps, size_t n_steps,
                            const pt_store_progress *progress, pt_store_epoch_metric *epoch,
                            const pt_worker_msg *checkpoint, const char *out_dir, char *result_json);
void pt_sched_submit_finish(pt_scheduler *s, const pt_sched_exit *e);
/* An op with no work: its done runs once every earlier op has. */
void pt_sched_submit_barrier(pt_scheduler *s, void (*done)(pt_scheduler *s));

#endif
