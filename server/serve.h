/* serve.h — server/serve, the packtrain service from start to stop: the
 * order in which the app, the API's routes, the scheduler and HTTP start,
 * the signals that stop it, and the drain.  It sits above server/api and
 * server/app and below the `serve` command (server/cli/cmd_serve.c), which
 * only turns flags and environment into pt_serve_options.
 *
 * Start: the app (data directory, database: a schema too new or an
 * unwritable file stops everything before anything is accepted), the API's
 * route table, then pt_app_start (scheduler, re-queueing what a previous
 * server left running; then HTTP).  Stop: the reverse (pt_app_close), so no
 * request ever sees a closed scheduler and no worker outlives the store it
 * reports to. */
#ifndef PT_SERVE_H
#define PT_SERVE_H

#include <stddef.h>

#include "server/app.h"

typedef struct pt_serve_options {
    pt_app_options app;
    const char *demo_file;   /* add the dataset "demo-qm9" from it unless present; NULL = none */
    const char *port_file;   /* write the bound port there once listening; NULL = none */
} pt_serve_options;

/* App, routes, scheduler and HTTP, in that order.  Returns 0, or -1 with the
 * reason in err and nothing left running. */
int pt_serve_start(pt_app *app, const pt_app_options *opt, char *err, size_t errlen);

/* Runs the service until SIGTERM or SIGINT, then drains it (requests finish,
 * workers are stopped; their jobs resume from their checkpoints at the next
 * start).  Signals are blocked in every thread (the mask is set before any
 * thread starts) and taken synchronously by sigwait on the calling thread, so
 * no handler ever runs inside libmicrohttpd, libuv or SQLite.  Returns the
 * process exit status (0, or 1 when it could not start). */
int pt_serve_run(const pt_serve_options *o);

/* Whether host is a loopback address (auth defaults to off there). */
int pt_serve_is_loopback(const char *host);

#endif
