/* test_same_origin.c — the browser-safety check of a server without tokens
 * (server/http/same_origin.h): which Host and Origin headers pass, which get
 * a 403, and what the 403 says.  The integration suites (api_hardening F9,
 * test_cors) run it through a real server. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "server/http/same_origin.h"

static const pt_same_origin plain = {"127.0.0.1", NULL, NULL};

/* -1 with a reason that contains `what`, or 0 (reason untouched) */
static int check(const pt_same_origin *s, const char *host, const char *origin, const char *what)
{
    char why[256] = "untouched";
    int rc = pt_same_origin_check(s, host, origin, why, sizeof why);
    if (rc == 0) {
        assert_string_equal(why, "untouched");
        return 0;
    }
    assert_int_equal(rc, -1);
    if (!strstr(why, what)) fail_msg("'%s' does not say '%s'", why, what);
    return rc;
}

static void test_loopback_hosts_pass(void **state)
{
    (void)state;
    const char *ok[] = {"localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:9", "127.1.2.3:80",
                        "[::1]:8080", "[::1]"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) assert_int_equal(check(&plain, ok[i], NULL, ""), 0);
}

static void test_foreign_hosts_refused(void **state)
{
    (void)state;
    /* a rebinding page reaches us under its own name; no Host at all is foreign too */
    assert_int_equal(check(&plain, "evil.example", NULL, "Host 'evil.example'"), -1);
    assert_int_equal(check(&plain, "evil.example:8080", NULL, "is not this server's name"), -1);
    assert_int_equal(check(&plain, "localhost.evil.example", NULL, "Host"), -1);
    assert_int_equal(check(&plain, "128.0.0.1", NULL, "Host"), -1);
    assert_int_equal(check(&plain, NULL, NULL, "Host ''"), -1);
    assert_int_equal(check(&plain, "", NULL, "Host ''"), -1);
    /* an IPv6 address in a Host header must be bracketed (RFC 3986 IP-literal) */
    assert_int_equal(check(&plain, "::1", NULL, "Host '::1'"), -1);
}

static void test_own_names_pass(void **state)
{
    (void)state;
    pt_same_origin s = {"10.1.2.3", "train.lab.example", NULL};
    assert_int_equal(check(&s, "10.1.2.3:8080", NULL, ""), 0);
    assert_int_equal(check(&s, "Train.Lab.Example:8080", NULL, ""), 0);
    assert_int_equal(check(&s, "other.lab.example", NULL, "Host"), -1);
    pt_same_origin empty = {"", "", NULL};   /* empty names never match an empty Host */
    assert_int_equal(check(&empty, "", NULL, "Host"), -1);
}

static void test_origins(void **state)
{
    (void)state;
    /* the server's own pages, under any of its names */
    assert_int_equal(check(&plain, "localhost:8080", "http://localhost:8080", ""), 0);
    assert_int_equal(check(&plain, "localhost:8080", "http://127.0.0.1:8080", ""), 0);
    assert_int_equal(check(&plain, "localhost:8080", "http://[::1]:8080", ""), 0);
    /* another site's page, sandboxed frames and files */
    assert_int_equal(check(&plain, "localhost:8080", "https://evil.example", "Origin 'https://evil.example'"),
                     -1);
    assert_int_equal(check(&plain, "localhost:8080", "null", "another site's page"), -1);
    /* the Host check comes first, whatever the Origin */
    assert_int_equal(check(&plain, "evil.example", "http://localhost:8080", "Host"), -1);
}

static void test_cors_list_lets_listed_origins_through(void **state)
{
    (void)state;
    pt_same_origin s = {"127.0.0.1", NULL, "https://app.example, null"};
    assert_int_equal(check(&s, "localhost", "https://app.example", ""), 0);
    assert_int_equal(check(&s, "localhost", "null", ""), 0);
    assert_int_equal(check(&s, "localhost", "https://app.example:444", "Origin"), -1);
    /* a listed Origin does not excuse a foreign Host */
    assert_int_equal(check(&s, "evil.example", "https://app.example", "Host"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback_hosts_pass),
        cmocka_unit_test(test_foreign_hosts_refused),
        cmocka_unit_test(test_own_names_pass),
        cmocka_unit_test(test_origins),
        cmocka_unit_test(test_cors_list_lets_listed_origins_through),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
