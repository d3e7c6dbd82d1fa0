/* Unit tests for `drover plan` on a job that is stopped (controller/deploy/survey.c, print_plan,
 * and the line it shares with the deploy, controller/deploy/deploy.c stopped_start_*).
 * A deploy onto a stopped job starts it, and the deploy says so; plan, its dry run, showed the
 * containers "stopped" and said nothing of the start (the newcomer pass).  Now plan says that a
 * deploy would start it, in the deploy's words, and -o json has "starts_stopped". */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/status.h"
#include "controller/cmd.h"
#include "controller/deploy/deploy.h"
#include "controller/deploy/jobspec.h"
#include "controller/deploy/state.h"
#include "controller/inventory.h"
#include "controller/transport/fleet.h"
#include "tests/unit/capture.h"

#define REL_A "2ab918e64d0050a3735a94c0d07ca241638eb2f15a7c54bfcd3cb48c36b1e548"
#define REL_B "1111111111111111111111111111111111111111111111111111111111111111"

static void job_in(struct job_status *js, enum gang_state state, const char *current)
{
    memset(js, 0, sizeof *js);
    strcpy(js->job, "train");
    js->state = state;
    strcpy(js->current, current);
}

/* The one wording, in both tenses; only stopped containers with a release count, and `drover
 * start` is offered only when every one of them ran the release deployed. */
static void test_message(void **state)
{
    (void)state;
    struct stopped_start s;
    struct job_status js;
    char buf[1600];
    stopped_start_init(&s);
    assert_string_equal(stopped_start_message(&s, true, "train", "2ab918e64d00", "v1", buf, sizeof buf), "");
    assert_false(stopped_start_add(&s, "h1:100", NULL, REL_A)); /* the agent does not know the job */
    job_in(&js, GANG_RUNNING, REL_A);
    assert_false(stopped_start_add(&s, "h1:100", &js, REL_A));
    job_in(&js, GANG_STOPPED, "");
    assert_false(stopped_start_add(&s, "h1:100", &js, REL_A)); /* never deployed there */
    job_in(&js, GANG_STOPPED, REL_A);
    assert_true(stopped_start_add(&s, "h1:101", &js, REL_A));
    assert_true(stopped_start_add(&s, "h1:102", &js, REL_A));
    assert_string_equal(stopped_start_message(&s, false, "train", "2ab918e64d00", "v1", buf, sizeof buf),
                        "job 'train' is stopped in h1:101, h1:102 (`drover stop`, or its gang ended): "
                        "this deploy starts it, with release 2ab918e64d00 (v1) on probation; "
                        "`drover start --job train` starts the release it ran without a deploy");
    assert_string_equal(stopped_start_message(&s, true, "train", "2ab918e64d00", "v1", buf, sizeof buf),
                        "job 'train' is stopped in h1:101, h1:102 (`drover stop`, or its gang ended): "
                        "a deploy would start it, with release 2ab918e64d00 (v1) on probation; "
                        "`drover start --job train` starts the release it ran without a deploy");
    job_in(&js, GANG_STOPPED, REL_B); /* another release: drover start would not run this one */
    assert_true(stopped_start_add(&s, "h2:201", &js, REL_A));
    assert_string_equal(stopped_start_message(&s, true, "train", "2ab918e64d00", "v2", buf, sizeof buf),
                        "job 'train' is stopped in h1:101, h1:102, h2:201 (`drover stop`, or its gang "
                        "ended): a deploy would start it, with release 2ab918e64d00 (v2) on probation");
    /* bounded: many long labels are cut, never overrun */
    char label[200];
    memset(label, 'x', sizeof label - 1);
    label[sizeof label - 1] = '\0';
    for (int i = 0; i < 20; i++)
        assert_true(stopped_start_add(&s, label, &js, REL_A));
    assert_int_equal(s.n, 23);
    char small[64];
    stopped_start_message(&s, true, "train", "2ab918e64d00", "v2", small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* `drover plan` against two local roots whose agent (a script) says the job is stopped there
 * with the very release planned: plan says a deploy would start it, naming both; -o json says
 * which containers in "starts_stopped" and keeps stdout one document. */
static void test_plan_says_deploy_starts_stopped_job(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-plan-XXXXXX", path[512], text[2048], out[512], err[512], why[512];
    assert_non_null(mkdtemp(dir));
    setenv("DROVER_HASH_CACHE", "off", 1);
    /* the release: bin/t, the job's command */
    snprintf(path, sizeof path, "%s/rel", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/rel/bin", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/rel/bin/t", dir);
    capture_put(path, "#!/bin/sh\nexit 0\n", 0755);
    snprintf(text, sizeof text,
             "[drover]\nstate_dir = %s/state\n[host h1]\nlocal = true\nagent_path = %s/agent\n"
             "[job train]\ncontainers = h1:local:%s/a h1:local:%s/b\ncommand = bin/t\n",
             dir, dir, dir, dir);
    struct inventory *inv = NULL;
    assert_int_equal(inventory_parse(text, strlen(text), "/t/inv.ini", &inv, why, sizeof why), 0);

    /* the release's id, as plan computes it: a first plan against an agent that knows no job */
    struct agent_status st;
    fake_agent_status_init(&st);
    fake_agent(dir, &st);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    snprintf(path, sizeof path, "%s/rel", dir);
    char *argv_json[] = { "plan", path, "--job", "train", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_plan, inv, argv_json, 6, out, err), EXIT_OK);
    json_error_t je;
    json_t *d = json_load_file(out, 0, &je);
    assert_non_null(d);
    json_t *plan = json_array_get(json_object_get(d, "plans"), 0);
    assert_non_null(plan);
    char id[RELEASE_ID_LEN + 1];
    assert_non_null(json_string_value(json_object_get(plan, "release")));
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(plan, "release")));
    assert_int_equal(json_array_size(json_object_get(plan, "starts_stopped")), 0);
    json_decref(d);

    /* now the job is stopped there with that release */
    st.njobs = 1;
    job_in(&st.jobs[0], GANG_STOPPED, id);
    strcpy(st.jobs[0].good, id);
    strcpy(st.jobs[0].reason, "stopped by the operator");
    fake_agent(dir, &st);
    char *argv[] = { "plan", path, "--job", "train", NULL };
    assert_int_equal(capture_verb(cmd_plan, inv, argv, 4, out, err), EXIT_OK);
    char want[1200];
    snprintf(want, sizeof want, "job 'train' is stopped in h1:local:%s/a, h1:local:%s/b (`drover stop`, "
             "or its gang ended): a deploy would start it, with release %.12s (rel) on probation; "
             "`drover start --job train` starts the release it ran without a deploy\n", dir, dir, id);
    char *said = capture_slurp(out);
    assert_non_null(strstr(said, want));
    free(said);

    assert_int_equal(capture_verb(cmd_plan, inv, argv_json, 6, out, err), EXIT_OK);
    d = json_load_file(out, 0, &je); /* stdout: the document alone */
    assert_non_null(d);
    json_t *starts = json_object_get(json_array_get(json_object_get(d, "plans"), 0), "starts_stopped");
    assert_int_equal(json_array_size(starts), 2);
    snprintf(want, sizeof want, "h1:local:%s/a", dir);
    assert_string_equal(json_string_value(json_array_get(starts, 0)), want);
    snprintf(want, sizeof want, "h1:local:%s/b", dir);
    assert_string_equal(json_string_value(json_array_get(starts, 1)), want);
    json_decref(d);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* plan's throughput line and "throughput_rule", on a plan of job eval's release 'rel' with
 * bin/e, against the fake agent's st and a baseline of 7.6 Ktok/s in state_dir. */
static json_t *plan_tput(const char *dir, struct inventory *inv, const struct agent_status *st, char **ret_said)
{
    char path[512], out[512], err[512];
    fake_agent(dir, st);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    snprintf(path, sizeof path, "%s/rel", dir);
    char *argv[] = { "plan", path, "--job", "eval", NULL };
    assert_int_equal(capture_verb(cmd_plan, inv, argv, 4, out, err), EXIT_OK);
    *ret_said = capture_slurp(out);
    char *argv_json[] = { "plan", path, "--job", "eval", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_plan, inv, argv_json, 6, out, err), EXIT_OK);
    json_error_t je;
    json_t *d = json_load_file(out, 0, &je);
    assert_non_null(d);
    json_t *rule = json_object_get(json_array_get(json_object_get(d, "plans"), 0), "throughput_rule");
    assert_non_null(rule);
    json_incref(rule);
    json_decref(d);
    return rule;
}

/* A deploy of the job's good pair (its good release with the spec it was promoted with) skips
 * the throughput rule and keeps the baseline; plan, its dry run, did not say so: it showed the
 * baseline and the tolerance as for any deploy.  Now it says the rule is not judged, and why,
 * in its text and in -o json; any other deploy is judged. */
static void test_plan_says_good_pair_not_judged(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-plan-XXXXXX", path[512];
    assert_non_null(mkdtemp(dir));
    setenv("DROVER_HASH_CACHE", "off", 1);
    snprintf(path, sizeof path, "%s/rel", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/rel/bin", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/rel/bin/e", dir);
    capture_put(path, "#!/bin/sh\nexit 0\n", 0755);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "e");
    const struct inv_job *j = inventory_find_job(inv, "eval");
    assert_non_null(j);
    char key[1024];
    inventory_job_key(j, key, sizeof key);
    struct spec_digest spec;
    assert_int_equal(jobspec_digest(j, 0, &spec), 0);

    /* the release's id: a first plan against an agent that knows no job, and no baseline */
    struct agent_status st;
    fake_agent_status_init(&st);
    char *said;
    json_t *rule = plan_tput(dir, inv, &st, &said);
    assert_false(json_is_true(json_object_get(rule, "judged")));
    assert_non_null(strstr(json_string_value(json_object_get(rule, "why")), "no baseline yet"));
    json_decref(rule);
    free(said);
    snprintf(path, sizeof path, "%s/rel", dir);
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    char *argv_json[] = { "plan", path, "--job", "eval", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_plan, inv, argv_json, 6, out, err), EXIT_OK);
    json_error_t je;
    json_t *d = json_load_file(out, 0, &je);
    assert_non_null(d);
    char id[RELEASE_ID_LEN + 1];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(json_array_get(json_object_get(d, "plans"), 0), "release")));
    json_decref(d);
    snprintf(path, sizeof path, "%s/state", dir);
    assert_int_equal(state_baseline_set(path, key, id, 7.6), 0);

    /* the job stopped on that release, promoted with this very spec: not judged, baseline kept */
    st.njobs = 1;
    job_in(&st.jobs[0], GANG_STOPPED, id);
    strcpy(st.jobs[0].job, "eval");
    strcpy(st.jobs[0].good, id);
    strcpy(st.jobs[0].spec_digest, spec.hex);
    strcpy(st.jobs[0].good_spec_digest, spec.hex);
    rule = plan_tput(dir, inv, &st, &said);
    assert_non_null(strstr(said, "baseline: 7.6 Ktok/s (one number, no samples)"));
    assert_non_null(strstr(said, "throughput: not judged for this deploy: the job's good release with the "
                                 "job spec it was promoted with"));
    assert_non_null(strstr(said, "`drover rebaseline --job eval` measures it again"));
    assert_false(json_is_true(json_object_get(rule, "judged")));
    assert_non_null(strstr(json_string_value(json_object_get(rule, "why")), "could only revert it to itself"));
    json_decref(rule);
    free(said);

    /* the good release, promoted with another spec: a deploy of it is judged */
    memset(st.jobs[0].good_spec_digest, 'f', 64);
    st.jobs[0].good_spec_digest[64] = '\0';
    rule = plan_tput(dir, inv, &st, &said);
    assert_null(strstr(said, "throughput: not judged"));
    assert_true(json_is_true(json_object_get(rule, "judged")));
    assert_true(json_is_null(json_object_get(rule, "why")));
    json_decref(rule);
    free(said);
    inventory_free(inv);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message),
        cmocka_unit_test(test_plan_says_deploy_starts_stopped_job),
        cmocka_unit_test(test_plan_says_good_pair_not_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
