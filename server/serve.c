/* serve.c — the start and stop order of the packtrain service (serve.h). */
#include "server/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "server/api/routes.h"
#include "server/http/cors.h"

int pt_serve_is_loopback(const char *host)
{
    return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

int pt_serve_start(pt_app *app, const pt_app_options *opt, char *err, size_t errlen)
{
    if (pt_app_init(app, opt, err, errlen) != 0) return -1;
    if (pt_api_register(app, err, errlen) != 0) {
        pt_app_close(app);
        return -1;
    }
    return pt_app_start(app, err, errlen);
}

static int write_port_file(const char *path, unsigned port)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "%u\n", port);
    if (fclose(f) != 0) return -1;
    return rename(tmp, path);
}

static void say_listening(const pt_app *app)
{
    const pt_app_options *o = &app->opt;
    int v6 = strchr(o->host, ':') != NULL;
    fprintf(stderr, "packtrain: listening on http://%s%s%s:%u (auth %s, %d worker slot%s, data in %s)\n",
            v6 ? "[" : "", o->host, v6 ? "]" : "", pt_app_port(app), o->auth ? "on" : "off", o->workers,
            o->workers == 1 ? "" : "s", app->data_dir);
    if (!o->auth && !pt_serve_is_loopback(o->host))
        fprintf(stderr, "packtrain: warning: auth is off on a non-loopback address; anyone who can reach "
                        "it acts as owner '%s'\n", PT_APP_LOCAL_OWNER);
    if (pt_cors_enabled(o->cors_origins))
        fprintf(stderr, "packtrain: CORS on for %s%s\n", o->cors_origins,
                o->auth ? "" : "; auth is off, so their pages can act here as owner '" PT_APP_LOCAL_OWNER
                               "' from any visitor's browser (docs/api.md, CORS)");
}

int pt_serve_run(const pt_serve_options *o)
{
    /* Blocked before any thread exists, so every thread inherits the mask. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    pt_app app;
    char err[1024];
    if (pt_serve_start(&app, &o->app, err, sizeof err) != 0) {
        fprintf(stderr, "packtrain serve: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (o->demo_file && pt_app_load_demo(&app, o->demo_file, err, sizeof err) != 0) {
        fprintf(stderr, "packtrain serve: --demo: %s\n", err);
        rc = 1;
    }
    if (rc == 0 && o->port_file && write_port_file(o->port_file, pt_app_port(&app)) != 0) {
        fprintf(stderr, "packtrain serve: cannot write %s: %s\n", o->port_file, strerror(errno));
        rc = 1;
    }
    if (rc == 0) {
        say_listening(&app);
        int sig = 0;
        sigwait(&stop, &sig);
        fprintf(stderr, "packtrain: %s received, draining\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    pt_app_close(&app);
    if (rc == 0) fprintf(stderr, "packtrain: stopped\n");
    return rc;
}
