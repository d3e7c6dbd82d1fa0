/* Unit tests for `drover stop|start`: the argument parsing and job selection
 * (controller/cmd_stopstart.c: --job repeats, --all-jobs, never both nor neither, ret untouched on
 * a usage error) and the per-container judgement and exit code (controller/deploy/stopstart.c:
 * a container that does not answer, or whose host is unreachable, fails the verb; a stopped
 * container fails both: for stop its agent starts the gang again with the container, so it is
 * said with what to do; "already running" is fine), and the
 * steps of the fan-out both it and the switch's stop phase use (controller/deploy/fan.c,
 * agent_fan_line/agent_fan_end: which line is kept, what ends a stream), and the worst case a
 * stop announces (stopstart_budget_of: it said only the agents' answers, "deadline 150 s", while
 * the lease taken before and the record and lease given back after can add as much again; with
 * several jobs, one after another, the sum of theirs), and a start of a gang that runs in part
 * (stopstart_split_gang, against a fake agent: the running part is stopped first, every
 * container starts as one rendezvous generation). */
#include <errno.h>
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

#include "common/agentcli.h"

#include "controller/cmd.h"
#include "controller/exitcode.h"
#include "controller/deploy/deploy_int.h"
#include "controller/deploy/stopstart.h"
#include "tests/unit/capture.h"

static int parse(struct stopstart_args *a, ...)
{
    char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, a);
    for (char *s = va_arg(ap, char *); s && argc < 15; s = va_arg(ap, char *))
        argv[argc++] = s;
    va_end(ap);
    argv[argc] = NULL;
    return cmd_stopstart_parse(argc, argv, a);
}

static void test_parse_selection(void **state)
{
    (void)state;
    struct stopstart_args a;
    assert_int_equal(parse(&a, "stop", "--job", "train", "--job", "side", "-o", "json", NULL), EXIT_OK);
    assert_int_equal(a.njobs, 2);
    assert_string_equal(a.jobs[0], "train");
    assert_string_equal(a.jobs[1], "side");
    assert_false(a.all);
    assert_true(a.json);
    assert_false(a.dry_run);
    assert_int_equal(parse(&a, "start", "--all-jobs", "--dry-run", NULL), EXIT_OK);
    assert_int_equal(a.njobs, 0);
    assert_true(a.all);
    assert_true(a.dry_run);
    assert_false(a.json);
}

static void test_parse_usage_errors(void **state)
{
    (void)state;
    struct stopstart_args a = { .njobs = 42 };
    assert_int_equal(parse(&a, "stop", NULL), EXIT_USAGE);                             /* neither */
    assert_int_equal(parse(&a, "stop", "--dry-run", NULL), EXIT_USAGE);
    assert_int_equal(parse(&a, "stop", "--job", "a", "--all-jobs", NULL), EXIT_USAGE); /* both */
    assert_int_equal(parse(&a, "stop", "--job", "a", "--job", "a", NULL), EXIT_USAGE); /* twice */
    assert_int_equal(parse(&a, "stop", "--job", "a", "-o", "yaml", NULL), EXIT_USAGE);
    assert_int_equal(parse(&a, "stop", "--job", "a", "extra", NULL), EXIT_USAGE);
    assert_int_equal(parse(&a, "stop", "--force", "--job", "a", NULL), EXIT_USAGE);
    assert_int_equal(a.njobs, 42); /* ret untouched after a failure */
}

static void test_judge(void **state)
{
    (void)state;
    /* stop */
    assert_int_equal(stopstart_judge(false, true, "ok release 1afd generation 1: stopped: no process of "
                                     "the gang is left", true, false), SS_DONE);
    assert_int_equal(stopstart_judge(false, false, NULL, false, false), SS_UNREACHABLE);
    assert_int_equal(stopstart_judge(false, true, NULL, false, false), SS_NO_ANSWER);
    assert_int_equal(stopstart_judge(false, true, NULL, true, false), SS_FAILED);
    assert_int_equal(stopstart_judge(false, true, NULL, true, true), SS_CT_STOPPED);
    /* start */
    assert_int_equal(stopstart_judge(true, true, "ok: already running", true, false), SS_ALREADY);
    assert_int_equal(stopstart_judge(true, true, "ok release 1afd generation 2", true, false), SS_DONE);
    /* an ok line counts even when the stream then broke */
    assert_int_equal(stopstart_judge(true, true, "ok release 1afd", false, false), SS_DONE);
    assert_string_equal(stopstart_word(false, SS_DONE), "stopped");
    assert_string_equal(stopstart_word(true, SS_DONE), "started");
    assert_string_equal(stopstart_word(true, SS_NO_ANSWER), "NO ANSWER");
}

static void test_exit_code(void **state)
{
    (void)state;
    enum stopstart_outcome all_ok[] = { SS_DONE, SS_DONE, SS_ALREADY };
    assert_int_equal(stopstart_exit(true, all_ok, 3, false), EXIT_OK);
    assert_int_equal(stopstart_exit(true, all_ok, 3, true), EXIT_HOSTKEY);
    enum stopstart_outcome ct_down[] = { SS_DONE, SS_CT_STOPPED };
    /* its agent starts the gang again with the container: not stopped (it exited 0) */
    assert_int_equal(stopstart_exit(false, ct_down, 2, false), EXIT_FAIL);
    assert_false(stopstart_is_ok(false, SS_CT_STOPPED));
    assert_false(stopstart_is_ok(true, SS_CT_STOPPED));
    assert_int_equal(stopstart_exit(true, ct_down, 2, false), EXIT_FAIL); /* nothing can start there */
    enum stopstart_outcome slow[] = { SS_DONE, SS_NO_ANSWER, SS_DONE };
    assert_int_equal(stopstart_exit(false, slow, 3, false), EXIT_FAIL);
    enum stopstart_outcome gone[] = { SS_UNREACHABLE };
    assert_int_equal(stopstart_exit(false, gone, 1, false), EXIT_FAIL);
    enum stopstart_outcome refused[] = { SS_FAILED, SS_DONE };
    assert_int_equal(stopstart_exit(false, refused, 2, false), EXIT_FAIL);
    assert_int_equal(stopstart_exit(false, NULL, 0, false), EXIT_OK);
}

/* a start that found the job running everywhere records nothing (it used to record "started") */
static void test_history_result(void **state)
{
    (void)state;
    enum stopstart_outcome all_already[] = { SS_ALREADY, SS_ALREADY, SS_ALREADY };
    assert_null(stopstart_history_result(true, all_already, 3, EXIT_OK));
    enum stopstart_outcome some[] = { SS_ALREADY, SS_DONE, SS_ALREADY };
    assert_string_equal(stopstart_history_result(true, some, 3, EXIT_OK), "started");
    enum stopstart_outcome done[] = { SS_DONE, SS_DONE };
    assert_string_equal(stopstart_history_result(true, done, 2, EXIT_OK), "started");
    assert_string_equal(stopstart_history_result(false, done, 2, EXIT_OK), "stopped");
    enum stopstart_outcome ct_down[] = { SS_DONE, SS_CT_STOPPED };
    assert_string_equal(stopstart_history_result(false, ct_down, 2, stopstart_exit(false, ct_down, 2, false)),
                        "stop-failed");
    assert_string_equal(stopstart_history_result(true, ct_down, 2, EXIT_FAIL), "start-failed");
    enum stopstart_outcome half[] = { SS_ALREADY, SS_NO_ANSWER };
    assert_string_equal(stopstart_history_result(true, half, 2, EXIT_FAIL), "start-failed");
    assert_string_equal(stopstart_history_result(false, half, 2, EXIT_FAIL), "stop-failed");
    assert_string_equal(stopstart_history_result(true, all_already, 3, EXIT_HOSTKEY), "start-failed");
    /* a stop of a job already stopped everywhere records nothing either (it added a "stopped"
     * row each time); one container that did stop is a stop */
    assert_null(stopstart_history_result(false, all_already, 3, EXIT_OK));
    assert_string_equal(stopstart_history_result(false, some, 3, EXIT_OK), "stopped");
    assert_string_equal(stopstart_word(false, SS_ALREADY), "already stopped");
    assert_string_equal(stopstart_word(true, SS_ALREADY), "already running");
    /* Ctrl-C during the fan-out: its own word, never ok (it used to read "no answer within
     * 160 s" five seconds in) */
    assert_string_equal(stopstart_word(false, SS_INTERRUPTED), "INTERRUPTED");
    assert_false(stopstart_is_ok(false, SS_INTERRUPTED));
    enum stopstart_outcome intr[] = { SS_DONE, SS_INTERRUPTED };
    assert_int_equal(stopstart_exit(false, intr, 2, false), EXIT_FAIL);
    assert_string_equal(stopstart_history_result(false, intr, 2, EXIT_FAIL), "stop-failed");
}

/* A refusal says what to do: a job never deployed in a container (it said "see drover logs"),
 * a vmid of no container (pct's words, as status says them), anything else with the logs; a
 * long reason is kept whole up to STOPSTART_SAID_MAX (it was cut at 299 bytes, mid-word). */
static void test_failed_hint(void **state)
{
    (void)state;
    char buf[1200];
    stopstart_failed_hint(true, "ghost", "h1:101", "no job 'ghost' on this agent", buf, sizeof buf);
    assert_non_null(strstr(buf, "job 'ghost' was never deployed in h1:101"));
    assert_non_null(strstr(buf, "`drover deploy DIR --job ghost`"));
    stopstart_failed_hint(false, "train", "h1:109",
                          "no container 109 on this host (Configuration file 'nodes/pve/lxc/109.conf' "
                          "does not exist): check the vmid in the inventory's containers", buf, sizeof buf);
    assert_true(!strncmp(buf, "no container 109 on this host", 29));
    assert_null(strstr(buf, "drover logs"));
    char said[STOPSTART_SAID_MAX];
    memset(said, 'a', sizeof said - 12);
    memcpy(said + sizeof said - 12, " age restart", 12);
    said[sizeof said - 1] = '\0';
    stopstart_failed_hint(false, "train", "h1:101", said, buf, sizeof buf);
    assert_non_null(strstr(buf, "drover-agent stop --job train failed: aaa"));
    assert_non_null(strstr(buf, " age restar")); /* the end of a 599-byte reason is kept */
    assert_non_null(strstr(buf, "see `drover logs --job train`"));
    assert_non_null(strstr(buf, "`drover logs --job train --agent`")); /* the agent's own log, by a verb */
    stopstart_failed_hint(true, "train", "h1:101", "", buf, sizeof buf);
    assert_non_null(strstr(buf, "failed: no reason given"));
}

/* A stopped container: stop said "nothing runs there" and counted it stopped, but its agent
 * starts the gang again when the container starts; both verbs say what to do, with the vmid
 * and host to start it on. */
static void test_ct_stopped_hint(void **state)
{
    (void)state;
    char buf[1200];
    stopstart_ct_stopped_hint(false, "train", 201, "h2", "CT 201 not running", buf, sizeof buf);
    assert_non_null(strstr(buf, "the container is not running (pct: CT 201 not running)"));
    assert_non_null(strstr(buf, "starts the gang again when the container starts"));
    assert_non_null(strstr(buf, "`pct start 201` on h2"));
    assert_non_null(strstr(buf, "then run `drover stop --job train` again"));
    assert_null(strstr(buf, "nothing runs there"));
    stopstart_ct_stopped_hint(true, "train", 201, "h2", "", buf, sizeof buf);
    assert_non_null(strstr(buf, "(pct: -)"));
    assert_non_null(strstr(buf, "`pct start 201` on h2"));
    assert_non_null(strstr(buf, "then run `drover start --job train` again"));
    stopstart_ct_stopped_hint(false, "train", -1, "h1", "x", buf, sizeof buf);
    assert_null(strstr(buf, "pct start"));
}

/* The old gang's stop in a deploy's switch said nothing until it ended or the switch deadline
 * passed: agent_fan_run's tick says, every 15 s, which containers it is still waiting on. */
static void test_fan_tick(void **state)
{
    (void)state;
    double next = 15;
    assert_false(agent_fan_tick_due(0, &next, 15));
    assert_false(agent_fan_tick_due(14.9, &next, 15));
    assert_true(agent_fan_tick_due(15.1, &next, 15));
    assert_true(next == 30);
    assert_false(agent_fan_tick_due(15.3, &next, 15)); /* once per step */
    assert_true(agent_fan_tick_due(47, &next, 15));   /* a slow turn: one line, not three */
    assert_true(next == 60);
    double never = -1;
    assert_false(agent_fan_tick_due(1000, &never, 15));

    static struct inv_job j; /* large: not on the stack */
    j.ncts = 3;
    strcpy(j.cts[0].label, "h1:101");
    strcpy(j.cts[1].label, "h1:102");
    strcpy(j.cts[2].label, "h2:201");
    struct agent_fan_ct c[3] = { { .asked = true, .took = -1 }, { .asked = true, .ended = true, .took = 2 },
                                 { .asked = true, .took = -1 } };
    char buf[512];
    assert_int_equal(agent_fan_waiting(buf, sizeof buf, "the old gang of job 'train'", &j, c, 15.2, 90), 2);
    assert_string_equal(buf, "still waiting for the old gang of job 'train' to stop on h1:101, h2:201 (15 s of 90 s)");
    c[0].ended = c[2].ended = true;
    assert_int_equal(agent_fan_waiting(buf, sizeof buf, "x", &j, c, 30, 90), 0);
    assert_string_equal(buf, "");
    c[0] = (struct agent_fan_ct){ .took = -1 }; /* not asked (skipped, or unreachable): not waited on */
    assert_int_equal(agent_fan_waiting(buf, sizeof buf, "x", &j, c, 30, 90), 0);
}

/* A survey whose host exec got no answer said "h1:101: the agent in h1:101 did not answer ...":
 * the stall message names its containers, so its line is said as it is, once per host; any other
 * failure gets the container's label in front. */
static void test_fan_said(void **state)
{
    (void)state;
    static struct inv_job j;
    static struct deploy d;
    static struct ct_fan cf;
    j.ncts = 3;
    strcpy(j.cts[0].label, "h1:101");
    strcpy(j.cts[1].label, "h1:102");
    strcpy(j.cts[2].label, "h2:201");
    d.job = &j;
    cf.d = &d;
    const char *stall = "the agents in h1:101, h1:102 did not all answer within 15s while drover asked them "
                        "for the job's status: ...";
    for (int i = 0; i < 2; i++) {
        cf.rc[i] = -ETIMEDOUT;
        cf.named[i] = true;
        strcpy(cf.err[i], stall);
    }
    cf.rc[2] = -EIO;
    strcpy(cf.err[2], "drover-agent status failed (exit 127): not found");
    char line[4096];
    const char *s = ct_fan_said(&cf, 0, line, sizeof line);
    assert_non_null(s);
    assert_string_equal(s, stall);
    assert_null(strstr(s, "h1:101: ")); /* the label once, not "h1:101: the agents in h1:101" */
    assert_null(ct_fan_said(&cf, 1, line, sizeof line)); /* the same host's line: said once */
    s = ct_fan_said(&cf, 2, line, sizeof line);
    assert_string_equal(s, "h2:201: drover-agent status failed (exit 127): not found");
    /* two hosts stalled: each host's line once */
    cf.named[2] = true;
    strcpy(cf.err[2], "the agent in h2:201 did not answer within 15s ...");
    assert_string_equal(ct_fan_said(&cf, 2, line, sizeof line), "the agent in h2:201 did not answer within 15s ...");
}

static void test_fan_steps(void **state)
{
    (void)state;
    struct agent_fan_ct c = { .took = -1 };
    agent_fan_line(&c, "progress: waiting for rank 1", 28);
    assert_string_equal(c.ok, "");
    agent_fan_line(&c, "o", 1); /* not an ok line */
    assert_string_equal(c.ok, "");
    agent_fan_line(&c, "ok: stopping", 12);
    agent_fan_line(&c, "ok: stopped: no process of the gang is left", 43);
    assert_string_equal(c.ok, "ok: stopped: no process of the gang is left"); /* the last wins */
    agent_fan_line(&c, "ok: stopped and more", 10); /* len, not the NUL, bounds the line */
    assert_string_equal(c.ok, "ok: stoppe");
    char longl[1000];
    memset(longl, 'x', sizeof longl);
    memcpy(longl, "ok", 2);
    agent_fan_line(&c, longl, sizeof longl);
    assert_int_equal(strlen(c.ok), 299);
    /* a poll that is not an end changes nothing */
    assert_false(agent_fan_end(&c, 0, "ignored", 1.0));
    assert_false(agent_fan_end(&c, -EAGAIN, "ignored", 1.0));
    assert_false(c.ended);
    assert_true(c.took < 0);
    /* the command's end, and a lost connection */
    assert_true(agent_fan_end(&c, -EPIPE, "CT 101 not running", 2.5));
    assert_true(c.ended);
    assert_false(c.lost);
    assert_string_equal(c.err, "CT 101 not running");
    assert_true(c.took == 2.5);
    struct agent_fan_ct l = { .took = -1 };
    assert_true(agent_fan_end(&l, -EIO, NULL, 0.5));
    assert_true(l.ended && l.lost);
    assert_string_equal(l.err, "");
    assert_string_equal(l.ok, "");
}

/* The worst case is the sum of the steps, each the timeout it runs under. */
static void test_budget(void **state)
{
    (void)state;
    struct stopstart_budget b;
    /* defaults: exec_timeout 2m, grace unset (30 s), one container per host, hosts at once */
    stopstart_budget_of(false, 0, 120, 1, 1, &b);
    assert_true(b.lease == 120 + 120); /* lease take --status, then the plain take of older agents */
    assert_true(b.answer == 30 + 120);
    assert_true(b.record == HISTORY_ADD_TIMEOUT_S);
    assert_true(b.give_back == 120);
    assert_true(b.total == 240 + 150 + 15 + 120);
    assert_true(b.total > b.answer); /* what used to be announced alone */
    /* the take with --status waits at least a status query's time */
    stopstart_budget_of(false, 5, 10, 1, 1, &b);
    assert_true(b.lease == lease_take_timeout(10, true) + 10);
    assert_true(lease_take_timeout(10, true) == FLEET_STATUS_TIMEOUT_S);
    assert_true(b.answer == 15);
    /* start waits for GPU memory too; a host's containers are recorded one after another; hosts
     * beyond [drover] parallel wait their turn */
    stopstart_budget_of(true, 5, 10, 2, 3, &b);
    assert_true(b.answer == 5 + 10 + 30);
    assert_true(b.record == 2 * 3 * HISTORY_ADD_TIMEOUT_S);
    assert_true(b.lease == 2 * (15 + 10));
    assert_true(b.give_back == 2 * 10);
    assert_true(b.total == b.lease + b.answer + b.record + b.give_back);
}

/* `drover stop` against local roots whose agent (a script) answers every stop: each job's line
 * announces its whole worst case, and with two jobs, stopped one after another, a first line says
 * the sum.  It announced "(deadline 15 s)", the agents' answers alone. */
static void test_stop_announces_worst_case(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-stop-XXXXXX", text[1024], path[256], out[128], err[128];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    capture_put(path, "#!/bin/sh\nfor a; do\n  if [ \"$p\" = stop ] && [ \"$a\" = --job ]; then\n"
                      "    echo 'ok: stopped: no process of the gang is left'; exit 0\n  fi\n  p=$a\ndone\n"
                      "exit 0\n", 0755);
    struct inventory *inv = fake_agent_inventory(dir, "exec_timeout = 10s\n", "grace = 5s\n", "c");
    char *argv[] = { "stop", "--job", "train", NULL };
    assert_int_equal(capture_verb(cmd_stop, inv, argv, 3, out, err), EXIT_OK);
    /* train: lease 15 + 10, answers 5 + 10, two records on h1 one after another 30, give back 10 */
    struct stopstart_budget b;
    stopstart_job_budget(inv, inventory_find_job(inv, "train"), false, &b);
    assert_true(b.total == 25 + 15 + 30 + 10);
    char *said = capture_slurp(err);
    if (!strstr(said, "stop: job 'train': drover-agent stop in 2 containers at once, under the job's "
                      "deploy lease: at most 80 s (lease 25 s, the agents' answers 15 s, history record "
                      "and lease given back 40 s)\n"))
        fail_msg("stderr:\n%s", said);
    free(said);
    char *argv_all[] = { "stop", "--all-jobs", NULL };
    assert_int_equal(capture_verb(cmd_stop, inv, argv_all, 2, out, err), EXIT_OK);
    said = capture_slurp(err);
    /* eval: lease 25, answers 30 + 10, one record 15, give back 10 = 90 */
    if (!strstr(said, "stop: 2 jobs, one after another (each in all its containers at once): at most "
                      "170 s in all, the sum of each job's (train 80 s, eval 90 s)\n"))
        fail_msg("stderr:\n%s", said);
    free(said);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover stop --job J` of a release whose rank ignores SIGTERM printed "h1:101 stopped 15.1 s":
 * only the agent's log said SIGKILL.  The agent's answer says it (AGENT_STOP_SIGKILLED), and the
 * stop warns, naming the container and the grace, that a checkpoint on SIGTERM may be missing;
 * an older agent's answer, without it, warns of nothing. */
static void test_stop_warns_of_sigkill(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-stopkill-XXXXXX", text[1024], path[256], out[128], err[128];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    for (int killed = 0; killed <= 1; killed++) {
        snprintf(text, sizeof text, "#!/bin/sh\nfor a; do\n  if [ \"$p\" = stop ] && [ \"$a\" = --job ]; then\n"
                 "    echo 'ok release aaaaaaaaaaaa generation 3: stopped: no process of the gang is left%s'; "
                 "exit 0\n  fi\n  p=$a\ndone\nexit 0\n",
                 killed ? "; " AGENT_STOP_SIGKILLED "15 s (a rank ignored SIGTERM)" : "");
        capture_put(path, text, 0755);
        struct inventory *inv = fake_agent_inventory(dir, "exec_timeout = 10s\n", "grace = 15s\n", "c");
        char *argv[] = { "stop", "--job", "train", NULL };
        assert_int_equal(capture_verb(cmd_stop, inv, argv, 3, out, err), EXIT_OK);
        char *said = capture_slurp(err);
        bool warned = strstr(said, "a rank of job 'train' ignored SIGTERM for its grace of 15 s and was "
                                   "SIGKILLed: a checkpoint it writes on SIGTERM may not have been written") != NULL;
        if (warned != (bool)killed)
            fail_msg("killed %d, stderr:\n%s", killed, said);
        free(said);
        inventory_free(inv);
    }
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover start|stop --job J` of a job no container knows (never deployed anywhere): said once,
 * exit 1, and no history row.  It printed the refusal twice per container (the table's line and
 * an error) and recorded "J - - start-failed" with no release. */
static void test_never_deployed(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-fresh-XXXXXX", text[1024], path[256], out[128], hist[256];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(hist, sizeof hist, "%s/state/history.jsonl", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    capture_put(path, "#!/bin/sh\nfor a; do\n  case \"$p\" in start|stop) if [ \"$a\" = --job ]; then\n"
                      "    echo \"drover-agent: error: no job 'train' on this agent\" >&2; exit 1\n  fi;; esac\n"
                      "  p=$a\ndone\nexit 0\n", 0755);
    struct inventory *inv = fake_agent_inventory(dir, "exec_timeout = 10s\n", "", "c");
    for (int start = 0; start < 2; start++) {
        char *argv[] = { start ? "start" : "stop", "--job", "train", NULL };
        assert_int_equal(capture_verb(start ? cmd_start : cmd_stop, inv, argv, 3, out, out), EXIT_FAIL);
        char *said = capture_slurp(out);
        const char *first = strstr(said, "was never deployed");
        if (!first || strstr(first + 1, "was never deployed") || strstr(said, "FAILED") ||
            !strstr(said, start ? "start of job 'train' refused, nothing changed: job 'train' was never deployed "
                                  "in any of its containers ("
                                : "stop of job 'train' refused, nothing changed") ||
            !strstr(said, "`drover deploy DIR --job train`"))
            fail_msg("said:\n%s", said);
        free(said);
        assert_int_equal(access(hist, F_OK), -1); /* nothing recorded */
    }
    /* one container that knows the job: the verb runs as before (a table, a record) */
    assert_true(stopstart_never_deployed((enum stopstart_outcome[]){ SS_FAILED, SS_FAILED },
                                         (char[2][STOPSTART_SAID_MAX]){ "no job 'train' on this agent",
                                                                         "no job 'train' on this agent" }, 2));
    assert_false(stopstart_never_deployed((enum stopstart_outcome[]){ SS_FAILED, SS_DONE },
                                          (char[2][STOPSTART_SAID_MAX]){ "no job 'train' on this agent",
                                                                          "ok: started" }, 2));
    assert_false(stopstart_never_deployed((enum stopstart_outcome[]){ SS_FAILED, SS_UNREACHABLE },
                                          (char[2][STOPSTART_SAID_MAX]){ "no job 'train' on this agent", "" }, 2));
    assert_false(stopstart_never_deployed(NULL, NULL, 0));
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* Which part of a gang a start must stop first: where it runs, when it is known not to run
 * in another container (a start there starts a new generation the running part never joins). */
static void test_split_gang(void **state)
{
    (void)state;
    bool part[3] = { true, true, true };
    /* h2:201 runs, h1:101 and h1:102 stopped: h2:201 is stopped first */
    assert_int_equal(stopstart_split_gang((bool[]){ false, false, true },
                                          (bool[]){ true, true, false }, 3, part),
                     1);
    assert_false(part[0]);
    assert_false(part[1]);
    assert_true(part[2]);
    /* everywhere, nowhere, or nothing known of the rest: nothing to stop, part untouched */
    bool keep[3] = { true, true, true };
    assert_int_equal(stopstart_split_gang((bool[]){ true, true, true },
                                          (bool[]){ false, false, false }, 3, keep),
                     0);
    assert_int_equal(stopstart_split_gang((bool[]){ false, false, false },
                                          (bool[]){ true, true, true }, 3, keep),
                     0);
    assert_int_equal(stopstart_split_gang((bool[]){ true, false, false },
                                          (bool[]){ false, false, false }, 3, keep),
                     0);
    assert_int_equal(stopstart_split_gang((bool[]){ true }, (bool[]){ true }, 1, keep), 0);
    assert_true(keep[0] && keep[1] && keep[2]);
    struct job_status js = { .state = GANG_RUNNING };
    assert_true(stopstart_gang_runs(&js));
    js.state = GANG_STARTING;
    assert_true(stopstart_gang_runs(&js));
    js.state = GANG_REVERTED; /* its good release runs */
    assert_true(stopstart_gang_runs(&js));
    js.state = GANG_BACKOFF; /* a start starts it: not "already running" */
    assert_false(stopstart_gang_runs(&js));
    js.state = GANG_STOPPED;
    assert_false(stopstart_gang_runs(&js));
    js.state = GANG_FAILED;
    assert_false(stopstart_gang_runs(&js));
    assert_true(stopstart_is_ok(true, SS_RESTARTED));
    assert_false(stopstart_is_ok(true, SS_HELD_BACK));
    assert_string_equal(stopstart_word(true, SS_RESTARTED), "restarted");
    assert_string_equal(stopstart_word(true, SS_HELD_BACK), "NOT STARTED");

    /* split generations: every container in the gang (running, or backing off for a peer's exit),
     * every token known, two that differ */
    struct job_status g[3] = { { .state = GANG_RUNNING, .rdzv = "aa" },
                               { .state = GANG_BACKOFF, .peer_exit = true, .rdzv = "bb" },
                               { .state = GANG_RUNNING, .rdzv = "aa" } };
    const struct job_status *gp[3] = { &g[0], &g[1], &g[2] };
    bool gpart[3] = { false, false, false };
    assert_int_equal(stopstart_split_generation(gp, 3, gpart), 3);
    assert_true(gpart[0] && gpart[1] && gpart[2]);
    bool gkeep[3] = { false, false, false };
    g[1].peer_exit = false; /* backing off for a cause of its own: a start starts it anyway */
    assert_int_equal(stopstart_split_generation(gp, 3, gkeep), 0);
    g[1].peer_exit = true;
    g[1].rdzv[0] = '\0'; /* an older agent: unknown decides nothing */
    assert_int_equal(stopstart_split_generation(gp, 3, gkeep), 0);
    strcpy(g[1].rdzv, "aa"); /* one generation */
    assert_int_equal(stopstart_split_generation(gp, 3, gkeep), 0);
    strcpy(g[1].rdzv, "bb");
    gp[2] = NULL; /* no document from one */
    assert_int_equal(stopstart_split_generation(gp, 3, gkeep), 0);
    assert_int_equal(stopstart_split_generation(gp, 1, gkeep), 0);
    assert_false(gkeep[0] || gkeep[1] || gkeep[2]);
}

/* The fake agent of test_start_split_gang: DIR/<root>/status.json for `lease take --status`, a
 * DIR/<root>/running file for a gang that runs (start answers "already running" there), stop
 * refused where DIR/<root>/stuck exists; every command logged to DIR/log as "<root> ARGS". */
static void split_agent_gen(const char *dir, const char *root, enum gang_state state, bool running,
                            const char *rdzv, bool peer_exit);

static void split_agent(const char *dir, const char *root, enum gang_state state, bool running)
{
    split_agent_gen(dir, root, state, running, NULL, false);
}

/* split_agent whose document names the gang's rendezvous generation rdzv (NULL: none, an older
 * agent) and peer_exit */
static void split_agent_gen(const char *dir, const char *root, enum gang_state state, bool running,
                            const char *rdzv, bool peer_exit)
{
    char path[512], text[512];
    struct agent_status *st = malloc(sizeof *st);
    assert_non_null(st);
    fake_agent_status_init(st);
    st->njobs = 1;
    strcpy(st->jobs[0].job, "train");
    st->jobs[0].state = state;
    memset(st->jobs[0].current, 'a', RELEASE_ID_LEN);
    memset(st->jobs[0].good, 'a', RELEASE_ID_LEN);
    if (rdzv)
        strcpy(st->jobs[0].rdzv, rdzv);
    st->jobs[0].peer_exit = peer_exit;
    char *doc = fake_agent_doc(st, false);
    free(st);
    snprintf(text, sizeof text, "mkdir -p '%s/%s' && rm -f '%s/%s/running'", dir, root, dir, root);
    assert_int_equal(system(text), 0);
    snprintf(path, sizeof path, "%s/%s/status.json", dir, root);
    capture_put(path, doc, 0600);
    free(doc);
    if (running) {
        snprintf(path, sizeof path, "%s/%s/running", dir, root);
        capture_put(path, "", 0600);
    }
}

static char *split_log(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/log", dir);
    char *log = capture_slurp(path);
    (void)unlink(path);
    return log;
}

/* How many commands of log were asked of root's agent and hold what. */
static int split_asked(const char *log, const char *root, const char *what)
{
    int n = 0;
    size_t rl = strlen(root);
    for (const char *l = log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *hit = strstr(l, what), *nl = strchr(l, '\n');
        n += !strncmp(l, root, rl) && l[rl] == ' ' && hit && (!nl || hit < nl);
    }
    return n;
}

/* The rendezvous generation of every `start` in log: the same in all, written to gen; returns
 * how many starts there were (-1: two generations). */
static int split_starts(const char *log, char gen[64])
{
    int n = 0;
    gen[0] = '\0';
    for (const char *p = log; (p = strstr(p, " start --job train --rdzv ")); n++) {
        p += strlen(" start --job train --rdzv ");
        char g[64];
        snprintf(g, sizeof g, "%.*s", (int)strcspn(p, " \n"), p);
        if (gen[0] && strcmp(gen, g))
            return -1;
        strcpy(gen, g);
    }
    return n;
}

/* The start tests' two fake containers a and b (fake_agent_inventory) under a new temporary dir
 * (a mkdtemp template), out and err the paths their output goes to, and the agent of
 * split_agent_gen's description: a lease take prints DIR/<root>/status.json; stop refuses where
 * DIR/<root>/stuck exists, else ends the gang; start answers "already running" where
 * DIR/<root>/running exists, else starts it; every command is logged to DIR/log. */
static struct inventory *split_setup(char *dir, char out[128], char err[128])
{
    char text[2048], path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(out, 128, "%s/out", dir);
    snprintf(err, 128, "%s/err", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    snprintf(
        text, sizeof text,
        "#!/bin/sh\nr=; p=\nfor a; do [ \"$p\" = --root ] && r=$a; p=$a; done\n"
        "echo \"${r##*/} $*\" >> '%s/log'\n"
        "case \" $* \" in\n"
        "*' lease take '*|*' status --json '*) cat \"$r/status.json\";;\n"
        "*' stop --job '*) [ -e \"$r/stuck\" ] && { echo 'gang still stopping' >&2; exit 1; }\n"
        "  rm -f \"$r/running\"; echo 'ok: stopped: no process of the gang is left';;\n"
        "*' start --job '*) if [ -e \"$r/running\" ]; then echo 'ok: already running'; else\n"
        "  touch \"$r/running\"; echo 'ok release aaaaaaaaaaaa generation 2'; fi;;\n"
        "esac\nexit 0\n",
        dir);
    capture_put(path, text, 0755);
    return fake_agent_inventory(dir, "exec_timeout = 10s\n", "grace = 5s\n", "c");
}

/* A start of a gang of several containers that ran in part: the new ranks got a new rendezvous
 * generation and the part that ran ("already running") kept its old one, so the gang never
 * formed (every rank "exited with code 8 ... rendezvous failed") while the start said it runs,
 * exit 0.  Now the running part is stopped first and started with the others as one generation;
 * where the lease's status did not tell, the start's answers do and the part is started again as
 * the same generation; where it cannot be stopped, nothing is started, exit 1. */
static void test_start_split_gang(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-split-XXXXXX", text[2048], path[256], out[128], err[128],
         gen[64];
    struct inventory *inv = split_setup(dir, out, err);
    char *argv[] = { "start", "--job", "train", NULL };

    /* the lease's status says b runs, a does not: b is stopped first, then both start as one */
    split_agent(dir, "a", GANG_STOPPED, false);
    split_agent(dir, "b", GANG_RUNNING, true);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, err), EXIT_OK);
    char *log = split_log(dir), *said = capture_slurp(out), *said_err = capture_slurp(err);
    /* b stopped first, alone; then both started as one generation */
    if (split_asked(log, "b", " stop --job train") != 1 ||
        split_asked(log, "a", " stop --job train") || split_starts(log, gen) != 2 ||
        strstr(log, " stop --job train") > strstr(log, " start --job train") ||
        !strstr(said,
                "job 'train' runs in 2 containers as one generation (1 started, 1 restarted") ||
        strstr(said, "already running") ||
        !strstr(said_err, "start: job 'train' runs in h1:local:"))
        fail_msg("log:\n%s\nstdout:\n%s\nstderr:\n%s", log, said, said_err);
    free(log);
    free(said);
    free(said_err);

    /* the status did not tell (it says stopped in both, b runs): b answers "already running",
     * a started; b is then stopped and started again as a's generation */
    split_agent(dir, "a", GANG_STOPPED, false);
    split_agent(dir, "b", GANG_STOPPED, true);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, err), EXIT_OK);
    log = split_log(dir);
    said = capture_slurp(out);
    said_err = capture_slurp(err);
    if (split_starts(log, gen) != 3 || !strstr(log, " stop --job train") ||
        !strstr(said, "1 started, 1 restarted") ||
        !strstr(said_err, "was already running in h1:local:"))
        fail_msg("log:\n%s\nstdout:\n%s\nstderr:\n%s", log, said, said_err);
    free(log);
    free(said);
    free(said_err);

    /* the running part cannot be stopped: nothing is started anywhere, exit 1, what to do said */
    split_agent(dir, "a", GANG_STOPPED, false);
    split_agent(dir, "b", GANG_RUNNING, true);
    snprintf(path, sizeof path, "%s/b/stuck", dir);
    capture_put(path, "", 0600);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, out), EXIT_FAIL);
    log = split_log(dir);
    said = capture_slurp(out);
    if (split_starts(log, gen) != 0 || !strstr(said, "NOT STARTED") ||
        !strstr(said, "gang still stopping") ||
        !strstr(
            said,
            "nothing was started anywhere: a gang of several containers starts as one generation"))
        fail_msg("log:\n%s\nsaid:\n%s", log, said);
    free(log);
    free(said);
    (void)unlink(path);

    /* running everywhere: already running, nothing stopped, exit 0 as before */
    split_agent(dir, "a", GANG_RUNNING, true);
    split_agent(dir, "b", GANG_RUNNING, true);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, err), EXIT_OK);
    log = split_log(dir);
    said = capture_slurp(out);
    if (strstr(log, " stop --job train") ||
        !strstr(said, "was already running in all 2 containers"))
        fail_msg("log:\n%s\nsaid:\n%s", log, said);
    free(log);
    free(said);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* The lab's outage: a switch aborted, its abort restarted one container's gang with one
 * rendezvous token and the other's agent restarted its own with another; both ranks exited 8
 * (rendezvous failed) and restarted for ever, and `drover start` answered "already running"
 * everywhere, nothing started.  Now the tokens in the lease's status documents differ: the gang
 * is stopped in every container, then started in all with one new --rdzv ("restarted"); the
 * same in every container (or one unknown: an older agent) is "already running", nothing done. */
static void test_start_split_generation(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-splitgen-XXXXXX", text[2048], out[128], err[128],
         gen[64];
    struct inventory *inv = split_setup(dir, out, err);
    char *argv[] = { "start", "--job", "train", NULL };

    /* running in both, as two generations: stopped in both, then both started as one */
    split_agent_gen(dir, "a", GANG_RUNNING, true, "83045394a73024a6", false);
    split_agent_gen(dir, "b", GANG_RUNNING, true, "7c758012f610e5a8", false);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, err), EXIT_OK);
    char *log = split_log(dir), *said = capture_slurp(out), *said_err = capture_slurp(err);
    if (split_asked(log, "a", " stop --job train") != 1 ||
        split_asked(log, "b", " stop --job train") != 1 || split_starts(log, gen) != 2 ||
        !strcmp(gen, "83045394a73024a6") || !strcmp(gen, "7c758012f610e5a8") ||
        strstr(log, " stop --job train") > strstr(log, " start --job train") ||
        !strstr(said, "0 started, 2 restarted") || strstr(said, "already running") ||
        !strstr(said_err, "not as one rendezvous generation"))
        fail_msg("log:\n%s\nstdout:\n%s\nstderr:\n%s", log, said, said_err);
    free(log);
    free(said);
    free(said_err);

    /* backing off after a peer's exit in both, two generations: the same */
    split_agent_gen(dir, "a", GANG_BACKOFF, false, "83045394a73024a6", true);
    split_agent_gen(dir, "b", GANG_BACKOFF, false, "7c758012f610e5a8", true);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, err), EXIT_OK);
    log = split_log(dir);
    said = capture_slurp(out);
    if (split_asked(log, "a", " stop --job train") != 1 ||
        split_asked(log, "b", " stop --job train") != 1 || split_starts(log, gen) != 2 ||
        !strstr(said, "0 started, 2 restarted"))
        fail_msg("log:\n%s\nstdout:\n%s", log, said);
    free(log);
    free(said);

    /* one generation in both, or one unknown (an older agent): already running, nothing done */
    for (int k = 0; k < 2; k++) {
        split_agent_gen(dir, "a", GANG_RUNNING, true, "83045394a73024a6", false);
        split_agent_gen(dir, "b", GANG_RUNNING, true, k ? NULL : "83045394a73024a6", false);
        assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, err), EXIT_OK);
        log = split_log(dir);
        said = capture_slurp(out);
        if (strstr(log, " stop --job train") ||
            !strstr(said, "was already running in all 2 containers"))
            fail_msg("case %d log:\n%s\nsaid:\n%s", k, log, said);
        free(log);
        free(said);
    }
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* A start where one container's agent could not take the job's deploy lease (its disk full: the
 * lease file cannot be written, `lease take` exits 8): the start went on there without it.  Now
 * nothing is started anywhere (the gang is one generation in all its containers), exit 1; the
 * container's row says why and what to do, the other's that it was held back. */
static void test_start_without_lease(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-nolease-XXXXXX", text[2048], path[256], out[128], gen[64];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    snprintf(
        text, sizeof text,
        "#!/bin/sh\nr=; p=\nfor a; do [ \"$p\" = --root ] && r=$a; p=$a; done\n"
        "echo \"${r##*/} $*\" >> '%s/log'\n"
        "case \" $* \" in\n"
        "*' lease take '*) if [ -e \"$r/full\" ]; then echo \"drover: error: lease of job 'train': "
        "cannot write '$r/leases/train.json': No space left on device (the container's disk is "
        "full)\" >&2; exit 8; fi; cat \"$r/status.json\";;\n"
        "*' start --job '*) touch \"$r/running\"; echo 'ok release aaaaaaaaaaaa generation 2';;\n"
        "esac\nexit 0\n",
        dir);
    capture_put(path, text, 0755);
    struct inventory *inv = fake_agent_inventory(dir, "exec_timeout = 10s\n", "grace = 5s\n", "c");
    char *argv[] = { "start", "--job", "train", NULL };
    split_agent(dir, "a", GANG_STOPPED, false);
    split_agent(dir, "b", GANG_STOPPED, false);
    snprintf(path, sizeof path, "%s/a/full", dir);
    capture_put(path, "", 0600);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, out), EXIT_FAIL);
    char *log = split_log(dir), *said = capture_slurp(out), want[512];
    snprintf(want, sizeof want, "no deploy lease here, so nothing was started anywhere: "
             "lease of job 'train': cannot write '%s/a/leases/train.json': No space left on device (the "
             "container's disk is full): free space there, then run `drover start --job train`", dir);
    if (split_starts(log, gen) != 0 || !strstr(said, want) || !strstr(said, "NOT STARTED") ||
        !strstr(said, "nothing was started anywhere: the job's deploy lease could not be taken in "
                      "h1:local:") ||
        !strstr(said, "start of job 'train': 0 of 2 containers started"))
        fail_msg("log:\n%s\nsaid:\n%s", log, said);
    free(log);
    free(said);

    /* the disk freed: it starts in both as one generation */
    (void)unlink(path);
    assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, out), EXIT_OK);
    log = split_log(dir);
    said = capture_slurp(out);
    if (split_starts(log, gen) != 2 || !strstr(said, "job 'train' runs in 2 containers (2 started"))
        fail_msg("log:\n%s\nsaid:\n%s", log, said);
    free(log);
    free(said);
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* A rollback (and a deploy, a revert) where one container's agent could not take the job's
 * deploy lease (its disk full, `lease take` exits 8): it warned and went on without the lease
 * there, stopped the old gang in every container, then failed to start the release in the full
 * one: the job was down.  Now refused before anything is pushed or stopped, exit 1, naming the
 * container with the agent's words and what to do; no agent was asked anything but the lease. */
static void test_switch_refused_without_lease(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-nolease-sw-XXXXXX", text[2048], path[256], out[128], rel[300];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    snprintf(
        text, sizeof text,
        "#!/bin/sh\nr=; p=\nfor a; do [ \"$p\" = --root ] && r=$a; p=$a; done\n"
        "echo \"${r##*/} $*\" >> '%s/log'\n"
        "case \" $* \" in\n"
        "*' lease take '*) if [ -e \"$r/full\" ]; then echo \"drover: error: lease of job 'train': "
        "cannot write '$r/leases/train.json': No space left on device\" >&2; exit 8; fi; "
        "cat \"$r/status.json\";;\n"
        "*' status '*) cat \"$r/status.json\";;\n"
        "esac\nexit 0\n",
        dir);
    capture_put(path, text, 0755);
    struct inventory *inv = fake_agent_inventory(dir, "exec_timeout = 10s\n", "grace = 5s\n", "c");
    split_agent(dir, "a", GANG_RUNNING, true);
    split_agent(dir, "b", GANG_RUNNING, true);
    snprintf(path, sizeof path, "%s/b/full", dir);
    capture_put(path, "", 0600);
    snprintf(rel, sizeof rel, "%s/rel", dir);
    snprintf(text, sizeof text, "mkdir -p '%s/bin' && printf '#!/bin/sh\\n' > '%s/bin/t' && chmod 755 '%s/bin/t'",
             rel, rel, rel);
    assert_int_equal(system(text), 0);
    char *rb[] = { "rollback", "--job", "train", NULL }, *rv[] = { "revert", "--job", "train", NULL };
    char *dp[] = { "deploy", rel, "--job", "train", NULL };
    static const char *const verbs[] = { "rollback", "revert", "deploy" };
    for (int k = 0; k < 3; k++) {
        int code = capture_verb(k == 0 ? cmd_rollback : k == 1 ? cmd_revert : cmd_deploy, inv,
                                k == 0 ? rb : k == 1 ? rv : dp, k == 2 ? 4 : 3, out, out);
        char *log = split_log(dir), *said = capture_slurp(out), want[700];
        snprintf(want, sizeof want,
                 "%s of job 'train' refused, nothing changed: h1:local:%s/b: no deploy lease here: "
                 "lease of job 'train': cannot write '%s/b/leases/train.json': No space left on device "
                 "(the container's disk is full: free space there, then run the command again)",
                 verbs[k], dir, dir);
        bool asked = false;
        static const char *const never[] = { " stop ", " activate ", " switch ", " start ", " install ", " status " };
        for (size_t w = 0; w < sizeof never / sizeof never[0]; w++)
            asked = asked || split_asked(log, "a", never[w]) || split_asked(log, "b", never[w]);
        if (code != EXIT_FAIL || asked || !strstr(said, want))
            fail_msg("%s: exit %d\nlog:\n%s\nsaid:\n%s", verbs[k], code, log, said);
        free(log);
        free(said);
    }
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover start` of a job whose current release failed its probation and stayed current (a
 * first deploy with no good release to go back to): it was started again with no word.  Now one
 * warning on stderr names the release, when and why it failed, before it is started anyway;
 * none once it is promoted, and none where it runs everywhere already (nothing starts). */
static void test_start_warns_of_failed_probation(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-startfail-XXXXXX", text[2048], path[256], out[128], err[128],
         id[RELEASE_ID_LEN + 1], gen[64];
    struct inventory *inv = split_setup(dir, out, err);
    char *argv[] = { "start", "--job", "train", NULL };
    memset(id, 'a', RELEASE_ID_LEN);
    id[RELEASE_ID_LEN] = '\0';
    /* 2026-12-02 14:03:11 UTC: its first deploy failed, no good release to return to */
    struct history_entry e = { .time = 1796220191.0, .ktok_s = -1, .baseline_ktok_s = -1 };
    strcpy(e.job, "train");
    strcpy(e.release, id);
    strcpy(e.name, "v1");
    strcpy(e.result, "failed");
    strcpy(e.reason, "crash-loop: rank 0 exited with code 1 and no good release to return to");
    snprintf(path, sizeof path, "%s/state", dir);
    (void)mkdir(path, 0700);
    assert_int_equal(state_history_append(path, &e), 0);
    const char *want = "start: job 'train' runs release aaaaaaaaaaaa (v1), which failed probation at "
                       "2026-12-02 14:03:11 UTC: crash-loop: rank 0 exited with code 1 and no good "
                       "release to return to; starting it anyway (drover deploy DIR --job train "
                       "deploys a fixed one)";
    for (int k = 0; k < 3; k++) {
        /* k 0: failed, stopped; k 1: already running everywhere; k 2: promoted since */
        split_agent(dir, "a", k == 1 ? GANG_RUNNING : GANG_FAILED, k == 1);
        split_agent(dir, "b", k == 1 ? GANG_RUNNING : GANG_FAILED, k == 1);
        if (k == 2) {
            e.time += 600;
            strcpy(e.result, "promoted");
            strcpy(e.reason, "promoted by the operator");
            snprintf(path, sizeof path, "%s/state", dir);
            assert_int_equal(state_history_append(path, &e), 0);
        }
        assert_int_equal(capture_verb(cmd_start, inv, argv, 3, out, err), EXIT_OK);
        char *log = split_log(dir), *said_err = capture_slurp(err);
        const char *w = strstr(said_err, want);
        if (k == 0 ? !w || strstr(w + 1, want) || split_starts(log, gen) != 2 : w != NULL)
            fail_msg("k %d: log:\n%s\nstderr:\n%s", k, log, said_err);
        free(log);
        free(said_err);
    }
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover start --dry-run` of such a job: the start warns that the release it would start failed
 * its probation, the dry run said nothing (it read no status).  It now reads each agent's status
 * (no lock, no lease, nothing started) and gives the same warning; none once the release is
 * promoted, none where it runs everywhere already. */
static void test_start_dry_run_warns_of_failed_probation(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-startdry-XXXXXX", text[2048], path[256], out[128], err[128],
         id[RELEASE_ID_LEN + 1];
    struct inventory *inv = split_setup(dir, out, err);
    char *argv[] = { "start", "--job", "train", "--dry-run", NULL };
    memset(id, 'a', RELEASE_ID_LEN);
    id[RELEASE_ID_LEN] = '\0';
    struct history_entry e = { .time = 1796220191.0, .ktok_s = -1, .baseline_ktok_s = -1 };
    strcpy(e.job, "train");
    strcpy(e.release, id);
    strcpy(e.name, "v1");
    strcpy(e.result, "failed");
    strcpy(e.reason, "crash-loop: rank 0 exited with code 1 and no good release to return to");
    snprintf(path, sizeof path, "%s/state", dir);
    (void)mkdir(path, 0700);
    assert_int_equal(state_history_append(path, &e), 0);
    const char *want = "start: job 'train' runs release aaaaaaaaaaaa (v1), which failed probation at "
                       "2026-12-02 14:03:11 UTC: crash-loop: rank 0 exited with code 1 and no good "
                       "release to return to";
    for (int k = 0; k < 3; k++) {
        /* k 0: failed, stopped; k 1: already running everywhere; k 2: promoted since */
        split_agent(dir, "a", k == 1 ? GANG_RUNNING : GANG_FAILED, k == 1);
        split_agent(dir, "b", k == 1 ? GANG_RUNNING : GANG_FAILED, k == 1);
        if (k == 2) {
            e.time += 600;
            strcpy(e.result, "promoted");
            strcpy(e.reason, "promoted by the operator");
            snprintf(path, sizeof path, "%s/state", dir);
            assert_int_equal(state_history_append(path, &e), 0);
        }
        snprintf(path, sizeof path, "%s/log", dir);
        (void)unlink(path);
        optind = 0;
        assert_int_equal(capture_verb(cmd_start, inv, argv, 4, out, err), EXIT_OK);
        char *said = capture_slurp(out), *said_err = capture_slurp(err);
        char *log = access(path, F_OK) == 0 ? capture_slurp(path) : strdup("");
        const char *w = strstr(said_err, want);
        /* nothing but the status asked: no lease, no start, no record */
        if ((k == 0 ? !w || strstr(w + 1, want) : w != NULL) || !strstr(said, "(dry run, nothing changed)") ||
            strstr(log, "lease") || strstr(log, "start --job") || strstr(log, "history"))
            fail_msg("k %d: log:\n%s\nstdout:\n%s\nstderr:\n%s", k, log, said, said_err);
        free(log);
        free(said);
        free(said_err);
    }
    inventory_free(inv);
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

/* `drover promote` and `drover revert` of a job `drover stop` stopped (on its good release, or on
 * a release left unpromoted): they said "runs its good release: nothing is held" or went on to
 * promote what did not run; now: stopped where, and `drover start --job J` runs it again.
 * Exit 1, nothing asked of the agents but the lease and the status. */
static void test_decide_stopped(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-decide-XXXXXX", text[1024], out[128], err[128];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    for (int held = 0; held < 2; held++) {
        struct agent_status *st = malloc(sizeof *st);
        assert_non_null(st);
        fake_agent_status_init(st);
        st->njobs = 1;
        strcpy(st->jobs[0].job, "train");
        st->jobs[0].state = GANG_STOPPED;
        memset(st->jobs[0].current, held ? 'b' : 'a', RELEASE_ID_LEN);
        memset(st->jobs[0].good, 'a', RELEASE_ID_LEN);
        strcpy(st->jobs[0].reason, "stopped by the operator");
        fake_agent(dir, st);
        free(st);
        struct inventory *inv = fake_agent_inventory(dir, "", "", "a");
        for (int promote = 0; promote < 2; promote++) {
            char *argv[] = { promote ? "promote" : "revert", "--job", "train", NULL };
            assert_int_equal(capture_verb(promote ? cmd_promote : cmd_revert, inv, argv, 3, out, err), EXIT_FAIL);
            char *said = capture_slurp(err);
            snprintf(text, sizeof text, "job 'train' is stopped in h1:local:%s/a, h1:local:%s/b (`drover stop "
                     "--job train`, or its gang ended): nothing runs to %s; `drover start --job train` runs it "
                     "again", dir, dir, promote ? "promote" : "revert");
            if (!strstr(said, text) || strstr(said, "good release"))
                fail_msg("held %d, %s: stderr:\n%s", held, argv[0], said);
            free(said);
        }
        inventory_free(inv);
    }
    snprintf(text, sizeof text, "rm -rf '%s'", dir);
    assert_int_equal(system(text), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_selection),
        cmocka_unit_test(test_parse_usage_errors),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_exit_code),
        cmocka_unit_test(test_failed_hint),
        cmocka_unit_test(test_ct_stopped_hint),
        cmocka_unit_test(test_fan_steps),
        cmocka_unit_test(test_fan_said),
        cmocka_unit_test(test_fan_tick),
        cmocka_unit_test(test_history_result),
        cmocka_unit_test(test_never_deployed),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_stop_announces_worst_case),
        cmocka_unit_test(test_stop_warns_of_sigkill),
        cmocka_unit_test(test_decide_stopped),
        cmocka_unit_test(test_split_gang),
        cmocka_unit_test(test_start_split_gang),
        cmocka_unit_test(test_start_split_generation),
        cmocka_unit_test(test_start_without_lease),
        cmocka_unit_test(test_switch_refused_without_lease),
        cmocka_unit_test(test_start_warns_of_failed_probation),
        cmocka_unit_test(test_start_dry_run_warns_of_failed_probation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
