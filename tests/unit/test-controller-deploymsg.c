/* Unit tests for deploy_unsurveyed_message() (controller/deploy/deploy.c): a host that cannot be
 * reached is not a missing agent; the "is the agent installed?" hint said so for a timeout. */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "controller/deploy/deploy.h"
#include "controller/deploy/deploy_int.h"
#include "controller/deploy/objsync.h"
#include "tests/unit/capture.h"

static void test_hint_only_for_agent(void **state)
{
    (void)state;
    char m[512];
    deploy_unsurveyed_message(m, sizeof m, "h1:101: host unreachable: Timeout connecting to 127.0.0.1",
                              false, "train");
    assert_string_equal(m, "h1:101: host unreachable: Timeout connecting to 127.0.0.1; nothing was pushed or stopped");
    assert_null(strstr(m, "install"));
    deploy_unsurveyed_message(m, sizeof m, "h1:101: drover-agent status failed (exit 127): not found", true,
                              "train");
    assert_non_null(strstr(m, "; nothing was pushed or stopped (is the agent installed? drover install --job train)"));
}

/* A read-only staging_dir on the host (an adversary pass: `mount -o ro` under it): the survey's
 * host shell failed at its `mkdir` there, before any agent was asked, and the deploy ended with
 * "is the agent installed? drover install --job J".  The host store is named, with what to do;
 * no agent hint.  The host's mkdir is a stand-in on PATH saying what a read-only mount says (a
 * root test process writes through any mode bits). */
static void test_unsurveyed_store_not_writable(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-dmsg-XXXXXX", p[512], keys[300], path[1200];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/bin", dir);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/bin/mkdir", dir);
    capture_put(p, "#!/bin/sh\nfor a; do d=$a; done\n"
                   "echo \"mkdir: cannot create directory '$d': Read-only file system\" >&2\nexit 1\n", 0755);
    const char *old_path = getenv("PATH");
    char *saved = strdup(old_path ? old_path : "/usr/bin:/bin");
    snprintf(path, sizeof path, "%s/bin:%s", dir, saved);
    assert_int_equal(setenv("PATH", path, 1), 0);
    struct agent_status st;
    fake_agent_status_init(&st);
    fake_agent(dir, &st);
    snprintf(keys, sizeof keys, "staging_dir = %s/ro/store\n", dir);
    struct inventory *inv = fake_agent_inventory(dir, keys, "", "c");
    struct fleet f;
    fleet_init(&f, inv, NULL);
    struct deploy d = { .f = &f, .inv = inv, .job = &inv->jobs[0] };
    bool all_current = false;
    char err[1024] = "", m[2400];
    assert_int_equal(survey(&d, true, &all_current, err, sizeof err), -EIO);
    assert_int_equal(setenv("PATH", saved, 1), 0);
    free(saved);
    deploy_unsurveyed_message(m, sizeof m, err, d.agent_failed, d.job->name);
    snprintf(p, sizeof p, "the host store under staging_dir (%s/ro/store) on h1 is not writable: mkdir: "
             "cannot create directory '%s/ro/store': Read-only file system; fix its mount or permissions, "
             "or set staging_dir in the inventory; nothing was pushed or stopped", dir, dir);
    if (strcmp(m, p) != 0)
        fail_msg("message: %s", m);
    assert_false(d.agent_failed);
    assert_null(strstr(m, "agent"));
    free(d.sv_js);
    fleet_done(&f);
    inventory_free(inv);
    assert_int_equal(fs_rm_rf(dir), 0);
}

/* A revert of a deploy onto a stopped job leaves it stopped, saying how to run it; where the
 * stop again did not succeed, where the good release may run and how to stop it. */
static void test_left_stopped_message(void **state)
{
    (void)state;
    char m[600];
    deploy_left_stopped_message(m, sizeof m, "train", "3e968584b08b", "");
    assert_string_equal(m, "reverted job 'train' to 3e968584b08b; the job was stopped before the deploy, so it "
                           "is left stopped: `drover start --job train` runs it");
    deploy_left_stopped_message(m, sizeof m, "train", "3e968584b08b", "h1:102 (NO ANSWER)");
    assert_string_equal(m, "reverted job 'train' to 3e968584b08b; the job was stopped before the deploy, but "
                           "stopping it again did not succeed in h1:102 (NO ANSWER), where 3e968584b08b may "
                           "run: `drover stop --job train` stops it");
}

/* Which host shell words are a store that cannot be written (not retried, not the agent's) */
static void test_said_store_unwritable(void **state)
{
    (void)state;
    assert_true(objsync_said_store_unwritable("mkdir: cannot create directory '/s/packs': Read-only file system"));
    assert_true(objsync_said_store_unwritable("sh: 1: cannot create manifests/x.tmp.9: Permission denied"));
    assert_false(objsync_said_store_unwritable("mkdir: cannot create directory '/s': No space left on device"));
    assert_false(objsync_said_store_unwritable(NULL));
}

/* REVERT FAILED with a host unreachable: the job is often up, running the failed release where
 * the revert did not reach; "the job may be down ... act now" was wrong then.  The message says
 * where, that the agent there reverts on its own at its probation deadline, and the command. */
static void test_revert_failed_unreached(void **state)
{
    (void)state;
    char m[1024];
    deploy_revert_failed_message(m, sizeof m, "revert failed on 1 of 2 containers", "h1:101", "", "7b7db40c6a7a",
                                 1796296320 /* 2026-12-03 11:12:00 UTC */, "train");
    assert_non_null(strstr(m, "revert failed on 1 of 2 containers; the revert did not reach h1:101 (or was "
                              "refused there: why is said above), which may still run the failed release "
                              "7b7db40c6a7a"));
    assert_non_null(strstr(m, "reverts it to the good release on its own at its probation deadline (about "
                              "11:12:00 UTC)"));
    assert_non_null(strstr(m, "`drover rollback --job train` does it now once the host answers"));
    assert_non_null(strstr(m, "stays stopped")); /* a gang phase 1 stopped: nothing restarts it */
    assert_null(strstr(m, "may be down"));
    assert_null(strstr(m, "act now"));
    /* deadline not known: said without a time */
    deploy_revert_failed_message(m, sizeof m, "revert failed on 1 of 2 containers", "h1:101", "", "7b7db40c6a7a", 0,
                                 "train");
    assert_non_null(strstr(m, "at its probation deadline (a gang"));
    assert_null(strstr(m, "install"));
}

/* An agent daemon killed during probation (kill -9; the host answers, the agent CLI says no
 * daemon listens): REVERT FAILED said the agent there reverts at its probation deadline and
 * `drover rollback` works "once the host answers".  The host answers; no agent runs, so nothing
 * reverts: the message says to start the agent (`drover install`), what that agent then does
 * (it keeps its probation deadline: agent/daemon.c), then `drover rollback`. */
static void test_revert_failed_no_agent(void **state)
{
    (void)state;
    char m[1800];
    deploy_revert_failed_message(m, sizeof m, "revert failed on 1 of 3 containers", "", "h1:102", "7b7db40c6a7a",
                                 1796296320 /* 2026-12-03 11:12:00 UTC */, "train");
    if (!strstr(m, "revert failed on 1 of 3 containers; the drover-agent in h1:102 is not running, so nothing "
                   "there reverts the failed release 7b7db40c6a7a (its gang may run on there, unwatched): "
                   "`drover install --job train` starts the agent again: it takes the job up where it was left, "
                   "on 7b7db40c6a7a (that gang, or a new one if it ended), keeping its probation deadline (about "
                   "11:12:00 UTC), and once that has passed reverts to the good release by itself, marking "
                   "7b7db40c6a7a bad there; then `drover rollback --job train` puts the good release back in "
                   "every container as one gang; `drover status --job train` shows what runs where"))
        fail_msg("message: %s", m);
    assert_null(strstr(m, "once the host answers"));
    assert_null(strstr(m, "did not reach"));
    /* both kinds at once: each said for its containers */
    deploy_revert_failed_message(m, sizeof m, "revert failed on 2 of 3 containers", "h2:201", "h1:102",
                                 "7b7db40c6a7a", 0, "train");
    assert_non_null(strstr(m, "; the revert did not reach h2:201 (or was refused"));
    assert_non_null(strstr(m, "does it now once the host answers; the drover-agent in h1:102 is not running"));
    assert_non_null(strstr(m, "keeping its probation deadline, and once"));
    assert_non_null(strstr(m, "; `drover status --job train` shows what runs where"));
    deploy_revert_failed_message(m, sizeof m, "revert failed", NULL, NULL, "7b7db40c6a7a", 0, "train");
    assert_string_equal(m, "revert failed; `drover status --job train` shows what runs where");
}

/* Which failed revert calls are an agent not running (the REVERT FAILED advice above), not a
 * host to wait for: exit 3 with the agent CLI's own words only. */
static void test_call_found_no_agent(void **state)
{
    (void)state;
    const char *dead = "h1:102: drover-agent revert failed (exit 3): revert: no drover-agent daemon "
                       "listening on '/run/drover/agent.sock'";
    assert_true(deploy_call_found_no_agent(-EIO, 3, dead));
    /* a wedged daemon exits 3 too: it runs, it is not started again by an install */
    assert_false(deploy_call_found_no_agent(-EIO, 3, "h1:102: drover-agent revert failed (exit 3): "
                                            "revert: the drover-agent daemon on '/run/drover/agent.sock' "
                                            "sent nothing for 90 s: it is stopped or wedged"));
    assert_false(deploy_call_found_no_agent(-EIO, 1, dead));       /* another exit */
    assert_false(deploy_call_found_no_agent(-ETIMEDOUT, 0, dead)); /* no answer: not run */
    assert_false(deploy_call_found_no_agent(-EHOSTUNREACH, 0, "h1:102: host unreachable"));
    assert_false(deploy_call_found_no_agent(0, 0, ""));
}

/* REVERT FAILED when every container took the revert but no recovery was confirmed: stdout said
 * only the watching's finding and left out "the job may be down ... act now", which stderr had;
 * a script reading stdout did not learn that the job may be down.  Both now say the same (two
 * files here: stdout redirected, stderr a terminal). */
static void test_revert_failed_same_on_both(void **state)
{
    (void)state;
    char said[600];
    deploy_revert_unconfirmed_message(said, sizeof said, "no rank heartbeated within 120s", "train");
    assert_string_equal(said, "no rank heartbeated within 120s; the job may be down: look with `drover status "
                              "--job train` and act now");
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    deploy_say_revert_failed(out, err, "train", said); /* not a TTY: no colour */
    char o[1024] = "", e[1024] = "";
    rewind(out);
    rewind(err);
    assert_non_null(fgets(o, sizeof o, out));
    assert_non_null(fgets(e, sizeof e, err));
    assert_string_equal(o, e);
    assert_non_null(strstr(o, "REVERT FAILED for job 'train': no rank heartbeated within 120s; the job may be "
                              "down"));
    fclose(out);
    fclose(err);
}

/* An agent killed during probation: the operator's terminal showed the REVERT FAILED paragraph
 * twice, once from stderr and once from stdout, both that terminal.  Where out and err are one
 * file (a terminal, `2>&1`, -o json's stdout onto stderr) it is said once, on out. */
static void test_revert_failed_once_on_one_file(void **state)
{
    (void)state;
    FILE *out = tmpfile();
    assert_non_null(out);
    FILE *err = fdopen(dup(fileno(out)), "w"); /* the same open file, as 2>&1 makes it */
    assert_non_null(err);
    deploy_say_revert_failed(out, err, "train", "revert failed on 1 of 3 containers");
    fflush(out);
    fflush(err);
    rewind(out);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, out))
        if (strstr(line, "REVERT FAILED for job 'train': revert failed on 1 of 3 containers"))
            n++;
    assert_int_equal(n, 1);
    fclose(err);
    fclose(out);
}

/* A deploy refused by gpu-check on containers the agent marked (environment fault) ended with
 * "the running release keeps running untouched", yet the job there is failed: nothing runs.
 * The closing line says where the job stays stopped, what runs in the others, what to do. */
static void test_aborted_marked(void **state)
{
    (void)state;
    const char *labels[] = { "h1:101", "h1:102", "h2:201" };
    bool none[] = { false, false, false }, all[] = { true, true, true }, one[] = { false, true, false };
    bool gang[] = { true, false, true }, stopped[] = { false, false, false };
    char m[1024];
    bool running[] = { true, true, true };
    /* nothing marked, a gang everywhere: as before */
    deploy_aborted_message(m, sizeof m, "8ba39e855bb1", "train", labels, none, running, 3, false);
    assert_string_equal(m, "deploy of 8ba39e855bb1 stopped before anything was switched: the running release "
                           "keeps running untouched");
    /* nothing marked, the job stopped (`drover stop`) everywhere: nothing kept running, and the
     * deploy started nothing (it said the running release kept running) */
    deploy_aborted_message(m, sizeof m, "8ba39e855bb1", "train", labels, none, stopped, 3, false);
    assert_string_equal(m, "deploy of 8ba39e855bb1 stopped before anything was switched: nothing was started: "
                           "job 'train' stays stopped");
    /* ... stopped in one: both, each where it is true */
    deploy_aborted_message(m, sizeof m, "8ba39e855bb1", "train", labels, none, gang, 3, false);
    assert_string_equal(m, "deploy of 8ba39e855bb1 stopped before anything was switched: the running release "
                           "keeps running untouched where it runs; nothing was started: job 'train' stays "
                           "stopped in h1:102");
    /* every container marked, refused by gpu-check */
    deploy_aborted_message(m, sizeof m, "8ba39e855bb1", "train", labels, all, stopped, 3, true);
    assert_null(strstr(m, "keeps running"));
    assert_non_null(strstr(m, "job 'train' stays stopped (failed: environment fault) in h1:101, h1:102, h2:201; "
                              "fix the GPU environment there (`drover-agent gpu-check` in the container"));
    assert_non_null(strstr(m, "then deploy again; or deploy --force"));
    assert_null(strstr(m, "other"));
    /* one marked: the others run the release as before */
    deploy_aborted_message(m, sizeof m, "8ba39e855bb1", "train", labels, one, gang, 3, true);
    assert_non_null(strstr(m, "stays stopped (failed: environment fault) in h1:102; the running release keeps "
                              "running untouched in the other 2 containers; fix the GPU"));
    /* one marked, nothing runs in the others; stopped for another reason: no gpu-check advice */
    deploy_aborted_message(m, sizeof m, "8ba39e855bb1", "train", labels, one, stopped, 3, false);
    assert_string_equal(m, "deploy of 8ba39e855bb1 stopped before anything was switched: job 'train' stays "
                           "stopped (failed: environment fault) in h1:102; nothing runs in the other 2 "
                           "containers either");
    /* bounded: a small buffer is cut, NUL-terminated */
    char small[40];
    deploy_aborted_message(small, sizeof small, "8ba39e855bb1", "train", labels, all, stopped, 3, true);
    assert_int_equal(strlen(small), sizeof small - 1);
}

static void said(struct deploy_ct_said *s, const char *head, const char *tail)
{
    snprintf(s->head, sizeof s->head, "%s", head);
    snprintf(s->tail, sizeof s->tail, "%s", tail);
}

/* Ctrl-C while the old gangs stopped: SWITCH ABORTED said "h1:101: interrupted while its old gang
 * was stopping; h1:102: interrupted while its old gang was stopping; h2:201: interrupted ..." and
 * the same for what became of each.  Now each reason once, with the containers it applies to. */
/* The good pair deployed again, its throughput rule skipped: the rate against the kept baseline,
 * and only past the tolerance what to do: the cause lies outside the release when the baseline
 * is its own; a rebaseline when the baseline is another release's (a rollback keeps it). */
static void test_own_baseline_note(void **state)
{
    (void)state;
    char buf[600];
    const char *s = deploy_own_baseline_note(buf, sizeof buf, "d031e0c1a2b3", "d031e0c1a2b3", "train", 60.0,
                                             100.0, 0.35);
    assert_ptr_equal(s, buf);
    assert_non_null(strstr(buf, "d031e0c1a2b3 ran at 60.0 Ktok/s, -40.0% against its own baseline of 100.0 Ktok/s (kept)"));
    assert_non_null(strstr(buf, "the cause lies outside it"));
    assert_non_null(strstr(buf, "`drover rebaseline --job train`"));
    deploy_own_baseline_note(buf, sizeof buf, "d031e0c1a2b3", "d031e0c1a2b3", "train", 90.0, 100.0, 0.35);
    assert_string_equal(buf, "d031e0c1a2b3 ran at 90.0 Ktok/s, -10.0% against its own baseline of 100.0 Ktok/s (kept)");
    deploy_own_baseline_note(buf, sizeof buf, "d031e0c1a2b3", "d031e0c1a2b3", "train", 110.0, 100.0, 0.35);
    assert_non_null(strstr(buf, "+10.0%"));
    /* the baseline of another release: no claim that the release is the same */
    deploy_own_baseline_note(buf, sizeof buf, "d031e0c1a2b3", "5c2e00000000", "train", 60.0, 100.0, 0.35);
    assert_non_null(strstr(buf, "against the job's baseline of 100.0 Ktok/s (measured on 5c2e00000000, kept): "
                                "if this is the rate to expect of it, `drover rebaseline --job train`"));
    assert_null(strstr(buf, "the release is the same"));
    /* a short buffer: cut, never overrun */
    char small[24];
    deploy_own_baseline_note(small, sizeof small, "d031e0c1a2b3", "d031e0c1a2b3", "train", 10.0, 100.0, 0.35);
    assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_switch_aborted_once(void **state)
{
    (void)state;
    const char *labels[] = { "h1:101", "h1:102", "h2:201" };
    struct deploy_ct_said why[3], done[3];
    for (int i = 0; i < 3; i++) {
        said(&why[i], "interrupted while the old gang was stopping", "");
        said(&done[i], "d031c2a1b9e4 starts again once the old gang is gone", "");
    }
    char m[2048];
    deploy_switch_aborted_message(m, sizeof m, "5c2e0f3a7d11", labels, 3, why, done);
    assert_string_equal(m, "switch to 5c2e0f3a7d11 aborted before anything new started: interrupted while the "
                           "old gang was stopping on h1:101, h1:102 and h2:201.  Nothing of 5c2e0f3a7d11 was "
                           "started anywhere; d031c2a1b9e4 starts again once the old gang is gone on h1:101, "
                           "h1:102 and h2:201");
    /* reasons that differ stay apart, in inventory order; one whose old gang is gone has none */
    said(&why[0], "", "");
    said(&done[0], "d031c2a1b9e4 started again", "");
    said(&why[1], "the old gang", " was not gone within the switch deadline of 8 s (a process that ignores SIGTERM)");
    said(&done[2], "d031c2a1b9e4 NOT started again",
         " (`drover start --job train` starts it with the others, as one gang)");
    deploy_switch_aborted_message(m, sizeof m, "5c2e0f3a7d11", labels, 3, why, done);
    assert_string_equal(m, "switch to 5c2e0f3a7d11 aborted before anything new started: the old gang on h1:102 "
                           "was not gone within the switch deadline of 8 s (a process that ignores SIGTERM); "
                           "interrupted while the old gang was stopping on h2:201.  Nothing of 5c2e0f3a7d11 "
                           "was started anywhere; d031c2a1b9e4 started again on h1:101; d031c2a1b9e4 starts "
                           "again once the old gang is gone on h1:102; d031c2a1b9e4 NOT started again on "
                           "h2:201 (`drover start --job train` starts it with the others, as one gang)");
    /* nothing restarted: said so */
    struct deploy_ct_said none[3] = { 0 };
    deploy_switch_aborted_message(m, sizeof m, "5c2e0f3a7d11", labels, 3, why, none);
    assert_non_null(strstr(m, ".  Nothing of 5c2e0f3a7d11 was started anywhere; nothing was stopped"));
    /* more than four with one reason: four named, then how many more */
    const char *six[] = { "h1:101", "h1:102", "h2:201", "h2:202", "h3:301", "h3:302" };
    struct deploy_ct_said w6[6], d6[6];
    for (int i = 0; i < 6; i++) {
        said(&w6[i], "interrupted while the old gang was stopping", "");
        said(&d6[i], "d031c2a1b9e4 started again", "");
    }
    deploy_switch_aborted_message(m, sizeof m, "5c2e0f3a7d11", six, 6, w6, d6);
    assert_non_null(strstr(m, "stopping on h1:101, h1:102, h2:201, h2:202 and 2 more.  Nothing"));
    assert_non_null(strstr(m, "; d031c2a1b9e4 started again on h1:101, h1:102, h2:201, h2:202 and 2 more"));
    /* bounded: a small buffer is cut, NUL-terminated */
    char small[50];
    deploy_switch_aborted_message(small, sizeof small, "5c2e0f3a7d11", six, 6, w6, d6);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* A rollback whose target the agents refused after the switch had stopped the old gang said the
 * agent's "nothing was stopped" (true of its activate request only) while the job was down. */
static void test_activate_failed_after_stop(void **state)
{
    (void)state;
    char m[600] = "h2:201: drover-agent activate failed (exit 3): release 748b57da5a16: 'config.json' is "
                  "missing or not what the manifest says; the release is marked damaged: deploy it again "
                  "and drover rebuilds it; nothing was stopped";
    deploy_activate_failed_message(m, sizeof m, 3);
    assert_null(strstr(m, "nothing was stopped"));
    assert_non_null(strstr(m, "deploy it again and drover rebuilds it; the switch had stopped the old gang in "
                              "3 containers before"));
    /* nothing stopped (a stopped job): the agent's words stand */
    char k[100] = "release x: bad; nothing was stopped";
    deploy_activate_failed_message(k, sizeof k, 0);
    assert_string_equal(k, "release x: bad; nothing was stopped");
    /* bounded */
    char small[40] = "a; nothing was stopped";
    deploy_activate_failed_message(small, sizeof small, 1);
    assert_true(strlen(small) < sizeof small);
    assert_null(strstr(small, "nothing was stopped"));
}

/* `drover promote --job J` of a job never deployed said "job 'J' runs its good release" */
static void test_nothing_held(void **state)
{
    (void)state;
    char m[400];
    deploy_nothing_held_message(m, sizeof m, "fresh", true, true);
    assert_string_equal(m, "job 'fresh' runs no release in any of its containers (never deployed there): "
                           "nothing is held to promote; deploy one with `drover deploy DIR --job fresh`");
    assert_null(strstr(m, "good release"));
    deploy_nothing_held_message(m, sizeof m, "train", false, false);
    assert_string_equal(m, "job 'train' runs its good release: nothing is held to revert");
    /* `drover promote`/`revert` of a job `drover stop` stopped said it ran its good release */
    deploy_stopped_held_message(m, sizeof m, "train", "h1:101, h1:102", true);
    assert_string_equal(m, "job 'train' is stopped in h1:101, h1:102 (`drover stop --job train`, or its gang "
                           "ended): nothing runs to promote; `drover start --job train` runs it again");
    deploy_stopped_held_message(m, sizeof m, "train", "h1:101", false);
    assert_non_null(strstr(m, "nothing runs to revert; `drover start --job train` runs it again"));
    char small[24];
    deploy_stopped_held_message(small, sizeof small, "train", "h1:101", false);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* A Ctrl-C right after "reverting job ..." ended the wait for the failed gang's stop, and the
 * warning blamed the switch deadline (90 s) less than a second later: it says the operator
 * interrupted it, and names the deadline only for the containers that ran past it. */
static void test_revert_unstopped_interrupted(void **state)
{
    (void)state;
    char m[400];
    deploy_revert_unstopped_message(m, sizeof m, "nc-x", 1, 1, "2098393b1f09");
    assert_string_equal(m, "revert of job 'nc-x': interrupted by the operator before 1 container confirmed the "
                           "stop of 2098393b1f09 (named above); nothing timed out, the agents go on stopping it");
    assert_null(strstr(m, "deadline"));
    deploy_revert_unstopped_message(m, sizeof m, "nc-x", 3, 1, "2098393b1f09");
    assert_string_equal(m, "revert of job 'nc-x': 2 containers did not confirm the stop of 2098393b1f09 within the "
                           "switch deadline, and the operator interrupted the wait for 1 more (named above)");
    deploy_revert_unstopped_message(m, sizeof m, "nc-x", 2, 0, "2098393b1f09");
    assert_string_equal(m, "revert of job 'nc-x': 2 containers did not confirm the stop of 2098393b1f09 within the "
                           "switch deadline (named above)");
}

/* ROLLBACK FAILED after the target did not recover (its agents not gone back yet): the state it
 * leaves (the target unpromoted on its agents' probation, until when) and the command that puts
 * the good release back, watched; promote named only as what not to run.  It said the recovery's
 * verdict and nothing more. */
static void test_rollback_failed_says_state_and_command(void **state)
{
    (void)state;
    char m[2000];
    deploy_rollback_failed_message(m, sizeof m, RBF_RECOVERY, "a56200000000 did not recover: rank 0 hung",
                                   "train", "a56200000000", "cd5d00000000", 1796220191.0);
    assert_string_equal(m, "a56200000000 did not recover: rank 0 hung; a56200000000 runs unpromoted in every "
                           "container, on its agents' probation: they return to cd5d00000000 by themselves "
                           "when it fails there, or at its deadline (about 14:03:11 UTC).  `drover rollback "
                           "--job train` puts cd5d00000000 back in every container now, as one gang, and "
                           "watches its recovery; do not `drover promote --job train` (a56200000000 did not "
                           "recover: promoted, it would run as the good release with no probation watching it)");
    /* no deadline known, no good release named: said without them */
    deploy_rollback_failed_message(m, sizeof m, RBF_RECOVERY, "x", "train", "a56200000000", NULL, 0);
    assert_null(strstr(m, "about"));
    assert_non_null(strstr(m, "puts the good release back"));
}

/* ROLLBACK FAILED after its target was activated in some containers only: the rollback puts the
 * good release back everywhere at once, as a failed deploy's revert does, and says so; the
 * revert's own outcome follows.  It told the operator to run `drover rollback --job J` and left
 * the gang split until the agents' deadlines.  With no good release nothing can be put back:
 * said, with the deploy that runs one gang again. */
/* ROLLBACK FAILED after the target trained but its promote failed in some containers: `drover
 * promote --job J` finishes it where the target is still held (rollback.c's held_plan), with the
 * rollback to the good release as the alternative.  It named only `rollback --to G` and a new
 * deploy of the target, a whole probation again. */
static void test_rollback_promote_failed_names_promote(void **state)
{
    (void)state;
    char m[2000];
    deploy_rollback_failed_message(m, sizeof m, RBF_PROMOTE, "a56200000000 trains", "train", "a56200000000",
                                   "cd5d00000000", 1796220191.0);
    assert_string_equal(m, "a56200000000 trains, but its promote failed in some containers (named above): there "
                           "a56200000000 runs unpromoted and its agents return to cd5d00000000 by themselves at "
                           "its probation deadline (about 14:03:11 UTC).  `drover promote --job train` finishes "
                           "the promote: it promotes a56200000000 where it is still held and leaves the "
                           "containers where it worked; or `drover rollback --job train --to cd5d00000000` puts "
                           "cd5d00000000 back in every container now and watches it (a plain rollback is refused "
                           "where the containers now disagree on the good release)");
}

/* A deploy whose promote failed in some containers: `drover promote --job J` finishes it (it
 * said only "Run the deploy again", a new probation for a release that passed one). */
static void test_deploy_promote_failed_names_promote(void **state)
{
    (void)state;
    char m[600];
    deploy_promote_failed_message(m, sizeof m, "a56200000000", "train", 600);
    assert_string_equal(m, "promote failed on some containers: a56200000000 passed probation but is not marked "
                           "good everywhere; the agents will revert it at the probation deadline (600s).  "
                           "`drover promote --job train` finishes the promote where it is still held; or run "
                           "the deploy again");
}

static void test_rollback_activate_failed_reverts(void **state)
{
    (void)state;
    char m[2000];
    deploy_rollback_failed_message(m, sizeof m, RBF_ACTIVATE, "h1:102: activate: cannot exec bin/t", "train",
                                   "a56200000000", "cd5d00000000", 1796220191.0);
    assert_string_equal(m, "h1:102: activate: cannot exec bin/t; a56200000000 was activated in some containers "
                           "only (the gang is split): putting cd5d00000000 back in every container now, as one "
                           "gang, as a failed deploy's revert does (the revert's outcome follows); do not "
                           "`drover promote --job train` (a56200000000 never ran as one gang)");
    assert_null(strstr(m, "`drover rollback --job train`"));
    deploy_rollback_failed_message(m, sizeof m, RBF_ACTIVATE, "x", "train", "a56200000000", NULL, 1796220191.0);
    assert_non_null(strstr(m, "job 'train' has no good release to put back"));
    assert_non_null(strstr(m, "(until its deadline, about 14:03:11 UTC)"));
    assert_non_null(strstr(m, "`drover deploy DIR --job train` runs one gang again"));
    assert_null(strstr(m, "putting"));
}

/* REVERT FAILED with a stopped container: "then deploy 8e509255046e again (`drover deploy DIR
 * --job pt`)" left the operator to find which directory held 8e509255046e, while drover knew its
 * name (good2).  The name follows the id where it is known. */
static void test_stopped_cts_names_good_release(void **state)
{
    (void)state;
    char m[1400];
    deploy_stopped_cts_message(m, sizeof m, "pt", 1, 2, "h2:201 (pct: container '201' not running!)",
                               "`pct start 201` on h2", "8e509255046e", "good2");
    if (!strstr(m, "1 container stopped: h2:201 (pct: container '201' not running!); the good release "
                   "8e509255046e (good2) was started in the other 1") ||
        !strstr(m, "start the container (`pct start 201` on h2), then deploy 8e509255046e (good2) again from its "
                   "release directory (`drover deploy DIR --job pt`) to form the gang"))
        fail_msg("%s", m);
    deploy_stopped_cts_message(m, sizeof m, "pt", 2, 3, "a, b", "`pct start 1` on h1, `pct start 2` on h2",
                               "8e509255046e", "");
    if (!strstr(m, "then deploy 8e509255046e again from its release directory") || strstr(m, "()") ||
        !strstr(m, "start the containers ("))
        fail_msg("%s", m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_held),
        cmocka_unit_test(test_hint_only_for_agent),
        cmocka_unit_test(test_rollback_failed_says_state_and_command),
        cmocka_unit_test(test_rollback_activate_failed_reverts),
        cmocka_unit_test(test_rollback_promote_failed_names_promote),
        cmocka_unit_test(test_deploy_promote_failed_names_promote),
        cmocka_unit_test(test_unsurveyed_store_not_writable),
        cmocka_unit_test(test_said_store_unwritable),
        cmocka_unit_test(test_left_stopped_message),
        cmocka_unit_test(test_revert_failed_unreached), cmocka_unit_test(test_revert_failed_no_agent),
        cmocka_unit_test(test_call_found_no_agent),
        cmocka_unit_test(test_revert_failed_same_on_both),
        cmocka_unit_test(test_revert_failed_once_on_one_file),
        cmocka_unit_test(test_aborted_marked),
        cmocka_unit_test(test_switch_aborted_once),
        cmocka_unit_test(test_activate_failed_after_stop),
        cmocka_unit_test(test_own_baseline_note),
        cmocka_unit_test(test_revert_unstopped_interrupted),
        cmocka_unit_test(test_stopped_cts_names_good_release),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
