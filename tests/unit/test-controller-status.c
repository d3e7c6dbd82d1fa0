/* Unit tests for controller/cmd_status.c: what `drover status` shows for a rank without data,
 * and an unanswering container that runs two jobs said once on stderr.
 * A rank that has not stepped yet (right after a switch) showed "NaN" in LOSS, which reads as
 * the non-finite-loss failure, and -o json said "ktok_s": 0.0 with every host down. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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

#include "common/fs.h"
#include "common/util.h"
#include "common/heartbeat.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/cmd.h"
#include "controller/inventory.h"
#include "controller/transport/fleet.h"
#include "controller/ui.h"
#include "tests/unit/capture.h"
#include "controller/transport/pct.h"
#include "controller/deploy/state.h"
#include "controller/deploy/holder.h"

static void test_loss_text(void **state)
{
    (void)state;
    struct rank_status rs;
    char buf[24];
    memset(&rs, 0, sizeof rs);
    assert_string_equal(status_loss_text(&rs, buf, sizeof buf), "-"); /* no heartbeat */
    rs.has_hb = true;
    heartbeat_init(&rs.hb);
    rs.hb.loss = NAN; /* started, no step yet */
    assert_string_equal(status_loss_text(&rs, buf, sizeof buf), "-");
    rs.hb.nonfinite = 2; /* the failure: NaN */
    assert_string_equal(status_loss_text(&rs, buf, sizeof buf), "NaN");
    rs.hb.nonfinite = 0;
    rs.hb.loss = 3.25;
    rs.hb.loss_finite = true;
    assert_string_equal(status_loss_text(&rs, buf, sizeof buf), "3.2500");
}

static void test_rank_ktok(void **state)
{
    (void)state;
    struct rank_status rs;
    memset(&rs, 0, sizeof rs);
    assert_true(isnan(rank_status_ktok(&rs))); /* no heartbeat: no data, not 0 */
    rs.has_hb = true;
    heartbeat_init(&rs.hb);
    rs.hb.tok_s = 0; /* unknown (heartbeat.h) */
    assert_true(isnan(rank_status_ktok(&rs)));
    rs.hb.tok_s = NAN;
    assert_true(isnan(rank_status_ktok(&rs)));
    rs.hb.tok_s = 41500;
    assert_true(isnan(rank_status_ktok(&rs))); /* no state: not a live rank */
    const char *live[] = { "running", "starting", "checkpointing" };
    for (int i = 0; i < 3; i++) {
        strcpy(rs.state, live[i]);
        assert_true(fabs(rank_status_ktok(&rs) - 41.5) < 1e-9);
    }
    /* its last heartbeat's figure is not what a rank that stopped talking or stepping does now
     * (status showed 41.5 for a silent rank, and summed it into the job's Ktok/s) */
    /* frozen (SIGSTOP) but still "running" to its agent: stale after 3 steps, at least 10 s */
    strcpy(rs.state, "running");
    rs.hb.step_ms = 200;
    rs.hb_age_s = 9;
    assert_true(fabs(rank_status_ktok(&rs) - 41.5) < 1e-9);
    rs.hb_age_s = 11;
    assert_true(isnan(rank_status_ktok(&rs)));
    rs.hb.step_ms = 5000; /* slow steps: 15 s */
    assert_true(fabs(rank_status_ktok(&rs) - 41.5) < 1e-9);
    rs.hb_age_s = 16;
    assert_true(isnan(rank_status_ktok(&rs)));
    rs.hb_age_s = 0;
    const char *dead[] = { "silent", "stalled", "exited", "killed" };
    for (int i = 0; i < 4; i++) {
        strcpy(rs.state, dead[i]);
        assert_true(isnan(rank_status_ktok(&rs)));
    }
}

/* A failed gang: the default table said only "failed" (the newcomer pass, a promoted PyTorch
 * release whose loss went NaN: the job is down and nothing said why or what to do) */
static void test_failed_hint(void **state)
{
    (void)state;
    struct job_status js;
    char buf[600];
    memset(&js, 0, sizeof js);
    js.state = GANG_RUNNING;
    assert_null(status_failed_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf));
    assert_null(status_failed_hint("h1:101", "drafter", NULL, NULL, buf, sizeof buf));
    js.state = GANG_FAILED;
    strcpy(js.good, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); /* promoted */
    strcpy(js.reason, "rank 0 reported 3 consecutive non-finite steps (non-retryable) on a promoted release: stopped");
    const char *h = status_failed_hint("h1:101", "drafter", &js, "lab.ini", buf, sizeof buf);
    assert_non_null(h);
    assert_non_null(strstr(h, "h1:101: job 'drafter' has failed and is not running: rank 0 reported 3"));
    assert_non_null(strstr(h, "`drover -i lab.ini rollback --job drafter`"));
    h = status_failed_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf);
    assert_non_null(strstr(h, "`drover rollback --job drafter`"));
    assert_null(strstr(h, "drover logs")); /* the code (none here) decides, not the words */
    /* a worker's doing (its reason code): the workers' log comes right after the agent's reason,
     * the pointer a crash loop's verdict ends with */
    js.reason_code = STATUS_RC_NONFINITE;
    h = status_failed_hint("h1:101", "drafter", &js, "lab.ini", buf, sizeof buf);
    assert_non_null(strstr(h, "on a promoted release: stopped; see `drover -i lab.ini logs --job drafter`; "
                              "`drover -i lab.ini rollback --job drafter`"));
    js.reason_code = STATUS_RC_FATAL_EXIT;
    strcpy(js.reason, "rank 0 exited with code 6 (non-retryable) on a promoted release: stopped");
    h = status_failed_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf);
    assert_non_null(strstr(h, "stopped; see `drover logs --job drafter`; `drover rollback"));
    /* that exit 6 was a full disk (its rank says so): a rollback fills it again; free space, then
     * start (the adversary pass: "rollback ... or deploy a fixed release", neither helps) */
    js.nranks = 1;
    js.ranks[0].exit_code = 6;
    h = status_failed_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf);
    assert_non_null(strstr(h, "; its disk is full: free space in the container (old checkpoints, "
                              "logs), then `drover start --job drafter` runs it again"));
    assert_null(strstr(h, "rollback"));
    js.nranks = 0;
    /* not for a start failure or the environment: their cause is not in that log */
    js.reason_code = STATUS_RC_START_FAILURE;
    strcpy(js.reason, "start failed: bin/t: not found");
    h = status_failed_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf);
    assert_null(strstr(h, "drover logs"));
}

/* The agent stopping a promoted PyTorch gang on its own (a rank silent past silence_deadline,
 * the newcomer pass): the table showed `silent:104s` for the two minutes of the job's grace and
 * nothing said that the agent had decided, or why; a switch's own stop says nothing here */
static void test_agent_hint(void **state)
{
    (void)state;
    struct job_status js;
    char buf[1200];
    memset(&js, 0, sizeof js);
    js.state = GANG_RUNNING;
    assert_null(status_agent_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf));
    assert_null(status_agent_hint("h1:101", "drafter", NULL, NULL, buf, sizeof buf));
    js.state = GANG_STOPPING;
    assert_null(status_agent_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf)); /* no reason */
    strcpy(js.reason, "stopping; starts again once every process of the gang is gone (start requested)");
    assert_null(status_agent_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf)); /* asked for */
    strcpy(js.reason, "rank 1 silent: no heartbeat for 20 s in phase train at step 2635 (silence_deadline 20 s); "
                      "stopping the gang");
    assert_null(status_agent_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf)); /* code none */
    js.reason_code = STATUS_RC_LIVENESS; /* decided on the code, not the words */
    const char *h = status_agent_hint("h1:101", "drafter", &js, "lab.ini", buf, sizeof buf);
    assert_non_null(h);
    assert_non_null(strstr(h, "h1:101: job 'drafter' is being stopped by its agent: rank 1 silent: no heartbeat"));
    assert_non_null(strstr(h, "`drover -i lab.ini events --job drafter`"));
    js.reason_code = STATUS_RC_NONE;
    strcpy(js.reason, "stopping; starts again once every process of the gang is gone (start requested)");
    assert_null(status_agent_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf));
    js.state = GANG_BACKOFF;
    js.reason_code = STATUS_RC_RANK_EXIT;
    strcpy(js.reason, "rank 0 exited with code 1 (1 of 3 in 120 s); restarting");
    h = status_agent_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf);
    assert_non_null(h);
    assert_non_null(strstr(h, "job 'drafter' lost a rank; its agent restarts the gang after a backoff: rank 0 exited"));
    assert_non_null(strstr(h, "`drover logs --job drafter`"));
    js.state = GANG_FAILED; /* status_failed_hint's */
    assert_null(status_agent_hint("h1:101", "drafter", &js, NULL, buf, sizeof buf));
}

/* A spec change on probation, or orphaned by a drover killed -9: the table shows the good
 * release, running, and said nothing else (the agents revert the spec at the probation deadline:
 * a restart of the gang nobody was told about) */
static void test_spec_hint(void **state)
{
    (void)state;
    struct job_status js;
    memset(&js, 0, sizeof js);
    const char *rel = "2ab918e64d0050a3735a94c0d07ca241638eb2f15a7c54bfcd3cb48c36b1e548";
    strcpy(js.current, rel);
    strcpy(js.good, rel);
    memset(js.spec_digest, 'a', 64);
    memset(js.good_spec_digest, 'a', 64);
    assert_false(status_runs_unpromoted_spec(&js)); /* promoted with this spec */
    assert_false(status_runs_unpromoted_spec(NULL));
    js.spec_digest[0] = 'b';
    assert_true(status_runs_unpromoted_spec(&js));
    js.good_spec_digest[0] = '\0'; /* an agent (or state) without digests: nothing to tell */
    assert_false(status_runs_unpromoted_spec(&js));
    js.good_spec_digest[0] = 'a';
    strcpy(js.good, "1111111111111111111111111111111111111111111111111111111111111111");
    assert_false(status_runs_unpromoted_spec(&js)); /* another release on probation: the table's '*' */
    char buf[600];
    const char *h = status_spec_hint("h1:101", 2, "train", rel, "lab.ini", buf, sizeof buf);
    assert_non_null(strstr(h, "h1:101 (and 2 more): job 'train' runs its good release 2ab918e64d00 with a job spec that was not promoted"));
    assert_non_null(strstr(h, "`drover -i lab.ini rollback --job train`"));
}

/* pct's own errors about the container: a vmid of no container on the host (an inventory typo)
 * was "agent-unreachable" in status with nothing on stderr, "no deploy lease ... is the agent
 * installed? drover install" in deploy and "is the container running? pct start 103" in install */
static void test_pct_ct_problem(void **state)
{
    (void)state;
    char buf[512];
    assert_int_equal(pct_ct_problem(103, "Configuration file 'nodes/h1/lxc/103.conf' does not exist", buf, sizeof buf),
                     -ENODEV);
    assert_non_null(strstr(buf, "no container 103 on this host (Configuration file 'nodes/h1/lxc/103.conf' does not exist)"));
    assert_non_null(strstr(buf, "check the vmid in the inventory"));
    assert_int_equal(pct_ct_problem(102, "container '102' not running!", buf, sizeof buf), -EHOSTDOWN);
    assert_non_null(strstr(buf, "start it with: pct start 102"));
    assert_int_equal(pct_ct_problem(101, "drover-agent: cannot open the store", buf, sizeof buf), 0);
    assert_int_equal(pct_ct_problem(-1, "Configuration file 'x' does not exist", buf, sizeof buf), 0); /* no container */
}

/* Lines of file path that contain needle. */
static int count_lines(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "r");
    char line[2048];
    int n = 0;
    assert_non_null(fp);
    while (fgets(line, sizeof line, fp))
        n += strstr(line, needle) != NULL;
    fclose(fp);
    return n;
}

/* A container that runs two jobs and whose agent does not answer: its error line came once per
 * job (the newcomer pass).  Now stderr says it once per container while the table keeps a row
 * per job, and -o json keeps its per-job containers, each with its error. */
static void test_unreachable_said_once_per_container(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-status-XXXXXX", text[1024], out[64], err[64], why[512];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    /* local roots whose agent is /bin/false: `status` exits 1, the agent did not answer */
    snprintf(text, sizeof text,
             "[drover]\nstate_dir = %s\n[host h1]\nlocal = true\nagent_path = /bin/false\n"
             "[job train]\ncontainers = h1:local:%s/a h1:local:%s/b\ncommand = bin/t\n"
             "[job eval]\ncontainers = h1:local:%s/a\ncommand = bin/e\nmaster_port = 29501\n",
             dir, dir, dir, dir);
    struct inventory *inv = NULL;
    assert_int_equal(inventory_parse(text, strlen(text), "/t/inv.ini", &inv, why, sizeof why), 0);
    char *argv[] = { "status", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv, 1, out, err), EXIT_FAIL);
    assert_int_equal(count_lines(out, "agent-unreachable"), 3); /* a row per job and container */
    assert_int_equal(count_lines(err, "drover-agent status failed"), 2); /* a line per container */
    char a[128];
    snprintf(a, sizeof a, "h1:local:%s/a: ", dir);
    assert_int_equal(count_lines(err, a), 1);

    char *argv_json[] = { "status", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv_json, 3, out, err), EXIT_FAIL);
    assert_int_equal(count_lines(err, ""), 0);
    json_error_t je;
    json_t *d = json_load_file(out, 0, &je);
    assert_non_null(d);
    json_t *jobs = json_object_get(d, "jobs");
    assert_int_equal(json_array_size(jobs), 2);
    static const size_t ncts[] = { 2, 1 };
    for (size_t j = 0; j < 2; j++) {
        json_t *cts = json_object_get(json_array_get(jobs, j), "containers");
        assert_int_equal(json_array_size(cts), ncts[j]);
        for (size_t c = 0; c < ncts[j]; c++) {
            json_t *co = json_array_get(cts, c);
            assert_true(json_is_false(json_object_get(co, "reachable")));
            assert_string_equal(json_string_value(json_object_get(co, "state")), "agent-unreachable");
            assert_non_null(strstr(json_string_value(json_object_get(co, "error")), "drover-agent status failed"));
        }
    }
    json_decref(d);
    (void)unlink(out);
    (void)unlink(err);
    (void)rmdir(dir);
    inventory_free(inv);
}

/* A container whose agent answers but does not know the job: the table said `no-job` and
 * nothing of what to do (the newcomer pass).  Now one line after the table per job names its
 * containers and the deploy that puts it there; -o json stays the document alone. */
/* In the `drover status -o json` document in file out (stdout: the document alone), the first
 * job's first container has member key equal to the string value. */
/* One job "train" in a fake agent's status (both containers of the inventory answer with it),
 * state gs, current and good as given: the scaffolding of the note tests below.  After changing
 * js, one_job_show() writes the agent's document again. */
struct one_job {
    char dir[40], out[64], err[64];
    struct agent_status *st;
    struct job_status *js;
    struct inventory *inv;
};

static void one_job_open(struct one_job *f, enum gang_state gs, const char *current, const char *good)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/drover-test-status-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->out, sizeof f->out, "%s/out", f->dir);
    snprintf(f->err, sizeof f->err, "%s/err", f->dir);
    f->st = calloc(1, sizeof *f->st);
    assert_non_null(f->st);
    fake_agent_status_init(f->st);
    f->st->njobs = 1;
    f->js = &f->st->jobs[0];
    strcpy(f->js->job, "train");
    f->js->state = gs;
    strcpy(f->js->current, current);
    strcpy(f->js->good, good);
    f->inv = NULL;
}

/* The agent's document as js says now; the inventory made the first time. */
static void one_job_show(struct one_job *f)
{
    fake_agent(f->dir, f->st);
    if (!f->inv)
        f->inv = fake_agent_inventory(f->dir, "", "", "a");
}

static void one_job_close(struct one_job *f)
{
    char cmd[80];
    inventory_free(f->inv);
    free(f->st);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
}

/* `drover status -o json` in out: the document (json_decref it) and its jobs[0].containers[0]. */
static json_t *first_container_json(const char *out, json_t **ret_co)
{
    json_error_t je;
    json_t *d = json_load_file(out, 0, &je);
    if (!d)
        fail_msg("'%s' is not one JSON document: %s", out, je.text);
    *ret_co = json_array_get(json_object_get(json_array_get(json_object_get(d, "jobs"), 0), "containers"), 0);
    return d;
}

static void want_first_container(const char *out, const char *key, const char *value)
{
    json_t *co, *d = first_container_json(out, &co);
    const char *got = json_string_value(json_object_get(co, key));
    if (!got || strcmp(got, value) != 0)
        fail_msg("jobs[0].containers[0].%s is '%s', not '%s'", key, got ? got : "(none)", value);
    json_decref(d);
}

static void test_nojob_hint(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-status-XXXXXX", text[1024], out[64], err[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    /* an agent (a script) that knows no job */
    struct agent_status st;
    fake_agent_status_init(&st);
    fake_agent(dir, &st);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
    char *argv[] = { "status", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv, 1, out, err), EXIT_OK); /* every container answered */
    assert_int_equal(count_lines(out, "no-job"), 3); /* a row per job and container */
    assert_int_equal(count_lines(out, "drover deploy"), 0); /* the table stays a table */
    assert_int_equal(count_lines(err, "deploy one with"), 2); /* once per job, not per row */
    char want[512];
    snprintf(want, sizeof want, "no job 'train' in h1:local:%s/a, h1:local:%s/b: deploy one with "
             "`drover deploy DIR --job train` (DIR: the release directory)", dir, dir);
    assert_int_equal(count_lines(err, want), 1);
    snprintf(want, sizeof want, "no job 'eval' in h1:local:%s/a: deploy one with `drover deploy DIR --job eval`", dir);
    assert_int_equal(count_lines(err, want), 1);

    char *argv_json[] = { "status", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv_json, 3, out, err), EXIT_OK);
    assert_int_equal(count_lines(err, ""), 0);
    assert_int_equal(count_lines(out, "deploy one with"), 0);
    want_first_container(out, "state", "no-job");
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* A rank that sent only the heartbeat module's hello (in the rendezvous) said "starting" in the
 * table, as one that sent nothing, and -o json's phase "init": the table says "rendezvous", and
 * -o json's flat phase; the rank's state stays the agent's word there. */
static void test_hello_only_rank_says_rendezvous(void **state)
{
    (void)state;
    static const char GOOD[] = "3f2a9c1b7d6e0000000000000000000000000000000000000000000000000000";
    struct one_job f;
    one_job_open(&f, GANG_RUNNING, GOOD, GOOD);
    struct job_status *js = f.js;
    js->nranks = 2;
    for (int k = 0; k < 2; k++) {
        fake_rank_training(&js->ranks[k], k, k, GOOD, 0, 0, NAN);
        strcpy(js->ranks[k].state, "starting");
        heartbeat_init(&js->ranks[k].hb);
    }
    js->ranks[0].hb.hello = true; /* rank 1 sent init: loading, still starting */
    one_job_show(&f);
    char *argv[] = { "status", NULL };
    assert_int_equal(capture_verb(cmd_status, f.inv, argv, 1, f.out, f.err), EXIT_OK);
    assert_int_equal(count_lines(f.out, " rendezvous "), 2); /* rank 0 in train's two containers */
    assert_int_equal(count_lines(f.out, " starting "), 2);
    char *argv_json[] = { "status", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_status, f.inv, argv_json, 3, f.out, f.err), EXIT_OK);
    json_t *co, *d = first_container_json(f.out, &co);
    json_t *r0 = json_array_get(json_object_get(co, "ranks"), 0), *r1 = json_array_get(json_object_get(co, "ranks"), 1);
    assert_string_equal(json_string_value(json_object_get(r0, "phase")), "rendezvous");
    assert_string_equal(json_string_value(json_object_get(r0, "state")), "starting");
    assert_string_equal(json_string_value(json_object_get(r1, "phase")), "init");
    json_decref(d);
    one_job_close(&f);
}

/* A job whose good release its agents marked bad (they stopped it while it ran promoted, for
 * non-finite loss or an exit not retried): the table showed it as any other release, and only
 * -o json's "bad" list said it.  A note under the table names the release, the containers, the
 * mark's reason and what to do; -o json carries the reasons beside "bad". */
static void test_good_release_marked_bad_note(void **state)
{
    (void)state;
    static const char GOOD[] = "dc1d30b010c60000000000000000000000000000000000000000000000000000";
    struct one_job f;
    one_job_open(&f, GANG_FAILED, GOOD, GOOD);
    struct job_status *js = f.js;
    js->nbad = 1;
    strcpy(js->bad[0], GOOD);
    strcpy(js->bad_reason[0], "stopped while promoted: rank 1 reported 3 consecutive non-finite steps");
    one_job_show(&f);
    char *argv[] = { "status", NULL };
    capture_verb(cmd_status, f.inv, argv, 1, f.out, f.err);
    /* once for the job, both containers named */
    assert_int_equal(count_lines(f.err, "job 'train': its good release dc1d30b010c6 is marked bad by the agents of "), 1);
    assert_int_equal(count_lines(f.err, "/a, "), 1);
    assert_int_equal(count_lines(f.err, " (stopped while promoted: rank 1 reported 3 consecutive non-finite steps): "), 1);
    assert_int_equal(count_lines(f.err, "`drover rollback --job train` goes to an earlier good release, "
                                        "`drover deploy DIR --job train` deploys a fixed one"), 1);
    char *argv_json[] = { "status", "-o", "json", NULL };
    capture_verb(cmd_status, f.inv, argv_json, 3, f.out, f.err);
    json_t *co, *d = first_container_json(f.out, &co);
    assert_string_equal(json_string_value(json_array_get(json_object_get(co, "bad_reasons"), 0)),
                        "stopped while promoted: rank 1 reported 3 consecutive non-finite steps");
    json_decref(d);
    /* a release that failed probation and was left (the good one runs): no note */
    strcpy(js->good, "3f2a9c1b7d6e0000000000000000000000000000000000000000000000000000");
    strcpy(js->current, js->good);
    js->state = GANG_RUNNING;
    one_job_show(&f);
    capture_verb(cmd_status, f.inv, argv, 1, f.out, f.err);
    assert_int_equal(count_lines(f.err, "is marked bad"), 0);
    one_job_close(&f);
}

/* A release on its agents' probation that no drover watches showed in plain `drover status` only
 * as `ID* probation`: a held one (on_inconclusive = hold: the deploy said HELD, decide with promote
 * or revert) and one whose deploy's drover was killed (-9) alike.  Now a note under the table says
 * which, and when its agents revert it on their own (the agents' "probation_left_s"); -o json
 * carries the deadline per container.  Nothing while a drover holds the job's lease (here: this
 * process, alive), nor from an agent too old to send the deadline. */
static void test_unwatched_probation_note(void **state)
{
    (void)state;
    static const char GOOD[] = "dc1d30b010c60000000000000000000000000000000000000000000000000000";
    static const char NEXT[] = "8e509255046e0000000000000000000000000000000000000000000000000000";
    char p[128];
    struct one_job f;
    one_job_open(&f, GANG_RUNNING, NEXT, GOOD);
    struct job_status *js = f.js;
    js->probation_left_s = 4410;
    one_job_show(&f);
    char *argv[] = { "status", NULL };
    capture_verb(cmd_status, f.inv, argv, 1, f.out, f.err);
    char *e = capture_slurp(f.err);
    if (count_lines(f.err, "job 'train': 8e509255046e is on probation with no drover watching it (the deploy that "
                           "started it is gone: its drover killed or cut off); its agents revert it on their own in "
                           "4410 s, about ") != 1 ||
        count_lines(f.err, "`drover rollback --job train` reverts it now") != 1)
        fail_msg("stderr: %s", e);
    free(e);
    char *argv_json[] = { "status", "-o", "json", NULL };
    capture_verb(cmd_status, f.inv, argv_json, 3, f.out, f.err);
    json_t *co, *d = first_container_json(f.out, &co);
    assert_true(fabs(json_real_value(json_object_get(co, "probation_left_s")) - 4410) < 1);
    json_decref(d);
    /* held by its deploy (this controller's history): waiting for promote or revert */
    struct history_entry h = { .time = 1, .ktok_s = -1, .baseline_ktok_s = -1 };
    strcpy(h.job, "train");
    strcpy(h.release, NEXT);
    strcpy(h.name, "good2");
    strcpy(h.result, "held");
    snprintf(p, sizeof p, "%s/state", f.dir);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    assert_int_equal(state_history_append(p, &h), 0);
    capture_verb(cmd_status, f.inv, argv, 1, f.out, f.err);
    e = capture_slurp(f.err);
    if (count_lines(f.err, "job 'train': 8e509255046e is held on probation (on_inconclusive = hold), waiting for "
                           "`drover promote --job train` or `drover revert --job train`; its agents revert it on "
                           "their own in 4410 s, about ") != 1 ||
        count_lines(f.err, "no drover watching") != 0)
        fail_msg("stderr: %s", e);
    free(e);
    /* a drover holds the lease and runs (this process): it watches, nothing said */
    holder_self(js->lease_holder, sizeof js->lease_holder);
    js->lease_left_s = 300;
    one_job_show(&f);
    capture_verb(cmd_status, f.inv, argv, 1, f.out, f.err);
    assert_int_equal(count_lines(f.err, "on probation"), 0);
    /* an agent too old to send the deadline: nothing claimed */
    js->lease_holder[0] = '\0';
    js->probation_left_s = -1;
    one_job_show(&f);
    capture_verb(cmd_status, f.inv, argv, 1, f.out, f.err);
    assert_int_equal(count_lines(f.err, "on probation"), 0);
    one_job_close(&f);
}

/* The warning's words when containers disagree: it quoted the first container's reason only,
 * and stopped at four releases without a word.  Now each container's reason when they differ,
 * "in N of its M containers" when some do not mark it, and a closing line counting the releases
 * left out.  One implementation for `drover status` and `drover top`. */
static void test_bad_marks_disagree(void **state)
{
    (void)state;
    static struct status_bad_marks m;
    char line[2400];
    memset(&m, 0, sizeof m);
    /* all agree: the reason once, as before */
    status_bad_marks_add(&m, "h1:101", "dc1d30b010c6aa", true, "stopped while promoted: A");
    status_bad_marks_add(&m, "h1:102", "dc1d30b010c6aa", true, "stopped while promoted: A");
    assert_int_equal(status_bad_marks_nlines(&m), 1);
    assert_non_null(strstr(status_bad_marks_line(&m, 0, "train", NULL, line, sizeof line),
                           "job 'train': its good release dc1d30b010c6 is marked bad by the agents of h1:101, "
                           "h1:102 (stopped while promoted: A): a plain rollback never goes to it; "));
    /* another reason in h2:201, and h2:202 marks nothing: said, each container's reason */
    status_bad_marks_add(&m, "h2:201", "dc1d30b010c6aa", true, "stopped while promoted: B");
    status_bad_marks_add(&m, "h2:202", NULL, false, NULL);
    status_bad_marks_line(&m, 0, "train", NULL, line, sizeof line);
    if (!strstr(line, "marked bad by the agents of h1:101, h1:102, h2:201, in 3 of its 4 containers (h1:101, "
                      "h1:102: stopped while promoted: A; h2:201: stopped while promoted: B): "))
        fail_msg("line: %s", line);
    /* an older agent's mark, without a reason, among others */
    status_bad_marks_add(&m, "h3:301", "dc1d30b010c6aa", true, "");
    status_bad_marks_line(&m, 0, "train", NULL, line, sizeof line);
    assert_non_null(strstr(line, "; h3:301: no reason given (an older agent)): "));
    /* more releases than are said: counted, each once, not dropped in silence */
    static const char *const rel[] = { "r1", "r2", "r3", "r4", "r5", "r5", "r6" };
    for (size_t k = 0; k < ARRAY_SIZE(rel); k++) {
        char ct[16];
        snprintf(ct, sizeof ct, "h4:%zu", 400 + k);
        status_bad_marks_add(&m, ct, rel[k], false, "stopped while promoted: C");
    }
    assert_int_equal(m.nmarks, 4);
    assert_int_equal(status_bad_marks_nlines(&m), 5);
    assert_non_null(strstr(status_bad_marks_line(&m, 1, "train", NULL, line, sizeof line),
                           "its current release r1 is marked bad by the agent of h4:400, in 1 of its 12 containers "
                           "(stopped while promoted: C)"));
    status_bad_marks_line(&m, 4, "train", "inv.ini", line, sizeof line);
    assert_string_equal(line, "job 'train': 3 more releases are marked bad by the agents of 4 containers, not said "
                              "here: `drover -i inv.ini status -o json` lists each container's \"bad\" and "
                              "\"bad_reasons\"");
    assert_string_equal(status_bad_marks_line(&m, 5, "train", NULL, line, sizeof line), "");

    /* each container's agent names its own ranks: one reason, said once (t-89 printed the same
     * words three times, "rank 0 ...", "rank 1 ...", "rank 2 ..."); other words stay apart */
    memset(&m, 0, sizeof m);
    status_bad_marks_add(&m, "h1:101", "dc1d30b010c6aa", true, "stopped while promoted: rank 0 reported NaN [rank 0: x]");
    status_bad_marks_add(&m, "h1:102", "dc1d30b010c6aa", true, "stopped while promoted: rank 1 reported NaN [rank 1: x]");
    status_bad_marks_add(&m, "h2:201", "dc1d30b010c6aa", true, "stopped while promoted: rank 12 reported NaN [rank 12: x]");
    status_bad_marks_line(&m, 0, "train", NULL, line, sizeof line);
    if (!strstr(line, "by the agents of h1:101, h1:102, h2:201 (h1:101: stopped while promoted: rank 0 reported NaN "
                      "[rank 0: x]; h1:102, h2:201: the same, of their own ranks): "))
        fail_msg("line: %s", line);
    status_bad_marks_add(&m, "h2:202", "dc1d30b010c6aa", true, "stopped while promoted: rank 3 reported inf [rank 3: x]");
    status_bad_marks_line(&m, 0, "train", NULL, line, sizeof line);
    if (!strstr(line, "; h2:202: stopped while promoted: rank 3 reported inf [rank 3: x]): "))
        fail_msg("line: %s", line);
}

/* A deploy's candidate (current is not the good release) runs: drover top said "probation" for
 * its ranks and `drover status` "running" (with the '*' of its release).  One word, from
 * status_rank_word(); promoted, both say running.  -o json keeps the agent's word. */
static void test_candidate_ranks_say_probation(void **state)
{
    (void)state;
    static const char NEW[] = "7b7db40c6a7a0000000000000000000000000000000000000000000000000000",
                      GOOD[] = "3f2a9c1b7d6e0000000000000000000000000000000000000000000000000000";
    char dir[] = "/tmp/drover-test-status-XXXXXX", text[1024], out[64], err[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct agent_status *st = calloc(1, sizeof *st);
    assert_non_null(st);
    for (int promoted = 0; promoted < 2; promoted++) {
        fake_agent_status_init(st);
        st->njobs = 1;
        struct job_status *js = &st->jobs[0];
        strcpy(js->job, "train");
        js->state = GANG_RUNNING;
        strcpy(js->current, NEW);
        strcpy(js->good, promoted ? NEW : GOOD);
        js->nranks = 1;
        fake_rank_training(&js->ranks[0], 0, 0, NEW, 42, 1000, 2.5);
        fake_agent(dir, st);
        struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
        char *argv[] = { "status", NULL };
        assert_int_equal(capture_verb(cmd_status, inv, argv, 1, out, err), EXIT_OK);
        assert_int_equal(count_lines(out, " probation "), promoted ? 0 : 2); /* train's two rows */
        assert_int_equal(count_lines(out, " running "), promoted ? 2 : 0);
        char *argv_json[] = { "status", "-o", "json", NULL };
        assert_int_equal(capture_verb(cmd_status, inv, argv_json, 3, out, err), EXIT_OK);
        /* the ranks keep the agent's "running" (scripts rely on it); the container says what the
         * table's word comes from (after a drover killed -9 mid-probation the table said
         * probation and the JSON nothing) */
        json_t *co, *d = first_container_json(out, &co);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(co, "ranks"), 0), "state")),
                            "running");
        assert_true(json_is_boolean(json_object_get(co, "on_probation")));
        assert_int_equal(json_is_true(json_object_get(co, "on_probation")), !promoted);
        json_decref(d);
        inventory_free(inv);
    }
    /* the word itself: only a running rank is said to be on probation */
    assert_string_equal(status_rank_word(GANG_RUNNING, "running", true), "probation");
    assert_string_equal(status_rank_word(GANG_RUNNING, "silent", true), "silent");
    assert_string_equal(status_rank_word(GANG_RUNNING, "running", false), "running");
    /* a hung gang its agent is stopping (its grace: up to two minutes): status said
     * "silent:62s" while top said "stopping" */
    assert_string_equal(status_rank_word(GANG_STOPPING, "silent", false), "stopping");
    assert_string_equal(status_rank_word(GANG_STOPPING, "running", true), "stopping");
    assert_true(status_on_probation(NEW, "", false));   /* nothing promoted yet */
    assert_true(status_on_probation(NEW, GOOD, false)); /* a candidate */
    assert_true(status_on_probation(NEW, NEW, true));   /* a spec change */
    assert_false(status_on_probation(NEW, NEW, false));
    free(st);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* Every member name in object o (and the objects and arrays of objects under it) is in doc, as
 * "name"; the missing ones are appended to missing. */
static void doc_has_members(const json_t *o, const char *doc, const char *path, char *missing, size_t sz)
{
    if (json_is_array(o)) {
        for (size_t i = 0; i < json_array_size(o); i++)
            doc_has_members(json_array_get(o, i), doc, path, missing, sz);
        return;
    }
    if (!json_is_object(o))
        return;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        char quoted[96], sub[256];
        snprintf(quoted, sizeof quoted, "\"%s\"", key);
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        if (!strstr(doc, quoted) && !strstr(missing, sub)) {
            size_t n = strlen(missing);
            snprintf(missing + n, sz - n, " %s", sub);
        }
        doc_has_members(v, doc, sub, missing, sz);
    }
}

/* docs/controller.md's `status -o json` example names every member the document has: it lacked
 * clock_skew_s, bad, goods, last_restart_reason, peer_exit, state_age_s, hb.mem_peak, ... (a
 * document with every optional member: a clock, marks, a heartbeat with mfu, mem_peak and an
 * error, a GPU) */
static void test_json_members_documented(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-status-XXXXXX", text[1024], out[64], err[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct agent_status *st = calloc(1, sizeof *st);
    assert_non_null(st);
    fake_agent_status_init(st);
    st->wall = 1795981869.5;
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    js->state = GANG_RUNNING;
    memset(js->current, 'a', 64);
    memset(js->good, 'b', 64);
    memset(js->previous, 'c', 64);
    memset(js->release, 'a', 64);
    memset(js->spec_digest, 'd', 64);
    memset(js->good_spec_digest, 'e', 64);
    strcpy(js->last_restart_reason, "rank 1 exited with code 1");
    js->peer_exit = true;
    js->nbad = 1;
    memset(js->bad[0], 'f', 64);
    js->ngoods = 1;
    memset(js->goods[0], 'b', 64);
    js->nranks = 1;
    struct rank_status *rs = &js->ranks[0];
    fake_rank_training(rs, 0, 0, js->current, 42, 50000, 3.0);
    rs->state_age_s = 3;
    rs->bad_lines = 1;
    rs->hb.mfu = 0.4;
    rs->hb.mem_peak = 1 << 30;
    strcpy(rs->hb.error, "CUDA error");
    rs->gpu = (struct gpu_status){ .valid = true, .index = 0, .util = 97, .mem_used = 1, .mem_total = 2, .temp = 61 };
    fake_agent(dir, st);
    free(st);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
    char *argv_json[] = { "status", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv_json, 3, out, err), EXIT_OK);
    json_error_t je;
    json_t *d = json_load_file(out, 0, &je);
    if (!d)
        fail_msg("'%s' is not one JSON document: %s", out, je.text);
    char *md = NULL;
    assert_int_equal(fs_read_file("docs/controller.md", 1 << 22, &md, NULL), 0);
    char *from = strstr(md, "`-o json` (stdout), version 1:"), *to = from ? strstr(from, "\n## ") : NULL;
    assert_non_null(from);
    assert_non_null(to);
    *to = '\0';
    char missing[2048] = "";
    doc_has_members(d, from, "", missing, sizeof missing);
    if (missing[0])
        fail_msg("docs/controller.md's status -o json section lacks:%s", missing);
    free(md);
    json_decref(d);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* A failed job's reason code reaches scripts (-o json "reason_code") and people (the pointer at
 * the workers' log under the table), from an agent of today and from one older than the code,
 * whose document has only the words (common/status.c derives the code from them). */
static void test_failed_reason_code(void **state)
{
    (void)state;
    for (int older = 0; older < 2; older++) {
        char dir[] = "/tmp/drover-test-status-XXXXXX", text[1024], out[64], err[64], why[512];
        assert_non_null(mkdtemp(dir));
        snprintf(out, sizeof out, "%s/out", dir);
        snprintf(err, sizeof err, "%s/err", dir);
        struct agent_status *st = calloc(1, sizeof *st);
        assert_non_null(st);
        fake_agent_status_init(st);
        st->njobs = 1;
        strcpy(st->jobs[0].job, "train");
        st->jobs[0].state = GANG_FAILED;
        st->jobs[0].reason_code = STATUS_RC_CRASH_LOOP;
        strcpy(st->jobs[0].reason, "crash loop: rank 0 exited with code 1 and no good release to return to");
        fake_agent_as(dir, st, older); /* older: the member is not there at all */
        free(st);
        snprintf(text, sizeof text,
                 "[drover]\nstate_dir = %s\n[host h1]\nlocal = true\nagent_path = %s/agent\n"
                 "[job train]\ncontainers = h1:local:%s/a\ncommand = bin/t\n", dir, dir, dir);
        struct inventory *inv = NULL;
        assert_int_equal(inventory_parse(text, strlen(text), "/t/inv.ini", &inv, why, sizeof why), 0);
        char *argv[] = { "status", NULL };
        assert_int_equal(capture_verb(cmd_status, inv, argv, 1, out, err), EXIT_OK);
        assert_int_equal(count_lines(err, "has failed and is not running: crash loop: "), 1);
        /* failed on its first deploy (no good release): never "rollback", which would refuse */
        assert_int_equal(count_lines(err, "to return to; see `drover logs --job train`; it has no good release "
                                          "to roll back to: deploy a fixed release (`drover deploy DIR --job train`)"), 1);
        assert_int_equal(count_lines(err, "rollback --job"), 0);
        char *argv_json[] = { "status", "-o", "json", NULL };
        assert_int_equal(capture_verb(cmd_status, inv, argv_json, 3, out, err), EXIT_OK);
        want_first_container(out, "state", "failed");
        want_first_container(out, "reason_code", "crash-loop");
        inventory_free(inv);
        snprintf(text, sizeof text, "rm -rf '%s'", dir);
        assert_int_equal(system(text), 0);
    }
}

static void test_nojob_hint_text(void **state)
{
    (void)state;
    char buf[800];
    assert_string_equal(status_nojob_hint("h1:101, h1:102", "train", "lab.ini", buf, sizeof buf),
                        "no job 'train' in h1:101, h1:102: deploy one with `drover -i lab.ini deploy DIR "
                        "--job train` (DIR: the release directory)");
}

/* A promoted release restarted after a hang, running again: `drover status -o json` showed
 * reason "" with restarts 1, nothing said why.  The agent's last_restart_reason travels in the
 * status document (absent when "": an older controller reads a newer agent's document as before,
 * and this one an older agent's) and is said as a note under the table. */
static void test_restart_note(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    assert_non_null(st);
    assert_non_null(back);
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    js->state = GANG_RUNNING;
    js->restarts = 1;
    strcpy(js->last_restart_reason, "rank 0 hung (liveness deadline)");
    char *text = NULL;
    assert_int_equal(status_format(st, &text), 0);
    assert_non_null(strstr(text, "\"last_restart_reason\":\"rank 0 hung (liveness deadline)\""));
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_string_equal(back->jobs[0].last_restart_reason, "rank 0 hung (liveness deadline)");
    free(text);
    char buf[600];
    const char *n = status_restart_note("h1:101", "train", &back->jobs[0], buf, sizeof buf);
    assert_non_null(n);
    assert_string_equal(n, "h1:101: job 'train' was restarted by its agent 1 time since it was last activated or started, last after "
                           "rank 0 hung (liveness deadline)");
    /* in backoff the agent hint says it; nothing restarted; an agent that did not say why */
    back->jobs[0].state = GANG_BACKOFF;
    assert_null(status_restart_note("h1:101", "train", &back->jobs[0], buf, sizeof buf));
    back->jobs[0].state = GANG_RUNNING;
    back->jobs[0].restarts = 0;
    assert_null(status_restart_note("h1:101", "train", &back->jobs[0], buf, sizeof buf));
    js->last_restart_reason[0] = '\0';
    assert_int_equal(status_format(st, &text), 0);
    assert_null(strstr(text, "last_restart_reason")); /* an older agent's document, as it was */
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_string_equal(back->jobs[0].last_restart_reason, "");
    assert_null(status_restart_note("h1:101", "train", &back->jobs[0], buf, sizeof buf));
    free(text);
    /* ranks that wrote lines that are not heartbeats: the first, its count, how many did */
    assert_null(status_bad_lines_note("h1:101", "train", &back->jobs[0], NULL, buf, sizeof buf));
    back->jobs[0].nranks = 3;
    back->jobs[0].ranks[1].rank = 1;
    back->jobs[0].ranks[1].bad_lines = 1;
    n = status_bad_lines_note("h1:101", "train", &back->jobs[0], "lab.ini", buf, sizeof buf);
    assert_non_null(n);
    assert_string_equal(n, "h1:101: job 'train' rank 1 wrote 1 line that is not a heartbeat; "
                           "`drover -i lab.ini logs --job train --agent` says why (docs/protocol.md, \"Heartbeat\")");
    back->jobs[0].ranks[2].rank = 2;
    back->jobs[0].ranks[2].bad_lines = 40;
    n = status_bad_lines_note("h1:101", "train", &back->jobs[0], NULL, buf, sizeof buf);
    assert_non_null(strstr(n, "rank 1 wrote 1 line that is not a heartbeat (2 of its ranks did);"));
    free(st);
    free(back);
}

/* An inventory without a job (an empty file, the wrong file, hosts only): status showed a bare
 * header and exit 0, validate said "ok (0 hosts, 0 jobs, 0 containers)", without a word of
 * why (the newcomer pass).  Now status warns, naming the file and what to add; validate
 * refuses a file with neither host nor job (exit 2) and warns about hosts without a job. */
static void test_no_job_said(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-nojobs-XXXXXX", text[512], out[64], err[64], why[512];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    snprintf(text, sizeof text, "[drover]\nstate_dir = %s\n[host h1]\nlocal = true\n", dir);
    struct inventory *inv = NULL;
    assert_int_equal(inventory_parse(text, strlen(text), "/t/hosts.ini", &inv, why, sizeof why), 0);
    char *argv[] = { "status", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv, 1, out, err), EXIT_OK);
    assert_int_equal(count_lines(err, "'/t/hosts.ini' has no job: add a [job NAME] section"), 1);
    char *vargv[] = { "validate", NULL };
    assert_int_equal(capture_verb(cmd_validate, inv, vargv, 1, out, err), EXIT_OK);
    assert_int_equal(count_lines(err, "'/t/hosts.ini' has no job"), 1);
    assert_int_equal(count_lines(out, "inventory /t/hosts.ini: ok (1 host, 0 jobs"), 1);
    inventory_free(inv);

    inv = NULL;
    assert_int_equal(inventory_parse("", 0, "/t/empty.ini", &inv, why, sizeof why), 0);
    assert_int_equal(capture_verb(cmd_validate, inv, vargv, 1, out, err), EXIT_USAGE);
    assert_int_equal(count_lines(err, "'/t/empty.ini' has no [host NAME] and no [job NAME] section"), 1);
    assert_int_equal(count_lines(out, "ok"), 0);
    inventory_free(inv);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* `drover status` said each container's notes on stderr right after its rows, so on a terminal
 * `job 'train' was restarted by its agent` stood between the table's rows (the newcomer pass),
 * while the docs say notes come under the table.  Now they are collected and said after the
 * last row: stdout and stderr into one file, as a terminal shows them (the controller flushes
 * stdout before each log line, cli_main). */
static void test_notes_under_the_table(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-status-XXXXXX", text[1024], both[64];
    assert_non_null(mkdtemp(dir));
    snprintf(both, sizeof both, "%s/both", dir);
    struct agent_status *st = calloc(1, sizeof *st);
    assert_non_null(st);
    fake_agent_status_init(st);
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    js->state = GANG_RUNNING;
    js->restarts = 1;
    strcpy(js->last_restart_reason, "rank 0 hung (liveness deadline)");
    js->nranks = 1;
    fake_rank_training(&js->ranks[0], 0, 0, "", 10, 1000, 3.0);
    fake_agent(dir, st);
    free(st);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
    log_set_flush_stdout(true);
    char *argv[] = { "status", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv, 1, both, both), EXIT_OK);
    log_set_flush_stdout(false);
    char *all = capture_slurp(both);
    /* the table: header, train in a and b, eval in a (no-job); then every note */
    const char *note = strstr(all, "was restarted by its agent");
    const char *last_row = strstr(all, "eval ");
    if (!note || !last_row || note < last_row)
        fail_msg("a note before the table's last row:\n%s", all);
    const char *first_note = strstr(all, "drover: ");
    if (!first_note || first_note < last_row)
        fail_msg("stderr said something between the table's rows:\n%s", all);
    snprintf(text, sizeof text, "h1:local:%s/b: job 'train' was restarted by its agent", dir);
    assert_non_null(strstr(all, text)); /* each container's note, the last one's too */
    free(all);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover logs` of a container where the job never ran said tail's "cannot open" (and with -f
 * waited silently, exit 0 on Ctrl-C): it says the job, or that rank, never ran there, exit 1;
 * a rank that ran prints its log, exit 0. */
static void test_logs_never_ran(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-logs-XXXXXX", text[1024], out[128], err[128], p[512];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
    char *argv[] = { "logs", "--job", "train", "--rank", "0", NULL };
    assert_int_equal(capture_verb(cmd_logs, inv, argv, 5, out, err), EXIT_FAIL);
    snprintf(text, sizeof text, "h1:local:%s/a: job 'train' never ran here: no worker log (no '%s/a/runs/train/logs'); "
             "`drover status --job train` says what runs where", dir, dir);
    assert_int_equal(count_lines(err, text), 1);
    assert_int_equal(count_lines(out, ""), 0);
    /* the job ran there, rank 0 did not (another nproc_per_node then) */
    snprintf(p, sizeof p, "mkdir -p '%s/a/runs/train/logs'", dir);
    assert_int_equal(system(p), 0);
    assert_int_equal(capture_verb(cmd_logs, inv, argv, 5, out, err), EXIT_FAIL);
    snprintf(text, sizeof text, "h1:local:%s/a: rank 0 of job 'train' never ran here: no worker log at "
             "'%s/a/runs/train/logs/rank0.log'", dir, dir);
    assert_int_equal(count_lines(err, text), 1);
    /* it ran: its log, exit 0 */
    snprintf(p, sizeof p, "%s/a/runs/train/logs/rank0.log", dir);
    capture_put(p, "step 1\n", 0640);
    assert_int_equal(capture_verb(cmd_logs, inv, argv, 5, out, err), EXIT_OK);
    assert_int_equal(count_lines(out, "step 1"), 1);
    assert_int_equal(count_lines(err, ""), 0);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* status -o json says per job whether a drover of this state_dir holds its deploy lock (a
 * deploy, rollback, stop or start in progress): its pid, since when, the lock; else null. */
static void test_deploy_in_progress(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-dip-XXXXXX", text[1024], out[128], err[128], p[512];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct agent_status st;
    fake_agent_status_init(&st);
    fake_agent(dir, &st);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
    snprintf(p, sizeof p, "%s/state", dir);
    int lock = state_lock_job(p, "train");
    assert_true(lock >= 0);
    char *argv[] = { "status", "-o", "json", NULL };
    assert_int_equal(capture_verb(cmd_status, inv, argv, 3, out, err), EXIT_OK);
    char *doc = capture_slurp(out);
    json_t *root = json_loads(doc, 0, NULL);
    assert_non_null(root);
    json_t *jobs = json_object_get(root, "jobs");
    assert_int_equal(json_array_size(jobs), 2);
    json_t *dip = json_object_get(json_array_get(jobs, 0), "deploy_in_progress");
    assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 0), "job")), "train");
    assert_true(json_is_object(dip));
    assert_int_equal(json_integer_value(json_object_get(dip, "holder_pid")), getpid());
    const char *since = json_string_value(json_object_get(dip, "since"));
    assert_non_null(since);
    assert_int_equal(strlen(since), 20); /* 2026-12-06T15:35:23Z */
    assert_int_equal(since[19], 'Z');
    snprintf(text, sizeof text, "%s/state/lock-train", dir);
    assert_string_equal(json_string_value(json_object_get(dip, "lock")), text);
    /* eval: nobody deploys it */
    dip = json_object_get(json_array_get(jobs, 1), "deploy_in_progress");
    assert_true(dip && json_is_null(dip));
    json_decref(root);
    free(doc);
    close(lock);
    assert_int_equal(capture_verb(cmd_status, inv, argv, 3, out, err), EXIT_OK);
    doc = capture_slurp(out);
    root = json_loads(doc, 0, NULL);
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(root, "jobs"), 0), "deploy_in_progress")));
    json_decref(root);
    free(doc);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `kill -9` of drover right after "switch: stopping the old gang": plain `drover status` showed
 * "stopped" for ~105 s, as after `drover stop`, no note; only -o wide and -o json said that the
 * agent starts the release again on its own.  A note under the table says it, and what to run;
 * a stop by `drover stop` gets none. */
static void test_switch_stop_noted(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-status-sw-XXXXXX", text[1024], out[64], err[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct agent_status st;
    fake_agent_status_init(&st);
    st.njobs = 1;
    strcpy(st.jobs[0].job, "train");
    st.jobs[0].state = GANG_STOPPED;
    memset(st.jobs[0].current, 'e', RELEASE_ID_LEN);
    strcpy(st.jobs[0].good, st.jobs[0].current);
    snprintf(st.jobs[0].reason, sizeof st.jobs[0].reason, "stopped for a switch; starts eeeeeeeeeeee again on its "
             "own unless the switch goes on within 105 s");
    fake_agent(dir, &st);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
    char *argv[] = { "status", "--job", "train", NULL };
    optind = 0;
    assert_int_equal(capture_verb(cmd_status, inv, argv, 3, out, err), EXIT_OK);
    char want[600];
    snprintf(want, sizeof want, "h1:local:%s/a: job 'train' is stopped for a switch, not by `drover stop`: its "
             "agent starts eeeeeeeeeeee again on its own unless the switch goes on within 105 s", dir);
    if (count_lines(err, want) != 1 || count_lines(err, "drover start --job train` starts it now") < 1) {
        char *e = capture_slurp(err);
        fail_msg("stderr: %s", e);
    }
    /* a stop by request: no note */
    strcpy(st.jobs[0].reason, "stopped by request");
    fake_agent(dir, &st);
    optind = 0;
    assert_int_equal(capture_verb(cmd_status, inv, argv, 3, out, err), EXIT_OK);
    assert_int_equal(count_lines(err, "stopped for a switch"), 0);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover history` of a release directory named 'sp ace': the NAME column split in two and the
 * table's columns no longer parsed; such a name is quoted as a shell quotes it, a plain one is
 * as it was, and what text_escape() escapes is escaped still. */
static void test_table_word_quotes_whitespace(void **state)
{
    (void)state;
    char buf[300];
    assert_string_equal(ui_table_word("v1", buf, sizeof buf), "v1");
    assert_string_equal(ui_table_word("", buf, sizeof buf), "");
    assert_string_equal(ui_table_word("sp ace", buf, sizeof buf), "'sp ace'");
    assert_string_equal(ui_table_word("tab\there", buf, sizeof buf), "tab\\there"); /* escaped: one word */
    assert_string_equal(ui_table_word("it's", buf, sizeof buf), "'it'\\''s'");
    char small[6];
    ui_table_word("sp ace and more", small, sizeof small);
    assert_true(strlen(small) < sizeof small);
    /* in the table: one column; -o json keeps the name as it is */
    char dir[] = "/tmp/drover-test-hist-XXXXXX", out[64], err[64], text[300];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
    struct history_entry e = { .time = 1764684191, .ktok_s = -1, .baseline_ktok_s = -1 };
    strcpy(e.job, "train");
    memset(e.release, 'a', RELEASE_ID_LEN);
    strcpy(e.name, "sp ace");
    strcpy(e.result, "promoted");
    strcpy(e.reason, "throughput +0.1%");
    assert_int_equal(fs_mkdir_p(inv->state_dir, 0700), 0);
    assert_int_equal(state_history_append(inv->state_dir, &e), 0);
    char *argv[] = { "history", "--local", NULL };
    optind = 0;
    assert_int_equal(capture_verb(cmd_history, inv, argv, 2, out, err), EXIT_OK);
    char *o = capture_slurp(out);
    if (!strstr(o, " 'sp ace' ") || strstr(o, " sp ace "))
        fail_msg("stdout: %s", o);
    free(o);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover validate DIR` of a release with a dangling relative symlink inside it said ok, and the
 * link failed at run time: it warns, naming the link, and still passes (the job may create the
 * target at run time: deploy ships it). */
static void test_validate_warns_of_dangling_link(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-val-XXXXXX", out[64], err[64], p[128], text[300], why[256];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    snprintf(p, sizeof p, "%s/rel/bin", dir);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/rel/bin/x", dir);
    capture_put(p, "#!/bin/sh\n", 0755);
    snprintf(p, sizeof p, "%s/rel/latest", dir);
    assert_int_equal(symlink("ckpt/step-100", p), 0);
    struct inventory *inv = NULL;
    snprintf(text, sizeof text, "[host h1]\nlocal = true\n[job mini]\ncontainers = h1:local:%s/c\ncommand = bin/x\n", dir);
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, why, sizeof why), 0);
    snprintf(p, sizeof p, "%s/rel", dir);
    char *argv[] = { "validate", p, NULL };
    optind = 0;
    assert_int_equal(capture_verb(cmd_validate, inv, argv, 2, out, err), EXIT_OK);
    char want[300];
    snprintf(want, sizeof want, "release symlink '%s/rel/latest' -> 'ckpt/step-100' points to nothing in the release", dir);
    if (count_lines(err, want) != 1) {
        char *e = capture_slurp(err);
        fail_msg("stderr: %s", e);
    }
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_text),
        cmocka_unit_test(test_rank_ktok),
        cmocka_unit_test(test_failed_hint),
        cmocka_unit_test(test_agent_hint),
        cmocka_unit_test(test_restart_note),
        cmocka_unit_test(test_spec_hint),
        cmocka_unit_test(test_pct_ct_problem),
        cmocka_unit_test(test_unreachable_said_once_per_container),
        cmocka_unit_test(test_nojob_hint),
        cmocka_unit_test(test_nojob_hint_text),
        cmocka_unit_test(test_failed_reason_code),
        cmocka_unit_test(test_candidate_ranks_say_probation),
        cmocka_unit_test(test_good_release_marked_bad_note),
        cmocka_unit_test(test_unwatched_probation_note),
        cmocka_unit_test(test_bad_marks_disagree),
        cmocka_unit_test(test_hello_only_rank_says_rendezvous),
        cmocka_unit_test(test_json_members_documented),
        cmocka_unit_test(test_no_job_said),
        cmocka_unit_test(test_notes_under_the_table),
        cmocka_unit_test(test_logs_never_ran),
        cmocka_unit_test(test_deploy_in_progress),
        cmocka_unit_test(test_switch_stop_noted),
        cmocka_unit_test(test_table_word_quotes_whitespace),
        cmocka_unit_test(test_validate_warns_of_dangling_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
