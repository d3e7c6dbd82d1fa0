/* Unit tests for the agent's store (agent/store.c), state.json / events.jsonl (agent/state.c),
 * job specs (agent/spec.c) and the restart/rollback policy (agent/supervise.c). */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/state.h"
#include "agent/store.h"
#include "agent/supervise.h"
#include "common/bundle.h"
#include "common/util.h"
#include "common/workerenv.h"

static char tmpd[256];

static int setup(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-store-test.XXXXXX");
    return mkdtemp(tmpd) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(tmpd);
}

static char *path(const char *rel)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", tmpd, rel);
    return p[i];
}

/* Pack a release whose one file says text; returns its id in id. */
static void make_bundle(const char *name, const char *text, char id[RELEASE_ID_LEN + 1])
{
    char dir[64], file[96], blob[96];
    snprintf(dir, sizeof dir, "src-%s", name);
    snprintf(file, sizeof file, "src-%s/bin/run.sh", name);
    snprintf(blob, sizeof blob, "%s.tar.zst", name);
    assert_int_equal(fs_mkdir_p(path(dir), 0755), 0);
    char bin[128];
    snprintf(bin, sizeof bin, "%s/bin", path(dir));
    assert_int_equal(fs_mkdir_p(bin, 0755), 0);
    assert_int_equal(fs_write_atomic(path(file), text, strlen(text), 0755), 0);
    assert_int_equal(bundle_pack(path(dir), name, path(blob), id, NULL), 0);
}

static void test_store_add_idempotent(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    char id[RELEASE_ID_LEN + 1], err[256];
    make_bundle("v1", "#!/bin/sh\necho 1\n", id);
    assert_int_equal(store_add_release(&s, path("v1.tar.zst"), id, err, sizeof err), 0);
    assert_true(store_has_release(&s, id));
    struct stat st;
    assert_int_equal(stat(path("v1.tar.zst"), &st), 0); /* not in incoming/: the caller's file stays */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/root/releases/%s/bin/run.sh", tmpd, id);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    /* again, pushed into incoming/ as the controller does: already present, blob consumed */
    assert_int_equal(rename(path("v1.tar.zst"), path("root/incoming/v1.bundle")), 0);
    assert_int_equal(store_add_release(&s, path("root/incoming/v1.bundle"), id, err, sizeof err), 1);
    assert_int_equal(stat(path("root/incoming/v1.bundle"), &st), -1);
    char **ids;
    size_t n;
    assert_int_equal(store_list(&s, &ids, &n), 0);
    assert_int_equal(n, 1);
    store_ids_free(ids, n);
    /* prefix resolution */
    char got[RELEASE_ID_LEN + 1];
    char pre[13];
    memcpy(pre, id, 12);
    pre[12] = '\0';
    assert_int_equal(store_resolve(&s, pre, got), 0);
    assert_string_equal(got, id);
    assert_int_equal(store_resolve(&s, "zz", got), -EINVAL);
    assert_int_equal(store_resolve(&s, "000000", got), id[0] == '0' && !strncmp(id, "000000", 6) ? 0 : -ENOENT);
}

/* An installed release is checked again before it is reactivated (issue 11): an edited file, a
 * deleted file and a missing release are each told apart from a good one. */
static void test_store_verify_release(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    char id[RELEASE_ID_LEN + 1], err[256] = "";
    make_bundle("v1", "#!/bin/sh\necho 1\n", id);
    assert_int_equal(store_add_release(&s, path("v1.tar.zst"), id, err, sizeof err), 0);
    assert_int_equal(store_verify_release(&s, id, err, sizeof err), 0);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/root/releases/%s/bin/run.sh", tmpd, id);
    assert_int_equal(fs_write_atomic(p, "#!/bin/sh\necho 2\n", 17, 0755), 0); /* same size */
    assert_int_equal(store_verify_release(&s, id, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "bin/run.sh"));
    assert_non_null(strstr(err, "sha256"));
    assert_int_equal(unlink(p), 0);
    assert_int_equal(store_verify_release(&s, id, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "missing"));
    char other[RELEASE_ID_LEN + 1];
    memset(other, 'e', RELEASE_ID_LEN);
    other[RELEASE_ID_LEN] = '\0';
    assert_int_equal(store_verify_release(&s, other, err, sizeof err), -ENOENT);
}

static void test_store_corrupt_blob_leaves_nothing(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    char id[RELEASE_ID_LEN + 1], other[RELEASE_ID_LEN + 1], err[256];
    make_bundle("v1", "#!/bin/sh\necho 1\n", id);
    make_bundle("v2", "#!/bin/sh\necho 2\n", other);
    /* v2's blob offered as v1: id mismatch */
    assert_int_equal(store_add_release(&s, path("v2.tar.zst"), id, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "release id mismatch"));
    assert_false(store_has_release(&s, id));
    /* a truncated blob */
    char *data;
    size_t len;
    assert_int_equal(fs_read_file(path("v1.tar.zst"), 1 << 20, &data, &len), 0);
    assert_int_equal(fs_write_atomic(path("v1.tar.zst"), data, len - 40, 0600), 0);
    free(data);
    assert_true(store_add_release(&s, path("v1.tar.zst"), id, err, sizeof err) < 0);
    assert_false(store_has_release(&s, id));
    char **ids;
    size_t n;
    assert_int_equal(store_list(&s, &ids, &n), 0);
    assert_int_equal(n, 0);
    store_ids_free(ids, n);
    /* no temp tree left behind either */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s/root/releases)\"", tmpd);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(store_add_release(&s, path("v1.tar.zst"), "nothex", err, sizeof err), -EINVAL);
}

/* A pid that no process can have: the kernel hands out pids below pid_max. */
static long dead_pid(void)
{
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    assert_non_null(f);
    long max = 0;
    assert_int_equal(fscanf(f, "%ld", &max), 1);
    fclose(f);
    assert_true(max > 1);
    return max;
}

static void test_store_switch_and_stale_tmp(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    char a[RELEASE_ID_LEN + 1], b[RELEASE_ID_LEN + 1], cur[RELEASE_ID_LEN + 1], err[256];
    make_bundle("a", "a\n", a);
    make_bundle("b", "b\n", b);
    assert_int_equal(store_add_release(&s, path("a.tar.zst"), a, err, sizeof err), 0);
    assert_int_equal(store_add_release(&s, path("b.tar.zst"), b, err, sizeof err), 0);
    assert_int_equal(store_current(&s, "train", cur), 0);
    assert_string_equal(cur, "");
    assert_int_equal(store_switch_current(&s, "train", a), 0);
    assert_int_equal(store_current(&s, "train", cur), 0);
    assert_string_equal(cur, a);
    assert_int_equal(store_switch_current(&s, "train", b), 0);
    assert_int_equal(store_current(&s, "train", cur), 0);
    assert_string_equal(cur, b);
    /* the link resolves to the release directory */
    struct stat st;
    assert_int_equal(stat(path("root/jobs/train/current/bin/run.sh"), &st), 0);
    /* a second job has its own current */
    assert_int_equal(store_switch_current(&s, "eval", a), 0);
    assert_int_equal(store_current(&s, "train", cur), 0);
    assert_string_equal(cur, b);
    /* switching to a missing release changes nothing */
    char missing[RELEASE_ID_LEN + 1];
    memset(missing, 'f', RELEASE_ID_LEN);
    missing[RELEASE_ID_LEN] = '\0';
    assert_int_equal(store_switch_current(&s, "train", missing), -ENOENT);
    assert_int_equal(store_current(&s, "train", cur), 0);
    assert_string_equal(cur, b);
    /* leftovers of an interrupted add / switch are cleaned on open; checkpoints are not, nor
     * the temp entries of a process that is still running. The dead owner is a pid no process
     * can have (pid_max itself: pids are below it), not a small number that may be alive on the
     * machine running the test (pid 99 was a kernel thread on one). */
    long dead = dead_pid();
    char rel_tmp[64], cur_tmp[64], live_tmp[64];
    snprintf(rel_tmp, sizeof rel_tmp, "root/releases/abc.tmp.%ld", dead);
    snprintf(cur_tmp, sizeof cur_tmp, "root/jobs/train/current.tmp.%ld", dead);
    snprintf(live_tmp, sizeof live_tmp, "root/jobs/train/current.tmp.%ld", (long)getpid());
    char rel_tmp_x[80];
    snprintf(rel_tmp_x, sizeof rel_tmp_x, "%s/x", rel_tmp);
    assert_int_equal(fs_mkdir_p(path(rel_tmp_x), 0755), 0);
    assert_int_equal(symlink("x", path(cur_tmp)), 0);
    assert_int_equal(symlink("x", path(live_tmp)), 0);
    assert_int_equal(fs_mkdir_p(path("root/runs/train/checkpoints"), 0755), 0);
    assert_int_equal(fs_write_atomic(path("root/runs/train/checkpoints/c.tmp.1"), "x", 1, 0644), 0);
    assert_int_equal(store_open(&s, path("root")), 0);
    assert_int_equal(lstat(path(rel_tmp), &st), -1);
    assert_int_equal(lstat(path(cur_tmp), &st), -1);
    assert_int_equal(lstat(path(live_tmp), &st), 0);
    assert_int_equal(unlink(path(live_tmp)), 0);
    assert_int_equal(stat(path("root/runs/train/checkpoints/c.tmp.1"), &st), 0);
    assert_int_equal(store_current(&s, "train", cur), 0);
    assert_string_equal(cur, b);
}

/* A reader never sees jobs/<job>/current missing or half-written while it is switched. */
static void test_store_switch_is_atomic(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    char a[RELEASE_ID_LEN + 1], b[RELEASE_ID_LEN + 1], cur[RELEASE_ID_LEN + 1], err[256];
    make_bundle("a", "a\n", a);
    make_bundle("b", "b\n", b);
    assert_int_equal(store_add_release(&s, path("a.tar.zst"), a, err, sizeof err), 0);
    assert_int_equal(store_add_release(&s, path("b.tar.zst"), b, err, sizeof err), 0);
    assert_int_equal(store_switch_current(&s, "train", a), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < 300; i++)
            if (store_switch_current(&s, "train", i % 2 ? a : b) < 0)
                _exit(1);
        _exit(0);
    }
    int seen_a = 0, seen_b = 0, ws;
    while (waitpid(pid, &ws, WNOHANG) == 0) {
        assert_int_equal(store_current(&s, "train", cur), 0);
        assert_true(!strcmp(cur, a) || !strcmp(cur, b));
        seen_a += !strcmp(cur, a);
        seen_b += !strcmp(cur, b);
    }
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_true(seen_a + seen_b > 0);
}

static void test_store_gc_keeps_protected(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    char id[5][RELEASE_ID_LEN + 1], err[256];
    for (int i = 0; i < 5; i++) {
        char name[8], text[16];
        snprintf(name, sizeof name, "r%d", i);
        snprintf(text, sizeof text, "r%d\n", i);
        make_bundle(name, text, id[i]);
        char blob[32];
        snprintf(blob, sizeof blob, "r%d.tar.zst", i);
        assert_int_equal(store_add_release(&s, path(blob), id[i], err, sizeof err), 0);
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/root/releases/%s", tmpd, id[i]);
        struct timespec ts[2] = {{.tv_sec = 1000 + i}, {.tv_sec = 1000 + i}};
        assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0); /* r4 newest */
    }
    /* keep 1 newest (r4); protect r0 (good) and r2 (previous) */
    const char *protect[] = {id[0], id[2], ""};
    assert_int_equal(store_gc(&s, 1, protect, 3, NULL, 0), 2);
    assert_true(store_has_release(&s, id[4]));
    assert_true(store_has_release(&s, id[0]));
    assert_true(store_has_release(&s, id[2]));
    assert_false(store_has_release(&s, id[1]));
    assert_false(store_has_release(&s, id[3]));
    assert_int_equal(store_gc(&s, 1, protect, 3, NULL, 0), 0);
}

/* Failed releases go first: the store's newest releases were mostly failed deploys (marked
 * bad), and keeping "the newest N" pushed the older good ones out, so `drover rollback --to` a
 * release promoted 15 min before found it in no container.  The keep slots now go to releases
 * that did not fail, newest first; failed ones only take what is left. */
static void test_store_gc_failed_go_first(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    char id[6][RELEASE_ID_LEN + 1], err[256];
    for (int i = 0; i < 6; i++) {
        char name[8], text[16];
        snprintf(name, sizeof name, "f%d", i);
        snprintf(text, sizeof text, "f%d\n", i);
        make_bundle(name, text, id[i]);
        char blob[32];
        snprintf(blob, sizeof blob, "f%d.tar.zst", i);
        assert_int_equal(store_add_release(&s, path(blob), id[i], err, sizeof err), 0);
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/root/releases/%s", tmpd, id[i]);
        struct timespec ts[2] = {{.tv_sec = 2000 + i}, {.tv_sec = 2000 + i}};
        assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0); /* f5 newest */
    }
    /* f5 current and good; f4, f3, f2 failed deploys after it (bad); f1, f0 promoted earlier,
     * out of the protected goods.  Keep 3: f5, then f1 and f0, before any failed one */
    const char *protect[] = {id[5]};
    const char *failed[] = {id[4], id[3], id[2], NULL};
    assert_int_equal(store_gc(&s, 3, protect, 1, failed, 4), 3);
    assert_true(store_has_release(&s, id[5]));
    assert_true(store_has_release(&s, id[1]));
    assert_true(store_has_release(&s, id[0]));
    for (int i = 2; i < 5; i++)
        assert_false(store_has_release(&s, id[i]));
    assert_int_equal(store_gc(&s, 3, protect, 1, failed, 4), 0);
}

static void fill_spec(struct job_spec *s, const char *release)
{
    spec_init(s);
    (void)str_copy(s->release, sizeof s->release, release);
    char *argv[] = {"bin/run.sh", "--steps", "100"};
    assert_int_equal(spec_set_argv(s, 3, argv), 0);
    s->nnodes = 2;
    s->node_rank = 1;
    s->nproc = 2;
    strcpy(s->gpus, "0,1");
    strcpy(s->master_addr, "10.0.0.1");
    s->master_port = 29501;
    s->grace_s = 5;
}

static void test_state_roundtrip(void **state)
{
    (void)state;
    struct agent_state st, back;
    state_init(&st);
    struct job_rec *j;
    assert_int_equal(state_add_job(&st, "train", &j), 0);
    memset(j->current, 'a', RELEASE_ID_LEN);
    memset(j->good, 'b', RELEASE_ID_LEN);
    j->state = GANG_REVERTED;
    strcpy(j->reason, "crash loop");
    j->generation = 7;
    j->restarts = 2;
    j->auto_rollbacks = 1;
    j->probation_deadline = 1234.5;
    j->gang_pgid = 4242;
    j->npids = 2;
    j->pids[0] = 4242;
    j->pids[1] = 4243;
    struct job_spec sp;
    fill_spec(&sp, j->current);
    sp.promoted = true;
    sp.ktok_s = 12.5;
    assert_int_equal(state_put_spec(j, &sp, NULL), 0);
    spec_done(&sp);
    assert_int_equal(state_add_job(&st, "eval", &j), 0);
    assert_int_equal(state_add_job(&st, "bad name!", &j), -EINVAL);
    assert_int_equal(state_save(path("state.json"), &st), 0);
    assert_int_equal(state_load(path("state.json"), &back), 0);
    assert_int_equal(back.njobs, 2);
    struct job_rec *b = state_find_job(&back, "train");
    assert_non_null(b);
    assert_string_equal(b->current, st.jobs[0].current);
    assert_string_equal(b->good, st.jobs[0].good);
    assert_int_equal(b->state, GANG_REVERTED);
    assert_string_equal(b->reason, "crash loop");
    assert_int_equal(b->generation, 7);
    assert_int_equal(b->auto_rollbacks, 1);
    assert_int_equal(b->npids, 2);
    assert_int_equal(b->pids[1], 4243);
    struct job_spec *bs = state_find_spec(b, b->current, NULL);
    assert_non_null(bs);
    assert_int_equal(bs->argc, 3);
    assert_string_equal(bs->argv[2], "100");
    assert_int_equal(bs->nnodes, 2);
    assert_string_equal(bs->gpus, "0,1");
    assert_true(bs->promoted);
    state_done(&back);
    /* a reason cut to fit in the middle of a character (a worker's UTF-8 error text) still
     * saves: escaped, not a failed state.json write or a dropped reason */
    b = state_find_job(&st, "train");
    strcpy(b->reason, "rank 0: shard \xe6\x97");
    assert_int_equal(state_save(path("state.json"), &st), 0);
    assert_int_equal(state_load(path("state.json"), &back), 0);
    assert_string_equal(state_find_job(&back, "train")->reason, "rank 0: shard \\xe6\\x97");
    state_done(&back);
    /* missing file: empty state */
    assert_int_equal(state_load(path("nothere.json"), &back), 0);
    assert_int_equal(back.njobs, 0);
    state_done(&st);
}

static void test_state_parse_errors(void **state)
{
    (void)state;
    struct agent_state st;
    st.njobs = 99; /* must stay untouched on failure */
    assert_int_equal(state_parse("{", 1, &st), -EINVAL);
    assert_int_equal(state_parse("{\"v\":2}", 7, &st), -EPROTONOSUPPORT);
    const char *dup = "{\"v\":1,\"jobs\":[{\"job\":\"a\"},{\"job\":\"a\"}]}";
    assert_int_equal(state_parse(dup, strlen(dup), &st), -EINVAL);
    const char *badid = "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"current\":\"../x\"}]}";
    assert_int_equal(state_parse(badid, strlen(badid), &st), -EINVAL);
    const char *badstate = "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"state\":\"dancing\"}]}";
    assert_int_equal(state_parse(badstate, strlen(badstate), &st), -EINVAL);
    char big[2048] = "{\"v\":1,\"jobs\":[";
    for (int i = 0; i < 9; i++)
        sprintf(big + strlen(big), "%s{\"job\":\"j%d\"}", i ? "," : "", i);
    strcat(big, "]}");
    assert_int_equal(state_parse(big, strlen(big), &st), -E2BIG);
    assert_int_equal(state_parse(big, STATE_MAX_BYTES + 1, &st), -E2BIG);
    assert_int_equal(st.njobs, 99);
}

static void test_state_spec_eviction(void **state)
{
    (void)state;
    struct agent_state st;
    state_init(&st);
    struct job_rec *j;
    assert_int_equal(state_add_job(&st, "train", &j), 0);
    char ids[STATE_MAX_SPECS + 2][RELEASE_ID_LEN + 1];
    for (int i = 0; i < STATE_MAX_SPECS + 2; i++) {
        memset(ids[i], 'a' + i, RELEASE_ID_LEN);
        ids[i][RELEASE_ID_LEN] = '\0';
    }
    strcpy(j->good, ids[0]);
    for (int i = 0; i < STATE_MAX_SPECS + 2; i++) {
        struct job_spec sp;
        fill_spec(&sp, ids[i]);
        assert_int_equal(state_put_spec(j, &sp, NULL), 0);
        spec_done(&sp);
    }
    assert_int_equal(j->nspecs, STATE_MAX_SPECS);
    assert_non_null(state_find_spec(j, ids[0], NULL)); /* good is never evicted */
    assert_null(state_find_spec(j, ids[1], NULL));
    assert_non_null(state_find_spec(j, ids[STATE_MAX_SPECS + 1], NULL));
    state_done(&st);
}

static void test_events_journal(void **state)
{
    (void)state;
    struct events ev;
    assert_int_equal(events_open(path("events.jsonl"), &ev), 0);
    assert_int_equal(ev.seq, 0);
    assert_int_equal(events_append(&ev, "train", "activate", "abc", "switched"), 1);
    assert_int_equal(events_append(&ev, "train", "crash", "abc", "rank 1 \"quoted\"\n"), 2);
    events_close(&ev);
    assert_int_equal(events_open(path("events.jsonl"), &ev), 0);
    assert_int_equal(ev.seq, 2); /* reloaded at start */
    assert_int_equal(events_append(&ev, "train", "revert", "def", ""), 3);
    events_close(&ev);
    FILE *f = fopen(path("dump"), "w");
    assert_int_equal(events_dump(path("events.jsonl"), 1, f), 0);
    fclose(f);
    char *text;
    assert_int_equal(fs_read_file(path("dump"), 1 << 20, &text, NULL), 0);
    assert_null(strstr(text, "\"activate\""));
    assert_non_null(strstr(text, "\"crash\""));
    assert_non_null(strstr(text, "\"revert\""));
    free(text);
}

static void test_spec_validate(void **state)
{
    (void)state;
    struct job_spec s;
    char err[128];
    fill_spec(&s, "");
    assert_int_equal(spec_validate(&s, err, sizeof err), 0);
    s.node_rank = 2;
    assert_int_equal(spec_validate(&s, err, sizeof err), -EINVAL);
    s.node_rank = 0;
    strcpy(s.gpus, "0");
    assert_int_equal(spec_validate(&s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "gpus"));
    strcpy(s.gpus, "0,x");
    assert_int_equal(spec_validate(&s, err, sizeof err), -EINVAL);
    spec_done(&s);
    assert_int_equal(spec_validate(&s, err, sizeof err), -EINVAL); /* no command */
    char *many[SPEC_MAX_ARGS + 1];
    for (int i = 0; i <= SPEC_MAX_ARGS; i++)
        many[i] = "x";
    assert_int_equal(spec_set_argv(&s, SPEC_MAX_ARGS + 1, many), -E2BIG);
    assert_int_equal(s.argc, 0);
    /* issue 12: 10 args with one in Latin-1 reached the worker as 9; now refused up front */
    char *latin1[] = { "bin/x", "--name", "caf\xe9" };
    assert_int_equal(spec_set_argv(&s, 3, latin1), -EILSEQ);
    assert_int_equal(s.argc, 0);
    /* worker environment extras */
    fill_spec(&s, "");
    assert_int_equal(spec_add_env(&s, "NCCL_DEBUG=INFO"), 0);
    assert_int_equal(spec_add_env(&s, "DROVER_TRAIN_FAULT=nan_at=5,slow=2"), 0);
    /* an allow-list: names the agent sets and loader/interpreter hooks are refused (-EPERM) */
    assert_int_equal(spec_add_env(&s, "RANK=3"), -EINVAL); /* reserved */
    assert_int_equal(spec_add_env(&s, "DROVER_HEARTBEAT_FD=1"), -EINVAL); /* reserved */
    assert_int_equal(spec_add_env(&s, "PATH=/evil"), -EINVAL); /* reserved */
    assert_int_equal(spec_add_env(&s, "CUDA_VISIBLE_DEVICES=3"), -EINVAL); /* reserved */
    assert_int_equal(spec_add_env(&s, "LD_PRELOAD=/tmp/evil.so"), -EPERM);
    assert_int_equal(spec_add_env(&s, "LD_LIBRARY_PATH=/tmp"), -EPERM);
    assert_int_equal(spec_add_env(&s, "LD_AUDIT=/tmp/x.so"), -EPERM);
    assert_int_equal(spec_add_env(&s, "BASH_ENV=/tmp/x"), -EPERM);
    assert_int_equal(spec_add_env(&s, "NCCL_=x"), -EPERM); /* a prefix alone is not a name */
    assert_non_null(strstr(worker_env_allowed_text(), "NCCL_*"));
    /* not UTF-8: JSON (state.json, the socket) cannot carry it, so it is refused, not dropped */
    assert_int_equal(spec_add_env(&s, "NCCL_SOCKET_IFNAME=caf\xe9"), -EILSEQ);
    assert_int_equal(spec_add_env(&s, "1BAD=x"), -EINVAL);
    assert_int_equal(spec_add_env(&s, "NOVALUE"), -EINVAL);
    assert_int_equal(spec_add_env(&s, "A B=x"), -EINVAL);
    assert_int_equal(spec_add_env(&s, "NCCL_DEBUG=WARN"), -EINVAL); /* set twice */
    char *argv2[] = {"bin/other"};
    assert_int_equal(spec_set_argv(&s, 1, argv2), 0); /* a new command keeps the env */
    assert_int_equal(s.nenv, 2);
    json_t *o = spec_to_json(&s);
    struct job_spec back;
    assert_int_equal(spec_from_json(o, &back), 0);
    json_decref(o);
    assert_int_equal(back.nenv, 2);
    assert_string_equal(back.env[1], "DROVER_TRAIN_FAULT=nan_at=5,slow=2");
    spec_done(&back);
    /* every argument survives the JSON round trip, UTF-8 included */
    char *utf[] = { "bin/x", "a", "b", "c", "d", "e", "f", "g", "h", "Grüße" };
    assert_int_equal(spec_set_argv(&s, 10, utf), 0);
    o = spec_to_json(&s);
    assert_non_null(o);
    assert_int_equal(spec_from_json(o, &back), 0);
    json_decref(o);
    assert_int_equal(back.argc, 10);
    assert_string_equal(back.argv[9], "Grüße");
    spec_done(&back);
    /* a state.json from before the allow-list: a refused name is left out (never reaches a
     * worker) and counted; the rest of the spec loads */
    json_t *old = json_pack("{s:s,s:[s],s:[s,s]}", "release", s.release, "argv", "bin/x", "env",
                            "LD_PRELOAD=/tmp/evil.so", "NCCL_DEBUG=INFO");
    assert_int_equal(spec_from_json(old, &back), 1);
    json_decref(old);
    assert_int_equal(back.nenv, 1);
    assert_string_equal(back.env[0], "NCCL_DEBUG=INFO");
    spec_done(&back);
    /* a spec jansson cannot carry (bypassing spec_set_argv) gives NULL, not a shorter argv */
    char *saved = s.argv[3];
    s.argv[3] = strdup("\xff");
    assert_null(spec_to_json(&s));
    free(s.argv[3]);
    s.argv[3] = saved;
    spec_done(&s);
    /* the rendezvous generation (issue 11): validated, kept through JSON, and in DROVER_RDZV so
     * a redeploy of the same release never pairs with the old ranks */
    fill_spec(&s, "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
    assert_true(spec_rdzv_ok("0123abcdEF_-"));
    assert_false(spec_rdzv_ok(""));
    assert_false(spec_rdzv_ok("a:b"));
    assert_false(spec_rdzv_ok("012345678901234567890123456789012")); /* 33 */
    strcpy(s.rdzv, "a b");
    assert_int_equal(spec_validate(&s, err, sizeof err), -EINVAL);
    strcpy(s.rdzv, "5f1c0e2a9b7d4e31");
    assert_int_equal(spec_validate(&s, err, sizeof err), 0);
    o = spec_to_json(&s);
    assert_int_equal(spec_from_json(o, &back), 0);
    json_decref(o);
    assert_string_equal(back.rdzv, "5f1c0e2a9b7d4e31");
    spec_done(&back);
    {
        struct store st;
        assert_int_equal(store_open(&st, path("root")), 0);
        struct gang_env *e = calloc(1, sizeof *e);
        assert_non_null(e);
        char want[256];
        assert_int_equal(gang_build_env(e, &st, "train", &s, NULL, 0, 3), 0);
        snprintf(want, sizeof want, "DROVER_RDZV=train:%s:5f1c0e2a9b7d4e31", s.release);
        bool found = false;
        for (int i = 0; i < e->n; i++)
            found |= !strcmp(e->envp[i], want);
        assert_true(found);
        s.rdzv[0] = '\0'; /* an older controller: job:release, as before */
        assert_int_equal(gang_build_env(e, &st, "train", &s, NULL, 0, 3), 0);
        snprintf(want, sizeof want, "DROVER_RDZV=train:%s", s.release);
        found = false;
        for (int i = 0; i < e->n; i++)
            found |= !strcmp(e->envp[i], want);
        assert_true(found);
        free(e);
    }
    spec_done(&s);
    assert_false(job_name_is_valid(""));
    assert_false(job_name_is_valid(".hidden"));
    assert_false(job_name_is_valid("a/b"));
    assert_true(job_name_is_valid("train-1.x"));
}

/* A bad mark's reason is kept whole up to STATUS_BAD_REASON_MAX and cut at a word beyond, with an
 * ellipsis: status -o json showed "... [rank 1: ModuleNotFoundError: No module nam" (160 bytes,
 * cut mid-word) for a reason of 180. */
static void test_state_bad_reason_cut_at_word(void **state)
{
    (void)state;
    struct agent_state st;
    state_init(&st);
    struct job_rec *j;
    assert_int_equal(state_add_job(&st, "train", &j), 0);
    const char *r = "drover: the gang on h2:201 lost a rank and is backing off (restarts 0): rank 1 exited with "
                    "code 1 (1 of 3 in 120 s) [rank 1: ModuleNotFoundError: No module named 'numpyy']";
    state_mark_bad(j, "ab12", r);
    assert_string_equal(state_bad_reason(j, "ab12"), r);
    char longer[600];
    snprintf(longer, sizeof longer, "%s; %s", r, r);
    state_mark_bad(j, "cd34", longer);
    const char *kept = state_bad_reason(j, "cd34");
    size_t n = strlen(kept);
    assert_true(n < STATUS_BAD_REASON_MAX);
    assert_true(n > 3 && !strcmp(kept + n - 3, "\xe2\x80\xa6")); /* the ellipsis */
    assert_memory_equal(kept, longer, n - 3); /* the words before it, whole: */
    assert_int_equal(longer[n - 3], ' ');     /* the cut falls between two words */
    state_done(&st);
}

static void test_policy(void **state)
{
    (void)state;
    struct crash_policy p;
    crash_policy_default(&p);
    char why[256];
    enum status_reason code;
    /* clean exit */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, 0, 0, 0, p.crash_window_s, 0, &code, why, sizeof why), POLICY_DONE);
    assert_int_equal(code, STATUS_RC_COMPLETED);
    /* unpromoted: restart until K crashes in the window, then revert */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 1, 1, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_RESTART);
    assert_int_equal(code, STATUS_RC_RANK_EXIT); /* one rank's exit, not a loop yet */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 1, 1, 0, 2, p.crash_window_s, 0, &code, why, sizeof why), POLICY_RESTART);
    assert_int_equal(policy_on_gang_exit(&p, false, true, 1, 1, 0, 3, p.crash_window_s, 0, &code, why, sizeof why), POLICY_REVERT);
    assert_non_null(strstr(why, "crash loop"));
    assert_int_equal(code, STATUS_RC_CRASH_LOOP);
    /* killed by a signal counts as a crash */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, -1, 9, 3, p.crash_window_s, 0, &code, why, sizeof why), POLICY_REVERT);
    assert_non_null(strstr(why, "signal 9"));
    /* non-retryable code: revert at once */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, 7, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_REVERT);
    assert_int_equal(code, STATUS_RC_FATAL_EXIT);
    /* exit 127: the agent's reason gives the hint preflight gives for it (one wording) */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, 127, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_RESTART);
    assert_string_equal(why, "rank 0 exited with code 127 (a command it runs, or a shared library it needs, was not "
                             "found) (1 of 3 in 120 s); restarting");
    /* nothing to go back to */
    assert_int_equal(policy_on_gang_exit(&p, false, false, 0, 3, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_FAIL);
    /* rollback cap */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, 1, 0, 3, p.crash_window_s, 3, &code, why, sizeof why), POLICY_FAIL);
    /* promoted: never rolled back, restarted however often it crashes */
    assert_int_equal(policy_on_gang_exit(&p, true, true, 0, 1, 0, 50, p.crash_window_s, 0, &code, why, sizeof why), POLICY_RESTART);
    /* promoted and diverged: stop, no blind restart */
    assert_int_equal(policy_on_gang_exit(&p, true, true, 0, 7, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_FAIL);
    assert_int_equal(code, STATUS_RC_FATAL_EXIT); /* the text says "(non-retryable)": the code says it too */
    /* a retryable trainer code (8 peer lost) on an unpromoted release: restart */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, 8, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_RESTART);
    assert_true(policy_exit_is_nonretryable(6));
    assert_true(policy_exit_is_nonretryable(10));
    assert_false(policy_exit_is_nonretryable(5)); /* checkpoint: maybe */
    assert_false(policy_exit_is_nonretryable(1));
    /* non-finite heartbeats: like diverged */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, JM_EXIT_DIVERGED, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_REVERT);
    assert_non_null(strstr(why, "non-finite"));
    assert_int_equal(code, STATUS_RC_NONFINITE);
    assert_int_equal(policy_on_gang_exit(&p, true, true, 0, JM_EXIT_DIVERGED, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_FAIL);
    /* device / driver failure (exit 9): an environment fault, never a rollback of the release
     * and never a restart loop, promoted or not (issue 12) */
    assert_int_equal(policy_on_gang_exit(&p, false, true, 0, 9, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_FAIL);
    assert_non_null(strstr(why, JM_ATTENTION_PREFIX));
    assert_int_equal(code, STATUS_RC_ENVIRONMENT);
    assert_non_null(strstr(why, "gpu-check"));
    assert_int_equal(policy_on_gang_exit(&p, true, true, 0, 9, 0, 1, p.crash_window_s, 0, &code, why, sizeof why), POLICY_FAIL);
    assert_int_equal(policy_on_gang_exit(&p, true, true, 0, 9, 0, 50, p.crash_window_s, 0, &code, why, sizeof why), POLICY_FAIL);
    /* backoff: 1, 2, 4, ... capped at 60 */
    assert_true(policy_backoff(&p, 1) == 1);
    assert_true(policy_backoff(&p, 2) == 2);
    assert_true(policy_backoff(&p, 3) == 4);
    assert_true(policy_backoff(&p, 30) == 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_add_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_corrupt_blob_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_verify_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_switch_and_stale_tmp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_switch_is_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_gc_keeps_protected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_gc_failed_go_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_roundtrip, setup, teardown),
        cmocka_unit_test(test_state_parse_errors),
        cmocka_unit_test(test_state_spec_eviction),
        cmocka_unit_test(test_state_bad_reason_cut_at_word),
        cmocka_unit_test_setup_teardown(test_events_journal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spec_validate, setup, teardown),
        cmocka_unit_test(test_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
