/* Unit tests for controller/deploy/rollback.c: the check before a deploy that the job's good
 * release (its rollback target) is in every container's store and verifies there.  A container
 * that cannot verify it refuses the deploy, naming --force; but a Ctrl-C during the check is the
 * operator's, not the target's: it used to be judged as an unverifiable target ("cannot verify
 * the rollback target ...: interrupted", "deploy refused: ... deploy with --force") before the
 * deploy said it was interrupted.  The same for the GPU environment check (gpu_check_cts).
 * Also against a local fake agent: the recovery watch after an interrupted revert, the
 * baseline's source (the agents' copy before this machine's cache), gc's words for a container
 * whose agent is not running. */
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

#include "common/samples.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/deploy_int.h"
#include "controller/transport/ssh.h"
#include "tests/unit/capture.h"

static const char good[] = "a562000000000000000000000000000000000000000000000000000000000000";
static const char next[] = "cd5d000000000000000000000000000000000000000000000000000000000000";
static struct inventory *inv;
static bool force;

/* check_rollback_target as a verb, for capture_verb: the job's good release is `good` */
static int check_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct deploy d = { .f = f, .inv = inv, .job = &inv->jobs[0] };
    strcpy(d.id, next);
    strcpy(d.good, good);
    memcpy(d.sid, next, RELEASE_SHORT_LEN);
    return check_rollback_target(&d, force);
}

static char dir[] = "/tmp/drover-unit-rb-XXXXXX";

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    char text[600], err[256];
    snprintf(text, sizeof text, "[host h1]\nlocal = true\nagent_path = %s/agent\n"
             "[job mini]\ncontainers = h1:local:%s\ncommand = bin/x\n", dir, dir);
    return inventory_parse(text, strlen(text), "t.ini", &inv, err, sizeof err);
}

static int teardown(void **state)
{
    (void)state;
    inventory_free(inv);
    return fs_rm_rf(dir);
}

/* the agent's verify: exit 4, not in the store */
static void agent_says_missing(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/agent", dir);
    capture_put(p, "#!/bin/sh\necho 'release not in the store' >&2\nexit 4\n", 0755);
}

static void test_missing_target_refuses(void **state)
{
    (void)state;
    agent_says_missing();
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    force = false;
    assert_int_equal(capture_verb(check_verb, inv, NULL, 0, out, err), -ENOENT);
    char *e = capture_slurp(err);
    assert_non_null(strstr(e, "the rollback target a56200000000 is not in the store"));
    assert_non_null(strstr(e, "deploy refused"));
    assert_non_null(strstr(e, "--force"));
    free(e);
}

/* verb run as after the operator's Ctrl-C (both flags the handler sets), with force or not: it
 * must say nothing on stderr (the deploy says the interrupt, once).  Returns its result. */
static int run_interrupted_silent(int (*verb)(struct fleet *, int, char **), bool with_force)
{
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    force = with_force;
    deploy_interrupted = 1;
    exec_interrupted = 1;
    int r = capture_verb(verb, inv, NULL, 0, out, err);
    deploy_interrupted = 0;
    exec_interrupted = 0;
    char *e = capture_slurp(err);
    assert_string_equal(e, "");
    free(e);
    return r;
}

static void test_interrupt_is_not_judged(void **state)
{
    (void)state;
    agent_says_missing(); /* never asked: the interrupt comes first */
    assert_int_equal(run_interrupted_silent(check_verb, false), -EINTR);
    /* with --force neither: no warning about going on without a rollback target */
    assert_int_equal(run_interrupted_silent(check_verb, true), -EINTR);
}

/* gpu_check_cts as a verb: the job names GPU 0 */
static int gpu_check_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct deploy d = { .f = f, .inv = inv, .job = &inv->jobs[0] };
    char err[2048] = "";
    int r = gpu_check_cts(&d, force, err, sizeof err);
    if (err[0])
        fprintf(stderr, "err: %s\n", err);
    return r;
}

/* The same for the GPU environment check: with --force, a Ctrl-C during it printed "...:
 * interrupted (--force: deploying anyway)" before the deploy said it was interrupted. */
static void test_gpu_check_interrupt_is_not_judged(void **state)
{
    (void)state;
    char p[512], out[600], err[600];
    snprintf(p, sizeof p, "%s/agent", dir);
    capture_put(p, "#!/bin/sh\necho 'gpu-check: driver mismatch' >&2\nexit 9\n", 0755);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    strcpy(inv->jobs[0].gpus, "0");
    /* not interrupted: the fault is said, refused without --force, a warning with it */
    force = false;
    assert_true(capture_verb(gpu_check_verb, inv, NULL, 0, out, err) < 0);
    char *e = capture_slurp(err);
    assert_non_null(strstr(e, "driver mismatch"));
    assert_non_null(strstr(e, "deploy --force"));
    free(e);
    force = true;
    assert_int_equal(capture_verb(gpu_check_verb, inv, NULL, 0, out, err), 0);
    e = capture_slurp(err);
    assert_non_null(strstr(e, "--force: deploying anyway"));
    free(e);
    /* interrupted: nothing said, with or without --force */
    assert_int_equal(run_interrupted_silent(gpu_check_verb, false), -EINTR);
    assert_int_equal(run_interrupted_silent(gpu_check_verb, true), -EINTR);
    inv->jobs[0].gpus[0] = '\0';
}

/* confirm_recovery as a verb: the job's good release is `good` */
static char recovery_msg[512];
static int recovery_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct deploy d = { .f = f, .inv = inv, .job = &inv->jobs[0] };
    d.st = calloc(1, sizeof *d.st);
    assert_non_null(d.st);
    for (int i = 0; i < inv->jobs[0].ncts; i++)
        d.labels[i] = inv->jobs[0].cts[i].label;
    int r = confirm_recovery(&d, good, recovery_msg, sizeof recovery_msg);
    free(d.st);
    return r;
}

/* A Ctrl-C while a revert runs is answered "interrupt noted: the revert under way goes on ...;
 * only the watch of its recovery ends".  The watch that followed reset the interrupt and ran on
 * to "training again": the words promised what did not happen. */
static void test_interrupt_during_revert_ends_the_watch(void **state)
{
    (void)state;
    agent_says_missing(); /* what it would say is not asked for: the watch ends at once */
    char out[600], err[600];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    deploy_revert_interrupted = 1; /* as on_sigint notes it while revert_all runs */
    double t0 = time_mono();
    int r = capture_verb(recovery_verb, inv, NULL, 0, out, err);
    assert_int_equal(r, -EINTR);
    assert_true(time_mono() - t0 < 10);
    assert_non_null(strstr(recovery_msg, "not confirmed (interrupted by the operator while its "
                                         "recovery was watched)"));
    assert_int_equal(deploy_revert_interrupted, 0); /* read once */
    deploy_interrupted = 0;
}

/* A sample set of release rel for job train's containers (key), measured at time t. */
static void base_set(struct sample_set *ss, const char *rel, double t, double ktok, const char *key)
{
    memset(ss, 0, sizeof *ss);
    strcpy(ss->release, rel);
    strcpy(ss->job, "train");
    snprintf(ss->containers, sizeof ss->containers, "%s", key);
    ss->time = t;
    ss->ranks = 2;
    ss->n = 5;
    for (int i = 0; i < ss->n; i++)
        ss->ktok_s[i] = ktok, ss->step_ms[i] = 0;
}

static struct sample_set *base_loaded;
static int load_base_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct deploy d;
    assert_int_equal(deploy_init(&d, f, "train", false), 0);
    base_loaded = load_base_samples(&d);
    deploy_done(&d, -1);
    return 0;
}

/* Two operators (two state_dirs): A promoted v3 (its cache: v3's samples), then B promoted v2,
 * whose samples the agents now keep.  A's next deploy was judged against its own cache, v3's,
 * never seeing B's promote (nor B's `drover rebaseline`).  The agents' copy now comes first and
 * refreshes the cache; the cache serves when the agent does not answer. */
static void test_baseline_agents_copy_wins(void **state)
{
    (void)state;
    char key[256], p[512], out[600], err[600];
    /* capture.h's inventory: a state_dir, job train in local roots whose agent is DIR/agent */
    struct inventory *inv2 = fake_agent_inventory(dir, "", "", "c");
    inventory_job_key(&inv2->jobs[0], key, sizeof key);
    snprintf(p, sizeof p, "%s/state", dir);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    struct sample_set mine, theirs;
    base_set(&mine, good, 1000, 6.05, key);
    base_set(&theirs, next, 2000, 7.09, key);
    assert_int_equal(state_samples_set(p, key, false, &mine), 0);
    char *line = NULL;
    assert_int_equal(samples_format(&theirs, &line), 0);
    char script[2048];
    snprintf(script, sizeof script, "#!/bin/sh\ncase \"$*\" in *baseline*) echo '%s';; *) exit 1;; esac\n",
             line);
    free(line);
    snprintf(out, sizeof out, "%s/agent", dir);
    capture_put(out, script, 0755);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    assert_int_equal(capture_verb(load_base_verb, inv2, NULL, 0, out, err), 0);
    assert_non_null(base_loaded);
    assert_string_equal(base_loaded->release, next); /* the agents', not this machine's cache */
    free(base_loaded);
    struct sample_set now;
    assert_int_equal(state_samples_get(p, key, false, &now), 0);
    assert_string_equal(now.release, next); /* the cache follows */
    /* an agent that does not answer: the cache */
    snprintf(out, sizeof out, "%s/agent", dir);
    capture_put(out, "#!/bin/sh\nexit 3\n", 0755);
    snprintf(out, sizeof out, "%s/out", dir);
    assert_int_equal(capture_verb(load_base_verb, inv2, NULL, 0, out, err), 0);
    assert_non_null(base_loaded);
    assert_string_equal(base_loaded->release, next);
    free(base_loaded);
    inventory_free(inv2);
}

/* gc with a container whose agent is not running (killed): it said "start the container, or
 * fix [job]'s containers in the inventory", while the container ran; the fix is an install. */
static void test_gc_agent_not_running(void **state)
{
    (void)state;
    char p[512], out[600], err[600];
    /* capture.h's inventory: a state_dir, job train in local roots whose agent is DIR/agent */
    struct inventory *inv2 = fake_agent_inventory(dir, "", "", "c");
    snprintf(p, sizeof p, "%s/agent", dir);
    capture_put(p, "#!/bin/sh\necho \"status: no drover-agent daemon listening on '/run/drover/agent.sock'\" >&2\n"
                   "exit 3\n", 0755);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    char *argv[] = { "gc", NULL };
    optind = 0;
    assert_int_equal(capture_verb(cmd_gc, inv2, argv, 1, out, err), 1);
    char *e = capture_slurp(err);
    assert_non_null(strstr(e, "nothing is collected on host 'h1' until its agent answers (`drover "
                              "install --job train` starts its agent)"));
    assert_null(strstr(e, "start the container"));
    free(e);
    inventory_free(inv2);
}

/* the collection after a deploy's promote, as a verb */
static int gc_after_promote_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return objsync_gc_fleet(f, NULL, 0, 5, true, &f->inv->jobs[0]);
}

/* Every deploy and promote printed `drover: error: gc: h1:102 (job 'train'): ... Failed to exec
 * "/usr/local/bin/drover-agent"` after `promoted`, for a container without the agent: an error
 * line under a success.  The collection after a promote warns, saying it skipped the host, why,
 * and that `drover install` puts the agent there; `drover gc` itself still fails on it. */
static void test_gc_after_promote_warns(void **state)
{
    (void)state;
    char p[512], out[600], err[600];
    struct inventory *inv2 = fake_agent_inventory(dir, "", "", "c");
    snprintf(p, sizeof p, "%s/agent", dir);
    capture_put(p, "#!/bin/sh\necho 'lxc-attach: 102: attach.c: lxc_attach_run_command: Failed to exec "
                   "\"/usr/local/bin/drover-agent\"' >&2\nexit 127\n", 0755);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    assert_true(capture_verb(gc_after_promote_verb, inv2, NULL, 0, out, err) < 0);
    char *e = capture_slurp(err);
    if (strstr(e, "error") || !strstr(e, "drover: warning: gc after the promote skipped host 'h1': ") ||
        !strstr(e, "the agent is not installed there: `drover install --job train` puts it there"))
        fail_msg("stderr: %s", e);
    free(e);
    char *argv[] = { "gc", NULL };
    optind = 0;
    assert_int_equal(capture_verb(cmd_gc, inv2, argv, 1, out, err), 1);
    e = capture_slurp(err);
    assert_non_null(strstr(e, "drover: error: gc: "));
    assert_non_null(strstr(e, "`drover install --job train` puts it there"));
    free(e);
    inventory_free(inv2);
}

/* revert_all as a verb, for capture_verb: job train of capture.h's inventory fails `next` and
 * goes back to `good`; stopped_before: the deploy's survey found the job stopped everywhere */
/* How many times needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *q = strstr(hay, needle); q; q = strstr(q + len, needle))
        n++;
    return n;
}

static struct inventory *left_inv;
static bool left_stopped_before;
static unsigned left_features; /* what the agents' status said (STATUS_FEAT_*) */
static int left_revert_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct deploy d = { .f = f, .inv = left_inv, .job = &left_inv->jobs[0] };
    strcpy(d.id, next);
    strcpy(d.good, good);
    memcpy(d.sid, next, RELEASE_SHORT_LEN);
    d.no_confirm = true; /* the old code's path must not watch a recovery the fake never shows */
    d.sv_js = calloc((size_t)d.job->ncts, sizeof *d.sv_js);
    assert_non_null(d.sv_js);
    for (int i = 0; i < d.job->ncts; i++) {
        d.sv_found[i] = true;
        strcpy(d.sv_js[i].current, good);
        strcpy(d.sv_js[i].good, good);
        d.sv_js[i].state = left_stopped_before ? GANG_STOPPED : GANG_RUNNING;
        d.has_gang[i] = !left_stopped_before;
        d.features[i] = left_features;
    }
    d.leave_stopped = deploy_job_is_stopped(&d); /* as deploy_run decides it after its survey */
    int r = revert_all(&d, HISTORY_RC_NONE, "probation failed: crash");
    free(d.sv_js);
    return r;
}

/* `drover stop --job J`, then `drover deploy --job J v2`: v2 failed its probation and was
 * reverted to v1, which the revert started, though the operator had left the job stopped.  Each
 * agent is asked `revert --no-start`: v1 is current again and nothing starts, so nothing is
 * stopped again, and the revert says the job is left stopped.  An agent older than the option
 * (no revert-no-start feature) is asked the old way and stopped again (before the record gives
 * the lease back).  A job that ran before is reverted and left running, as before. */
static void test_revert_of_stopped_job_leaves_it_stopped(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbstop-XXXXXX", p[600], text[1400], keys[300], out[600], err[600];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    fake_agent_status_init(&st);
    st.njobs = 1;
    strcpy(st.jobs[0].job, "train");
    st.jobs[0].state = GANG_FAILED; /* the failed release's gang, as the revert finds it */
    strcpy(st.jobs[0].current, next);
    strcpy(st.jobs[0].good, good);
    fake_agent(d2, &st);
    /* the agent: status as fake_agent's; every other call logged and answered "ok" */
    snprintf(text, sizeof text, "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*status*) cat '%s/status.json';;\n*) echo ok;;\nesac\n", d2, d2);
    snprintf(p, sizeof p, "%s/agent", d2);
    capture_put(p, text, 0755);
    snprintf(p, sizeof p, "%s/state", d2);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(keys, sizeof keys, "staging_dir = %s/st\n", d2);
    left_inv = fake_agent_inventory(d2, keys, "", "c");
    snprintf(out, sizeof out, "%s/out", d2);
    snprintf(err, sizeof err, "%s/err", d2);
    snprintf(p, sizeof p, "%s/calls", d2);
    for (int k = 0; k < 4; k++) {
        int before = k < 2;
        bool knows = k % 2 == 0; /* the agents say revert-no-start */
        left_stopped_before = before;
        left_features = knows ? STATUS_FEATURES_ALL : STATUS_FEAT_SPEC_PAIRS;
        (void)unlink(p);
        assert_int_equal(capture_verb(left_revert_verb, left_inv, NULL, 0, out, err), EXIT_REVERTED);
        char *calls = capture_slurp(p), *o = capture_slurp(out);
        const char *rev = strstr(calls, "revert");
        assert_non_null(rev);
        /* a plain stop after the revert (not the switch's stop, which restarts after a while) */
        const char *again = strstr(rev, "stop --job train\n");
        if (before && knows) { /* nothing started, nothing to stop again */
            /* both containers (counted: gcc's -Wstringop-overread under ASan took a search
             * from rev + 1 for a read past a zero-sized region, and make asan did not build) */
            assert_true(count_of(calls, "revert") >= 2);
            assert_true(count_of(calls, "--no-start") >= 2);
            assert_null(again);
            if (!strstr(o, "reverted job 'train' to a56200000000; the job was stopped before the deploy, "
                           "so it is left stopped: `drover start --job train` runs it"))
                fail_msg("stdout: %s", o);
        } else if (before) {
            assert_null(strstr(calls, "--no-start"));
            assert_non_null(again);
            assert_non_null(strstr(again + 1, "stop --job train\n")); /* both containers */
            if (!strstr(o, "reverted job 'train' to a56200000000; the job was stopped before the deploy, "
                           "so it is left stopped: `drover start --job train` runs it"))
                fail_msg("stdout: %s", o);
        } else {
            assert_null(again);
            assert_null(strstr(calls, "--no-start"));
            assert_null(strstr(o, "left stopped"));
        }
        free(calls);
        free(o);
    }
    /* every agent already went back by itself (the good release's gang runs): the revert still
     * stops it (--no-start), and stderr says so; it said "nothing is stopped; ... the recovery is
     * watched" */
    st.jobs[0].state = GANG_RUNNING;
    strcpy(st.jobs[0].current, good);
    fake_agent(d2, &st);
    snprintf(p, sizeof p, "%s/agent", d2); /* fake_agent wrote its own: the logging one again */
    capture_put(p, text, 0755);
    snprintf(p, sizeof p, "%s/calls", d2);
    left_stopped_before = true;
    left_features = STATUS_FEATURES_ALL;
    (void)unlink(p);
    assert_int_equal(capture_verb(left_revert_verb, left_inv, NULL, 0, out, err), EXIT_REVERTED);
    char *e = capture_slurp(err), *calls = capture_slurp(p);
    if (!strstr(e, "the job was stopped before the deploy, so each agent is asked to stop it there "
                   "and leave the job stopped") || strstr(e, "nothing is stopped"))
        fail_msg("stderr: %s", e);
    assert_non_null(strstr(calls, "--no-start"));
    free(e);
    free(calls);
    inventory_free(left_inv);
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* `drover rollback` to a release that is damaged in a container (a worker wrote into a file its
 * releases share): the switch stopped the old gang everywhere, then each agent's activation
 * refused the target, and the rollback said "ROLLBACK FAILED ...; nothing was stopped" while
 * the job stayed down.  The target is verified in every container before anything is stopped:
 * refused with nothing stopped, and saying so truthfully. */
static int rb_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return deploy_rollback(f, "train", NULL, false, true, false);
}

/* Job train runs next, its good release, promoted after good (the previous good release). */
static void st_next_over_good(struct agent_status *st)
{
    fake_agent_status_init(st);
    st->njobs = 1;
    strcpy(st->jobs[0].job, "train");
    st->jobs[0].state = GANG_RUNNING;
    strcpy(st->jobs[0].current, next);
    strcpy(st->jobs[0].previous, good);
    strcpy(st->jobs[0].good, next);
    st->jobs[0].ngoods = 2;
    strcpy(st->jobs[0].goods[0], next);
    strcpy(st->jobs[0].goods[1], good);
}

static void test_rollback_to_damaged_target_stops_nothing(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbdmg-XXXXXX", p[600], text[1400], keys[300], out[600], err[600];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    st_next_over_good(&st);
    fake_agent(d2, &st);
    /* the agent: status as fake_agent's; verify of the target fails as a damaged release does;
     * every other call logged and answered "ok" */
    snprintf(text, sizeof text, "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*status*) cat '%s/status.json';;\n"
             "*'release verify'*) echo \"release verify: release a56200000000: 'config.json' is missing or not "
             "what the manifest says (type, size or link target); the release is marked damaged: deploy it "
             "again and drover rebuilds it\" >&2; exit 3;;\n*) echo ok;;\nesac\n", d2, d2);
    snprintf(p, sizeof p, "%s/agent", d2);
    capture_put(p, text, 0755);
    snprintf(p, sizeof p, "%s/state", d2);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(keys, sizeof keys, "staging_dir = %s/st\n", d2);
    struct inventory *inv2 = fake_agent_inventory(d2, keys, "", "c");
    snprintf(out, sizeof out, "%s/out", d2);
    snprintf(err, sizeof err, "%s/err", d2);
    int code = capture_verb(rb_verb, inv2, NULL, 0, out, err);
    char *e = capture_slurp(err);
    snprintf(p, sizeof p, "%s/calls", d2);
    char *calls = capture_slurp(p);
    if (code != EXIT_FAIL || !strstr(e, "ROLLBACK FAILED for job 'train'") || !strstr(e, "nothing was stopped") ||
        !strstr(e, "'config.json' is missing") || !strstr(e, "deploy it again"))
        fail_msg("exit %d, stderr: %s\ncalls: %s", code, e, calls);
    assert_non_null(strstr(calls, "release verify a5620000"));
    assert_null(strstr(calls, "stop"));     /* no gang stopped */
    assert_null(strstr(calls, "activate")); /* nothing switched */
    free(calls);
    free(e);
    inventory_free(inv2);
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* The history record of a `drover rollback --now` of job train against a fake agent whose status
 * is st and whose promote exits promote_rc: its last record in state_dir (*ret), and the exit. */
static const char *rb_case = ""; /* one more case of the fake agent's, before its own */
static int (*rb_fn)(struct fleet *, int, char **) = rb_verb; /* the verb rb_record runs */
static bool rb_refusal; /* rb_record: no record is expected */
/* rb_record: called with the fresh state_dir and the job's key before the verb runs */
static void (*rb_prepare)(const char *state_dir, const char *key);
static int rb_record(const char *d2, struct agent_status *st, int promote_rc, struct history_entry *ret)
{
    char p[600], text[1400], keys[300], out[600], err[600];
    fake_agent(d2, st);
    snprintf(text, sizeof text, "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n%s"
             "*status*) cat '%s/status.json';;\n*' promote '*) [ %d = 0 ] && echo ok || "
             "{ echo 'promote: no space left' >&2; exit %d; };;\n*) echo ok;;\nesac\n", d2, rb_case, d2,
             promote_rc, promote_rc);
    snprintf(p, sizeof p, "%s/agent", d2);
    capture_put(p, text, 0755);
    snprintf(p, sizeof p, "%s/state", d2);
    (void)fs_rm_rf(p);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(keys, sizeof keys, "staging_dir = %s/st\n", d2);
    struct inventory *inv2 = fake_agent_inventory(d2, keys, "", "c");
    if (rb_prepare) {
        char key[256];
        inventory_job_key(&inv2->jobs[0], key, sizeof key);
        rb_prepare(p, key);
    }
    snprintf(out, sizeof out, "%s/out", d2);
    snprintf(err, sizeof err, "%s/err", d2);
    int code = capture_verb(rb_fn, inv2, NULL, 0, out, err);
    struct history_entry *h = NULL;
    size_t n = 0;
    snprintf(p, sizeof p, "%s/state", d2);
    assert_int_equal(state_history_read(p, "train", &h, &n, NULL), 0);
    if (n == 0 && rb_refusal) { /* a refusal writes no record */
        memset(ret, 0, sizeof *ret);
        inventory_free(inv2);
        return code;
    }
    if (n == 0) {
        char *e = capture_slurp(err);
        fail_msg("exit %d, no record; stderr: %s", code, e);
    }
    *ret = h[n - 1];
    free(h);
    inventory_free(inv2);
    return code;
}

/* A rollback's history record names the release it went to as `release` and the one it came
 * from as `previous`, as a deploy's names its candidate and the good release before it, whether
 * it succeeded or failed.  A successful rollback to an earlier good release named its target in
 * both; one of a release never promoted (back to the good one) named the release it left as
 * `release`; a failed one named its target as `release`: `drover history` showed the two kinds the
 * other way round. */
static void test_rollback_record_names_target_first(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbrec-XXXXXX";
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    /* runs its good release next, promoted after good: back to good, promoted */
    st_next_over_good(&st);
    assert_int_equal(rb_record(d2, &st, 0, &e), EXIT_OK);
    assert_string_equal(e.result, "rollback");
    assert_string_equal(e.release, good);
    assert_string_equal(e.previous, next);
    /* the same, its promote failing: ROLLBACK FAILED, the record the same way round */
    assert_int_equal(rb_record(d2, &st, 1, &e), EXIT_REVERT_FAILED);
    assert_string_equal(e.result, "revert-failed");
    assert_string_equal(e.release, good);
    assert_string_equal(e.previous, next);
    /* runs next, never promoted: the agents' revert to its good release good */
    st.jobs[0].state = GANG_RUNNING;
    strcpy(st.jobs[0].good, good);
    st.jobs[0].ngoods = 1;
    strcpy(st.jobs[0].goods[0], good);
    assert_int_equal(rb_record(d2, &st, 0, &e), EXIT_OK);
    assert_string_equal(e.result, "rollback");
    assert_string_equal(e.release, good);
    assert_string_equal(e.previous, next);
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* nc4 finding 2: after a rollback from next (promoted last: the job's baseline is its samples)
 * to good, the next deploy's baseline was still next's ("probation: baseline c84dd6fa5d0e: 21
 * samples" of the release rolled back from).  good's own samples, kept on this machine when they
 * were the baseline, go with the rollback's promote (the agents keep them as the baseline) and
 * become this machine's baseline again; where none are kept the rollback says the baseline stays
 * the other release's, and how to measure the target. */
static char rb_key[256];
static void prepare_both_baselines(const char *state_dir, const char *key)
{
    struct sample_set ss;
    base_set(&ss, good, 1000, 6.05, key);
    assert_int_equal(state_samples_set(state_dir, key, false, &ss), 0);
    base_set(&ss, next, 2000, 9.5, key);
    assert_int_equal(state_samples_set(state_dir, key, false, &ss), 0);
    snprintf(rb_key, sizeof rb_key, "%s", key);
}
static void prepare_next_baseline(const char *state_dir, const char *key)
{
    struct sample_set ss; /* rb_record's state_dir is fresh: only next's are kept */
    base_set(&ss, next, 2000, 9.5, key);
    assert_int_equal(state_samples_set(state_dir, key, false, &ss), 0);
    snprintf(rb_key, sizeof rb_key, "%s", key);
}

static void test_rollback_restores_target_baseline(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbbase-XXXXXX", p[600];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    st_next_over_good(&st);
    rb_prepare = prepare_both_baselines;
    assert_int_equal(rb_record(d2, &st, 0, &e), EXIT_OK);
    assert_string_equal(e.result, "rollback");
    snprintf(p, sizeof p, "%s/err", d2);
    char *err = capture_slurp(p);
    snprintf(p, sizeof p, "%s/calls", d2);
    char *calls = capture_slurp(p);
    const char *pr = strstr(calls, " promote ");
    if (!strstr(err, "baseline: job 'train''s baseline is a56200000000's own again: its 5 samples from when "
                     "it was promoted (median 6.0 Ktok/s)") ||
        !pr || !strstr(pr, "--samples") || !strstr(pr, good))
        fail_msg("stderr: %s\ncalls: %s", err, calls);
    free(err);
    free(calls);
    struct sample_set now;
    snprintf(p, sizeof p, "%s/state", d2);
    assert_int_equal(state_samples_get(p, rb_key, false, &now), 0);
    assert_string_equal(now.release, good);
    /* none of good's kept here: the baseline stays next's, said */
    rb_prepare = prepare_next_baseline;
    snprintf(p, sizeof p, "%s/calls", d2);
    (void)unlink(p);
    assert_int_equal(rb_record(d2, &st, 0, &e), EXIT_OK);
    snprintf(p, sizeof p, "%s/err", d2);
    err = capture_slurp(p);
    snprintf(p, sizeof p, "%s/calls", d2);
    calls = capture_slurp(p);
    if (!strstr(err, "baseline: job 'train''s baseline stays cd5d00000000's samples (median 9.5 Ktok/s): none "
                     "of a56200000000's are kept on this machine; `drover rebaseline --job train` measures") ||
        strstr(calls, "--samples"))
        fail_msg("stderr: %s\ncalls: %s", err, calls);
    free(err);
    free(calls);
    rb_prepare = NULL;
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* A rollback that fails after its switch began leaves its target unpromoted, on its agents'
 * probation.  ROLLBACK FAILED said "look with `drover status`" (activation failed in a container)
 * or nothing (the target did not recover, or its promote failed), and an operator who then ran
 * `drover promote` made a target that never ran as a gang the good release, watched by no
 * probation.  It now says the state and the command that puts the good release back, watched:
 * `drover rollback --job J`, or `--to G` where a partial promote left the containers disagreeing
 * on the good release; and not to promote. */
static void test_failed_rollback_says_how_back(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbfail-XXXXXX", p[600];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    st_next_over_good(&st);
    /* activated everywhere, its promote failing: back to the good release by --to (the
     * activation failing in some containers only: test_rollback_activate_failed_reverts) */
    rb_case = "";
    assert_int_equal(rb_record(d2, &st, 1, &e), EXIT_REVERT_FAILED);
    snprintf(p, sizeof p, "%s/err", d2);
    char *said = capture_slurp(p);
    if (!strstr(said, "but its promote failed in some containers") ||
        !strstr(said, "`drover rollback --job train --to cd5d00000000` puts cd5d00000000 back"))
        fail_msg("stderr: %s", said);
    free(said);
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* The calls the fake agent of rb_record logged in d2, and its stderr and stdout, after a run
 * with rb_case (the calls log emptied first).  Returns the exit. */
static int rb_run(const char *d2, struct agent_status *st, const char *rcase, struct history_entry *e,
                  char **ret_calls, char **ret_err, char **ret_out)
{
    char p[600];
    snprintf(p, sizeof p, "%s/calls", d2);
    (void)unlink(p);
    rb_case = rcase;
    int code = rb_record(d2, st, 0, e);
    rb_case = "";
    *ret_calls = capture_slurp(p);
    snprintf(p, sizeof p, "%s/err", d2);
    *ret_err = capture_slurp(p);
    snprintf(p, sizeof p, "%s/out", d2);
    *ret_out = capture_slurp(p);
    return code;
}

/* `drover rollback` to an earlier good release whose activation failed in one container (the
 * root ending in /b): the target ran unpromoted where it was activated, the good release
 * restarted elsewhere, and the rollback only said ROLLBACK FAILED, "run `drover rollback --job
 * J`", exit 4, leaving the gang split until the agents' deadlines.  It now reverts at once, as a
 * failed deploy does: every agent is asked to revert (without marking the target bad: it is no
 * probation verdict), the job ends on its good release as one gang, exit 3, recorded "reverted"
 * (name "rollback", target first).  A job stopped before it is left stopped (revert --no-start);
 * a revert that fails too is REVERT FAILED, exit 4, recorded "revert-failed". */
static void test_rollback_activate_failed_reverts(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbact-XXXXXX";
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    fake_agent_status_init(&st);
    st.features = STATUS_FEATURES_ALL;
    st.njobs = 1;
    strcpy(st.jobs[0].job, "train");
    st.jobs[0].state = GANG_RUNNING;
    strcpy(st.jobs[0].current, next);
    strcpy(st.jobs[0].previous, good);
    strcpy(st.jobs[0].good, next);
    st.jobs[0].ngoods = 2;
    strcpy(st.jobs[0].goods[0], next);
    strcpy(st.jobs[0].goods[1], good);
    static const char act_fails[] = "*/b/agent.sock\\ activate\\ *) echo 'activate: cannot exec bin/t' >&2; exit 1;;\n";
    char *calls, *err, *out;
    int code = rb_run(d2, &st, act_fails, &e, &calls, &err, &out);
    if (code != EXIT_REVERTED || strcmp(e.result, "reverted") != 0 || strcmp(e.name, "rollback") != 0 ||
        !strstr(err, "ROLLBACK FAILED for job 'train'") ||
        !strstr(err, "a56200000000 was activated in some containers only (the gang is split): putting "
                     "cd5d00000000 back in every container now, as one gang") ||
        strstr(err, "`drover rollback --job train` puts") ||
        !strstr(out, "reverted job 'train' to cd5d00000000") ||
        count_of(calls, "sock revert --job train") != 2 || count_of(calls, "--no-mark") != 2 ||
        strstr(calls, "--no-start"))
        fail_msg("exit %d, record %s (%s)\nstderr: %s\nstdout: %s\ncalls: %s", code, e.result, e.name, err, out,
                 calls);
    assert_string_equal(e.release, good); /* the target first, the good release it came from */
    assert_string_equal(e.previous, next);
    assert_non_null(strstr(e.reason, "activate failed"));
    free(calls);
    free(err);
    free(out);
    /* the job was stopped before: the revert leaves it stopped (its agents know --no-start) */
    st.jobs[0].state = GANG_STOPPED;
    code = rb_run(d2, &st, act_fails, &e, &calls, &err, &out);
    if (code != EXIT_REVERTED || strcmp(e.result, "reverted") != 0 || count_of(calls, "--no-start") != 2 ||
        !strstr(out, "so it is left stopped"))
        fail_msg("exit %d, record %s\nstderr: %s\nstdout: %s\ncalls: %s", code, e.result, err, out, calls);
    free(calls);
    free(err);
    free(out);
    /* the revert fails too (in /b): REVERT FAILED, recorded so */
    st.jobs[0].state = GANG_RUNNING;
    char both[400];
    snprintf(both, sizeof both, "%s*/b/agent.sock\\ revert\\ *) echo 'revert: no space left' >&2; exit 1;;\n",
             act_fails);
    code = rb_run(d2, &st, both, &e, &calls, &err, &out);
    if (code != EXIT_REVERT_FAILED || strcmp(e.result, "revert-failed") != 0 || !strstr(out, "REVERT FAILED") ||
        !strstr(e.reason, "activate failed"))
        fail_msg("exit %d, record %s\nstderr: %s\nstdout: %s\ncalls: %s", code, e.result, err, out, calls);
    free(calls);
    free(err);
    free(out);
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* `drover deploy v5`, the agent killed in a container during probation: "v5 is not marked bad",
 * REVERT FAILED; then `drover install`, `drover rollback --job J`: the rollback reverted the
 * never-promoted v5 asking each agent to mark it bad, so status listed it under bad and a later
 * `rollback --to` it asked for --force.  A rollback's revert of a release whose probation was
 * never decided leaves it unmarked (revert --no-mark), as `drover revert` does. */
static void test_rollback_of_undecided_release_leaves_it_unmarked(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbund-XXXXXX";
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    fake_agent_status_init(&st);
    st.features = STATUS_FEATURES_ALL;
    st.njobs = 1;
    strcpy(st.jobs[0].job, "train");
    st.jobs[0].state = GANG_RUNNING;
    strcpy(st.jobs[0].current, next);
    strcpy(st.jobs[0].previous, good);
    strcpy(st.jobs[0].good, good);
    st.jobs[0].ngoods = 1;
    strcpy(st.jobs[0].goods[0], good);
    char *calls, *err, *out;
    int code = rb_run(d2, &st, "", &e, &calls, &err, &out);
    if (code != EXIT_OK || strcmp(e.result, "rollback") != 0 || count_of(calls, "sock revert --job train") != 2 ||
        count_of(calls, "--no-mark") != 2)
        fail_msg("exit %d, record %s\nstderr: %s\nstdout: %s\ncalls: %s", code, e.result, err, out, calls);
    free(calls);
    free(err);
    free(out);
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* A promote that worked in /a only: /a calls next good; /b still runs next on its agent's
 * probation, good its good release (its status in d2/status-b.json, which bcase serves for
 * /b's lease take and status). */
static void partial_promote_setup(const char *d2, struct agent_status *st, struct agent_status *stb, char *bcase,
                                  size_t bcase_sz)
{
    char p[600];
    st_next_over_good(st);
    *stb = *st;
    strcpy(stb->jobs[0].good, good);
    stb->jobs[0].ngoods = 1;
    strcpy(stb->jobs[0].goods[0], good);
    char *doc = fake_agent_doc(stb, false);
    snprintf(p, sizeof p, "%s/status-b.json", d2);
    capture_put(p, doc, 0644);
    free(doc);
    snprintf(bcase, bcase_sz, "*/b/agent.sock\\ lease\\ take*|*/b/agent.sock\\ status*) cat '%s';;\n", p);
}

/* `drover promote --job train` */
static int promote_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return deploy_decide_held(f, "train", true);
}

/* `drover promote` after a promote that failed in some containers only (a deploy's, or a held
 * release's): the container it worked in calls the candidate good, the other still holds it on
 * its agent's probation.  The promote read the job from the first container only and refused,
 * "runs its good release: nothing is held to promote", while the other would revert it at its
 * deadline.  It reads every container: promotes where the candidate is held, says where it is
 * promoted already, and records the good release it replaced as previous.  Containers that do
 * not run one release are refused, each named, with what to run instead. */
static void test_promote_after_partial_promote(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbprom-XXXXXX", p[600], bcase[900];
    assert_non_null(mkdtemp(d2));
    struct agent_status st, stb;
    struct history_entry e;
    partial_promote_setup(d2, &st, &stb, bcase, sizeof bcase);
    char *doc;
    rb_fn = promote_verb;
    rb_case = bcase;
    int code = rb_record(d2, &st, 0, &e);
    snprintf(p, sizeof p, "%s/calls", d2);
    char *calls = capture_slurp(p);
    snprintf(p, sizeof p, "%s/err", d2);
    char *err = capture_slurp(p);
    if (code != EXIT_OK || strcmp(e.result, "promoted") != 0 || strstr(err, "nothing is held") ||
        !strstr(err, "promote: cd5d00000000 is promoted already in h1:local:") ||
        count_of(calls, "sock promote ") != 1 || !strstr(calls, "/b/agent.sock promote "))
        fail_msg("exit %d, record %s\nstderr: %s\ncalls: %s", code, e.result, err, calls);
    assert_string_equal(e.release, next);
    assert_string_equal(e.previous, good); /* the good release it replaced, not itself */
    free(calls);
    free(err);
    /* /b went back to good by itself (its deadline passed): no one release to promote */
    strcpy(stb.jobs[0].current, good);
    doc = fake_agent_doc(&stb, false);
    snprintf(p, sizeof p, "%s/status-b.json", d2);
    capture_put(p, doc, 0644);
    free(doc);
    snprintf(p, sizeof p, "%s/calls", d2);
    (void)unlink(p);
    /* and /a holds next unpromoted, so a promote has a candidate to name */
    strcpy(st.jobs[0].good, good);
    rb_refusal = true;
    code = rb_record(d2, &st, 0, &e);
    rb_refusal = false;
    calls = capture_slurp(p);
    snprintf(p, sizeof p, "%s/err", d2);
    err = capture_slurp(p);
    if (code != EXIT_FAIL || strstr(calls, "sock promote ") ||
        !strstr(err, "promote of job 'train' refused, nothing promoted: its containers do not run one release") ||
        !strstr(err, "/a holds cd5d00000000 (not promoted there)") ||
        !strstr(err, "/b runs a56200000000 (its good release)") ||
        !strstr(err, "`drover rollback --job train --to ID`"))
        fail_msg("exit %d\nstderr: %s\ncalls: %s", code, err, calls);
    free(calls);
    free(err);
    rb_fn = rb_verb;
    rb_case = "";
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* `drover revert --job train` */
static int revert_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return deploy_decide_held(f, "train", false);
}

/* `drover revert` after a promote that failed in some containers only read the job from the
 * first container: promoted there, it said "nothing is held to revert"; held there, it reverted
 * where the release was held and left it running where it was promoted (each agent's revert
 * goes to its own good release): a split gang.  It reads every container, as promote does:
 * promoted in some, held in others, it is refused naming `drover rollback --to G`, nothing
 * reverted. */
static void test_revert_after_partial_promote(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbrev-XXXXXX", p[600], bcase[900];
    assert_non_null(mkdtemp(d2));
    struct agent_status st, stb;
    struct history_entry e;
    partial_promote_setup(d2, &st, &stb, bcase, sizeof bcase);
    rb_fn = revert_verb;
    rb_case = bcase;
    rb_refusal = true;
    int code = rb_record(d2, &st, 0, &e);
    snprintf(p, sizeof p, "%s/calls", d2);
    char *calls = capture_slurp(p);
    snprintf(p, sizeof p, "%s/err", d2);
    char *err = capture_slurp(p);
    if (code != EXIT_FAIL || strstr(calls, "sock revert ") || strstr(err, "nothing is held") ||
        !strstr(err, "revert of job 'train' refused, nothing reverted: cd5d00000000 is promoted already in h1:local:") ||
        !strstr(err, "`drover rollback --job train --to a56200000000`"))
        fail_msg("exit %d\nstderr: %s\ncalls: %s", code, err, calls);
    free(calls);
    free(err);
    rb_refusal = false;
    rb_fn = rb_verb;
    rb_case = "";
    assert_int_equal(fs_rm_rf(d2), 0);
}

static const char nanp[] = "dc1d30b010c60000000000000000000000000000000000000000000000000000";
static const char *rb_to = NULL; /* rb_plan_verb's --to */
/* `drover rollback --dry-run` (--to rb_to) of job train */
static int rb_plan_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return deploy_rollback(f, "train", rb_to, false, true, true);
}

/* d2/hist.jsonl holding the one record *rec, its path into p (psz): what a fake agent's
 * `history list` prints */
static void rb_history_file(const char *d2, const struct history_entry *rec, char *p, size_t psz)
{
    char *line = NULL;
    assert_int_equal(history_entry_format(rec, &line), 0);
    snprintf(p, psz, "%s/hist.jsonl", d2);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fprintf(fp, "%s\n", line);
    fclose(fp);
    free(line);
}

/* The job after `drover rollback` from nanp (promoted, then stopped by its agent) to next: st
 * runs next, good, with nanp among its promoted releases; the agent's own record of the stop
 * (reason code code, reason) is what its `history list` prints, from d2/hist.jsonl, the fake
 * agent's case for it in hcase (hsz). */
static void rb_agent_stopped(const char *d2, struct agent_status *st, enum history_reason code, const char *name,
                             const char *reason, char *hcase, size_t hsz)
{
    char p[600];
    st_next_over_good(st); /* then nanp promoted, and next again */
    strcpy(st->jobs[0].previous, nanp);
    st->jobs[0].ngoods = 3;
    strcpy(st->jobs[0].goods[1], nanp);
    strcpy(st->jobs[0].goods[2], next);
    struct history_entry rec = { .time = 1796220191, .ktok_s = -1, .baseline_ktok_s = -1, .reason_code = code };
    strcpy(rec.job, "train");
    strcpy(rec.release, nanp);
    strcpy(rec.name, name);
    strcpy(rec.result, "failed");
    strcpy(rec.by, HISTORY_BY_AGENT);
    strcpy(rec.reason, reason);
    rb_history_file(d2, &rec, p, sizeof p);
    snprintf(hcase, hsz, "*'history list'*) cat '%s';;\n", p);
}

/* A newcomer's release nanp was promoted, then produced NaN; its agent stopped it ("rank 1
 * reported 3 consecutive non-finite steps (non-retryable) on a promoted release: stopped"),
 * marked it bad and recorded that in the job's history; `drover rollback` went back to v1 (next
 * here).  The next `drover rollback --dry-run` would go back to nanp, "the previous good
 * release": it is now skipped, saying when and why from the agent's own record (this
 * controller's history has none: no drover was there), and `--to` it is refused naming the same,
 * with --force. */
static void test_rollback_skips_release_stopped_while_promoted(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbnan-XXXXXX", p[600], hcase[900];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    /* the agent's own record of the stop: history list prints it */
    rb_agent_stopped(d2, &st, HISTORY_RC_AGENT_STOPPED, "nanp", "drover-agent rank 1 reported 3 consecutive "
                     "non-finite steps (non-retryable) on a promoted release: stopped", hcase, sizeof hcase);
    st.jobs[0].nbad = 1;
    strcpy(st.jobs[0].bad[0], nanp);
    rb_fn = rb_plan_verb;
    rb_case = hcase;
    rb_refusal = true;
    rb_to = NULL;
    int code = rb_record(d2, &st, 0, &e);
    snprintf(p, sizeof p, "%s/err", d2);
    char *err = capture_slurp(p);
    if (code != EXIT_FAIL || strstr(err, "would go from") ||
        !strstr(err, "skipping dc1d30b010c6 (nanp): its agent stopped it for job 'train' at 2026-") ||
        !strstr(err, "UTC while it ran as the promoted release (failed: drover-agent rank 1 reported 3 "
                     "consecutive non-finite steps (non-retryable) on a promoted release: stopped)") ||
        !strstr(err, "--to dc1d30b010c6 --force goes to it") ||
        !strstr(err, "has no earlier good release to roll back to (releases marked bad"))
        fail_msg("exit %d\nstderr: %s", code, err);
    free(err);
    /* --to it: refused, naming --force and the stop */
    rb_to = "dc1d30";
    code = rb_record(d2, &st, 0, &e);
    err = capture_slurp(p);
    if (code != EXIT_FAIL || strstr(err, "would go from") ||
        !strstr(err, "release dc1d30b010c6 (nanp) was stopped by its agent for job 'train' at 2026-") ||
        !strstr(err, "while it ran as the promoted release: drover-agent rank 1 reported 3 consecutive") ||
        !strstr(err, "roll back to it only with --force (drover rollback --job train --to dc1d30b010c6 --force)"))
        fail_msg("exit %d\nstderr: %s", code, err);
    free(err);
    rb_to = NULL;
    rb_refusal = false;
    rb_fn = rb_verb;
    rb_case = "";
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* nc4 finding 2: release nanp (here: a release that hung) ran promoted, and its agent stopped it
 * once its restart budget was spent on hangs: not marked bad (a hang can be the
 * infrastructure's), but recorded (agent-stopped-hung).  After a rollback to next, a plain
 * `drover rollback` (and `--to` it) goes to it, warning when and why from the agent's record;
 * neither skipped nor refused.  It went through silently. */
static void test_rollback_to_release_hung_while_promoted_warns(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbhang-XXXXXX", p[600], hcase[900];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    rb_agent_stopped(d2, &st, HISTORY_RC_AGENT_STOPPED_HUNG, "hang", "drover-agent rank 0 hung (liveness "
                     "deadline) on a promoted release, 4 times in 360 s (restart budget 3): stopped",
                     hcase, sizeof hcase);
    rb_fn = rb_plan_verb;
    rb_case = hcase;
    rb_refusal = true; /* a dry run records nothing */
    for (int k = 0; k < 2; k++) {
        rb_to = k ? "dc1d30" : NULL;
        int code = rb_record(d2, &st, 0, &e);
        snprintf(p, sizeof p, "%s/err", d2);
        char *err = capture_slurp(p);
        snprintf(p, sizeof p, "%s/out", d2);
        char *out = capture_slurp(p);
        if (code != EXIT_OK || !strstr(out, "would go from cd5d00000000 to the") ||
            !strstr(out, "release dc1d30b010c6") || strstr(err, "skipping") || strstr(err, "refused") ||
            !strstr(err, "rolling back to dc1d30b010c6 (hang), which its agent stopped for job 'train' at 2026-") ||
            !strstr(err, "while it ran as the promoted release: drover-agent rank 0 hung (liveness deadline) on a "
                         "promoted release, 4 times in 360 s (restart budget 3): stopped; it is not marked bad"))
            fail_msg("--to %s: exit %d\nstdout: %s\nstderr: %s", rb_to ? rb_to : "(none)", code, out, err);
        free(out);
        free(err);
    }
    rb_to = NULL;
    rb_refusal = false;
    rb_fn = rb_verb;
    rb_case = "";
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* `drover rollback --to a1ea9a` of a release promoted 15 min before, shown by `drover history`:
 * its agents had let it go (they keep the job's last few promoted releases, their stores the
 * newest ones), and the rollback said "no release the job ran (good, previous, promoted or bad)
 * begins with 'a1ea9a'", as for a typo.  It now says what the history knows: promoted at T, no
 * longer kept in the containers named, and to deploy it again; and where every container still
 * keeps it, it goes there (the dry run says so). */
static void test_rollback_to_release_no_longer_kept(void **state)
{
    (void)state;
    static const char gone[] = "a1ea9a00000000000000000000000000000000000000000000000000000000ff";
    char d2[] = "/tmp/drover-unit-rbgone-XXXXXX", p[600], hcase[1200];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    struct history_entry e;
    st_next_over_good(&st);
    /* the job's history, as its agents keep it: gone promoted at 2026-12-07 08:00:00 UTC */
    struct history_entry rec = { .time = 1796630400, .ktok_s = 410, .baseline_ktok_s = 400 };
    strcpy(rec.job, "train");
    strcpy(rec.release, gone);
    strcpy(rec.name, "v3");
    strcpy(rec.result, "promoted");
    strcpy(rec.previous, good);
    rb_history_file(d2, &rec, p, sizeof p);
    for (int kept = 0; kept < 2; kept++) {
        snprintf(hcase, sizeof hcase, "*'history list'*) cat '%s/hist.jsonl';;\n"
                 "*'release have %s'*) echo '%s %s';;\n", d2, gone, gone, kept ? "present" : "absent");
        rb_fn = rb_plan_verb;
        rb_case = hcase;
        rb_refusal = true;
        rb_to = "a1ea9a";
        int code = rb_record(d2, &st, 0, &e);
        snprintf(p, sizeof p, "%s/err", d2);
        char *err = capture_slurp(p);
        snprintf(p, sizeof p, "%s/out", d2);
        char *out = capture_slurp(p);
        if (strstr(err, "no release the job ran"))
            fail_msg("kept %d: exit %d\nstderr: %s", kept, code, err);
        if (!kept && (code != EXIT_FAIL ||
                      !strstr(err, "rollback of job 'train' refused, nothing changed: release a1ea9a000000 "
                                   "(v3) was promoted for job 'train' at 2026-12-07 08:00:00 UTC but is no "
                                   "longer kept in h1:local:") ||
                      !strstr(err, "deploy it again from its directory (drover deploy DIR --job train)")))
            fail_msg("exit %d\nstderr: %s", code, err);
        if (kept && (code != EXIT_OK || !strstr(err, "every container still keeps it") ||
                     !strstr(out, "a1ea9a000000")))
            fail_msg("exit %d\nstderr: %s\nstdout: %s", code, err, out);
        free(err);
        free(out);
    }
    rb_to = NULL;
    rb_refusal = false;
    rb_fn = rb_verb;
    rb_case = "";
    assert_int_equal(fs_rm_rf(d2), 0);
}

/* The decision alone: stopped in every container (or stopped in some, its gang ended in the
 * others: no gang anywhere) is a stopped job; a gang running anywhere is not. */
static void test_job_is_stopped_decision(void **state)
{
    (void)state;
    struct inv_job j = { .ncts = 2 };
    struct job_status js[2] = { 0 };
    struct deploy d = { .job = &j, .sv_js = js };
    strcpy(js[0].current, good);
    strcpy(js[1].current, good);
    d.sv_found[0] = d.sv_found[1] = true;
    js[0].state = js[1].state = GANG_STOPPED;
    assert_true(deploy_job_is_stopped(&d));
    js[1].state = GANG_FAILED;
    assert_true(deploy_job_is_stopped(&d));
    js[1].state = GANG_RUNNING;
    d.has_gang[1] = true;
    assert_false(deploy_job_is_stopped(&d));
    d.has_gang[1] = false;
    js[0].state = js[1].state = GANG_FAILED; /* crashed, not stopped: the revert runs it */
    assert_false(deploy_job_is_stopped(&d));
}

/* The deploy that replaces a release whose drover died during its probation (kill -9) records
 * it as aborted ("never decided ...; replaced by ...") and says so on stderr.  A release that
 * had been promoted once before (job train's v1 deployed again, its drover killed) got neither:
 * the job's older "promoted" record of it was taken for a record of this run. */
static struct history_entry *abandoned_old; /* the job's history before the deploy */
static size_t abandoned_nold;
static int abandoned_verb(struct fleet *f, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const struct inventory *iv = f->inv;
    struct deploy d = { .f = f, .inv = iv, .job = &iv->jobs[0] };
    strcpy(d.id, "ee01000000000000000000000000000000000000000000000000000000000000");
    memcpy(d.sid, d.id, RELEASE_SHORT_LEN);
    strcpy(d.name, "v3");
    strcpy(d.good, good);
    struct job_status js[2];
    d.sv_js = js;
    for (int i = 0; i < 2; i++) {
        memset(&js[i], 0, sizeof js[i]);
        strcpy(js[i].job, "train");
        js[i].state = GANG_RUNNING;
        strcpy(js[i].current, next); /* v1 again, on probation: its drover was killed */
        strcpy(js[i].good, good);
        js[i].age_s = 40; /* started 40 s ago, no restart since */
        d.sv_found[i] = true;
    }
    for (size_t k = 0; k < abandoned_nold; k++)
        assert_int_equal(state_history_append(iv->state_dir, &abandoned_old[k]), 0);
    history_record_abandoned(&d);
    return 0;
}

static void test_abandoned_release_promoted_before_is_recorded(void **state)
{
    (void)state;
    char d2[] = "/tmp/drover-unit-rbaband-XXXXXX", p[600], out[600], err[600];
    assert_non_null(mkdtemp(d2));
    struct agent_status st;
    fake_agent_status_init(&st);
    fake_agent(d2, &st);
    snprintf(p, sizeof p, "%s/state", d2);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    /* next promoted an hour ago, good promoted after it (the job's good release now) */
    struct history_entry old[2] = { { .time = time_wall() - 3600, .ktok_s = -1, .baseline_ktok_s = -1 },
                                    { .time = time_wall() - 1800, .ktok_s = -1, .baseline_ktok_s = -1 } };
    strcpy(old[0].job, "train");
    strcpy(old[0].release, next);
    strcpy(old[0].name, "v1");
    strcpy(old[0].result, "promoted");
    old[1] = old[0];
    old[1].time = time_wall() - 1800;
    strcpy(old[1].release, good);
    strcpy(old[1].name, "v2");
    strcpy(old[1].previous, next);
    abandoned_old = old;
    abandoned_nold = 2;
    struct inventory *inv2 = fake_agent_inventory(d2, "", "", "c");
    snprintf(out, sizeof out, "%s/out", d2);
    snprintf(err, sizeof err, "%s/err", d2);
    assert_int_equal(capture_verb(abandoned_verb, inv2, NULL, 0, out, err), 0);
    struct history_entry *h = NULL;
    size_t n = 0;
    assert_int_equal(state_history_read(p, "train", &h, &n, NULL), 0);
    char *e = capture_slurp(err);
    if (n != 3 || strcmp(h[2].result, "aborted") != 0 || strcmp(h[2].release, next) != 0 ||
        !strstr(h[2].reason, "never decided") || !strstr(h[2].reason, "replaced by ee0100000000 (v3)") ||
        !strstr(e, "recorded as aborted, replaced by ee0100000000"))
        fail_msg("%zu records, last %s; stderr: %s", n, n ? h[n - 1].result : "-", e);
    free(e);
    free(h);
    /* a record of this run (its revert failed: the release still runs) tells it: no second */
    snprintf(p, sizeof p, "%s/state/history.jsonl", d2);
    (void)unlink(p);
    old[1].time = time_wall() - 10;
    strcpy(old[1].release, next);
    strcpy(old[1].result, "revert-failed");
    assert_int_equal(capture_verb(abandoned_verb, inv2, NULL, 0, out, err), 0);
    snprintf(p, sizeof p, "%s/state", d2);
    assert_int_equal(state_history_read(p, "train", &h, &n, NULL), 0);
    assert_int_equal(n, 2);
    free(h);
    inventory_free(inv2);
    assert_int_equal(fs_rm_rf(d2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_target_refuses),
        cmocka_unit_test(test_interrupt_is_not_judged),
        cmocka_unit_test(test_gpu_check_interrupt_is_not_judged),
        cmocka_unit_test(test_interrupt_during_revert_ends_the_watch),
        cmocka_unit_test(test_baseline_agents_copy_wins),
        cmocka_unit_test(test_gc_agent_not_running),
        cmocka_unit_test(test_gc_after_promote_warns),
        cmocka_unit_test(test_revert_of_stopped_job_leaves_it_stopped),
        cmocka_unit_test(test_job_is_stopped_decision),
        cmocka_unit_test(test_rollback_to_damaged_target_stops_nothing),
        cmocka_unit_test(test_rollback_record_names_target_first),
        cmocka_unit_test(test_failed_rollback_says_how_back),
        cmocka_unit_test(test_rollback_activate_failed_reverts),
        cmocka_unit_test(test_promote_after_partial_promote),
        cmocka_unit_test(test_rollback_of_undecided_release_leaves_it_unmarked),
        cmocka_unit_test(test_revert_after_partial_promote),
        cmocka_unit_test(test_rollback_skips_release_stopped_while_promoted),
        cmocka_unit_test(test_rollback_to_release_hung_while_promoted_warns),
        cmocka_unit_test(test_rollback_restores_target_baseline),
        cmocka_unit_test(test_rollback_to_release_no_longer_kept),
        cmocka_unit_test(test_abandoned_release_promoted_before_is_recorded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
