/* Unit tests for controller/cmd_result.c: the `-o json` result document (v1, docs/protocol.md)
 * of deploy, rollback, plan and install: its members and their order, the outcome names, a
 * verb's own members (plan's "plans", install's "containers"), and that stdout carries that one
 * document and nothing else while the verb's own lines go to stderr. */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/state.h"
#include "common/log.h"
#include "controller/inventory.h"
#include "controller/transport/fleet.h"

static void test_doc_members(void **state)
{
    (void)state;
    const char *jobs[] = { "train" };
    json_t *plan = json_pack("{s:s,s:i}", "job", "train", "unreachable", 0);
    json_t *extra = json_pack("{s:[o]}", "plans", plan);
    json_t *d = cmd_result_doc("plan", jobs, 1, EXIT_OK, "ignored when ok", json_array(), extra);
    assert_non_null(d);
    const char *order[] = { "v", "kind", "jobs", "exit", "outcome", "error", "records", "plans" };
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v)
    {
        assert_true(i < sizeof order / sizeof order[0]);
        assert_string_equal(k, order[i]);
        i++;
    }
    assert_int_equal(i, sizeof order / sizeof order[0]);
    assert_int_equal(json_integer_value(json_object_get(d, "v")), 1);
    assert_string_equal(json_string_value(json_object_get(d, "kind")), "plan");
    assert_string_equal(json_string_value(json_object_get(d, "outcome")), "ok");
    assert_true(json_is_null(json_object_get(d, "error"))); /* ok: no reason, even if given */
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "jobs"), 0)), "train");
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(d, "plans"), 0), "job")),
                        "train");
    json_decref(d);
}

/* Without a verb's own members the document has the seven common ones (rollback, deploy); a
 * failure names its reason. */
static void test_doc_without_extra(void **state)
{
    (void)state;
    json_t *d = cmd_result_doc("install", NULL, 0, EXIT_FAIL, "cannot read agent binary 'x'", json_array(), NULL);
    assert_non_null(d);
    assert_int_equal(json_object_size(d), 7);
    assert_string_equal(json_string_value(json_object_get(d, "error")), "cannot read agent binary 'x'");
    assert_int_equal(json_array_size(json_object_get(d, "jobs")), 0);
    assert_string_equal(json_string_value(json_object_get(d, "outcome")), "failed");
    json_decref(d);
}

static void test_outcome_names(void **state)
{
    (void)state;
    static const struct {
        int code;
        const char *name;
    } want[] = {
        { EXIT_OK, "ok" },         { EXIT_FAIL, "failed" },          { EXIT_USAGE, "usage" },
        { EXIT_REVERTED, "reverted" }, { EXIT_REVERT_FAILED, "revert-failed" },
        { EXIT_HOSTKEY, "hostkey" }, { EXIT_NOT_REVERTED, "not-reverted" }, { EXIT_HELD, "held" },
        { EXIT_ENV_FAULT, "env-fault" }, { EXIT_TAKEN_OVER, "taken-over" }, { 99, "unknown" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *d = cmd_result_doc("deploy", NULL, 0, want[i].code, NULL, json_array(), NULL);
        assert_non_null(d);
        assert_int_equal(json_integer_value(json_object_get(d, "exit")), want[i].code);
        assert_string_equal(json_string_value(json_object_get(d, "outcome")), want[i].name);
        json_decref(d);
    }
}

/* begin() .. end(): what the verb printed went to stderr; stdout holds one document with the
 * history record the run appended and the verb's own members. */
/* A record as `drover history -o json` and the result documents show it: the members scripts
 * read, reason_code among them (added beside reason; nothing renamed). */
static void test_record_members(void **state)
{
    (void)state;
    struct history_entry h = { .time = 1764552000.5, .ktok_s = 41.2, .baseline_ktok_s = -1,
                               .reason_code = HISTORY_RC_ENVIRONMENT };
    strcpy(h.job, "train");
    strcpy(h.result, "failed");
    strcpy(h.reason, "h1:101: needs attention: environment fault: Xid 79");
    json_t *o = history_entry_json(&h);
    assert_non_null(o);
    static const char *const keys[] = { "time", "job", "release", "name", "result", "previous",
                                        "reason", "reason_code", "containers", "ktok_s",
                                        "baseline_ktok_s", "by" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_non_null(json_object_get(o, keys[i]));
    assert_int_equal(json_object_size(o), sizeof keys / sizeof keys[0]);
    assert_string_equal(json_string_value(json_object_get(o, "reason_code")), "environment");
    assert_true(json_is_null(json_object_get(o, "baseline_ktok_s")));
    assert_string_equal(json_string_value(json_object_get(o, "by")), "drover");
    json_decref(o);
    h.reason_code = HISTORY_RC_NONE;
    o = history_entry_json(&h);
    assert_string_equal(json_string_value(json_object_get(o, "reason_code")), "");
    json_decref(o);
}

static void test_begin_end_stdout(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-result-XXXXXX", out[64], err[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct inventory *inv = calloc(1, sizeof *inv);
    assert_non_null(inv);
    snprintf(inv->state_dir, sizeof inv->state_dir, "%s", dir);
    struct history_entry old = { .time = 1000, .job = "train", .result = "promoted", .ktok_s = -1,
                                 .baseline_ktok_s = -1 };
    assert_int_equal(state_history_append(dir, &old), 0); /* before the run: not in the document */

    fflush(stdout);
    fflush(stderr);
    int save_out = dup(STDOUT_FILENO), save_err = dup(STDERR_FILENO);
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fo >= 0 && fe >= 0);
    dup2(fo, STDOUT_FILENO);
    dup2(fe, STDERR_FILENO);
    close(fo);
    close(fe);

    struct cmd_result cr = { .saved_fd = -1 };
    assert_int_equal(cmd_result_begin(&cr), 0);
    printf("h1:101: agent started\n"); /* the verb's human line */
    /* the engine's clock (time(NULL) may lag it by a tick and read as before the run) */
    struct history_entry now = { .time = time_wall(), .job = "train", .result = "reverted",
                                 .reason = "throughput regression", .ktok_s = 41.5, .baseline_ktok_s = -1 };
    assert_int_equal(state_history_append(dir, &now), 0);
    cr.extra = json_pack("{s:[{s:s}]}", "containers", "container", "h1:101");
    const char *jobs[] = { "train" };
    assert_int_equal(cmd_result_end(&cr, inv, "install", jobs, 1, EXIT_REVERTED), EXIT_REVERTED);
    assert_null(cr.extra);

    fflush(stdout);
    fflush(stderr);
    dup2(save_out, STDOUT_FILENO);
    dup2(save_err, STDERR_FILENO);
    close(save_out);
    close(save_err);

    json_error_t je;
    json_t *d = json_load_file(out, 0, &je); /* fails on anything after the document */
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "kind")), "install");
    assert_string_equal(json_string_value(json_object_get(d, "outcome")), "reverted");
    /* no error line logged: the verdict's reason */
    assert_string_equal(json_string_value(json_object_get(d, "error")), "throughput regression");
    json_t *rec = json_object_get(d, "records");
    assert_int_equal(json_array_size(rec), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(rec, 0), "result")), "reverted");
    assert_true(json_is_null(json_object_get(json_array_get(rec, 0), "baseline_ktok_s")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(d, "containers"), 0),
                                                          "container")),
                        "h1:101");
    json_decref(d);
    FILE *fp = fopen(err, "r");
    char line[256] = "";
    assert_non_null(fp);
    assert_non_null(fgets(line, sizeof line, fp));
    fclose(fp);
    assert_string_equal(line, "h1:101: agent started\n");

    char rm[128];
    snprintf(rm, sizeof rm, "%s/history.jsonl", dir);
    unlink(rm);
    unlink(out);
    unlink(err);
    rmdir(dir);
    free(inv);
}

/* Run verb with -o json, stdout and stderr into files; the document read back (NULL if none). */
static json_t *run_json_verb(int (*verb)(struct fleet *, int, char **), char **argv, int argc, int *code)
{
    char dir[] = "/tmp/drover-test-result-XXXXXX", out[64], err[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct inventory *inv = calloc(1, sizeof *inv);
    assert_non_null(inv);
    snprintf(inv->state_dir, sizeof inv->state_dir, "%s", dir);
    struct fleet f;
    fleet_init(&f, inv, NULL);
    fflush(stdout);
    fflush(stderr);
    int save_out = dup(STDOUT_FILENO), save_err = dup(STDERR_FILENO);
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fo >= 0 && fe >= 0);
    dup2(fo, STDOUT_FILENO);
    dup2(fe, STDERR_FILENO);
    close(fo);
    close(fe);
    *code = verb(&f, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(save_out, STDOUT_FILENO);
    dup2(save_err, STDERR_FILENO);
    close(save_out);
    close(save_err);
    json_error_t je;
    json_t *d = json_load_file(out, 0, &je);
    fleet_done(&f);
    unlink(out);
    unlink(err);
    rmdir(dir);
    free(inv);
    return d;
}

/* A failure before any host is contacted (the release directory is missing) still writes the
 * document, and it says why: `drover deploy rel/missing -o json` used to print nothing. */
static void test_early_failure_writes_document(void **state)
{
    (void)state;
    static int (*const verbs[])(struct fleet *, int, char **) = { cmd_deploy, cmd_plan };
    static const char *const kinds[] = { "deploy", "plan" };
    for (size_t i = 0; i < 2; i++) {
        char *argv[] = { (char *)kinds[i], "/nonexistent/rel/missing", "-o", "json", NULL };
        int code = -1;
        json_t *d = run_json_verb(verbs[i], argv, 4, &code);
        assert_int_equal(code, EXIT_USAGE); /* bad input, not a failed deploy */
        assert_non_null(d);
        assert_string_equal(json_string_value(json_object_get(d, "kind")), kinds[i]);
        assert_string_equal(json_string_value(json_object_get(d, "outcome")), "usage");
        const char *e = json_string_value(json_object_get(d, "error"));
        assert_non_null(e);
        assert_non_null(strstr(e, "release directory '/nonexistent/rel/missing'"));
        /* each kind's own member is there, empty: deploy's "unchanged" (the jobs it found with
         * nothing to do), plan's "plans" */
        json_t *own = json_object_get(d, i == 0 ? "unchanged" : "plans");
        assert_true(json_is_array(own) && json_array_size(own) == 0);
        json_decref(d);
    }
}

/* end() names the last error logged since begin(), not one from before. */
static void test_error_is_this_runs(void **state)
{
    (void)state;
    log_error("an older error, before the run");
    struct cmd_result cr = { .saved_fd = -1 };
    assert_int_equal(cmd_result_begin(&cr), 0);
    char e[64];
    log_last_error(e, sizeof e);
    assert_string_equal(e, "");
    log_error("timed out connecting to '%s'", "h1");
    log_last_error(e, sizeof e);
    assert_string_equal(e, "timed out connecting to 'h1'");
    fflush(stdout);
    dup2(cr.saved_fd, STDOUT_FILENO);
    close(cr.saved_fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doc_members),
        cmocka_unit_test(test_doc_without_extra),
        cmocka_unit_test(test_outcome_names),
        cmocka_unit_test(test_record_members),
        cmocka_unit_test(test_begin_end_stdout),
        cmocka_unit_test(test_early_failure_writes_document),
        cmocka_unit_test(test_error_is_this_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
