/* Unit tests for the wire formats in common/: heartbeat lines, manifests, status documents.
 * Each parser is tested on its error paths: limits, wrong types, versions, ret_ untouched. */
#include <errno.h>
#include <jansson.h>
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

#include "common/heartbeat.h"
#include "common/manifest.h"
#include "common/manifest2.h"
#include "common/sha256.h"
#include "common/fs.h"
#include "common/status.h"
#include "common/util.h"

static void test_heartbeat_roundtrip(void **state)
{
    (void)state;
    struct heartbeat hb, back;
    heartbeat_init(&hb);
    hb.rank = 2;
    hb.pid = 4242;
    hb.step = 120;
    hb.tokens = 7864320;
    hb.loss = 3.91;
    hb.loss_finite = true;
    hb.tok_s = 412345.6;
    hb.phase = HB_PHASE_TRAIN;
    hb.resumed_from = 100;
    strcpy(hb.release, "abc");
    strcpy(hb.backend, "cpu");
    char line[HEARTBEAT_LINE_MAX];
    int n = heartbeat_format(&hb, line, sizeof line);
    assert_true(n > 0);
    assert_int_equal(line[n - 1], '\n');
    assert_int_equal(heartbeat_parse(line, (size_t)n, &back), 0);
    assert_int_equal(back.rank, 2);
    assert_int_equal(back.step, 120);
    assert_int_equal(back.resumed_from, 100);
    assert_true(back.loss_finite);
    assert_true(fabs(back.loss - 3.91) < 1e-5);
    assert_true(fabs(back.tok_s - 412345.6) < 1.0);
    assert_int_equal(back.phase, HB_PHASE_TRAIN);
    assert_string_equal(back.release, "abc");
}

static void test_heartbeat_nan_is_null(void **state)
{
    (void)state;
    struct heartbeat hb, back;
    heartbeat_init(&hb);
    hb.loss = NAN;
    hb.loss_finite = false;
    hb.nonfinite = 3;
    char line[HEARTBEAT_LINE_MAX];
    int n = heartbeat_format(&hb, line, sizeof line);
    assert_true(n > 0);
    assert_non_null(strstr(line, "\"loss\":null"));
    assert_int_equal(heartbeat_parse(line, (size_t)n, &back), 0);
    assert_false(back.loss_finite);
    assert_int_equal(back.nonfinite, 3);
}

/* What Python's json.dumps writes for real workers: NaN/Infinity tokens, no release, extra keys. */
static void test_heartbeat_forgiving(void **state)
{
    (void)state;
    struct heartbeat hb;
    const char *nan = "{\"v\": 1, \"rank\": 1, \"step\": 6, \"loss\": NaN, \"tok_s\": Infinity, "
                      "\"phase\": \"train\", \"note\": \"NaN stays in strings\", \"extra\": [1, {\"x\": -Infinity}]}\n";
    assert_int_equal(heartbeat_parse(nan, strlen(nan), &hb), 0);
    assert_int_equal(hb.rank, 1);
    assert_int_equal(hb.step, 6);
    assert_true(hb.has_loss);
    assert_false(hb.loss_finite);
    assert_true(hb.tok_s == 0); /* Infinity reads as null: unknown */
    assert_string_equal(hb.release, "");
    const char *inf = "{\"v\":1,\"rank\":0,\"step\":2,\"loss\":-Infinity,\"phase\":\"train\"}";
    assert_int_equal(heartbeat_parse(inf, strlen(inf), &hb), 0);
    assert_false(hb.loss_finite);
    const char *null = "{\"v\":1,\"rank\":0,\"step\":2,\"loss\":null,\"phase\":\"train\"}";
    assert_int_equal(heartbeat_parse(null, strlen(null), &hb), 0);
    assert_true(hb.has_loss);
    assert_false(hb.loss_finite);
    /* no loss at all: unknown, not a failure; no phase with step > 0: train */
    const char *bare = "{\"v\":1,\"rank\":0,\"step\":3}";
    assert_int_equal(heartbeat_parse(bare, strlen(bare), &hb), 0);
    assert_false(hb.has_loss);
    assert_int_equal(hb.phase, HB_PHASE_TRAIN);
    char line[HEARTBEAT_LINE_MAX];
    int n = heartbeat_format(&hb, line, sizeof line);
    assert_true(n > 0);
    assert_null(strstr(line, "\"loss\"")); /* stays unknown through the status document */
    const char *bare0 = "{\"v\":1,\"rank\":0,\"step\":0}";
    assert_int_equal(heartbeat_parse(bare0, strlen(bare0), &hb), 0);
    assert_int_equal(hb.phase, HB_PHASE_INIT);
    /* a string containing NaN is not touched; escapes inside strings are followed */
    const char *str = "{\"v\":1,\"rank\":0,\"step\":1,\"backend\":\"a\\\"NaN\",\"loss\":1.5}";
    assert_int_equal(heartbeat_parse(str, strlen(str), &hb), 0);
    assert_string_equal(hb.backend, "a\"NaN");
    assert_true(hb.loss_finite);
    /* still rejected: NaN where an integer is required, a glued token, the version */
    const char *bad[] = {"{\"v\":1,\"rank\":NaN,\"step\":1}", "{\"v\":1,\"rank\":0,\"step\":1,\"loss\":NaNa}",
                         "{\"v\":NaN,\"rank\":0,\"step\":1}", "{\"rank\":0,\"step\":1}"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(heartbeat_parse(bad[i], strlen(bad[i]), &hb), -EINVAL);
    /* a line of NaN tokens at the size limit still fits the rewritten buffer */
    char big[HEARTBEAT_LINE_MAX];
    size_t o = (size_t)snprintf(big, sizeof big, "{\"v\":1,\"rank\":0,\"step\":1,\"x\":[");
    while (o + 8 < sizeof big)
        o += (size_t)snprintf(big + o, sizeof big - o, "NaN,");
    o += (size_t)snprintf(big + o, sizeof big - o, "0]}");
    assert_int_equal(heartbeat_parse(big, o, &hb), 0);
}

/* The Python module's first line, from Heartbeat() before the rendezvous: "the module started",
 * told apart from an init heartbeat (hb.init()) and kept through the status document; an old
 * agent reads it as the phase-init heartbeat it looks like. */
static void test_heartbeat_hello(void **state)
{
    (void)state;
    struct heartbeat hb, back;
    const char *hello = "{\"v\":1,\"kind\":\"hello\",\"rank\":1,\"pid\":77,\"step\":0,\"tokens\":0,"
                        "\"loss\":null,\"nonfinite\":0,\"tok_s\":0.0,\"step_ms\":0.0,\"phase\":\"init\","
                        "\"resumed_from\":-1,\"ckpt_step\":-1,\"release\":\"abc\",\"backend\":\"torch\"}\n";
    assert_int_equal(heartbeat_parse(hello, strlen(hello), &hb), 0);
    assert_true(hb.hello);
    assert_int_equal(hb.phase, HB_PHASE_INIT);
    assert_int_equal(hb.rank, 1);
    char line[HEARTBEAT_LINE_MAX];
    int n = heartbeat_format(&hb, line, sizeof line);
    assert_true(n > 0);
    assert_non_null(strstr(line, "\"kind\":\"hello\""));
    assert_int_equal(heartbeat_parse(line, (size_t)n, &back), 0);
    assert_true(back.hello);
    /* an init heartbeat is no hello, and says no kind */
    const char *init = "{\"v\":1,\"rank\":1,\"step\":0,\"phase\":\"init\"}";
    assert_int_equal(heartbeat_parse(init, strlen(init), &hb), 0);
    assert_false(hb.hello);
    n = heartbeat_format(&hb, line, sizeof line);
    assert_true(n > 0);
    assert_null(strstr(line, "\"kind\""));
    /* a hello is phase init whatever else it says; another kind reads as a heartbeat */
    const char *odd = "{\"v\":1,\"kind\":\"hello\",\"rank\":0,\"step\":4,\"phase\":\"train\"}";
    assert_int_equal(heartbeat_parse(odd, strlen(odd), &hb), 0);
    assert_true(hb.hello);
    assert_int_equal(hb.phase, HB_PHASE_INIT);
    const char *other = "{\"v\":1,\"kind\":\"later\",\"rank\":0,\"step\":4,\"phase\":\"train\"}";
    assert_int_equal(heartbeat_parse(other, strlen(other), &hb), 0);
    assert_false(hb.hello);
    assert_int_equal(hb.phase, HB_PHASE_TRAIN);
    /* "kind" is a string */
    const char *bad = "{\"v\":1,\"kind\":1,\"rank\":0,\"step\":0}";
    assert_int_equal(heartbeat_parse(bad, strlen(bad), &hb), -EINVAL);
    char why[128];
    assert_string_equal(heartbeat_refusal(bad, strlen(bad), why, sizeof why), "\"kind\" has the wrong type or value");
}

static void test_heartbeat_rejects(void **state)
{
    (void)state;
    struct heartbeat hb;
    memset(&hb, 0x5a, sizeof hb);
    struct heartbeat before = hb;
    const char *bad[] = {
        "", "not json", "[]", "{\"v\":1}", "{\"v\":1,\"rank\":0}", "{\"v\":1,\"rank\":\"0\",\"step\":1}",
        "{\"v\":1,\"rank\":-1,\"step\":1}", "{\"v\":1,\"rank\":0,\"step\":1,\"loss\":\"x\"}",
        "{\"v\":1,\"rank\":0,\"step\":1,\"phase\":\"dancing\"}", "{\"v\":1,\"rank\":0,\"rank\":1,\"step\":1}",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(heartbeat_parse(bad[i], strlen(bad[i]), &hb), -EINVAL);
    const char *v2 = "{\"v\":2,\"rank\":0,\"step\":1}";
    assert_int_equal(heartbeat_parse(v2, strlen(v2), &hb), -EPROTONOSUPPORT);
    char big[HEARTBEAT_LINE_MAX + 10];
    memset(big, ' ', sizeof big);
    assert_int_equal(heartbeat_parse(big, sizeof big, &hb), -E2BIG);
    assert_memory_equal(&hb, &before, sizeof hb); /* ret_ untouched on failure */
}

/* Each refused line's reason, as the agent logs it: a worker writing its own heartbeats was
 * told only "Invalid argument" (the newcomer pass: a line without "rank"). */
static void test_heartbeat_refusal(void **state)
{
    (void)state;
    static const struct {
        const char *line, *why;
    } cases[] = {
        {"step=1 loss=2.0", "not JSON: "},
        {"[1]", "not a JSON object"},
        {"{\"step\":1,\"rank\":0}", "no integer \"v\" (heartbeats carry \"v\": 1)"},
        {"{\"v\":2,\"rank\":0,\"step\":1}", "\"v\" is 2: this agent reads version 1"},
        {"{\"v\":1,\"step\":1,\"phase\":\"train\",\"loss\":2.5}", "no \"rank\" (the global rank, $RANK)"},
        {"{\"v\":1,\"rank\":\"0\",\"step\":1}", "\"rank\" is not an integer 0..1048576"},
        {"{\"v\":1,\"rank\":0}", "no \"step\""},
        {"{\"v\":1,\"rank\":0,\"step\":-3}", "\"step\" is not a non-negative integer"},
        {"{\"v\":1,\"rank\":0,\"step\":1,\"loss\":\"x\"}", "\"loss\" has the wrong type or value"},
        {"{\"v\":1,\"rank\":0,\"step\":1,\"phase\":\"dancing\"}", "\"phase\" has the wrong type or value"},
        {"{\"v\":1,\"rank\":0,\"step\":1,\"tokens\":1.5,\"loss\":NaN}", "\"tokens\" has the wrong type or value"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct heartbeat hb;
        char why[256];
        assert_true(heartbeat_parse(cases[i].line, strlen(cases[i].line), &hb) < 0);
        heartbeat_refusal(cases[i].line, strlen(cases[i].line), why, sizeof why);
        if (strncmp(why, cases[i].why, strlen(cases[i].why)) != 0)
            fail_msg("'%s': '%s', want '%s'", cases[i].line, why, cases[i].why);
    }
    char big[HEARTBEAT_LINE_MAX + 10], why[64];
    memset(big, ' ', sizeof big);
    assert_string_equal(heartbeat_refusal(big, sizeof big, why, sizeof why), "longer than 1024 bytes");
}

static void test_heartbeat_format_too_small(void **state)
{
    (void)state;
    struct heartbeat hb;
    heartbeat_init(&hb);
    char small[16];
    assert_int_equal(heartbeat_format(&hb, small, sizeof small), -ENOSPC);
}

static void test_manifest_paths(void **state)
{
    (void)state;
    assert_true(manifest_path_is_safe("bin/drover-train"));
    assert_true(manifest_path_is_safe("a"));
    assert_false(manifest_path_is_safe(""));
    assert_false(manifest_path_is_safe("/etc/passwd"));
    assert_false(manifest_path_is_safe("../x"));
    assert_false(manifest_path_is_safe("a/../../x"));
    assert_false(manifest_path_is_safe("a/./b"));
    assert_false(manifest_path_is_safe("a//b"));
    assert_false(manifest_path_is_safe("a/"));
    assert_false(manifest_path_is_safe("a\nb"));
    /* one rule for both versions: they agree below v1's length limit */
    static const char *const paths[] = { "a", "a/b.py", "", "/x", "..", "a/..", "./a", "a//b", "a/",
                                         "a\\b", "a\x7f", "\x01", "...", "a.b/c..d", ".hidden" };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (manifest_path_is_safe(paths[i]) != (int)manifest2_path_is_safe(paths[i]))
            fail_msg("v1 and v2 disagree on '%s'", paths[i]);
    char lp[MANIFEST_PATH_MAX + 1];
    for (size_t i = 0; i < sizeof lp - 1; i++)
        lp[i] = i % 2 ? '/' : 'a'; /* "a/a/.../a": MANIFEST_PATH_MAX bytes of short components */
    lp[sizeof lp - 2] = 'b';            /* ends in "ab" */
    lp[sizeof lp - 1] = '\0';
    assert_true(manifest2_path_is_safe(lp));
    assert_false(manifest_path_is_safe(lp));
    lp[MANIFEST_PATH_MAX - 3] = '\0'; /* ends in "a" */
    assert_true(manifest_path_is_safe(lp));
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static void test_manifest_dir_dump_parse(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-manifest-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[512];
    snprintf(p, sizeof p, "%s/bin", dir);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/bin/tool", dir);
    write_file(p, "#!/bin/sh\necho hi\n", 0755);
    snprintf(p, sizeof p, "%s/config.ini", dir);
    write_file(p, "[a]\nb=1\n", 0644);

    struct manifest *m = NULL;
    assert_int_equal(manifest_from_dir(dir, "v1", &m), 0);
    assert_int_equal(m->nfiles, 2);
    assert_string_equal(m->files[0].path, "bin/tool");
    assert_int_equal(m->files[0].mode, 0755);
    assert_int_equal(m->files[1].mode, 0644);
    char *text = NULL, id[RELEASE_ID_LEN + 1], id2[RELEASE_ID_LEN + 1];
    assert_int_equal(manifest_dump(m, &text, id), 0);
    assert_true(sha256_is_hex(id));

    struct manifest *back = NULL;
    assert_int_equal(manifest_parse(text, strlen(text), &back), 0);
    char *text2 = NULL;
    assert_int_equal(manifest_dump(back, &text2, id2), 0);
    assert_string_equal(text, text2); /* canonical: same content, same id */
    assert_string_equal(id, id2);
    assert_non_null(manifest_find(back, "config.ini"));
    assert_null(manifest_find(back, "nope"));

    /* Changing one byte changes the id. */
    write_file(p, "[a]\nb=2\n", 0644);
    struct manifest *m3 = NULL;
    char *text3 = NULL, id3[RELEASE_ID_LEN + 1];
    assert_int_equal(manifest_from_dir(dir, "v1", &m3), 0);
    assert_int_equal(manifest_dump(m3, &text3, id3), 0);
    assert_string_not_equal(id, id3);

    /* A symlink in the release directory is refused. */
    snprintf(p, sizeof p, "%s/link", dir);
    assert_int_equal(symlink("/etc/passwd", p), 0);
    struct manifest *m4 = (struct manifest *)0x1;
    assert_int_equal(manifest_from_dir(dir, NULL, &m4), -EINVAL);
    assert_ptr_equal(m4, (struct manifest *)0x1);
    /* ... also one that stays inside (v2 holds it; v1, walked by v2's walker, must not) */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(symlink("config.ini", p), 0);
    assert_int_equal(manifest_from_dir(dir, NULL, &m4), -EINVAL);
    assert_int_equal(unlink(p), 0);
    /* a FIFO is refused; an empty directory is not listed (v1 implies directories) */
    assert_int_equal(mkfifo(p, 0644), 0);
    assert_int_equal(manifest_from_dir(dir, NULL, &m4), -EINVAL);
    assert_ptr_equal(m4, (struct manifest *)0x1);
    assert_int_equal(unlink(p), 0);
    snprintf(p, sizeof p, "%s/empty", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    struct manifest *m5 = NULL;
    assert_int_equal(manifest_from_dir(dir, NULL, &m5), 0);
    assert_int_equal(m5->nfiles, 2);
    manifest_free(m5);
    /* a path v2 holds but v1 cannot (MANIFEST_PATH_MAX) */
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    snprintf(p, sizeof p, "%s/empty/%s", dir, longname);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/empty/%s/%s", dir, longname, longname);
    write_file(p, "x", 0644);
    assert_int_equal(manifest_from_dir(dir, NULL, &m4), -ENAMETOOLONG);
    assert_ptr_equal(m4, (struct manifest *)0x1);
    snprintf(p, sizeof p, "%s/empty", dir);
    assert_int_equal(fs_rm_rf(p), 0);

    free(text);
    free(text2);
    free(text3);
    manifest_free(m);
    manifest_free(back);
    manifest_free(m3);
    manifest_free(NULL);
    assert_int_equal(fs_rm_rf(dir), 0);
}

static void test_manifest_parse_rejects(void **state)
{
    (void)state;
    const char *h = "0000000000000000000000000000000000000000000000000000000000000000";
    char doc[1024];
    struct manifest *m = NULL;
    const char *bad_paths[] = {"../x", "/abs", "a/../b", ""};
    for (size_t i = 0; i < ARRAY_SIZE(bad_paths); i++) {
        snprintf(doc, sizeof doc, "{\"v\":1,\"files\":[{\"path\":\"%s\",\"sha256\":\"%s\",\"size\":1,\"mode\":\"0644\"}]}",
                 bad_paths[i], h);
        assert_int_equal(manifest_parse(doc, strlen(doc), &m), -EINVAL);
    }
    snprintf(doc, sizeof doc, "{\"v\":1,\"files\":[{\"path\":\"a\",\"sha256\":\"xyz\",\"size\":1,\"mode\":\"0644\"}]}");
    assert_int_equal(manifest_parse(doc, strlen(doc), &m), -EINVAL);
    snprintf(doc, sizeof doc, "{\"v\":1,\"files\":[{\"path\":\"a\",\"sha256\":\"%s\",\"size\":1,\"mode\":\"4755\"}]}", h);
    assert_int_equal(manifest_parse(doc, strlen(doc), &m), -EINVAL);
    snprintf(doc, sizeof doc,
             "{\"v\":1,\"files\":[{\"path\":\"a\",\"sha256\":\"%s\",\"size\":1,\"mode\":\"0644\"},"
             "{\"path\":\"a\",\"sha256\":\"%s\",\"size\":1,\"mode\":\"0644\"}]}",
             h, h);
    assert_int_equal(manifest_parse(doc, strlen(doc), &m), -EINVAL);
    snprintf(doc, sizeof doc,
             "{\"v\":1,\"files\":[{\"path\":\"a\",\"sha256\":\"%s\",\"size\":1,\"mode\":\"0644\"},"
             "{\"path\":\"a/b\",\"sha256\":\"%s\",\"size\":1,\"mode\":\"0644\"}]}",
             h, h);
    assert_int_equal(manifest_parse(doc, strlen(doc), &m), -EINVAL);
    assert_int_equal(manifest_parse("{\"v\":9,\"files\":[]}", 18, &m), -EPROTONOSUPPORT);
    assert_null(m);
}

static void test_status_roundtrip(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    strcpy(st->host, "ct101");
    st->agent_pid = 7;
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    strcpy(js->current, "abc");
    js->state = GANG_RUNNING;
    js->nranks = 2;
    for (int i = 0; i < 2; i++) {
        js->ranks[i].rank = i;
        js->ranks[i].exit_code = -1;
        strcpy(js->ranks[i].state, "running");
        js->ranks[i].has_hb = true;
        heartbeat_init(&js->ranks[i].hb);
        js->ranks[i].hb.step = 10 + i;
        js->ranks[i].hb.loss_finite = i == 0;
        js->ranks[i].hb.loss = i == 0 ? 2.5 : NAN;
    }
    js->ranks[1].gpu.valid = true;
    js->ranks[1].gpu.util = 97;
    st->wall = 1.7e9;
    js->nbad = 1;
    memset(js->bad[0], 'b', RELEASE_ID_LEN);
    strcpy(js->bad_reason[0], "stopped while promoted: rank 1 reported 3 consecutive non-finite steps");
    js->ngoods = 2;
    memset(js->goods[0], 'a', RELEASE_ID_LEN);
    memset(js->goods[1], 'c', RELEASE_ID_LEN);
    char *text = NULL;
    assert_int_equal(status_format(st, &text), 0);
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    const struct job_status *bj = status_find_job(back, "train");
    assert_non_null(bj);
    assert_null(status_find_job(back, "other"));
    assert_int_equal(bj->state, GANG_RUNNING);
    assert_int_equal(bj->nranks, 2);
    assert_int_equal(bj->ranks[1].hb.step, 11);
    assert_true(bj->ranks[0].hb.loss_finite);
    assert_false(bj->ranks[1].hb.loss_finite);
    assert_false(bj->ranks[0].gpu.valid);
    assert_true(bj->ranks[1].gpu.valid);
    assert_true(back->wall == 1.7e9);
    assert_int_equal(bj->nbad, 1);
    assert_string_equal(bj->bad[0], js->bad[0]);
    /* the mark's reason travels beside it (`drover status` names it under its table) */
    assert_string_equal(bj->bad_reason[0], js->bad_reason[0]);
    assert_int_equal(bj->ngoods, 2);
    assert_string_equal(bj->goods[1], js->goods[1]);
    assert_int_equal(back->features, 0); /* none said: an older agent's document */
    assert_string_equal(bj->goods_spec[0], "");
    assert_false(bj->peer_exit);
    assert_null(strstr(text, "peer_exit")); /* said only when true */
    free(text);
    /* a job backing off for a peer's stop says so; anything but a boolean is refused */
    js->state = GANG_BACKOFF;
    js->peer_exit = true;
    assert_int_equal(status_format(st, &text), 0);
    assert_non_null(strstr(text, "\"peer_exit\":true"));
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_true(status_find_job(back, "train")->peer_exit);
    assert_int_equal(status_find_job(back, "train")->ranks[0].bad_lines, 0);
    assert_null(strstr(text, "bad_lines")); /* said only when > 0 */
    free(text);
    /* a rank that wrote lines that are not heartbeats: the count travels (the verdict says it) */
    js->ranks[1].bad_lines = 40;
    assert_int_equal(status_format(st, &text), 0);
    assert_non_null(strstr(text, "\"bad_lines\":40"));
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_int_equal(status_find_job(back, "train")->ranks[1].bad_lines, 40);
    free(text);
    const char *odd = "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"current\":\"\",\"previous\":\"\",\"good\":\"\","
                      "\"state\":\"backoff\",\"release\":\"\",\"generation\":1,\"restarts\":0,\"age_s\":0,"
                      "\"world_size\":1,\"node_rank\":0,\"nproc\":1,\"peer_exit\":\"yes\"}]}";
    assert_int_equal(status_parse(odd, strlen(odd), back), -EINVAL);
    free(st);
    free(back);
}

/* The gang's rendezvous generation travels; absent (an older agent, no --rdzv) reads as ""
 * (unknown), and one that is not a token is refused */
static void test_status_rdzv(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "beta");
    js->state = GANG_RUNNING;
    char *text = NULL;
    assert_int_equal(status_format(st, &text), 0);
    assert_null(strstr(text, "rdzv")); /* said only when known */
    memset(back, 0x55, sizeof *back);
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_string_equal(status_find_job(back, "beta")->rdzv, "");
    free(text);
    strcpy(js->rdzv, "83045394a73024a6");
    assert_int_equal(status_format(st, &text), 0);
    assert_non_null(strstr(text, "\"rdzv\":\"83045394a73024a6\""));
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_string_equal(status_find_job(back, "beta")->rdzv, "83045394a73024a6");
    free(text);
    const char *bad[] = { "\"a b\"", "7", "\"123456789012345678901234567890123\"" };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char doc[600];
        snprintf(doc, sizeof doc,
                 "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"current\":\"\",\"previous\":\"\",\"good\":\"\","
                 "\"state\":\"running\",\"release\":\"\",\"generation\":1,\"restarts\":0,\"age_s\":0,"
                 "\"world_size\":1,\"node_rank\":0,\"nproc\":1,\"rdzv\":%s}]}", bad[k]);
        assert_int_equal(status_parse(doc, strlen(doc), back), -EINVAL);
    }
    assert_true(status_rdzv_is_valid("a_B-9"));
    assert_false(status_rdzv_is_valid(""));
    free(st);
    free(back);
}

/* The promoted pairs (goods with goods_spec) and the agent's features survive the document; a
 * document without them (an older agent) reads as no features and unknown digests, and a
 * goods_spec that does not line up with goods is refused. */
static void test_status_goods_spec_features(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    assert_non_null(st);
    assert_non_null(back);
    strcpy(st->host, "h");
    st->features = STATUS_FEATURES_ALL;
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    js->ngoods = 3;
    for (int k = 0; k < 3; k++)
        memset(js->goods[k], k == 2 ? 'c' : 'a', RELEASE_ID_LEN); /* the same release twice */
    memset(js->goods_spec[0], '2', SPEC_DIGEST_LEN);
    memset(js->goods_spec[1], '1', SPEC_DIGEST_LEN);
    char *text = NULL;
    assert_int_equal(status_format(st, &text), 0);
    assert_non_null(strstr(text, "\"features\":[\"spec-pairs\",\"promote-spec\",\"recorded-spec\",\"revert-no-start\"]"));
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    free(text);
    assert_int_equal(back->features, STATUS_FEATURES_ALL);
    const struct job_status *bj = status_find_job(back, "train");
    assert_int_equal(bj->ngoods, 3);
    assert_string_equal(bj->goods_spec[0], js->goods_spec[0]);
    assert_string_equal(bj->goods_spec[1], js->goods_spec[1]);
    assert_string_equal(bj->goods_spec[2], ""); /* not recorded any more */
    assert_string_equal(status_feature_name(STATUS_FEAT_PROMOTE_SPEC), "promote-spec");
    assert_null(status_feature_name(STATUS_FEAT_SPEC_PAIRS | STATUS_FEAT_PROMOTE_SPEC));
    /* a newer agent's feature this reader does not know is skipped */
    const char *newer = "{\"v\":1,\"features\":[\"spec-pairs\",\"teleport\"],\"jobs\":[]}";
    assert_int_equal(status_parse(newer, strlen(newer), back), 0);
    assert_int_equal(back->features, STATUS_FEAT_SPEC_PAIRS);
    static const char *const bad[] = {
        "{\"v\":1,\"features\":\"spec-pairs\",\"jobs\":[]}",
        "{\"v\":1,\"features\":[1],\"jobs\":[]}",
        /* two goods, one digest */
        "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"goods\":[\"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "\",\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"],\"goods_spec\":[\"\"]}]}",
        "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"goods\":[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"],"
        "\"goods_spec\":[\"xyz\"]}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (status_parse(bad[i], strlen(bad[i]), back) != -EINVAL)
            fail_msg("accepted: %s", bad[i]);
    free(st);
    free(back);
}

/* The job's reason code ("reason_code", common/status.h): every code survives the document by
 * its name; a name this reader does not know (a newer agent's) reads as "other", never an
 * error; a document without it (an agent from before it) gets the code derived from the
 * reason's words, as the controller read them before the code. */
/* What each reason code says of its cause, in the one table beside the names: probation and
 * `drover status` ask these, never the reason's words. */
static void test_status_reason_predicates(void **state)
{
    (void)state;
    static const struct {
        enum status_reason c;
        bool in_log, stops;
    } rows[] = {
        { STATUS_RC_NONE, false, false },           { STATUS_RC_CRASH_LOOP, true, false },
        { STATUS_RC_FATAL_EXIT, true, false },      { STATUS_RC_RANK_EXIT, true, true },
        { STATUS_RC_COMPLETED, true, false },       { STATUS_RC_NONFINITE, true, true },
        { STATUS_RC_LIVENESS, false, true },        { STATUS_RC_ENVIRONMENT, false, false },
        { STATUS_RC_START_FAILURE, false, false },  { STATUS_RC_PROBATION_DEADLINE, false, false },
        { STATUS_RC_OTHER, false, true },
    };
    assert_int_equal(sizeof rows / sizeof rows[0], STATUS_RC_COUNT); /* a new code gets a row */
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(rows[i].c, (enum status_reason)i);
        if (status_reason_in_workers_log(rows[i].c) != rows[i].in_log ||
            status_reason_stops_gang(rows[i].c) != rows[i].stops)
            fail_msg("reason code '%s': in the workers' log %d, stops the gang %d", status_reason_name(rows[i].c),
                     status_reason_in_workers_log(rows[i].c), status_reason_stops_gang(rows[i].c));
    }
}

static void test_status_reason_code(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    assert_non_null(st);
    assert_non_null(back);
    strcpy(st->host, "h");
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    /* the round trip, every code: the name is the document's, the words stay the reason's */
    for (int c = 0; c < STATUS_RC_COUNT; c++) {
        js->reason_code = (enum status_reason)c;
        strcpy(js->reason, "crash loop: words that say otherwise"); /* the code wins */
        char *text = NULL;
        assert_int_equal(status_format(st, &text), 0);
        char want[64];
        snprintf(want, sizeof want, "\"reason_code\":\"%s\"", status_reason_name((enum status_reason)c));
        assert_non_null(strstr(text, want));
        assert_int_equal(status_parse(text, strlen(text), back), 0);
        assert_int_equal(back->jobs[0].reason_code, c);
        assert_string_equal(back->jobs[0].reason, js->reason);
        assert_int_equal(status_reason_from_name(status_reason_name((enum status_reason)c)), c);
        free(text);
    }
    assert_string_equal(status_reason_name(STATUS_RC_NONE), "");
    assert_string_equal(status_reason_name(STATUS_RC_CRASH_LOOP), "crash-loop");
    assert_string_equal(status_reason_name(STATUS_RC_RANK_EXIT), "rank-exit");
    assert_string_equal(status_reason_name(STATUS_RC_COUNT), "other");
    /* a newer agent's code: "other", and the document still reads */
    const char *newer = "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"state\":\"failed\",\"reason\":\"crash loop: x\","
                        "\"reason_code\":\"cosmic-ray\"}]}";
    assert_int_equal(status_parse(newer, strlen(newer), back), 0);
    assert_int_equal(back->jobs[0].reason_code, STATUS_RC_OTHER);
    assert_int_equal(status_reason_from_name("Crash-Loop"), STATUS_RC_OTHER);
    /* not a string: malformed */
    const char *bad = "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"reason_code\":3}]}";
    assert_int_equal(status_parse(bad, strlen(bad), back), -EINVAL);
    /* an older agent: no "reason_code"; the words its agent/jobmachine.c wrote decide */
    static const struct {
        const char *reason;
        enum status_reason want;
    } old[] = {
        {"", STATUS_RC_NONE},
        {"activated", STATUS_RC_NONE},
        {"crash loop: rank 1 exited with code 1 (crash limit reached)", STATUS_RC_CRASH_LOOP},
        {"reverted on its own from aaaaaaaaaaaa: crash loop: rank 1 exited with code 1", STATUS_RC_CRASH_LOOP},
        {"non-retryable exit: rank 0 exited with code 4 and no good release to return to", STATUS_RC_FATAL_EXIT},
        {"non-retryable exit: rank 0 reported 3 consecutive non-finite steps", STATUS_RC_FATAL_EXIT},
        {"liveness: rank 0 hung (liveness deadline) and no good release to return to", STATUS_RC_LIVENESS},
        {STATUS_ATTENTION_PREFIX " rank 0 exited with code 9 (device error): ...", STATUS_RC_ENVIRONMENT},
        {"rank 1 exited with code 1; stopping the gang", STATUS_RC_RANK_EXIT},
        {"rank 0 killed by signal 9; stopping the gang", STATUS_RC_RANK_EXIT},
        {"rank 0 reported 3 consecutive non-finite steps; stopping the gang", STATUS_RC_OTHER},
        {"rank 0 silent: no heartbeat for 11 s; stopping the gang", STATUS_RC_OTHER},
        {"stopping the gang the previous agent left", STATUS_RC_OTHER},
        /* words the controller never read: no code (the old verdicts did not use them) */
        {"rank 1 exited with code 1 (1 of 3 in 120 s); restarting", STATUS_RC_NONE},
        {"start failed: bin/t: not found", STATUS_RC_NONE},
        {"rank 0 exited with code 6 (non-retryable) on a promoted release: stopped", STATUS_RC_NONE},
        {"not a liveness: prefix", STATUS_RC_NONE},
    };
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) {
        json_t *o = json_pack("{s:i,s:[{s:s,s:s}]}", "v", 1, "jobs", "job", "a", "reason", old[i].reason);
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        assert_int_equal(status_parse(text, strlen(text), back), 0);
        if (back->jobs[0].reason_code != old[i].want)
            fail_msg("'%s' read as '%s', not '%s'", old[i].reason, status_reason_name(back->jobs[0].reason_code),
                     status_reason_name(old[i].want));
        assert_int_equal(status_reason_from_text(old[i].reason), old[i].want);
        free(text);
    }
    /* docs/protocol.md has a row per code, by its name ("" is the first) */
    char *proto;
    size_t plen;
    assert_int_equal(fs_read_file("docs/protocol.md", 1 << 20, &proto, &plen), 0);
    for (int c = 0; c < STATUS_RC_COUNT; c++) {
        char row[64];
        snprintf(row, sizeof row, "\n| `%s` |", c == STATUS_RC_NONE ? "\"\"" : status_reason_name((enum status_reason)c));
        if (!strstr(proto, row))
            fail_msg("docs/protocol.md has no row for the reason code '%s'", status_reason_name((enum status_reason)c));
    }
    free(proto);
    free(st);
    free(back);
}

/* The agent's wall clock survives the document to the millisecond: the controller's skew check
 * (cmd_status.c) warns above 2 s, and a wall written with the document's 9 significant digits was
 * rounded to 10 s, so agents on the controller's own clock were shown up to 5 s off (t-29). */
static void test_status_wall_precision(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    assert_non_null(st);
    assert_non_null(back);
    strcpy(st->host, "h");
    strcpy(st->agent_version, "1");
    const double walls[] = { 1796121934.987, 1796121939.999, 1796121930.001, 1700000004.5 };
    for (size_t i = 0; i < sizeof walls / sizeof walls[0]; i++) {
        st->wall = walls[i];
        char *text = NULL;
        assert_int_equal(status_format(st, &text), 0);
        assert_int_equal(status_parse(text, strlen(text), back), 0);
        if (fabs(back->wall - walls[i]) > 0.0015)
            fail_msg("wall %.3f came back as %.3f (%s)", walls[i], back->wall, text);
        free(text);
    }
    /* a document of an older agent: only `wall`, taken as it is */
    const char *old = "{\"v\":1,\"host\":\"h\",\"agent_pid\":1,\"agent_version\":\"1\",\"uptime_s\":1,"
                      "\"seq\":0,\"wall\":1796121930,\"jobs\":[]}";
    assert_int_equal(status_parse(old, strlen(old), back), 0);
    assert_true(back->wall == 1796121930);
    const char *bad = "{\"v\":1,\"host\":\"h\",\"agent_pid\":1,\"agent_version\":\"1\",\"uptime_s\":1,"
                      "\"seq\":0,\"wall_ms\":-5,\"jobs\":[]}";
    assert_int_equal(status_parse(bad, strlen(bad), back), -EINVAL);
    free(st);
    free(back);
}

/* A bad mark's reason is read whole up to its limit (it was cut mid-word at 159: "No module nam"),
 * and a longer one (a newer agent's) is cut at a word with an ellipsis, never mid-word; so is a
 * job's reason past STATUS_REASON_MAX. */
static void test_status_long_reasons(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    strcpy(st->host, "ct101");
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    const char *liv = "failed: rank 0 silent: no heartbeat for 25 s in phase train at step 1200 (silence_deadline "
                      "20 s) on a promoted release, 4 times in 360 s (restart budget 3): stopped";
    assert_true(strlen(liv) < STATUS_REASON_MAX);
    strcpy(js->reason, liv);
    js->nbad = 1;
    memset(js->bad[0], 'b', RELEASE_ID_LEN);
    strcpy(js->bad_reason[0], "drover: rank 1 exited with code 1 (1 of 3 in 120 s) [rank 1: ModuleNotFoundError: "
                              "No module named 'numpyy']; the gang on h2:201 lost a rank and is backing off");
    char *text = NULL;
    assert_int_equal(status_format(st, &text), 0);
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_string_equal(back->jobs[0].reason, liv);
    assert_string_equal(back->jobs[0].bad_reason[0], js->bad_reason[0]);
    free(text);
    /* a newer agent's longer mark: cut at a word, with the ellipsis */
    char doc[8192], word[STATUS_BAD_REASON_MAX * 2] = "";
    while (strlen(word) < sizeof word - 16)
        strcat(word, "module ");
    strcpy(js->bad_reason[0], "MARK");
    assert_int_equal(status_format(st, &text), 0);
    char *m = strstr(text, "MARK");
    assert_non_null(m);
    snprintf(doc, sizeof doc, "%.*s%s%s", (int)(m - text), text, word, m + 4);
    free(text);
    assert_int_equal(status_parse(doc, strlen(doc), back), 0);
    const char *br = back->jobs[0].bad_reason[0];
    size_t n = strlen(br);
    if (n < 10 || strcmp(br + n - 3, "\xe2\x80\xa6") != 0 || strncmp(br + n - 9, "module", 6) != 0)
        fail_msg("%s", br);
    /* the same for the job's reason */
    strcpy(js->bad_reason[0], "");
    strcpy(js->reason, "MARK");
    assert_int_equal(status_format(st, &text), 0);
    m = strstr(text, "MARK");
    assert_non_null(m);
    snprintf(doc, sizeof doc, "%.*s%s%s", (int)(m - text), text, word, m + 4);
    free(text);
    assert_int_equal(status_parse(doc, strlen(doc), back), 0);
    br = back->jobs[0].reason;
    n = strlen(br);
    if (n < 10 || strcmp(br + n - 3, "\xe2\x80\xa6") != 0 || strncmp(br + n - 9, "module", 6) != 0)
        fail_msg("%s", br);
    free(st);
    free(back);
}

static void test_status_rejects(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st);
    assert_int_equal(status_parse("{}", 2, st), -EINVAL);
    assert_int_equal(status_parse("{\"v\":2}", 7, st), -EPROTONOSUPPORT);
    const char *bad_state = "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"state\":\"flying\"}]}";
    assert_int_equal(status_parse(bad_state, strlen(bad_state), st), -EINVAL);
    char many[4096] = "{\"v\":1,\"jobs\":[{\"job\":\"a\",\"ranks\":[";
    for (int i = 0; i <= STATUS_MAX_RANKS; i++)
        strcat(many, i ? ",{}" : "{}");
    strcat(many, "]}]}");
    assert_int_equal(status_parse(many, strlen(many), st), -E2BIG);
    free(st);
}

/* `lease take --status`'s output: the document is the last line, when it is a JSON object */
static void test_status_after_lease(void **state)
{
    (void)state;
    static const struct {
        const char *out;
        int want;
        const char *doc; /* the document found */
    } rows[] = {
        { "lease of job 'train' taken by a@h/pid-1 for 300 s\n{\"v\":1}\n", 0, "{\"v\":1}" },
        { "lease of job 'train' renewed by a@h/pid-1 for 300 s\n{\"v\":1}", 0, "{\"v\":1}" },
        /* a takeover prints two lines before it */
        { "lease of job 't': deploy lease taken over by a from b (idle 400 s, past its 300 s TTL)\n{}\n", 0, "{}" },
        { "{\"v\":1}\n", 0, "{\"v\":1}" },
        /* no document: the daemon did not answer, or an older agent's plain lease */
        { "lease of job 'train' taken by a@h/pid-1 for 300 s\n", -ENOENT, NULL },
        { "", -ENOENT, NULL },
        { "\n", -ENOENT, NULL },
        { "\n\n", -ENOENT, NULL },
        /* only the last line counts: a '{' earlier is not a document */
        { "{\"v\":1}\nlease of job 'train' taken by x for 300 s\n", -ENOENT, NULL },
        { "lease\n {\"v\":1}\n", -ENOENT, NULL },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        size_t off = 12345, len = 6789;
        int r = status_after_lease(rows[i].out, strlen(rows[i].out), &off, &len);
        assert_int_equal(r, rows[i].want);
        if (r == 0) {
            assert_int_equal(len, strlen(rows[i].doc));
            assert_memory_equal(rows[i].out + off, rows[i].doc, len);
        } else {
            assert_int_equal(off, 12345); /* ret_ untouched on failure */
            assert_int_equal(len, 6789);
        }
    }
    size_t off, len;
    assert_int_equal(status_after_lease(NULL, 0, &off, &len), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_after_lease),
        cmocka_unit_test(test_status_goods_spec_features),
        cmocka_unit_test(test_status_reason_code),
        cmocka_unit_test(test_status_reason_predicates),
        cmocka_unit_test(test_heartbeat_roundtrip),   cmocka_unit_test(test_heartbeat_nan_is_null),
        cmocka_unit_test(test_heartbeat_forgiving),   cmocka_unit_test(test_heartbeat_refusal),
        cmocka_unit_test(test_heartbeat_rejects),     cmocka_unit_test(test_heartbeat_format_too_small),
        cmocka_unit_test(test_heartbeat_hello),
        cmocka_unit_test(test_manifest_paths),        cmocka_unit_test(test_manifest_dir_dump_parse),
        cmocka_unit_test(test_manifest_parse_rejects), cmocka_unit_test(test_status_roundtrip),
        cmocka_unit_test(test_status_rdzv),
        cmocka_unit_test(test_status_long_reasons),
        cmocka_unit_test(test_status_rejects), cmocka_unit_test(test_status_wall_precision),
    };
    return cmocka_run_group_tests_name("common-wire", tests, NULL, NULL);
}
