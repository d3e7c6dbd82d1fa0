/* tests/unit/test-trainer-config.c: drover-train's INI config: defaults, every error path names
 * file, line and key, the 200-byte line limit, and the LR schedule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "trainer/config.h"
#include "trainer/fault.h"

static int parse(const char *text, struct train_config *c, char *err)
{
    return train_config_parse("t.ini", text, strlen(text), c, err, 256);
}

static void test_good_config(void **state)
{
    (void)state;
    struct train_config c;
    char err[256] = "";
    const char *t = "[model]\nlayers = 3\nheads = 2\ndim = 32\nvocab = 100\nseq = 16\n"
                    "[train]\nbatch = 4\nlr = 0.01\nmax_steps = 50\nwarmup_steps = 5\nseed = 9\nval_every = 5\n"
                    "; comment\n[data]\ntrain = data/*.bin\n[backend]\ndevice = cpu\nthreads = 2\n";
    assert_int_equal(parse(t, &c, err), 0);
    assert_int_equal(c.model.layers, 3);
    assert_int_equal(c.model.vocab_padded, 128);
    assert_int_equal(c.batch, 4);
    assert_int_equal(c.seed, 9);
    assert_string_equal(c.train, "data/*.bin");
    assert_int_equal(c.threads, 2);
    assert_int_equal(c.val_every, 5);
    assert_int_equal(c.val_batches, 4);
    assert_true(fabs(c.beta2 - 0.95) < 1e-12); /* default kept */
}

static void expect_error(const char *text, const char *needle)
{
    struct train_config c;
    memset(&c, 0x5a, sizeof c);
    struct train_config before = c;
    char err[256] = "";
    assert_int_equal(parse(text, &c, err), -EINVAL);
    if (!strstr(err, needle))
        fail_msg("error '%s' does not contain '%s'", err, needle);
    assert_memory_equal(&c, &before, sizeof c); /* ret_ untouched on failure */
}

static void test_errors_name_line_and_key(void **state)
{
    (void)state;
    expect_error("[model]\nlayers = 2\nbogus = 1\n", "t.ini:3: [model] bogus: unknown key");
    expect_error("[train]\nlr = abc\n", "t.ini:2: [train] lr: 'abc' is not a number");
    expect_error("[train]\nbatch = 0\n", "t.ini:2: [train] batch: '0' is out of range");
    expect_error("[train]\nval_batches = 0\n", "[train] val_batches: '0' is out of range");
    expect_error("[train]\nbatch = 3x\n", "[train] batch: '3x' is not an integer");
    expect_error("[train]\nseed = -1\n", "[train] seed");
    expect_error("[nope]\nx = 1\n", "t.ini:2: [nope] x: unknown section");
    expect_error("[backend]\ndevice = tpu\n", "[backend] device: 'tpu' is not cpu or cuda");
    expect_error("[model]\nheads = 3\ndim = 64\n", "heads (3) must divide dim (64)");
    expect_error("[train]\nwarmup_steps = 10\nmax_steps = 5\n", "warmup_steps (10) exceeds max_steps (5)");
    expect_error("[model\nlayers = 1\n", "t.ini:1: malformed line");
    expect_error("[train]\nlr 0.1\n", "t.ini:2: malformed line");
    expect_error("[train]\nlr: 0.1\n", "t.ini:2: 'key: value' is not read here; write key = value");
    expect_error("[train] x\nlr = 0.1\n", "t.ini:1: text after the section's ']'");
    expect_error("[model]\nlayers = 2\n", "t.ini: [data] train is missing");
    char longline[400];
    memset(longline, 'a', sizeof longline);
    memcpy(longline, "[data]\ntrain = ", 15);
    longline[sizeof longline - 1] = '\0';
    expect_error(longline, "t.ini:2: line longer than");
}

static void test_missing_file(void **state)
{
    (void)state;
    struct train_config c;
    char err[256];
    assert_int_equal(train_config_load("/nonexistent/drover.ini", &c, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/drover.ini"));
}

static void test_lr_schedule(void **state)
{
    (void)state;
    struct train_config c;
    train_config_defaults(&c);
    c.lr = 1.0;
    c.min_lr_frac = 0.1;
    c.warmup_steps = 10;
    c.max_steps = 110;
    assert_true(fabs(train_lr_at(&c, 0) - 0.1) < 1e-12);
    assert_true(fabs(train_lr_at(&c, 9) - 1.0) < 1e-12);
    assert_true(fabs(train_lr_at(&c, 10) - 1.0) < 1e-12);
    assert_true(fabs(train_lr_at(&c, 60) - 0.55) < 1e-12); /* halfway: (1+0.1)/2 */
    assert_true(fabs(train_lr_at(&c, 110) - 0.1) < 1e-12);
    assert_true(fabs(train_lr_at(&c, 500) - 0.1) < 1e-12);
    c.max_steps = 0;
    assert_true(fabs(train_lr_at(&c, 500) - 1.0) < 1e-12);
}

static void test_fault_knobs(void **state)
{
    (void)state;
    struct train_faults f;
    assert_int_equal(fault_parse(NULL, &f), 0);
    assert_int_equal(f.crash_at, -1);
    assert_int_equal(fault_parse("slow=1.5,nan_at=100,hang_at=7,ckpt_chunk_delay=50", &f), 0);
    assert_true(f.slow == 1.5 && f.nan_at == 100 && f.hang_at == 7 && f.ckpt_chunk_delay_ms == 50);
    assert_int_equal(fault_parse("ckpt_chunk_delay=50ms,warmup_slow=1500ms,ckpt_sleep=2s", &f), 0);
    assert_int_equal(f.ckpt_chunk_delay_ms, 50);
    assert_true(f.warmup_slow == 1.5 && f.ckpt_sleep == 2);
    assert_int_equal(fault_parse("crash_after=40", &f), 0);
    assert_true(f.crash_after == 40 && f.crash_at == -1);
    assert_int_equal(fault_parse("crash_after=0", &f), -EINVAL);
    assert_int_equal(fault_parse("crash_at=5s", &f), -EINVAL);
    f.crash_at = 42;
    assert_int_equal(fault_parse("crash_at", &f), -EINVAL);
    assert_int_equal(fault_parse("typo=1", &f), -EINVAL);
    assert_int_equal(fault_parse("slow=0.5", &f), -EINVAL);
    assert_int_equal(fault_parse("nan_at=-3", &f), -EINVAL);
    assert_int_equal(f.crash_at, 42); /* untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_config),
        cmocka_unit_test(test_errors_name_line_and_key),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_fault_knobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
