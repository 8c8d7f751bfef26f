/* access_log.c — one line per request; see access_log.h. */
#include "server/http/access_log.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* The target with access_token values hidden and unprintable bytes escaped,
 * so a log line never carries a credential or breaks the one-line format. */
static void target_for_log(const char *target, char *out, size_t cap)
{
    size_t n = 0;
    const char *p = target;
    while (*p && n + 8 < cap) {
        if ((p == target || p[-1] == '?' || p[-1] == '&') && !strncmp(p, "access_token=", 13)) {
            n += (size_t)snprintf(out + n, cap - n, "access_token=-");
            p += 13 + strcspn(p + 13, "&");
            continue;
        }
        unsigned char c = (unsigned char)*p++;
        if (c < 0x21 || c >= 0x7f || c == '"' || c == '\\') n += (size_t)snprintf(out + n, cap - n, "\\x%02x", c);
        else out[n++] = (char)c;
    }
    out[n] = '\0';
}

static const char *termination_name(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return "ok";
    case MHD_REQUEST_TERMINATED_WITH_ERROR: return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR: return "read-error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT: return "client-abort";
    }
    return "unknown";
}

void pt_http_client_address(struct MHD_Connection *conn, char *out, size_t cap)
{
    snprintf(out, cap, "-");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)cap);
}

void pt_access_log_write(FILE *log, const pt_request *req, struct MHD_Connection *conn,
                         enum MHD_RequestTerminationCode toe, double total_ms)
{
    char when[40], client[INET6_ADDRSTRLEN], target[512];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + n, sizeof when - n, ".%03ldZ", ts.tv_nsec / 1000000);
    pt_http_client_address(conn, client, sizeof client);
    target_for_log(req->target, target, sizeof target);
    fprintf(log, "%s %s \"%s %s\" %d %.3fms route=%s owner=%s%s%s\n", when, client,
            req->method ? req->method : "-", target, req->status, total_ms, req->route[0] ? req->route : "-",
            req->auth.owner[0] ? req->auth.owner : "-", toe != MHD_REQUEST_TERMINATED_COMPLETED_OK ? " end=" : "",
            toe != MHD_REQUEST_TERMINATED_COMPLETED_OK ? termination_name(toe) : "");
    fflush(log);
}

