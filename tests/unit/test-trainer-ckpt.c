/* tests/unit/test-trainer-ckpt.c: checkpoint v1 round trip, corruption detection with fallback
 * to an older checkpoint, shape isolation (another model's files are neither loaded nor pruned),
 * and exact resume: 2N steps in one run and N + resume + N give bit-identical state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "trainer/ckpt.h"
#include "trainer/data.h"
#include "trainer/exitcode.h"
#include "trainer/train.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_LVL_ERR);
    strcpy(dir, "/tmp/drover-test-ckpt.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(dir);
}

static struct gpt_config tiny(int seq)
{
    struct gpt_config c = {.layers = 1, .heads = 2, .dim = 8, .vocab = 50, .seq = seq};
    assert_int_equal(gpt_config_check(&c), 0);
    return c;
}

static void fill(float *x, size_t n, float base)
{
    for (size_t i = 0; i < n; i++)
        x[i] = base + (float)i * 0.001f;
}

static void test_roundtrip_and_fallback(void **state)
{
    (void)state;
    char d[128];
    snprintf(d, sizeof d, "%s/rt", dir);
    struct gpt_config c = tiny(4);
    size_t n = gpt_num_params(&c);
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4);
    assert_true(p && m && v && p2 && m2 && v2);
    fill(p, n, 1);
    fill(m, n, 2);
    fill(v, n, 3);
    struct ckpt_meta meta = {.model = c, .step = 10, .pos = {0, 64}, .rng_state = 0xdeadbeefULL,
                             .tokens = 640, .loss = 3.5, .world_size = 1, .batch = 2};
    strcpy(meta.release, "rel-1");
    strcpy(meta.backend, "cpu");
    char path10[CKPT_PATH_MAX], path20[CKPT_PATH_MAX];
    assert_int_equal(ckpt_write(d, &meta, p, m, v, path10), 0);
    meta.step = 20;
    p[0] = 42;
    assert_int_equal(ckpt_write(d, &meta, p, m, v, path20), 0);

    struct ckpt_meta got;
    char which[CKPT_PATH_MAX];
    assert_int_equal(ckpt_load_latest(d, &c, NULL, &got, p2, m2, v2, which), 1);
    assert_string_equal(which, path20);
    assert_int_equal(got.step, 20);
    assert_int_equal(got.pos.offset, 64);
    assert_true(got.rng_state == 0xdeadbeefULL);
    assert_string_equal(got.release, "rel-1");
    assert_string_equal(got.backend, "cpu");
    assert_memory_equal(p, p2, n * 4);
    assert_memory_equal(v, v2, n * 4);

    /* flip one byte in the newest: it is refused and the older one is used */
    int fd = open(path20, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    char b;
    assert_int_equal(pread(fd, &b, 1, CKPT_HEADER_BYTES + 100), 1);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, CKPT_HEADER_BYTES + 100), 1);
    close(fd);
    assert_int_equal(ckpt_read(path20, &c, &got, p2, m2, v2), -EBADMSG);
    assert_int_equal(ckpt_load_latest(d, &c, NULL, &got, p2, m2, v2, which), 1);
    assert_string_equal(which, path10);
    assert_int_equal(got.step, 10);
    /* truncated */
    assert_int_equal(truncate(path10, 300), 0);
    assert_int_equal(ckpt_read(path10, &c, &got, p2, m2, v2), -EBADMSG);
    assert_int_equal(ckpt_load_latest(d, &c, NULL, &got, p2, m2, v2, NULL), 0);
    /* no directory at all: nothing to resume */
    assert_int_equal(ckpt_load_latest("/nonexistent/drover", &c, NULL, &got, p2, m2, v2, NULL), 0);
    free(p), free(m), free(v), free(p2), free(m2), free(v2);
}

static int count_files(const char *d, const char *prefix)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '^%s' ", d, prefix);
    FILE *f = popen(cmd, "r");
    int n = -1;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &n), 1);
    pclose(f);
    return n;
}

static void test_shapes_isolated_and_prune(void **state)
{
    (void)state;
    char d[128];
    snprintf(d, sizeof d, "%s/shapes", dir);
    struct gpt_config a = tiny(4), b = tiny(8);
    size_t na = gpt_num_params(&a), nb = gpt_num_params(&b);
    float *pa = calloc(na, 4), *pb = calloc(nb, 4);
    assert_true(pa && pb);
    struct ckpt_meta meta = {.model = b, .step = 99};
    assert_int_equal(ckpt_write(d, &meta, pb, pb, pb, NULL), 0);
    meta.model = a;
    for (int s = 1; s <= 4; s++) {
        meta.step = s;
        assert_int_equal(ckpt_write(d, &meta, pa, pa, pa, NULL), 0);
    }
    /* a stale temp file of shape a from a killed writer */
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s/.ckpt-%016llx-000000000005.tmp.1234", d,
             (unsigned long long)gpt_config_fingerprint(&a));
    assert_int_equal(fs_write_atomic(tmp, "x", 1, 0644), 0);
    struct ckpt_meta got;
    assert_int_equal(ckpt_load_latest(d, &a, NULL, &got, pa, pa, pa, NULL), 1);
    assert_int_equal(got.step, 4); /* not shape b's step 99 */
    assert_int_equal(ckpt_prune(d, &a, 2, NULL, NULL), 3); /* steps 1, 2 and the temp file */
    assert_int_equal(count_files(d, "ckpt-"), 3); /* a:3, a:4, b:99 */
    assert_int_equal(count_files(d, ".ckpt-"), 0);
    assert_int_equal(ckpt_load_latest(d, &b, NULL, &got, pb, pb, pb, NULL), 1);
    assert_int_equal(got.step, 99);
    /* unwritable directory */
    assert_int_equal(ckpt_write("/proc/drover-no", &meta, pa, pa, pa, NULL) < 0, 1);
    free(pa);
    free(pb);
}

/* A release on probation (v2) writes checkpoints of the same shape as the good release (v1): v2
 * must not prune v1's away, and v1, trusting only itself, resumes from its own newest one. */
static void test_release_filter_and_own_prune(void **state)
{
    (void)state;
    char d[128];
    snprintf(d, sizeof d, "%s/releases", dir);
    struct gpt_config a = tiny(4);
    float *p = calloc(gpt_num_params(&a), 4);
    assert_non_null(p);
    struct ckpt_meta meta = {.model = a};
    strcpy(meta.release, "v1");
    for (int s = 1; s <= 2; s++) {
        meta.step = s;
        assert_int_equal(ckpt_write(d, &meta, p, p, p, NULL), 0);
    }
    strcpy(meta.release, "v2");
    for (int s = 3; s <= 6; s++) {
        meta.step = s;
        assert_int_equal(ckpt_write(d, &meta, p, p, p, NULL), 0);
        assert_true(ckpt_prune(d, &a, 2, "v2", "v2,v1") >= 0);
    }
    assert_int_equal(count_files(d, "ckpt-"), 4); /* v1:1, v1:2, v2:5, v2:6 */
    struct ckpt_meta got;
    assert_int_equal(ckpt_load_latest(d, &a, "v1,v0", &got, p, p, p, NULL), 1);
    assert_int_equal(got.step, 2);
    assert_string_equal(got.release, "v1");
    assert_int_equal(ckpt_load_latest(d, &a, "v2,v1", &got, p, p, p, NULL), 1);
    assert_int_equal(got.step, 6);
    assert_int_equal(ckpt_load_latest(d, &a, "v9", &got, p, p, p, NULL), 0);
    assert_true(ckpt_release_trusted(NULL, "x"));
    assert_false(ckpt_release_trusted("v10", "v1"));
    assert_false(ckpt_release_trusted("v1", ""));

    /* v2 failed its probation; v1, back, trusts itself and the promoted v0: its next checkpoint
     * prunes v2's, which no release of the job resumes from (they filled the disk, one per
     * failed deploy).  An empty or absent list (not run by the agent) deletes no one else's. */
    strcpy(meta.release, "v1");
    meta.step = 7;
    assert_int_equal(ckpt_write(d, &meta, p, p, p, NULL), 0);
    assert_int_equal(ckpt_prune(d, &a, 2, "v1", NULL), 1); /* v1:1, its oldest */
    assert_int_equal(ckpt_prune(d, &a, 2, "v1", ""), 0);
    assert_int_equal(count_files(d, "ckpt-"), 4); /* v1:2, v1:7, v2:5, v2:6 */
    assert_int_equal(ckpt_prune(d, &a, 2, "v1", "v1,v0"), 2);
    assert_int_equal(count_files(d, "ckpt-"), 2);
    assert_int_equal(ckpt_load_latest(d, &a, "v1,v0", &got, p, p, p, NULL), 1);
    assert_int_equal(got.step, 7);
    assert_int_equal(ckpt_load_latest(d, &a, NULL, &got, p, p, p, NULL), 1);
    assert_int_equal(got.step, 7); /* nothing of v2's left */
    free(p);
}

/* ---- exact resume through the real training loop ---- */

static void write_run_files(const char *d)
{
    char p[256];
    assert_int_equal(fs_mkdir_p(d, 0755), 0);
    uint16_t *tok = malloc(20000 * 2);
    assert_non_null(tok);
    uint32_t x = 1;
    for (int i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        tok[i] = (uint16_t)((i % 7 == 0) ? (x >> 16) % 64u : (tok[i ? i - 1 : 0] * 3u + 1u) % 64u);
    }
    snprintf(p, sizeof p, "%s/train.bin", d);
    assert_int_equal(shard_write(p, tok, 20000), 0);
    free(tok);
    snprintf(p, sizeof p, "%s/cfg.ini", d);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "[model]\nlayers = 2\nheads = 2\ndim = 16\nvocab = 64\nseq = 16\n"
             "[train]\nbatch = 4\nlr = 0.003\nwarmup_steps = 3\nmax_steps = 12\n"
             "checkpoint_every = 4\nlog_every = 0\nweight_decay = 0.1\n[data]\ntrain = %s/train.bin\n", d);
    assert_int_equal(fs_write_atomic(p, cfg, strlen(cfg), 0644), 0);
}

static int run(const char *d, const char *ck, int64_t max_steps)
{
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/cfg.ini", d);
    struct train_args a = {.config = cfg, .ckpt_dir = ck, .max_steps = max_steps};
    return train_run(&a);
}

static void test_exact_resume(void **state)
{
    (void)state;
    char d[128], ck1[160], ck2[160];
    snprintf(d, sizeof d, "%s/run", dir);
    snprintf(ck1, sizeof ck1, "%s/ck-one", d);
    snprintf(ck2, sizeof ck2, "%s/ck-split", d);
    write_run_files(d);
    unsetenv("DROVER_HEARTBEAT_FD");
    unsetenv("WORLD_SIZE");
    unsetenv("RANK");
    assert_int_equal(run(d, ck1, -1), TX_OK);  /* 12 steps */
    assert_int_equal(run(d, ck2, 6), TX_OK);   /* 6 steps, checkpoint at exit */
    assert_int_equal(run(d, ck2, -1), TX_OK);  /* resume: 6 more */

    struct gpt_config c = {.layers = 2, .heads = 2, .dim = 16, .vocab = 64, .seq = 16};
    assert_int_equal(gpt_config_check(&c), 0);
    size_t n = gpt_num_params(&c);
    float *p1 = malloc(n * 4), *m1 = malloc(n * 4), *v1 = malloc(n * 4);
    float *p2 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4);
    assert_true(p1 && m1 && v1 && p2 && m2 && v2);
    struct ckpt_meta a, b;
    assert_int_equal(ckpt_load_latest(ck1, &c, NULL, &a, p1, m1, v1, NULL), 1);
    assert_int_equal(ckpt_load_latest(ck2, &c, NULL, &b, p2, m2, v2, NULL), 1);
    assert_int_equal(a.step, 12);
    assert_int_equal(b.step, 12);
    assert_int_equal(a.pos.offset, b.pos.offset);
    assert_true(a.loss == b.loss); /* the last loss, bit for bit */
    assert_memory_equal(p1, p2, n * 4);
    assert_memory_equal(m1, m2, n * 4);
    assert_memory_equal(v1, v2, n * 4);
    /* and training did something */
    float *p0 = malloc(n * 4);
    struct rng r;
    rng_seed(&r, 1337);
    gpt_params_init(&c, p0, &r);
    assert_true(memcmp(p0, p1, n * 4) != 0);
    free(p0);
    free(p1), free(m1), free(v1), free(p2), free(m2), free(v2);

    /* a missing shard is a data error naming the path */
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/bad.ini", d);
    const char *t = "[data]\ntrain = /nonexistent/shard.bin\n";
    assert_int_equal(fs_write_atomic(cfg, t, strlen(t), 0644), 0);
    struct train_args bad = {.config = cfg, .ckpt_dir = ck1, .max_steps = 1};
    assert_int_equal(train_run(&bad), TX_DATA);
    bad.config = "/nonexistent/cfg.ini";
    assert_int_equal(train_run(&bad), TX_CONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_and_fallback),
        cmocka_unit_test(test_shapes_isolated_and_prune),
        cmocka_unit_test(test_release_filter_and_own_prune),
        cmocka_unit_test(test_exact_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
