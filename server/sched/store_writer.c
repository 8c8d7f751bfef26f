/* store_writer.c — the scheduler's database thread; see store_writer.h.
 *
 * Two singly linked FIFOs under one mutex: `pending` (loop -> writer) and `done`
 * (writer -> loop).  The writer never holds the mutex while running an op, so
 * a slow commit never blocks the loop thread's submit. */
#include "server/sched/store_writer.h"

#include <stdio.h>
#include <string.h>

static void queue_push(pt_store_op **head, pt_store_op **tail, pt_store_op *op)
{
    op->next = NULL;
    if (*tail) (*tail)->next = op;
    else *head = op;
    *tail = op;
}

static void *writer_main(void *arg)
{
    pt_store_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->pending_head && !w->stopping) pthread_cond_wait(&w->cond, &w->mu);
        pt_store_op *op = w->pending_head;
        if (!op) break;   /* stopping and nothing left */
        w->pending_head = op->next;
        if (!w->pending_head) w->pending_tail = NULL;
        pthread_mutex_unlock(&w->mu);

        op->work(w->store, op);

        pthread_mutex_lock(&w->mu);
        queue_push(&w->done_head, &w->done_tail, op);
        uv_async_send(&w->done_async);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Loop thread: runs every finished op's done callback, oldest first. */
static void run_done(pt_store_writer *w)
{
    for (;;) {
        pthread_mutex_lock(&w->mu);
        pt_store_op *op = w->done_head;
        w->done_head = w->done_tail = NULL;
        pthread_mutex_unlock(&w->mu);
        if (!op) return;
        while (op) {
            pt_store_op *next = op->next;   /* done may free op */
            if (op->done) op->done(op);
            op = next;
        }
    }
}

static void on_done_async(uv_async_t *h)
{
    run_done(h->data);
}

int pt_store_writer_init(pt_store_writer *w, uv_loop_t *loop, const char *db_path, char *err,
                         size_t errlen)
{
    memset(w, 0, sizeof(*w));
    char serr[512] = "";
    int rc = pt_store_open(&w->store, db_path, serr, sizeof(serr));
    if (rc != PT_STORE_OK) {
        snprintf(err, errlen, "cannot open the job database %s: %s", db_path, serr);
        return -1;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cond, NULL);
    rc = uv_async_init(loop, &w->done_async, on_done_async);
    if (rc == 0) {
        w->done_async.data = w;
        rc = pthread_create(&w->thread, NULL, writer_main, w);
        if (rc != 0) {
            snprintf(err, errlen, "cannot start the store writer thread: %s", strerror(rc));
            uv_close((uv_handle_t *)&w->done_async, NULL);
        }
    } else {
        snprintf(err, errlen, "cannot create the store writer's async handle: %s", uv_strerror(rc));
    }
    if (rc != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->mu);
        pt_store_close(w->store);
        w->store = NULL;
        return -1;
    }
    w->started = 1;
    return 0;
}

void pt_store_writer_submit(pt_store_writer *w, pt_store_op *op)
{
    pthread_mutex_lock(&w->mu);
    int inline_run = w->stopped;
    if (!inline_run) {
        queue_push(&w->pending_head, &w->pending_tail, op);
        pthread_cond_signal(&w->cond);
    }
    pthread_mutex_unlock(&w->mu);
    if (inline_run) {
        /* The thread is gone (shutdown): run here, in order, on this thread. */
        if (w->store) op->work(w->store, op);
        if (op->done) op->done(op);
    }
}

void pt_store_writer_close(pt_store_writer *w)
{
    if (!w->started) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_lock(&w->mu);
    w->stopped = 1;
    pthread_mutex_unlock(&w->mu);
    run_done(w);
    pt_store_close(w->store);
    w->store = NULL;
    w->started = 0;
    uv_close((uv_handle_t *)&w->done_async, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mu);
}
