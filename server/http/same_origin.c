/* same_origin.c — the Host and Origin checks of a server without tokens;
 * see same_origin.h. */
#include "server/http/same_origin.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/http/cors.h"

/* The host of "host", "host:port", "[v6]:port" or "scheme://host[:port]/..."
 * into out; "" when there is none. */
static void host_part(const char *v, char *out, size_t cap)
{
    const char *p = strstr(v, "://");
    p = p ? p + 3 : v;
    size_t n;
    if (*p == '[') {
        p++;
        n = strcspn(p, "]");
    } else {
        n = strcspn(p, ":/");
    }
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

static int host_allowed(const pt_same_origin *s, const char *host)
{
    if (!strcasecmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1")) return 1;
    if (s->bind_address && s->bind_address[0] && !strcasecmp(host, s->bind_address)) return 1;
    return s->host_name && s->host_name[0] && !strcasecmp(host, s->host_name);
}

int pt_same_origin_check(const pt_same_origin *s, const char *host_hdr, const char *origin,
                         char *why, size_t cap)
{
    char host[256];
    host_part(host_hdr ? host_hdr : "", host, sizeof host);
    if (!host_allowed(s, host)) {
        snprintf(why, cap, "Host '%.100s' is not this server's name: without tokens (auth off) only "
                           "loopback names and the server's own address are answered",
                           host_hdr ? host_hdr : "");
        return -1;
    }
    if (!origin || pt_cors_origin_allowed(s->cors_origins, origin)) return 0;   /* the operator's list */
    host_part(origin, host, sizeof host);
    if (strcmp(origin, "null") != 0 && host_allowed(s, host)) return 0;
    snprintf(why, cap, "requests from another site's page (Origin '%.100s') are refused: without tokens "
                       "(auth off) only this server's own pages may call it", origin);
    return -1;
}
