/* controller/deploy/jobspec.c: the inventory's job spec per container as the digest activate
 * sends, and what a deploy says when the spec a container runs differs from it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/deploy/jobspec.h"

static struct inv_job *job(void)
{
    struct inv_job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    strcpy(j->name, "train");
    j->ncts = 3;
    j->nproc_per_node = 1;
    strcpy(j->command, "bin/drover-train");
    j->nargs = 1;
    strcpy(j->args[0], "train");
    j->nenv = 2;
    strcpy(j->env[0], "NCCL_DEBUG=WARN");
    strcpy(j->env[1], "OMP_NUM_THREADS=2");
    j->master_port = 29500;
    return j;
}

/* a container's status as an agent that ran spec d reports it */
static void runs(struct job_status *js, const struct spec_digest *d, int nproc)
{
    memset(js, 0, sizeof *js);
    strcpy(js->job, "train");
    strcpy(js->spec_digest, d->hex);
    strcpy(js->good_spec_digest, d->hex);
    strcpy(js->spec_fields, d->fields);
    js->nproc = nproc;
}

static void test_digest_per_container(void **state)
{
    (void)state;
    struct inv_job *j = job();
    struct spec_digest a0, a1, b0;
    assert_int_equal(jobspec_digest(j, 0, &a0), 0);
    assert_int_equal(jobspec_digest(j, 1, &a1), 0);
    assert_string_not_equal(a0.hex, a1.hex); /* node_rank is part of it */
    strcpy(j->env[0], "OMP_NUM_THREADS=2"); /* the same set, the other order */
    strcpy(j->env[1], "NCCL_DEBUG=WARN");
    assert_int_equal(jobspec_digest(j, 0, &b0), 0);
    assert_string_equal(a0.hex, b0.hex);
    j->grace_s = 99; /* not part of the spec: no relaunch for it alone */
    j->policy.silence_deadline_s = 7;
    assert_int_equal(jobspec_digest(j, 0, &b0), 0);
    assert_string_equal(a0.hex, b0.hex);
    free(j);
}

static void test_describe_change(void **state)
{
    (void)state;
    struct inv_job *j = job();
    struct spec_digest old, want;
    assert_int_equal(jobspec_digest(j, 0, &old), 0);
    struct job_status *js = calloc(1, sizeof *js);
    runs(js, &old, 1);
    char out[400];
    assert_true(jobspec_is_current(js, &old));
    assert_string_equal(jobspec_describe_change(j, js, &old, out, sizeof out), "");
    j->nproc_per_node = 2;
    strcpy(j->env[1], "OMP_NUM_THREADS=4");
    assert_int_equal(jobspec_digest(j, 0, &want), 0);
    assert_false(jobspec_is_current(js, &want));
    assert_string_equal(jobspec_describe_change(j, js, &want, out, sizeof out), "nproc_per_node 1 -> 2, env");
    /* an agent without the digest: unknown, and the deploy says why it relaunches */
    js->spec_digest[0] = '\0';
    js->spec_fields[0] = '\0';
    assert_false(jobspec_is_current(js, &want));
    assert_non_null(strstr(jobspec_describe_change(j, js, &want, out, sizeof out), "unknown"));
    free(js);
    free(j);
}

/* A spec change on probation (or left there by a drover killed -9): the agents run the new spec
 * on the good release, not promoted with it.  A deploy relaunches it and runs its probation, so
 * `deploy --dry-run` must not call it "already current" (it did: describe said "" and plan
 * compared the release alone). */
static void test_spec_not_promoted(void **state)
{
    (void)state;
    struct inv_job *j = job();
    struct spec_digest good, want;
    assert_int_equal(jobspec_digest(j, 0, &good), 0);
    strcpy(j->env[1], "OMP_NUM_THREADS=4");
    assert_int_equal(jobspec_digest(j, 0, &want), 0);
    struct job_status *js = calloc(1, sizeof *js);
    runs(js, &want, 1);
    strcpy(js->current, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    strcpy(js->good, js->current);
    strcpy(js->good_spec_digest, good.hex); /* promoted with the old spec only */
    char out[400];
    assert_true(jobspec_is_current(js, &want));
    assert_false(jobspec_is_settled(js, js->current, &want));
    assert_non_null(strstr(jobspec_describe_change(j, js, &want, out, sizeof out), "not promoted"));
    /* promoted: settled, nothing to say */
    strcpy(js->good_spec_digest, want.hex);
    assert_true(jobspec_is_settled(js, js->current, &want));
    assert_string_equal(jobspec_describe_change(j, js, &want, out, sizeof out), "");
    assert_true(jobspec_is_good_pair(js, js->current, &want));
    /* a release on probation with the good spec: not settled (the release is not promoted) */
    strcpy(js->good, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    assert_false(jobspec_is_settled(js, js->current, &want));
    /* ... while the good pair is still the good release with its spec, whatever runs */
    assert_true(jobspec_is_good_pair(js, js->good, &want));
    assert_false(jobspec_is_good_pair(js, js->current, &want));
    /* the good release with another spec than it was promoted with: not the good pair */
    assert_false(jobspec_is_good_pair(js, js->good, &good));
    /* no promoted spec recorded (an older agent): never */
    js->good_spec_digest[0] = '\0';
    assert_false(jobspec_is_good_pair(js, js->good, &want));
    assert_false(jobspec_is_good_pair(NULL, js->good, &want));
    assert_false(jobspec_is_settled(NULL, js->good, &want));
    /* the good pair, current, but another spec runs (a spec change on probation): not settled */
    strcpy(js->good, js->current);
    strcpy(js->good_spec_digest, want.hex);
    assert_true(jobspec_is_settled(js, js->current, &want));
    strcpy(js->spec_digest, good.hex);
    assert_true(jobspec_is_good_pair(js, js->current, &want));
    assert_false(jobspec_is_settled(js, js->current, &want));
    free(js);
    free(j);
}

/* A change of the spec alone is revertible only where the agent keeps a spec per (release,
 * spec): one that says spec-pairs, or reports the digest of what runs.  An agent older than
 * digests (no digest, no features) keeps one per release: deploy refuses there without --force. */
static void test_revertible_here(void **state)
{
    (void)state;
    struct inv_job *j = job();
    struct spec_digest d;
    assert_int_equal(jobspec_digest(j, 0, &d), 0);
    struct job_status js;
    runs(&js, &d, 1);
    assert_true(jobspec_revertible_here(&js, 0)); /* an agent of the digests, before features */
    memset(js.spec_digest, 0, sizeof js.spec_digest);
    assert_false(jobspec_revertible_here(&js, 0)); /* older than digests */
    assert_true(jobspec_revertible_here(&js, STATUS_FEAT_SPEC_PAIRS)); /* a spec from before them, new agent */
    assert_false(jobspec_revertible_here(NULL, STATUS_FEAT_PROMOTE_SPEC));
    assert_true(jobspec_revertible_here(NULL, STATUS_FEATURES_ALL));
    free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_per_container),
        cmocka_unit_test(test_describe_change),
        cmocka_unit_test(test_spec_not_promoted),
        cmocka_unit_test(test_revertible_here),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
