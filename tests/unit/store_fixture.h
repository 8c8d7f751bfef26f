/* store_fixture.h — a temporary store for the store tests: a fresh database
 * in its own directory under /tmp, rows to hang tests on, and removal of the
 * directory with the database's -wal and -shm files.
 *
 *   typedef store_fx fixture;
 *   setup:    store_fx_init(f, "store_jobs", 1), store_fx_dataset(f->s, "alice", "ready", f->ds)
 *   teardown: store_fx_close(f)
 *
 * Header-only (static inline). */
#ifndef PT_STORE_FIXTURE_H
#define PT_STORE_FIXTURE_H

#include "store/store.h"
#include "tests/unit/tmp_fixture.h"

typedef struct store_fx {
    char dir[64];
    char path[128];       /* DIR/db.sqlite */
    pt_store *s;          /* open on path; NULL with open_db 0 */
    char ds[PT_STORE_ID_MAX], ds2[PT_STORE_ID_MAX];   /* rows a test hangs on */
    char job[PT_STORE_ID_MAX];
} store_fx;

/* A new directory, and the database opened (and migrated) in it when
 * open_db.  Returns 0 or -1. */
static inline int store_fx_init(store_fx *f, const char *tag, int open_db)
{
    memset(f, 0, sizeof(*f));
    if (tfx_mkdtemp(f->dir, sizeof f->dir, tag) != 0) return -1;
    snprintf(f->path, sizeof f->path, "%s/db.sqlite", f->dir);
    return open_db && pt_store_open(&f->s, f->path, NULL, 0) != PT_STORE_OK ? -1 : 0;
}

static inline void store_fx_close(store_fx *f)
{
    if (f->s) pt_store_close(f->s);
    f->s = NULL;
    tfx_rmtree(f->dir);
}

/* A dataset row of owner in state status; its id in id.  Returns 0 or -1. */
static inline int store_fx_dataset(pt_store *s, const char *owner, const char *status,
                                   char id[PT_STORE_ID_MAX])
{
    pt_store_dataset d, out;
    memset(&d, 0, sizeof(d));
    snprintf(d.owner, sizeof(d.owner), "%s", owner);
    snprintf(d.name, sizeof(d.name), "set");
    snprintf(d.path, sizeof(d.path), "/data/set.xyz");
    snprintf(d.format, sizeof(d.format), "xyz");
    snprintf(d.status, sizeof(d.status), "%s", status);
    if (pt_store_dataset_create(s, &d, &out) != PT_STORE_OK) return -1;
    memcpy(id, out.id, PT_STORE_ID_MAX);
    pt_store_dataset_clear(&out);
    return 0;
}

/* A queued job of owner on dataset ds with config "{}"; its id in id. */
static inline int store_fx_job(pt_store *s, const char *owner, const char *ds, char id[PT_STORE_ID_MAX])
{
    pt_store_job_request req = {.owner = owner, .dataset_id = ds, .config_json = "{}"};
    pt_store_job job;
    if (pt_store_job_create(s, &req, &job, NULL) != PT_STORE_OK) return -1;
    memcpy(id, job.id, PT_STORE_ID_MAX);
    pt_store_job_clear(&job);
    return 0;
}

#endif
