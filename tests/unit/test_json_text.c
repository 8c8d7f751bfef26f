/* test_json_text.c — JSON text with shortest round-trip reals
 * (server/http/json_text.h): every real reads back to the same double with
 * no more digits than needed, against jansson's own output for everything
 * else (strings with escapes, keys in order, nesting, integers, literals). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/json_text.h"

static void expect_text(json_t *v, const char *want)
{
    size_t len = 0;
    char *got = pt_json_text(v, &len);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_int_equal(len, strlen(want));
    free(got);
    json_decref(v);
}

static void test_shortest_reals(void **state)
{
    (void)state;
    /* jansson alone prints 0.10000000000000001 and 0.33333333333333331 */
    expect_text(json_pack("[f,f,f,f,f,f]", 0.1, 1.0 / 3, 2.5e-7, 100.0, -0.0, 1e300),
                "[0.1,0.3333333333333333,2.5e-7,100.0,-0.0,1e300]");
    /* the least subnormal reads back from 15 digits (its shortest is 5e-324:
     * below DBL_MIN a double has fewer significant bits than the argument
     * in json_text.c assumes; such numbers may be longer than shortest) */
    expect_text(json_pack("[f,f]", 5e-324, DBL_MAX), "[4.94065645841247e-324,1.7976931348623157e308]");
    char buf[40];
    pt_json_real_text(0.1 + 0.2, buf, sizeof buf);
    assert_string_equal(buf, "0.30000000000000004");   /* needs all 17 */
    pt_json_real_text(1.0 / 3, buf, sizeof buf);
    assert_string_equal(buf, "0.3333333333333333");    /* 16 read back */
}

/* Random doubles of every magnitude: each reads back, and one digit fewer
 * would not (for those printed with more than 15). */
static void test_round_trip(void **state)
{
    (void)state;
    uint64_t s = 12345;
    for (int i = 0; i < 200000; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double x;
        uint64_t bits = s;
        memcpy(&x, &bits, sizeof x);
        if (!isfinite(x)) continue;
        char buf[40];
        int n = pt_json_real_text(x, buf, sizeof buf);
        assert_true(n > 0 && n < 32);
        assert_true(strtod(buf, NULL) == x);
        /* significant digits: leading zeros, sign and point aside */
        int digits = 0, lead = 1;
        for (const char *p = buf; *p && *p != 'e'; p++) {
            if (*p < '0' || *p > '9') continue;
            if (lead && *p == '0') continue;
            lead = 0;
            digits++;
        }
        assert_true(digits <= 17);
        /* more than 15: one fewer would not read back (15 or fewer is the
         * shortest, as %.15g rounds to the nearest such decimal) */
        if (digits > 15) {
            char probe[400];
            snprintf(probe, sizeof probe, "%.*g", digits - 1, x);
            assert_true(strtod(probe, NULL) != x);
        }
    }
}

/* Everything but reals is jansson's own text. */
static void test_same_as_jansson_otherwise(void **state)
{
    (void)state;
    json_t *v = json_pack("{s:s,s:[i,b,n,{s:s}],s:{},s:[],s:I}", "z\"q\\\n\xc3\xa9\x01", "t\tab", "list", 7, 1,
                          "k", "v", "empty", "none", "big", (json_int_t)9007199254740993LL);
    char *mine = pt_json_text(v, NULL);
    char *theirs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_string_equal(mine, theirs);
    free(mine);
    free(theirs);
    json_decref(v);
    expect_text(json_string("x"), "\"x\"");
    expect_text(json_integer(-3), "-3");
    assert_null(pt_json_text(NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortest_reals),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_same_as_jansson_otherwise),
    };
    return cmocka_run_group_tests_name("json_text", tests, NULL, NULL);
}
