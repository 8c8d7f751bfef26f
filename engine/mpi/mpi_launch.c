/* mpi_launch.c — building the mpirun command line of an mpi job (rules and
 * the reasons for each flag in mpi_launch.h).  Pure string work plus a PATH
 * search: it compiles and is tested with or without Open MPI. */
#include "engine/mpi/mpi_launch.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static const char *const default_env[] = {"PATH", "LD_LIBRARY_PATH", "OPENBLAS_NUM_THREADS",
                                          "OMP_NUM_THREADS", "PACKTRAIN_MPI_CHECK_EVERY", NULL};

void pt_mpi_launch_init(pt_mpi_launch *l)
{
    l->n = 0;
    l->used = 0;
    l->argv[0] = NULL;
}

int pt_mpi_launch_add(pt_mpi_launch *l, const char *word, pt_errors *errs)
{
    size_t len = strlen(word) + 1;
    if (l->n >= PT_MPI_LAUNCH_WORDS || len > sizeof l->text - l->used) {
        pt_errors_add(errs, "", 0, "mpirun", "the command line is too long (over %d words or "
                      "%d bytes) at \"%.40s\"", PT_MPI_LAUNCH_WORDS, PT_MPI_LAUNCH_TEXT, word);
        return -1;
    }
    char *dst = l->text + l->used;
    memcpy(dst, word, len);
    l->used += len;
    l->argv[l->n++] = dst;
    l->argv[l->n] = NULL;
    return 0;
}

/* "name" or "name:slots": a plain host name, so that it can neither be read
 * as an mpirun option nor reach a shell or ssh as anything but a name. */
static int host_ok(const char *h, size_t len)
{
    if (len == 0 || len > 253 || h[0] == '-' || h[0] == '.') return 0;
    size_t i = 0;
    for (; i < len && h[i] != ':'; i++)
        if (!isalnum((unsigned char)h[i]) && h[i] != '.' && h[i] != '-' && h[i] != '_') return 0;
    if (i == 0) return 0;
    if (i == len) return 1;
    if (++i == len || len - i > 6) return 0;   /* ":" then 1..6 digits */
    for (; i < len; i++)
        if (!isdigit((unsigned char)h[i])) return 0;
    return 1;
}

static void check_hosts(const char *hosts, pt_errors *errs)
{
    const char *p = hosts;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!host_ok(p, len))
            pt_errors_add(errs, "", 0, "hosts", "\"%.*s\" is not a host name (letters, digits, "
                          "'.', '-', '_', optionally \":slots\"), in \"%.80s\"",
                          (int)(len < 80 ? len : 80), p, hosts);
        if (!end) break;
        p = end + 1;
    }
}

static int add_words(pt_mpi_launch *l, const char *text, pt_errors *errs)
{
    const char *p = text;
    char word[1024];
    while (*p) {
        while (isspace((unsigned char)*p)) p++;
        size_t n = 0;
        while (p[n] && !isspace((unsigned char)p[n])) n++;
        if (n == 0) break;
        if (n >= sizeof word) {
            pt_errors_add(errs, "", 0, "PACKTRAIN_MPI_ARGS", "a word longer than %zu bytes",
                          sizeof word - 1);
            return -1;
        }
        memcpy(word, p, n);
        word[n] = '\0';
        if (pt_mpi_launch_add(l, word, errs)) return -1;
        p += n;
    }
    return 0;
}

int pt_mpi_launch_build(pt_mpi_launch *l, const pt_mpi_launch_opts *o, pt_errors *errs)
{
    pt_mpi_launch_init(l);
    size_t before = errs->total;
    int has_hosts = o->hosts && o->hosts[0], has_file = o->hostfile && o->hostfile[0];
    if (o->ranks < 1)
        pt_errors_add(errs, "", 0, "backend.ranks", "must be >= 1, got %d", (int)o->ranks);
    if (has_hosts && has_file)
        pt_errors_add(errs, "", 0, "hosts", "give hosts or a hostfile, not both (hosts \"%.60s\", "
                      "hostfile %.120s)", o->hosts, o->hostfile);
    if (has_hosts) check_hosts(o->hosts, errs);
    if (has_file && access(o->hostfile, R_OK) != 0)
        pt_errors_add(errs, o->hostfile, 0, "hostfile", "cannot read the MPI hostfile");
    if (errs->total != before) return -1;

    char np[16];
    snprintf(np, sizeof np, "%d", (int)o->ranks);
    const char *words[] = {o->mpirun ? o->mpirun : "mpirun", "-np", np, "--oversubscribe",
                           "--bind-to", "none", "--stdin", "none", "--mca", "mpi_yield_when_idle",
                           "1"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (pt_mpi_launch_add(l, words[i], errs)) return -1;
    if (o->as_root && pt_mpi_launch_add(l, "--allow-run-as-root", errs)) return -1;
    if (has_hosts && (pt_mpi_launch_add(l, "--host", errs) || pt_mpi_launch_add(l, o->hosts, errs)))
        return -1;
    if (has_file &&
        (pt_mpi_launch_add(l, "--hostfile", errs) || pt_mpi_launch_add(l, o->hostfile, errs)))
        return -1;
    for (const char *const *e = o->env ? o->env : default_env; *e; e++)
        if (getenv(*e) && (pt_mpi_launch_add(l, "-x", errs) || pt_mpi_launch_add(l, *e, errs)))
            return -1;
    if (o->extra && add_words(l, o->extra, errs)) return -1;
    return 0;
}

/* Slots of "a,b:4": 1 per host without ":N". */
static int64_t hosts_slots(const char *hosts)
{
    int64_t total = 0;
    for (const char *p = hosts; *p;) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        total += colon ? strtol(colon + 1, NULL, 10) : 1;
        p += len;
        if (*p == ',') p++;
    }
    return total;
}

/* Slots of a hostfile: "name slots=N" (or "slots = N"), 1 when a line names
 * a host without them; comments and blank lines count nothing. */
static int64_t hostfile_slots(const char *path, pt_errors *errs)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        pt_errors_add(errs, path, 0, "hostfile", "cannot read the MPI hostfile");
        return -1;
    }
    int64_t total = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\n")] = '\0';
        char *p = line + strspn(line, " \t\r");
        if (!*p) continue;
        const char *slots = strstr(p, "slots");
        while (slots && slots > p && slots[-1] == '_') slots = strstr(slots + 5, "slots");   /* max_slots */
        int64_t n = 1;
        if (slots) {
            const char *v = slots + 5 + strspn(slots + 5, " \t");
            if (*v == '=') n = strtol(v + 1, NULL, 10);
        }
        total += n > 0 ? n : 0;
    }
    fclose(f);
    return total;
}

int32_t pt_mpi_slots(const pt_mpi_launch_opts *o, const char *max_ranks, int cores, char *source,
                     size_t len, pt_errors *errs)
{
    int64_t n;
    if (max_ranks && max_ranks[0]) {
        char *end = NULL;
        long v = strtol(max_ranks, &end, 10);
        if (*end || v < 1 || v > 65536) {
            pt_errors_add(errs, "", 0, "PACKTRAIN_MPI_MAX_RANKS",
                          "must be an integer from 1 to 65536, got '%.32s'", max_ranks);
            return -1;
        }
        n = v;
        snprintf(source, len, "PACKTRAIN_MPI_MAX_RANKS");
    } else if (o->hosts && o->hosts[0]) {
        n = hosts_slots(o->hosts);
        snprintf(source, len, "the slots of PACKTRAIN_MPI_HOSTS");
    } else if (o->hostfile && o->hostfile[0]) {
        n = hostfile_slots(o->hostfile, errs);
        if (n < 0) return -1;
        snprintf(source, len, "the slots of the MPI hostfile");
    } else {
        n = cores;
        snprintf(source, len, "this machine's cores");
    }
    return n < 1 ? 1 : n > 65536 ? 65536 : (int32_t)n;
}

/* An executable named `name` on PATH, or `name` itself when it has a '/'. */
static int find_program(const char *name, char *out, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (!path || !path[0]) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        int w = snprintf(out, len, "%.*s/%s", (int)n, n ? path : ".", name);
        if (w > 0 && (size_t)w < len && access(out, X_OK) == 0) return 0;
        if (!end) break;
        path = end + 1;
    }
    return -1;
}

int pt_mpi_launch_opts_from_env(pt_mpi_launch_opts *o, char *mpirun_buf, size_t len,
                                pt_errors *errs)
{
    memset(o, 0, sizeof(*o));
    o->ranks = 1;
    const char *want = getenv("PACKTRAIN_MPIRUN");
    if (!want || !want[0]) want = "mpirun";
    if (find_program(want, mpirun_buf, len) != 0) {
        pt_errors_add(errs, "", 0, "backend.kind",
                      "\"mpi\" needs %s%s, not found (apt-get install openmpi-bin, or set "
                      "PACKTRAIN_MPIRUN)", want, strchr(want, '/') ? "" : " on PATH");
        return -1;
    }
    o->mpirun = mpirun_buf;
    o->hostfile = getenv("PACKTRAIN_MPI_HOSTFILE");
    o->hosts = getenv("PACKTRAIN_MPI_HOSTS");
    o->extra = getenv("PACKTRAIN_MPI_ARGS");
    o->as_root = geteuid() == 0;
    return 0;
}

int pt_mpi_launched(void)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    return size && size[0];
}

/* Appends to a bounded buffer; the length counts what did not fit too. */
typedef struct text_out {
    char *buf;
    size_t len, n;
} text_out;

static void put(text_out *t, const char *s)
{
    for (; *s; s++, t->n++)
        if (t->n + 1 < t->len) t->buf[t->n] = *s;
    if (t->len) t->buf[t->n < t->len ? t->n : t->len - 1] = '\0';
}

/* A word as the shell reads it back: as is when it is plain, else in single
 * quotes with each ' written as '\''. */
static void put_quoted(text_out *t, const char *w)
{
    int plain = w[0] != '\0';
    for (const char *p = w; *p && plain; p++)
        plain = isalnum((unsigned char)*p) || strchr("-_./:=,+@%", *p);
    if (plain) {
        put(t, w);
        return;
    }
    put(t, "'");
    for (const char *p = w; *p; p++) {
        char one[2] = {*p, '\0'};
        put(t, *p == '\'' ? "'\\''" : one);
    }
    put(t, "'");
}

void pt_mpi_launch_format(const pt_mpi_launch *l, char *buf, size_t len)
{
    text_out t = {buf, len, 0};
    if (len) buf[0] = '\0';
    for (int i = 0; i < l->n; i++) {
        if (i) put(&t, " ");
        put_quoted(&t, l->argv[i]);
    }
}
