/* store.h — packtrain's SQLite persistence layer: datasets' metadata, jobs and
 * their state transitions, step/epoch metrics, checkpoint locations, hashed API
 * tokens and idempotency keys.  It knows nothing of HTTP or of the engine's math.
 *
 * Room store: SQLite persistence.  It includes no other room; knows no
 * HTTP, scheduler or engine math.
 *
 * Conventions (read these once, they hold for every function below):
 * - Handles: one pt_store per thread.  The connection is opened with
 *   SQLITE_OPEN_NOMUTEX, so a handle must never be used by two threads at once;
 *   open one handle per thread on the same file instead.  WAL mode lets any
 *   number of readers run beside one writer; writers queue on `busy_timeout`.
 * - Return values: every function returning int returns a pt_store_status; on
 *   anything but PT_STORE_OK, pt_store_errmsg() says what and where.
 * - Owners: every dataset/job call takes an `owner`.  Rows of another owner are
 *   invisible (PT_STORE_NOT_FOUND).  owner == NULL means "system scope" (the
 *   scheduler and worker bookkeeping); the HTTP layer must always pass one.
 * - Times are Unix microseconds (int64).  created_at is additionally forced to
 *   be strictly increasing per table, so "newest first" is creation order even
 *   when the wall clock steps back.
 * - Strings in row structs are fixed arrays, except JSON documents (`*_json`),
 *   which are heap copies owned by the struct: release with the matching
 *   *_clear() function (clearing a zeroed struct is fine).
 * - Doubles: a NaN is stored as SQL NULL and read back as NaN ("no value").
 * - Durability: writes that change what a user or the recovery code relies on
 *   (job state, datasets, tokens, idempotency keys, checkpoint records) commit
 *   with synchronous=FULL.  High-rate writes (step/epoch metrics, progress)
 *   commit with synchronous=NORMAL: safe against a process crash, and a later
 *   FULL commit on the same WAL (e.g. the next checkpoint record) makes them
 *   durable too, so no metric before a recorded checkpoint can be lost even to
 *   a power cut. */
#ifndef PT_STORE_H
#define PT_STORE_H

#include <stddef.h>
#include <stdint.h>

#define PT_STORE_ID_MAX 32          /* "job_" + 16 hex, "ds_" + 16 hex, "tok_" + 16 hex */
#define PT_STORE_OWNER_MAX 128
#define PT_STORE_NAME_MAX 256
#define PT_STORE_PATH_MAX 1024
#define PT_STORE_FORMAT_MAX 16
#define PT_STORE_STATUS_MAX 16
#define PT_STORE_REASON_MAX 512
#define PT_STORE_KEY_MAX 256        /* idempotency keys */
#define PT_STORE_HASH_HEX 65        /* SHA-256 as 64 lowercase hex + NUL */
#define PT_STORE_SECRET_MAX 72      /* "pt_" + 64 hex + NUL */
#define PT_STORE_PAGE_TOKEN_MAX 96
#define PT_STORE_PAGE_DEFAULT 20    /* list limit when the caller passes 0 */
#define PT_STORE_PAGE_MAX 100       /* larger limits are clamped to this */
#define PT_STORE_POINTS_DEFAULT 1000
#define PT_STORE_POINTS_MAX 10000
#define PT_STORE_BUSY_TIMEOUT_MS 10000

typedef enum pt_store_status {
    PT_STORE_OK = 0,
    PT_STORE_NOT_FOUND,             /* no such row for this owner (HTTP 404) */
    PT_STORE_INVALID,               /* bad argument: length, range, page token (400/422) */
    PT_STORE_CONFLICT,              /* row exists / not in a state that allows this (409) */
    PT_STORE_IN_USE,                /* dataset still used by an unfinished job (409) */
    PT_STORE_ILLEGAL_TRANSITION,    /* job state change not in the lifecycle (409) */
    PT_STORE_IDEMPOTENCY_MISMATCH,  /* same Idempotency-Key, different request (422) */
    PT_STORE_BUSY,                  /* database lock not obtained within busy_timeout (503) */
    PT_STORE_TOO_NEW,               /* database schema newer than this code */
    PT_STORE_IO                     /* any other SQLite / OS failure, incl. out of memory */
} pt_store_status;

typedef enum pt_job_state {
    PT_JOB_ANY = -1,                /* list filter only */
    PT_JOB_QUEUED = 0,
    PT_JOB_RUNNING,
    PT_JOB_CANCELLING,
    PT_JOB_SUCCEEDED,
    PT_JOB_FAILED,
    PT_JOB_CANCELLED,
    PT_JOB_STOPPED,                 /* ended early: max_runtime_seconds or a cancel while running */
    PT_JOB_STATE_COUNT
} pt_job_state;

typedef struct pt_store pt_store;

/* ---- handle ------------------------------------------------------------- */

/* Opens (creating if needed) the database at `path`, sets WAL, busy_timeout,
 * foreign keys and synchronous=FULL, and applies pending schema migrations in
 * one transaction.  On failure *out is NULL, the status says why and `err`
 * (may be NULL) holds the message. */
int pt_store_open(pt_store **out, const char *path, char *err, size_t errlen);
void pt_store_close(pt_store *s);
const char *pt_store_errmsg(const pt_store *s);
const char *pt_store_status_name(int status);
int pt_store_schema_version(pt_store *s, int *version);
/* The newest schema version this code knows. */
int pt_store_schema_latest(void);
/* Milliseconds a writer waits for the lock before PT_STORE_BUSY. */
int pt_store_set_busy_timeout(pt_store *s, int ms);

/* ---- helpers shared with the server -------------------------------------- */

/* prefix + 16 hex chars from getrandom(), e.g. "job_3f9a0c1d2e4b5a69". */
int pt_store_new_id(const char *prefix, char *out, size_t outlen);
void pt_store_sha256_hex(const void *data, size_t len, char out[PT_STORE_HASH_HEX]);
int64_t pt_store_now_us(void);

const char *pt_job_state_name(pt_job_state st);
/* Returns 0 and sets *st, or -1 for an unknown name. */
int pt_job_state_parse(const char *name, pt_job_state *st);
int pt_job_state_is_terminal(pt_job_state st);
/* 1 when the lifecycle allows from -> to. */
int pt_job_transition_allowed(pt_job_state from, pt_job_state to);

/* ---- datasets ------------------------------------------------------------ */

typedef struct pt_store_dataset {
    char id[PT_STORE_ID_MAX];        /* set by create when empty on input */
    char owner[PT_STORE_OWNER_MAX];
    char name[PT_STORE_NAME_MAX];
    char path[PT_STORE_PATH_MAX];
    char format[PT_STORE_FORMAT_MAX];  /* "extxyz", "xyz", "qm9", ... */
    char status[PT_STORE_STATUS_MAX];  /* "uploading", "ready", "failed"; jobs need "ready" */
    int64_t created_at;
    int64_t n_structs, n_atoms, bytes;
    char *report_json;               /* heap; NULL when absent */
    char content_sha256[PT_STORE_HASH_HEX];  /* of the file as uploaded; "" when unknown */
    char ingest_hash[PT_STORE_HASH_HEX];     /* the upload's identity (content and ingest options);
                                              * one dataset per identity and owner; "" = none */
} pt_store_dataset;

typedef struct pt_store_dataset_page {
    pt_store_dataset *items;
    size_t n;
    char next_token[PT_STORE_PAGE_TOKEN_MAX];  /* "" on the last page */
} pt_store_dataset_page;

void pt_store_dataset_clear(pt_store_dataset *d);
void pt_store_dataset_page_clear(pt_store_dataset_page *p);

/* Inserts `in` (id generated when in->id is empty; created_at set by the
 * store); `out` (may be NULL) receives the stored row. */
int pt_store_dataset_create(pt_store *s, const pt_store_dataset *in, pt_store_dataset *out);
/* With an ingest_hash that the owner already has, PT_STORE_CONFLICT and
 * *existing_id (may be NULL) names that dataset. */
int pt_store_dataset_create_unique(pt_store *s, const pt_store_dataset *in, pt_store_dataset *out,
                                   char existing_id[PT_STORE_ID_MAX]);
/* The owner's dataset of that upload identity; PT_STORE_NOT_FOUND when none. */
int pt_store_dataset_find_ingest(pt_store *s, const char *owner, const char *ingest_hash, pt_store_dataset *out);
/* Idempotency-Keys of uploads.  get: the request hash and dataset stored
 * under (owner, key), PT_STORE_NOT_FOUND when unused.  put: records it,
 * PT_STORE_CONFLICT when the key is taken (get it then).  A key goes with
 * its dataset. */
int pt_store_dataset_key_get(pt_store *s, const char *owner, const char *key, char request_hash[PT_STORE_HASH_HEX],
                             char dataset_id[PT_STORE_ID_MAX]);
int pt_store_dataset_key_put(pt_store *s, const char *owner, const char *key, const char *request_hash,
                             const char *dataset_id);
/* Updates status, counts and report of an existing dataset of `owner`. */
int pt_store_dataset_update(pt_store *s, const char *owner, const pt_store_dataset *d);
int pt_store_dataset_get(pt_store *s, const char *owner, const char *id, pt_store_dataset *out);
/* Newest first; limit 0 = PT_STORE_PAGE_DEFAULT; page_token NULL/"" = first page. */
int pt_store_dataset_list(pt_store *s, const char *owner, int limit, const char *page_token,
                          pt_store_dataset_page *out);
/* Refused with PT_STORE_IN_USE while a queued/running/cancelling job uses it;
 * finished jobs keep their row with dataset_id "".  `removed` (may be NULL)
 * receives the deleted row so the caller can unlink its file. */
int pt_store_dataset_delete(pt_store *s, const char *owner, const char *id, pt_store_dataset *removed);

/* ---- packing reports: a cache kept with the dataset (store_packing.c) ---- */
#define PT_STORE_PACKING_KEEP 32          /* reports kept per dataset, newest first */
#define PT_STORE_PACKING_PARAMS_MAX 512   /* the canonical parameter text */
/* The report stored for (dataset, params) as a heap JSON text in *json
 * (free()); PT_STORE_NOT_FOUND when none.  No owner: the caller has read the
 * dataset with its owner's scope first. */
int pt_store_packing_get(pt_store *s, const char *dataset_id, const char *params, char **json);
/* Stores or replaces it and keeps the dataset's newest PT_STORE_PACKING_KEEP;
 * PT_STORE_NOT_FOUND when the dataset is gone.  Deleting the dataset deletes
 * its reports. */
int pt_store_packing_put(pt_store *s, const char *dataset_id, const char *params, const char *json);

/* ---- jobs ---------------------------------------------------------------- */

typedef struct pt_store_job {
    char id[PT_STORE_ID_MAX];
    char owner[PT_STORE_OWNER_MAX];
    char dataset_id[PT_STORE_ID_MAX];  /* "" once the dataset was deleted */
    char config_hash[PT_STORE_HASH_HEX];  /* SHA-256 of config_json */
    char *config_json;                 /* heap */
    pt_job_state state;
    int64_t created_at, started_at, finished_at;  /* 0 = not yet */
    double progress;                   /* 0..1 */
    int64_t epoch, step;
    double best_val_mae;               /* NaN until an epoch reported val_mae */
    double latest_graphs_per_s;        /* NaN until progress reported it */
    char failure_reason[PT_STORE_REASON_MAX];
    int attempts;                      /* times the job entered `running` */
    int64_t worker_pid;                /* 0 when no worker */
    int64_t version;                   /* bumped on every state/progress change */
    char *result_json;                 /* heap; a finished run's result object (the
                                          worker's done line), NULL before */
    int64_t event_seq;                 /* the job's newest event id (0: none) */
    char name[PT_STORE_NAME_MAX];      /* "" when the submission gave none */
    char *tags_json;                   /* heap: a JSON array of strings ("[]") */
    char *metadata_json;               /* heap: a JSON object ("{}") */
    char stop_reason[PT_STORE_STATUS_MAX];  /* stopped jobs: "cancelled" or "max_runtime"; else "" */
} pt_store_job;

typedef struct pt_store_job_page {
    pt_store_job *items;
    size_t n;
    char next_token[PT_STORE_PAGE_TOKEN_MAX];
} pt_store_job_page;

typedef struct pt_store_job_array {   /* unpaginated lists (system scope) */
    pt_store_job *items;
    size_t n;
} pt_store_job_array;

typedef struct pt_store_job_request {
    const char *owner;
    const char *dataset_id;
    const char *config_json;           /* pass a canonical dump: its bytes are hashed */
    const char *idempotency_key;       /* NULL or "" for none */
    const char *name;                  /* NULL or "" for none */
    const char *tags_json;             /* compact JSON array of strings; NULL = "[]" */
    const char *metadata_json;         /* compact JSON object; NULL = "{}" */
} pt_store_job_request;

/* What GET /v1/jobs may filter on; a NULL member matches every job. */
typedef struct pt_store_job_filter {
    const char *state;                 /* a state's name */
    const char *dataset_id;
    const char *name;                  /* exact */
    const char *tag;                   /* one of the job's tags */
} pt_store_job_filter;

typedef struct pt_store_progress {
    double progress;                   /* 0..1 */
    int64_t epoch, step;
    double graphs_per_s;               /* NaN keeps the previous value */
} pt_store_progress;

typedef struct pt_store_transition {
    pt_job_state from;                 /* PT_JOB_ANY for the creation row */
    pt_job_state to;
    int64_t at;
    char reason[PT_STORE_REASON_MAX];
    int64_t event_id;
} pt_store_transition;

typedef struct pt_store_transition_list {
    pt_store_transition *items;
    size_t n;
} pt_store_transition_list;

void pt_store_job_clear(pt_store_job *j);
void pt_store_job_page_clear(pt_store_job_page *p);
void pt_store_job_array_clear(pt_store_job_array *l);
void pt_store_transition_list_clear(pt_store_transition_list *l);

/* Creates a queued job on a "ready" dataset of the same owner.  With an
 * idempotency key: same owner + key + same request (dataset_id, config_json,
 * name, tags, metadata) returns the existing job with *created = 0; a
 * different request under that key is PT_STORE_IDEMPOTENCY_MISMATCH.
 * `created` may be NULL. */
int pt_store_job_create(pt_store *s, const pt_store_job_request *req, pt_store_job *out, int *created);
int pt_store_job_get(pt_store *s, const char *owner, const char *id, pt_store_job *out);
/* Cheap poll for ETag / long-poll: the job's version and state. */
int pt_store_job_version(pt_store *s, const char *owner, const char *id, int64_t *version,
                         pt_job_state *state);
/* Owner's jobs, newest first, those matching every filter given (`filter`
 * may be NULL). */
int pt_store_job_list(pt_store *s, const char *owner, const pt_store_job_filter *filter, int limit,
                      const char *page_token, pt_store_job_page *out);
/* Deletes a final job with its transitions, metrics, checkpoint records and
 * idempotency keys; PT_STORE_CONFLICT while it is queued, running or
 * cancelling.  `removed` (may be NULL) receives the row. */
int pt_store_job_delete(pt_store *s, const char *owner, const char *id, pt_store_job *removed);
int pt_store_job_transitions(pt_store *s, const char *owner, const char *id,
                             pt_store_transition_list *out);

/* Moves the job to `to` if the lifecycle allows it, records the transition row
 * in the same transaction.  Side effects: ->running sets started_at (first
 * time) and attempts += 1; ->queued and terminal states clear worker_pid;
 * terminal states set finished_at; ->failed stores `reason` as failure_reason;
 * ->stopped sets stop_reason ("cancelled" from cancelling, "max_runtime" from
 * running: store_lifecycle.c).
 * `out` (may be NULL) receives the updated job. */
int pt_store_job_transition(pt_store *s, const char *owner, const char *id, pt_job_state to,
                            const char *reason, pt_store_job *out);
/* Cancel as the API means it: queued -> cancelled, running -> cancelling,
 * cancelling stays (OK); a finished job is PT_STORE_ILLEGAL_TRANSITION. */
int pt_store_job_cancel(pt_store *s, const char *owner, const char *id, const char *reason,
                        pt_store_job *out);
/* The calls below without an `owner` are system scope: the scheduler and the
 * worker bookkeeping use them, never on behalf of an HTTP caller. */

/* Atomically takes the oldest queued job and moves it to running;
 * PT_STORE_NOT_FOUND when nothing is queued. */
int pt_store_job_claim_next(pt_store *s, const char *reason, pt_store_job *out);
int pt_store_job_set_worker(pt_store *s, const char *id, int64_t pid);
/* Only while running or cancelling (else PT_STORE_CONFLICT). */
int pt_store_job_update_progress(pt_store *s, const char *id, const pt_store_progress *p);
/* The run's result, a JSON object (checked; PT_STORE_INVALID otherwise), kept
 * with the job; only while running or cancelling (else PT_STORE_CONFLICT). */
int pt_store_job_set_result(pt_store *s, const char *id, const char *result_json);
/* Jobs left running or cancelling (restart recovery), oldest first. */
int pt_store_job_list_unfinished(pt_store *s, pt_store_job_array *out);
/* counts[state] for one owner, or all owners when owner is NULL. */
int pt_store_job_count_by_state(pt_store *s, const char *owner, int64_t counts[PT_JOB_STATE_COUNT]);
/* *known = 1 when `owner` has used Idempotency-Key `key` (a retry of a
 * request already answered, which creates nothing). */
int pt_store_idempotency_known(pt_store *s, const char *owner, const char *key, int *known);
/* Deletes idempotency keys created before `before_us`; *n_removed may be NULL. */
int pt_store_idempotency_prune(pt_store *s, int64_t before_us, int64_t *n_removed);

/* ---- metrics and checkpoints --------------------------------------------- */

typedef struct pt_store_step_metric {
    int64_t step, epoch;
    double loss, mae, lr, graphs_per_s;
    int64_t at;                        /* 0 on input = now */
    char *json;                        /* extra fields; input: borrowed, output: heap */
    int64_t event_id;                  /* output only: its place in the job's events */
} pt_store_step_metric;

typedef struct pt_store_epoch_metric {
    int64_t epoch, step;
    double train_loss, train_mae, val_loss, val_mae, graphs_per_s, seconds;
    int64_t at;
    char *json;
    int64_t event_id;                  /* output only */
} pt_store_epoch_metric;

typedef struct pt_store_step_series {
    pt_store_step_metric *items;
    size_t n;
    int64_t total;                     /* rows after since_step before downsampling */
} pt_store_step_series;

typedef struct pt_store_epoch_series {
    pt_store_epoch_metric *items;
    size_t n;
} pt_store_epoch_series;

typedef struct pt_store_checkpoint {
    char job_id[PT_STORE_ID_MAX];
    int64_t step, epoch, created_at;
    char path[PT_STORE_PATH_MAX];
} pt_store_checkpoint;

void pt_store_step_series_clear(pt_store_step_series *s);
void pt_store_epoch_series_clear(pt_store_epoch_series *s);

/* Writers of metrics and checkpoints are system scope (no owner); readers
 * take the owner like every other HTTP-facing call. */

/* Inserts n steps in one transaction.  A step already stored for the job is
 * left exactly as it was (first write wins), so a resumed job can never
 * duplicate a step; *n_inserted (may be NULL) tells how many were new. */
int pt_store_steps_append(pt_store *s, const char *job_id, const pt_store_step_metric *rows,
                          size_t n, size_t *n_inserted);
/* Same rule per epoch; a new epoch with a val_mae lowers best_val_mae.
 * *inserted (may be NULL) is 0 when the epoch was already stored. */
int pt_store_epoch_append(pt_store *s, const char *job_id, const pt_store_epoch_metric *row,
                          int *inserted);
/* Steps with step > since_step, ascending.  When more than max_points match,
 * at most max_points of them: the first, the last, and in each of the equal
 * runs of rows between them the lowest and the highest loss (store_metrics.c).
 * max_points 0 = PT_STORE_POINTS_DEFAULT; otherwise 2..PT_STORE_POINTS_MAX. */
int pt_store_steps_read(pt_store *s, const char *owner, const char *job_id, int64_t since_step,
                        int max_points, pt_store_step_series *out);
/* Steps with step > since_step, ascending, every one (never thinned): the
 * first `limit` (1..PT_STORE_POINTS_MAX) of them; out->total counts all that
 * match, so a reader pages on from the last step returned while
 * total > n. */
int pt_store_steps_page(pt_store *s, const char *owner, const char *job_id, int64_t since_step, int limit,
                        pt_store_step_series *out);
int pt_store_epochs_read(pt_store *s, const char *owner, const char *job_id,
                         pt_store_epoch_series *out);
/* The job's newest step row (its json heap, release with free());
 * PT_STORE_NOT_FOUND when it has none yet. */
int pt_store_steps_last(pt_store *s, const char *owner, const char *job_id, pt_store_step_metric *out);
/* On resume from a checkpoint at `step`: forget steps after it and epochs
 * whose end step lies after it, so the series follows the resumed run. */
int pt_store_metrics_discard_after(pt_store *s, const char *job_id, int64_t step);

/* ---- events ---------------------------------------------------------------
 * Every transition, epoch and step row of a job has an event id: 1, 2, 3, ...
 * in the order they were stored (one sequence per job, jobs.event_seq), so
 * an event stream can resume after any id.  Rows discarded on a resume keep
 * their ids used; the rows that replace them get new, larger ones. */

typedef struct pt_store_events {
    pt_job_state state;                /* the job's state in the same snapshot */
    int64_t last_id;                   /* the job's newest event id */
    pt_store_transition_list transitions;  /* event_id > after, ascending */
    pt_store_epoch_series epochs;          /* event_id > after, ascending */
    pt_store_step_series steps;            /* event_id > after, ascending, thinned to max_steps */
} pt_store_events;

void pt_store_events_clear(pt_store_events *e);
/* The events after `after_id` in one read snapshot: every transition and
 * epoch, and the steps thinned like pt_store_steps_read to max_steps
 * (2..PT_STORE_POINTS_MAX), so a late reader of a long job is not sent every
 * step.  Every event up to last_id is covered. */
int pt_store_events_read(pt_store *s, const char *owner, const char *job_id, int64_t after_id, int max_steps,
                         pt_store_events *out);

/* Records (or re-records) the checkpoint of a job at a step; FULL sync. */
int pt_store_checkpoint_record(pt_store *s, const char *job_id, int64_t step, int64_t epoch,
                               const char *path);
int pt_store_checkpoint_latest(pt_store *s, const char *owner, const char *job_id,
                               pt_store_checkpoint *out);
/* The job's `max` newest recorded checkpoints, newest first, into out[0..*n). */
int pt_store_checkpoint_recent(pt_store *s, const char *owner, const char *job_id,
                               pt_store_checkpoint *out, size_t max, size_t *n);

/* ---- API tokens ---------------------------------------------------------- */

typedef struct pt_store_token {
    char id[PT_STORE_ID_MAX];
    char owner[PT_STORE_OWNER_MAX];
    char name[PT_STORE_NAME_MAX];
    int64_t created_at;
    int revoked;
} pt_store_token;

typedef struct pt_store_token_array {
    pt_store_token *items;
    size_t n;
} pt_store_token_array;

void pt_store_token_array_clear(pt_store_token_array *l);

/* Makes "pt_" + 64 hex (32 random bytes) into `secret`; only its SHA-256 is
 * stored.  `row` (may be NULL) receives the stored metadata. */
int pt_store_token_create(pt_store *s, const char *owner, const char *name,
                          char secret[PT_STORE_SECRET_MAX], pt_store_token *row);
/* PT_STORE_OK and the token's row when the secret is known and not revoked,
 * else PT_STORE_NOT_FOUND. */
int pt_store_token_verify(pt_store *s, const char *secret, pt_store_token *row);
int pt_store_token_revoke(pt_store *s, const char *owner, const char *token_id);
int pt_store_token_list(pt_store *s, const char *owner, pt_store_token_array *out);

#endif
