/* Unit tests for what a deploy says when a container's host or agent answers nothing (an
 * operator froze sshd or drover-agent with SIGSTOP during a deploy), against local fake agents
 * (capture.h's inventory: job train in DIR/a and DIR/b, one script for both):
 * - a revert's stop unanswered at the switch deadline because the agent answers nothing was
 *   blamed on "a process that ignores SIGTERM ... or one stuck in the kernel" (stop_old_gangs);
 * - the REVERT FAILED that followed named the rank of the healthy container, which only waited
 *   at its rendezvous for the silent one (confirm_recovery);
 * - a daemon that answered nothing to `lease take --status` cost a silent 60 s (the agent's own
 *   status deadline), then the survey asked again, waited 15 s more and said "did not answer
 *   within 15s" (lease.c, survey.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fs.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/deploy_int.h"
#include "controller/deploy/stopstart.h"
#include "controller/exitcode.h"
#include "tests/unit/capture.h"

static const char good[] = "a562000000000000000000000000000000000000000000000000000000000000";
static const char next[] = "cd5d000000000000000000000000000000000000000000000000000000000000";

/* The fake agent of both containers: every call logged to DIR/log as "<root> ARGS".  Once
 * ROOT/frozen exists it answers nothing to stop, status, watch or lease (as a drover-agent
 * under SIGSTOP; the revert and the history record are answered: their waits, 10 s and 15 s,
 * are not what is tested); a stop where ROOT/freeze-at-stop exists freezes it.  `watch` prints
 * ROOT/status.json every second, its "step":40 counted up from 1 (a rank that trains), or, where
 * ROOT/freeze-after-2 exists, two documents and then nothing, its stream left open (a daemon
 * stopped with SIGSTOP a second into a watch); status and lease take --status print it once,
 * anything else answers "ok". */
static void frozen_agent(const char *dir)
{
    char text[1400], p[400];
    snprintf(text, sizeof text,
             "#!/bin/sh\nr=; p=\nfor a; do [ \"$p\" = --root ] && r=$a; p=$a; done\n"
             "echo \"${r##*/} $*\" >> '%s/log'\n"
             "case \" $* \" in\n"
             "*' stop '*|*' status '*|*' watch '*|*' lease '*) [ -e \"$r/frozen\" ] && exec sleep 30;;\n"
             "esac\n"
             "case \" $* \" in\n"
             "*' stop '*) if [ -e \"$r/freeze-at-stop\" ]; then : > \"$r/frozen\"; exec sleep 30; fi\n"
             "  echo 'ok: stopped: no process of the gang is left';;\n"
             "*' watch '*) i=0; while :; do i=$((i+1))\n"
             "  [ -e \"$r/freeze-after-2\" ] && [ $i -gt 2 ] && exec sleep 60\n"
             "  sed \"s/\\\"step\\\":40,/\\\"step\\\":$i,/g\" \"$r/status.json\"; echo; sleep 1; done;;\n"
             "*' status '*|*' lease '*) cat \"$r/status.json\";;\n"
             "*) echo ok;;\n"
             "esac\nexit 0\n",
             dir);
    snprintf(p, sizeof p, "%s/agent", dir);
    capture_put(p, text, 0755);
}

/* frozen_status's exit_code for a rank that sent only its hello (Heartbeat() ran, no hb.init()) */
#define FROZEN_HELLO (-2)

/* DIR/ROOT/status.json: job train on current (good: good), in state, release rel running,
 * with rank `rank` exited with code exit_code (-1: training at step 40; FROZEN_HELLO: its hello
 * only) */
static void frozen_status(const char *dir, const char *root, const char *current, enum gang_state state,
                          int rank, int exit_code)
{
    struct agent_status *st = calloc(1, sizeof *st);
    assert_non_null(st);
    fake_agent_status_init(st);
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    strcpy(js->current, current);
    strcpy(js->good, good);
    strcpy(js->release, current);
    js->state = state;
    js->nproc = 1;
    js->nranks = 1;
    fake_rank_training(&js->ranks[0], rank, 0, current, 40, 1000, 2.5);
    if (exit_code == FROZEN_HELLO) {
        js->ranks[0].hb.phase = HB_PHASE_INIT;
        js->ranks[0].hb.step = 0;
        js->ranks[0].hb.hello = true;
    }
    if (exit_code >= 0) {
        strcpy(js->ranks[0].state, "exited");
        js->ranks[0].exit_code = exit_code;
        js->ranks[0].pid = 0;
    }
    st->features = STATUS_FEATURES_ALL;
    char p[400], *doc = fake_agent_doc(st, false);
    snprintf(p, sizeof p, "%s/%s", dir, root);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(p, sizeof p, "%s/%s/status.json", dir, root);
    capture_put(p, doc, 0600);
    free(doc);
    free(st);
}

static struct inventory *frozen_inv;
static bool frozen_confirm; /* revert_verb watches the recovery */

/* revert_all as a verb: job train failed `next` and goes back to `good` */
static int revert_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct deploy d = { .f = f, .inv = frozen_inv, .job = &frozen_inv->jobs[0] };
    strcpy(d.id, next);
    strcpy(d.good, good);
    memcpy(d.sid, next, RELEASE_SHORT_LEN);
    d.no_confirm = !frozen_confirm;
    d.st = calloc(1, sizeof *d.st);
    d.sv_js = calloc((size_t)d.job->ncts, sizeof *d.sv_js);
    assert_non_null(d.st);
    assert_non_null(d.sv_js);
    for (int i = 0; i < d.job->ncts; i++) {
        d.labels[i] = d.job->cts[i].label;
        d.sv_found[i] = true;
        strcpy(d.sv_js[i].current, next);
        strcpy(d.sv_js[i].good, good);
        d.sv_js[i].state = GANG_RUNNING;
        d.has_gang[i] = true;
        d.features[i] = STATUS_FEATURES_ALL;
    }
    int r = revert_all(&d, HISTORY_RC_NONE, "probation failed: crash");
    free(d.sv_js);
    free(d.st);
    return r;
}

/* A new temporary DIR with the fake agent, its inventory (switch deadline and exec_timeout 2 s)
 * and b's agent set to freeze at its stop; a runs the good release already, its rank 0 exited 8
 * (peer lost: it waited for b's rank in vain), b the failed one. */
static void frozen_setup(char *dir)
{
    char p[400], keys[400];
    assert_non_null(mkdtemp(dir));
    frozen_agent(dir);
    frozen_status(dir, "a", good, GANG_RUNNING, 0, 8);
    frozen_status(dir, "b", next, GANG_FAILED, 1, 1);
    snprintf(p, sizeof p, "%s/b/freeze-at-stop", dir);
    capture_put(p, "", 0600);
    snprintf(p, sizeof p, "%s/state", dir);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(keys, sizeof keys, "exec_timeout = 2s\nstaging_dir = %s/st\n", dir);
    frozen_inv = fake_agent_inventory(dir, keys, "grace = 1s\nswitch_deadline = 2s\n", "c");
}

static void frozen_teardown(const char *dir)
{
    inventory_free(frozen_inv);
    frozen_inv = NULL;
    assert_int_equal(fs_rm_rf(dir), 0);
}

/* b's drover-agent froze at the revert's stop: the stop is unanswered at the switch deadline.
 * The line naming b said "the old gang was not gone within the switch deadline of 2 s (a process
 * that ignores SIGTERM ..., or one stuck in the kernel)"; it says now that b's agent answered
 * nothing, neither the stop nor a status asked after it, and what to check. */
static void test_revert_stop_unanswered(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-frozen-XXXXXX", out[600], err[600], want[600];
    frozen_setup(dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    frozen_confirm = false;
    (void)capture_verb(revert_verb, frozen_inv, NULL, 0, out, err);
    char *e = capture_slurp(err);
    snprintf(want, sizeof want, "revert: h1:local:%s/b: no answer from drover-agent within the switch deadline "
             "of 2 s, nor to a status asked after it within 2 s: is drover-agent there stopped or hung, or "
             "the host no longer answering?", dir);
    if (!strstr(e, want) || strstr(e, "ignores SIGTERM"))
        fail_msg("stderr:\n%s", e);
    free(e);
    frozen_teardown(dir);
}

/* The recovery after that revert fails: a's rank exited 8 (peer lost) waiting at its rendezvous
 * for b's, which never started.  REVERT FAILED named only "rank 0 on h1:local:.../a exited with
 * code 8"; it names b now, as the cause, with a's rank as what the watch saw. */
static void test_revert_failed_names_silent_container(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-frozen-XXXXXX", out[600], err[600], want[900];
    frozen_setup(dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    frozen_confirm = true;
    int code = capture_verb(revert_verb, frozen_inv, NULL, 0, out, err);
    char *o = capture_slurp(out);
    snprintf(want, sizeof want, "REVERT FAILED for job 'train': a56200000000 did not recover: h1:local:%s/b "
             "answered nothing (its drover-agent did not answer within the switch deadline of 2 s, nor to a "
             "status asked after it within 2 s, and it sent no status while the recovery was watched): check that "
             "its host is up and that drover-agent there is not stopped or hung; the ranks in the other "
             "containers only wait for its ranks at their rendezvous (the watch saw: rank 0 on h1:local:%s/a "
             "exited with code 8", dir, dir);
    if (code != EXIT_REVERT_FAILED || !strstr(o, want))
        fail_msg("exit %d\nstdout:\n%s", code, o);
    free(o);
    frozen_teardown(dir);
}

/* Job train in DIR/a and DIR/b, both running good, b's daemon stopped (SIGSTOP): its `lease take
 * --status` takes the lease, waits its own status deadline (60 s), says so on stderr and exits 0
 * without the document (here at once, in the agent's words); its status and stop answer nothing.
 * Every call is logged to DIR/log as "<root> ARGS"; a's stop is answered ok.  Sets frozen_inv. */
static void wedged_b_setup(const char *dir)
{
    char text[1600], p[400];
    snprintf(text, sizeof text,
             "#!/bin/sh\nr=; p=\nfor a; do [ \"$p\" = --root ] && r=$a; p=$a; done\n"
             "echo \"${r##*/} $*\" >> '%s/log'\n"
             "case \" $* \" in\n"
             "*' lease take '*) if [ -e \"$r/wedged\" ]; then echo \"status: the drover-agent daemon on "
             "'/run/drover/agent.sock' sent nothing for 60 s: it is stopped or wedged\" >&2; "
             "exit 0; fi; cat \"$r/status.json\";;\n"
             "*' stop '*) [ -e \"$r/wedged\" ] && exec sleep 30; echo 'ok: stopped: no process of the gang is left';;\n"
             "*' status '*) [ -e \"$r/wedged\" ] && exec sleep 30; cat \"$r/status.json\";;\n"
             "esac\nexit 0\n",
             dir);
    snprintf(p, sizeof p, "%s/agent", dir);
    capture_put(p, text, 0755);
    frozen_status(dir, "a", good, GANG_RUNNING, 0, -1);
    frozen_status(dir, "b", good, GANG_RUNNING, 1, -1);
    snprintf(p, sizeof p, "%s/b/wedged", dir);
    capture_put(p, "", 0600);
    snprintf(p, sizeof p, "%s/state", dir);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(text, sizeof text, "staging_dir = %s/st\n", dir);
    frozen_inv = fake_agent_inventory(dir, text, "", "c");
}

/* b's drover-agent daemon answers nothing (SIGSTOP) when a rollback takes the deploy lease:
 * its `lease take --status` takes the lease, waits its own status deadline (60 s), says so on
 * stderr and exits 0 without the document (here at once, in the agent's words).  The lease step
 * kept nothing of that; the survey asked b's status again, waited 15 s more and said "did not
 * answer within 15s".  Now the survey names b with the deadline that fired (60 s), without
 * asking again. */
static void test_lease_status_unanswered(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-frozen-XXXXXX", out[600], p[400], want[900];
    assert_non_null(mkdtemp(dir));
    wedged_b_setup(dir);
    snprintf(out, sizeof out, "%s/out", dir);
    char *rb[] = { "rollback", "--job", "train", NULL };
    double t0 = time_mono();
    int code = capture_verb(cmd_rollback, frozen_inv, rb, 3, out, out);
    double took = time_mono() - t0;
    snprintf(p, sizeof p, "%s/log", dir);
    char *said = capture_slurp(out), *log = capture_slurp(p);
    snprintf(want, sizeof want, "drover: error: the agent in h1:local:%s/b did not answer within 60s while drover "
             "asked it for the job's status with its deploy lease: is drover-agent stopped or hung there, or the "
             "host no longer answering? `drover status --job train` shows it (the lease was taken there; 60 s is "
             "the agent's own deadline for a status, and its daemon sent nothing)", dir);
    if (code != EXIT_FAIL || !strstr(said, want) || strstr(said, "within 15s") || strstr(log, "b status") ||
        took > 10)
        fail_msg("exit %d in %.1f s\nsaid:\n%s\nlog:\n%s", code, took, said, log);
    free(said);
    free(log);
    frozen_teardown(dir);
}

static enum probation_verdict watch_v;
static char watch_reason[PROBATION_REASON_MAX];
static int watch_gone;

/* watch_probation as a verb: job train's probation of `next` from now, healthy_deadline 12 s (past
 * PROBATION_QUIET_S, so that a container silent since the start is stale by then); the verdict,
 * its reason and probation_agent_gone_ct() are kept above. */
static int watch_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct deploy d = { .f = f, .inv = frozen_inv, .job = &frozen_inv->jobs[0] };
    d.st = calloc(1, sizeof *d.st);
    assert_non_null(d.st);
    for (int i = 0; i < d.job->ncts; i++)
        d.labels[i] = d.job->cts[i].label;
    struct inv_policy pol = d.job->policy;
    pol.healthy_deadline_s = 12;
    struct probation *p;
    assert_int_equal(probation_new(&pol, "train", next, d.job->ncts, d.labels, 1, -1, false, time_mono(), &p), 0);
    watch_v = watch_probation(&d, p, "probation");
    snprintf(watch_reason, sizeof watch_reason, "%s", probation_reason(p));
    watch_gone = probation_agent_gone_ct(p);
    probation_free(p);
    free(d.st);
    return 0;
}

/* b's drover-agent stopped (SIGSTOP) a second into probation, its rank's hello its last word,
 * while a's rank trains on: its watch sends nothing more and does not end.  At healthy_deadline
 * the verdict came from b's stale document, "rank 1 (h1:local:.../b) with release cd5d00000000
 * started drover_heartbeat (at +0s) but never called hb.init() ...", which the deploy took for
 * the release's failure and marked it bad.  It names b's agent now, once b's silence passes
 * healthy_deadline, and blames it (probation_agent_gone_ct: not marked bad, undecided). */
static void test_probation_agent_frozen(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-frozen-XXXXXX", out[600], p[400], want[600];
    assert_non_null(mkdtemp(dir));
    frozen_agent(dir);
    frozen_status(dir, "a", next, GANG_RUNNING, 0, -1);
    frozen_status(dir, "b", next, GANG_RUNNING, 1, FROZEN_HELLO);
    snprintf(p, sizeof p, "%s/b/freeze-after-2", dir);
    capture_put(p, "", 0600);
    snprintf(p, sizeof p, "%s/state", dir);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(p, sizeof p, "staging_dir = %s/st\n", dir);
    frozen_inv = fake_agent_inventory(dir, p, "grace = 1s\n", "c");
    snprintf(out, sizeof out, "%s/out", dir);
    (void)capture_verb(watch_verb, frozen_inv, NULL, 0, out, out);
    snprintf(want, sizeof want, "no status from h1:local:%s/b for ", dir);
    if (watch_v != PROBATION_FAIL || strstr(watch_reason, want) != watch_reason ||
        !strstr(watch_reason, "(healthy_deadline 12s): its drover-agent is not answering (stopped or frozen, or "
                              "its host is down); its workers' figures that old are not judged") ||
        watch_gone != 1) {
        char *o = capture_slurp(out);
        fail_msg("verdict %s, gone %d: %s\noutput:\n%s", probation_verdict_name(watch_v), watch_gone,
                 watch_reason, o);
    }
    frozen_teardown(dir);
}

/* `drover stop --job train` where b's daemon sent nothing to the status asked with the deploy
 * lease (SIGSTOP): the stop was asked there too and waited the daemon's stop deadline again (60 s
 * + 110 s: 170 s in all, while the row said "sent nothing for 110 s"), and the hint named
 * `systemctl restart drover-agent` alone, in containers without systemd.  Now b is not asked
 * again: its row says the 60 s that were waited, how to resume or restart the daemon with and
 * without systemd, and to stop again; a is stopped. */
static int stop_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return deploy_stop_start(f, "train", false, false);
}

static void test_stop_skips_wedged_daemon(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-unit-frozen-XXXXXX", out[600], p[400];
    assert_non_null(mkdtemp(dir));
    wedged_b_setup(dir);
    snprintf(out, sizeof out, "%s/out", dir);
    double t0 = time_mono();
    int code = capture_verb(stop_verb, frozen_inv, NULL, 0, out, out);
    double took = time_mono() - t0;
    snprintf(p, sizeof p, "%s/log", dir);
    char *said = capture_slurp(out), *log = capture_slurp(p);
    if (code != EXIT_FAIL || strstr(log, "b stop") || !strstr(log, "a stop") ||
        !strstr(said, "its drover-agent daemon sent nothing for 60 s to the status asked with the deploy lease") ||
        !strstr(said, "the stop was not asked there") || !strstr(said, "`kill -CONT $(cat /run/drover/agent.pid)`") ||
        !strstr(said, "`systemctl restart drover-agent` where systemd runs it") ||
        !strstr(said, "`drover install --job train` from the controller") ||
        !strstr(said, "then run `drover stop --job train` again") || took > 10)
        fail_msg("exit %d in %.1f s\nsaid:\n%s\nlog:\n%s", code, took, said, log);
    free(said);
    free(log);
    frozen_teardown(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_revert_stop_unanswered),
        cmocka_unit_test(test_revert_failed_names_silent_container),
        cmocka_unit_test(test_lease_status_unanswered),
        cmocka_unit_test(test_probation_agent_frozen),
        cmocka_unit_test(test_stop_skips_wedged_daemon),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
