/* The GPU memory wait's decision (agent/gpumem.c) against a fake of the NVML table it uses: which
 * processes count, what is said about them, and when waiting stops.  No GPU, no clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/gpumem.h"

#define MiB (1ULL << 20)

/* The fake: per GPU index, an NVML return code and the listed processes. */
static struct {
    int by_index_rc[4];
    int procs_rc[4];
    unsigned int n[4];
    struct gpumem_proc p[4][GPUMEM_MAX_PROCS + 4];
    int calls;
} fake;
static int devs[4];

static int fake_by_index(unsigned int index, void **ret_device)
{
    if (index >= 4)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    if (fake.by_index_rc[index])
        return fake.by_index_rc[index];
    *ret_device = &devs[index];
    return 0;
}

static int fake_procs(void *device, unsigned int *inout_count, struct gpumem_proc *procs)
{
    int g = (int)((int *)device - devs);
    fake.calls++;
    if (fake.procs_rc[g])
        return fake.procs_rc[g];
    if (fake.n[g] > *inout_count) { /* NVML: the count needed, INSUFFICIENT_SIZE */
        *inout_count = fake.n[g];
        return GPUMEM_NVML_INSUFFICIENT_SIZE;
    }
    memcpy(procs, fake.p[g], fake.n[g] * sizeof *procs);
    *inout_count = fake.n[g];
    return 0;
}

static const struct gpumem_nvml table = { fake_by_index, fake_procs };

static bool pid_is_ours(pid_t pid, void *ud)
{
    return pid == *(pid_t *)ud; /* another live gang of this agent */
}

static int reset(void **state)
{
    (void)state;
    memset(&fake, 0, sizeof fake);
    return 0;
}

static void test_no_nvml(void **state)
{
    (void)state;
    char why[256] = "x";
    unsigned int gpus[] = {0, 1};
    assert_int_equal(gpumem_decide(NULL, gpus, 2, NULL, NULL, 0, 30, why, sizeof why), GPUMEM_NO_NVML);
    assert_string_equal(why, "");
    struct gpumem_nvml half = { fake_by_index, NULL }; /* an NVML without the process listing */
    assert_int_equal(gpumem_decide(&half, gpus, 2, NULL, NULL, 0, 30, why, sizeof why), GPUMEM_NO_NVML);
    assert_string_equal(gpumem_verdict_name(GPUMEM_NO_NVML), "no-nvml");
}

static void test_free_and_held(void **state)
{
    (void)state;
    char why[256];
    unsigned int gpus[] = {0, 1};
    pid_t other = 77;
    /* nothing listed: free at once, both GPUs asked */
    assert_int_equal(gpumem_decide(&table, gpus, 2, pid_is_ours, &other, 0, 30, why, sizeof why), GPUMEM_FREE);
    assert_int_equal(fake.calls, 2);
    assert_string_equal(why, "");
    /* another live gang's process and a context without memory do not count */
    fake.n[1] = 2;
    fake.p[1][0] = (struct gpumem_proc){.pid = 77, .used = 900 * MiB};
    fake.p[1][1] = (struct gpumem_proc){.pid = 4000, .used = 0};
    assert_int_equal(gpumem_decide(&table, gpus, 2, pid_is_ours, &other, 5, 30, why, sizeof why), GPUMEM_FREE);
    /* the old gang's worker still holds memory (the driver tears its context down): wait */
    fake.n[0] = 1;
    fake.p[0][0] = (struct gpumem_proc){.pid = 4242, .used = 812 * MiB - 5};
    assert_int_equal(gpumem_decide(&table, gpus, 2, pid_is_ours, &other, 1, 30, why, sizeof why), GPUMEM_HELD);
    assert_string_equal(why, "GPU 0: pid 4242 holds 812 MiB");
    /* an amount NVML cannot tell counts as held */
    fake.p[1][1].used = GPUMEM_USED_UNKNOWN;
    assert_int_equal(gpumem_decide(&table, gpus, 2, pid_is_ours, &other, 1, 30, why, sizeof why), GPUMEM_HELD);
    assert_string_equal(why, "GPU 0: pid 4242 holds 812 MiB; GPU 1: pid 4000 holds memory (amount unknown)");
    /* at the deadline: timeout (the daemon starts anyway and journals why) */
    assert_int_equal(gpumem_decide(&table, gpus, 2, pid_is_ours, &other, 30, 30, why, sizeof why), GPUMEM_TIMEOUT);
    /* released: free again */
    fake.n[0] = 0;
    fake.p[1][1].used = 0;
    assert_int_equal(gpumem_decide(&table, gpus, 2, pid_is_ours, &other, 12, 30, why, sizeof why), GPUMEM_FREE);
    /* only the gang's GPUs are asked */
    fake.n[3] = 1;
    fake.p[3][0] = (struct gpumem_proc){.pid = 9, .used = MiB};
    assert_int_equal(gpumem_decide(&table, gpus, 2, pid_is_ours, &other, 0, 30, why, sizeof why), GPUMEM_FREE);
}

static void test_nvml_errors_and_limits(void **state)
{
    (void)state;
    char why[64];
    unsigned int gpus[] = {2, 3};
    /* a GPU NVML cannot answer for is not waited for, and said */
    fake.procs_rc[2] = 999; /* NVML_ERROR_UNKNOWN */
    assert_int_equal(gpumem_decide(&table, gpus, 2, NULL, NULL, 0, 30, why, sizeof why), GPUMEM_FREE);
    assert_string_equal(why, "GPU 2: NVML error 999, not waited for");
    fake.procs_rc[2] = 0;
    fake.by_index_rc[3] = 3; /* NVML_ERROR_NOT_SUPPORTED */
    assert_int_equal(gpumem_decide(&table, gpus, 2, NULL, NULL, 0, 30, why, sizeof why), GPUMEM_FREE);
    fake.by_index_rc[3] = 0;
    /* more holders than the list holds: held, never read past it */
    fake.n[2] = GPUMEM_MAX_PROCS + 1;
    for (unsigned int k = 0; k < fake.n[2]; k++)
        fake.p[2][k] = (struct gpumem_proc){.pid = 100 + k, .used = MiB};
    assert_int_equal(gpumem_decide(&table, gpus, 2, NULL, NULL, 0, 30, why, sizeof why), GPUMEM_HELD);
    assert_non_null(strstr(why, "more than 64 processes"));
    /* many holders: the line is cut at its buffer, still terminated */
    fake.n[2] = GPUMEM_MAX_PROCS;
    assert_int_equal(gpumem_decide(&table, gpus, 2, NULL, NULL, 0, 30, why, sizeof why), GPUMEM_HELD);
    assert_true(strlen(why) < sizeof why);
    assert_int_equal(strncmp(why, "GPU 2: pid 100 holds 1 MiB; GPU 2: pid 101", 42), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_nvml, reset),
        cmocka_unit_test_setup(test_free_and_held, reset),
        cmocka_unit_test_setup(test_nvml_errors_and_limits, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
