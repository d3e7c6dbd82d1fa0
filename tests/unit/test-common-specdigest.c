/* common/specdigest.c: the job spec digest the controller sends with activate and the agent
 * reports back (docs/protocol.md, "Job spec digest"): stable (a pinned value: the canonical form
 * never changes under a version), env hashed as a set, args in order, each field its own digest,
 * and the status document carrying it, or not (older agents' documents stay readable). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/specdigest.h"
#include "common/status.h"

static const char *const env2[] = { "NCCL_DEBUG=WARN", "OMP_NUM_THREADS=4" };
static const char *const env2r[] = { "OMP_NUM_THREADS=4", "NCCL_DEBUG=WARN" };
static const char *const args3[] = { "train", "--config", "etc/train.ini" };
static const char *const args3r[] = { "--config", "train", "etc/train.ini" };

static struct launch_spec base(void)
{
    struct launch_spec s = {
        .job = "train", .nnodes = 3, .node_rank = 1, .nproc_per_node = 1, .gpus = "",
        .master_addr = "", .master_port = 29500, .nenv = 2, .env = env2,
        .command = "bin/drover-train", .nargs = 3, .args = args3,
    };
    return s;
}

static void digest(const struct launch_spec *s, struct spec_digest *d)
{
    assert_int_equal(spec_digest_compute(s, d), 0);
    assert_true(spec_digest_is_valid(d->hex));
    assert_true(spec_fields_is_valid(d->fields));
}

static void test_stable_and_canonical(void **state)
{
    (void)state;
    struct launch_spec s = base();
    struct spec_digest a, b;
    digest(&s, &a);
    digest(&s, &b);
    assert_string_equal(a.hex, b.hex);
    /* pinned: a change here changes every recorded digest, and every job relaunches at the next
     * deploy.  Only with a new version string in the canonical form. */
    assert_string_equal(a.hex, "27e979e7bdb0ae51bde3ab6082d2e470f00bc1d20153268a07051ba965e6aff6");
    /* env is a set: its order in the inventory is not the spec's */
    s.env = env2r;
    digest(&s, &b);
    assert_string_equal(a.hex, b.hex);
    assert_string_equal(a.fields, b.fields);
    /* args are a list: their order is */
    s = base();
    s.args = args3r;
    digest(&s, &b);
    assert_string_not_equal(a.hex, b.hex);
    char names[200];
    assert_int_equal(spec_fields_diff(a.fields, b.fields, names, sizeof names), 1);
    assert_string_equal(names, "arg");
    /* NULL and "" are the same string */
    s = base();
    s.gpus = NULL;
    s.master_addr = NULL;
    digest(&s, &b);
    assert_string_equal(a.hex, b.hex);
    /* length-prefixed: moving a byte from one arg to the next is another spec */
    static const char *const x1[] = { "ab", "c" }, *const x2[] = { "a", "bc" };
    s = base();
    s.nargs = 2;
    s.args = x1;
    digest(&s, &a);
    s.args = x2;
    digest(&s, &b);
    assert_string_not_equal(a.hex, b.hex);
}

/* every field changes the digest, and only its own field digest */
static void test_each_field(void **state)
{
    (void)state;
    struct launch_spec s0 = base();
    struct spec_digest a;
    digest(&s0, &a);
    static const char *const env1[] = { "NCCL_DEBUG=INFO", "OMP_NUM_THREADS=4" };
    static const char *const args2[] = { "train", "--config" };
    for (int f = 0; f < SPEC_F_COUNT; f++) {
        struct launch_spec s = base();
        switch ((enum spec_field)f) {
        case SPEC_F_JOB: s.job = "train2"; break;
        case SPEC_F_NNODES: s.nnodes = 4; break;
        case SPEC_F_NODE_RANK: s.node_rank = 2; break;
        case SPEC_F_NPROC: s.nproc_per_node = 2; break;
        case SPEC_F_GPUS: s.gpus = "0"; break;
        case SPEC_F_MASTER_ADDR: s.master_addr = "10.0.0.1"; break;
        case SPEC_F_MASTER_PORT: s.master_port = 29501; break;
        case SPEC_F_ENV: s.env = env1; break;
        case SPEC_F_COMMAND: s.command = "./launch.sh"; break;
        case SPEC_F_ARGS: s.nargs = 2; s.args = args2; break;
        case SPEC_F_COUNT: break;
        }
        struct spec_digest b;
        digest(&s, &b);
        assert_string_not_equal(a.hex, b.hex);
        char names[200];
        assert_int_equal(spec_fields_diff(a.fields, b.fields, names, sizeof names), 1);
        assert_string_equal(names, spec_field_name((enum spec_field)f));
    }
    /* two at once, in field order */
    struct launch_spec s = base();
    s.nproc_per_node = 2;
    s.env = env1;
    struct spec_digest b;
    digest(&s, &b);
    char names[200];
    assert_int_equal(spec_fields_diff(a.fields, b.fields, names, sizeof names), 2);
    assert_string_equal(names, "nproc_per_node, env");
    assert_int_equal(spec_fields_diff(a.fields, a.fields, names, sizeof names), 0);
    assert_string_equal(names, "");
    /* a field one side lacks counts as changed (a newer controller's field) */
    assert_int_equal(spec_fields_diff("job:0123456789abcdef", "job:0123456789abcdef,x:0123456789abcdef",
                                      names, sizeof names), 1);
    assert_string_equal(names, "x");
}

static void test_limits_and_validation(void **state)
{
    (void)state;
    struct spec_digest d;
    memset(&d, 'z', sizeof d);
    struct launch_spec s = base();
    s.nenv = -1;
    assert_int_equal(spec_digest_compute(&s, &d), -EINVAL);
    s = base();
    s.nenv = 300;
    assert_int_equal(spec_digest_compute(&s, &d), -EINVAL);
    s = base();
    s.nargs = 1;
    s.args = NULL;
    assert_int_equal(spec_digest_compute(&s, &d), -EINVAL);
    assert_int_equal(d.hex[0], 'z'); /* untouched on failure */
    assert_false(spec_digest_is_valid(""));
    assert_false(spec_digest_is_valid("ABCDEF0000000000000000000000000000000000000000000000000000000000"));
    assert_false(spec_digest_is_valid("abc"));
    assert_false(spec_fields_is_valid(""));
    assert_false(spec_fields_is_valid("job:0123456789abcdef,"));
    assert_false(spec_fields_is_valid("job:0123456789abcde"));
    assert_false(spec_fields_is_valid("Job:0123456789abcdef"));
    assert_false(spec_fields_is_valid("job:0123456789abcdefg"));
    assert_false(spec_fields_is_valid("job0123456789abcdef"));
    assert_true(spec_fields_is_valid("job:0123456789abcdef"));
    char names[8];
    assert_int_equal(spec_fields_diff("bad", "job:0123456789abcdef", names, sizeof names), -EINVAL);
    assert_string_equal(names, "");
}

/* The status document carries the digests; a document without them (an older agent) reads as
 * "" (unknown: the controller redeploys); a malformed one is refused. */
static void test_status_round_trip(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    assert_non_null(st);
    assert_non_null(back);
    strcpy(st->host, "ct101");
    st->njobs = 2;
    struct launch_spec s = base();
    struct spec_digest d;
    digest(&s, &d);
    strcpy(st->jobs[0].job, "train");
    strcpy(st->jobs[0].spec_digest, d.hex);
    strcpy(st->jobs[0].good_spec_digest, d.hex);
    strcpy(st->jobs[0].spec_fields, d.fields);
    strcpy(st->jobs[1].job, "old"); /* without: left out of the document */
    char *text = NULL;
    assert_int_equal(status_format(st, &text), 0);
    assert_non_null(strstr(text, "\"spec_digest\""));
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    free(text);
    assert_string_equal(back->jobs[0].spec_digest, d.hex);
    assert_string_equal(back->jobs[0].good_spec_digest, d.hex);
    assert_string_equal(back->jobs[0].spec_fields, d.fields);
    assert_string_equal(back->jobs[1].spec_digest, "");
    assert_string_equal(back->jobs[1].spec_fields, "");
    const char *old = "{\"v\":1,\"host\":\"h\",\"agent_pid\":1,\"agent_version\":\"1\",\"uptime_s\":1,"
                      "\"seq\":0,\"jobs\":[{\"job\":\"train\",\"current\":\"\",\"state\":\"running\"}]}";
    assert_int_equal(status_parse(old, strlen(old), back), 0);
    assert_string_equal(back->jobs[0].spec_digest, "");
    assert_string_equal(back->jobs[0].good_spec_digest, "");
    const char *bad[] = {
        "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"spec_digest\":\"xyz\"}]}",
        "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"spec_digest\":5}]}",
        "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"good_spec_digest\":\"ABC\"}]}",
        "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"spec_fields\":\"job:zz\"}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(status_parse(bad[i], strlen(bad[i]), back), -EINVAL);
    free(st);
    free(back);
}

/* promote --spec-digest's rule: no digest asked (an older controller) accepts what runs; a
 * digest asked matches only exactly, never an unknown running spec. */
static void test_matches(void **state)
{
    (void)state;
    const char *d1 = "1111111111111111111111111111111111111111111111111111111111111111";
    const char *d2 = "2222222222222222222222222222222222222222222222222222222222222222";
    assert_true(spec_digest_matches(d1, NULL));
    assert_true(spec_digest_matches(d1, ""));
    assert_true(spec_digest_matches("", ""));
    assert_true(spec_digest_matches(d1, d1));
    assert_false(spec_digest_matches(d1, d2));
    assert_false(spec_digest_matches("", d1));
    assert_false(spec_digest_matches(NULL, d1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stable_and_canonical),
        cmocka_unit_test(test_each_field),
        cmocka_unit_test(test_limits_and_validation),
        cmocka_unit_test(test_status_round_trip),
        cmocka_unit_test(test_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
