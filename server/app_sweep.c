/* app_sweep.c — what a server killed mid-work leaves in its data directory,
 * removed at the next start, before anything is accepted:
 *
 *   tmp/ (all of it)           uploads in flight (upload-*), predict's
 *                              temporary datasets: nothing there outlives
 *                              the request that made it;
 *   datasets/ds_* without row  a dataset whose ingest had not been recorded
 *                              (the row is written only once the .ptd is
 *                              complete, so such a directory is never listed);
 *   datasets/ID/...tmp...      the .ptd writer's temp files (data.ptd.tmpXXXXXX)
 *                              and any other half-written file of a dataset
 *                              that is recorded.
 *
 * Only one server may use a data directory (pt_app_lock_data_dir), so at
 * start nothing in those places belongs to a request still running.  Each
 * removal is logged with its size. */
#include "server/app.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct sweep {
    pt_app *app;
    FILE *log;
    uint64_t files, bytes;
} sweep;

static uint64_t g_tree_bytes;   /* nftw has no user pointer; sweeps run once, at start */

static int tree_remove(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag == FTW_F || flag == FTW_SL) g_tree_bytes += (uint64_t)st->st_size;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Removes a file or a whole directory; adds what it held to the tally. */
static void remove_entry(sweep *sw, const char *path, const char *what)
{
    g_tree_bytes = 0;
    int rc = nftw(path, tree_remove, 16, FTW_DEPTH | FTW_PHYS);
    if (rc != 0) {
        fprintf(sw->log, "packtrain: cannot remove %s (%s): %s\n", path, what, strerror(errno));
        return;
    }
    sw->files++;
    sw->bytes += g_tree_bytes;
    fprintf(sw->log, "packtrain: removed %s (%s, %.1f MB)\n", path, what, g_tree_bytes / 1e6);
}

static void sweep_tmp(sweep *sw)
{
    DIR *d = opendir(sw->app->tmp_dir);
    if (!d) return;
    char path[PATH_MAX];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (snprintf(path, sizeof path, "%s/%s", sw->app->tmp_dir, e->d_name) >= (int)sizeof path) continue;
        remove_entry(sw, path, "left in tmp/ by an earlier run");
    }
    closedir(d);
}

/* Inside a recorded dataset: files whose name holds ".tmp" are the .ptd
 * writer's (and any cache writer's) unfinished output. */
static void sweep_dataset_dir(sweep *sw, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char path[PATH_MAX];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".tmp")) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        remove_entry(sw, path, "a half-written file of a recorded dataset");
    }
    closedir(d);
}

static void sweep_datasets(sweep *sw, pt_store *s)
{
    DIR *d = opendir(sw->app->datasets_dir);
    if (!d) return;
    char path[PATH_MAX];
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "ds_", 3) != 0) continue;
        if (snprintf(path, sizeof path, "%s/%s", sw->app->datasets_dir, e->d_name) >= (int)sizeof path) continue;
        pt_store_dataset row = {0};
        int rc = pt_store_dataset_get(s, NULL, e->d_name, &row);
        pt_store_dataset_clear(&row);
        if (rc == PT_STORE_NOT_FOUND || rc == PT_STORE_INVALID)
            remove_entry(sw, path, "a dataset whose upload never completed");
        else if (rc == PT_STORE_OK)
            sweep_dataset_dir(sw, path);
        else
            fprintf(sw->log, "packtrain: cannot check %s against the database: %s\n", path, pt_store_errmsg(s));
    }
    closedir(d);
}

int pt_app_sweep(pt_app *app, char *err, size_t errlen)
{
    sweep sw = {.app = app, .log = app->opt.log ? app->opt.log : stderr};
    pt_store *s = pt_app_store_acquire(app, err, errlen);
    if (!s) return -1;
    sweep_tmp(&sw);
    sweep_datasets(&sw, s);
    pt_app_store_release(app, s);
    if (sw.files)
        fprintf(sw.log, "packtrain: swept %llu leftover%s of an earlier run (%.1f MB)\n",
                (unsigned long long)sw.files, sw.files == 1 ? "" : "s", sw.bytes / 1e6);
    fflush(sw.log);
    return 0;
}

int pt_app_lock_data_dir(pt_app *app, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/packtrain.lock", app->data_dir) >= (int)sizeof path)
        return pt_err_printf(err, errlen, "data directory path %s is too long", app->data_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return pt_err_printf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        close(fd);
        if (busy)
            return pt_err_printf(err, errlen, "the data directory %s is in use by another packtrain server "
                                 "(%s is locked); stop it, or give this one another --data-dir",
                                 app->data_dir, path);
        return pt_err_printf(err, errlen, "cannot lock %s: %s", path, strerror(errno));
    }
    app->lock_fd = fd;
    return 0;
}
