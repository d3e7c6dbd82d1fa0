/* gpu_query_with() (agent/gpu.c) against a fake NVML table, the way test-agent-gpumem.c fakes
 * NVML: the device's index and UUID travel with its figures (the labels dcgm-exporter puts on
 * its series, so drover's per-rank series join with DCGM's); an NVML without
 * nvmlDeviceGetUUID, a failing call or a garbled answer leaves the UUID unknown (the label is
 * then absent), and the status document carries both and refuses junk.  No GPU needed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/gpu.h"
#include "common/status.h"

#define UUID1 "GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab"

static struct {
    int by_index_rc, uuid_rc;
    const char *uuid;   /* what nvmlDeviceGetUUID writes */
    size_t uuid_len;    /* bytes written (no NUL when it equals the buffer) */
} fake;
static int dev[4];

static int f_by_index(unsigned int index, void **ret)
{
    if (fake.by_index_rc || index >= 4)
        return fake.by_index_rc ? fake.by_index_rc : 2;
    *ret = &dev[index];
    return 0;
}
static int f_util(void *d, struct gpu_nvml_util *u)
{
    (void)d;
    u->gpu = 97;
    u->memory = 40;
    return 0;
}
static int f_mem(void *d, struct gpu_nvml_mem *m)
{
    (void)d;
    m->total = 80ULL << 30;
    m->used = 1ULL << 30;
    m->free = m->total - m->used;
    return 0;
}
static int f_temp(void *d, int sensor, unsigned int *t)
{
    (void)d;
    (void)sensor;
    *t = 61;
    return 0;
}
static int f_uuid(void *d, char *buf, unsigned int length)
{
    (void)d;
    if (fake.uuid_rc)
        return fake.uuid_rc;
    size_t n = fake.uuid_len ? fake.uuid_len : strlen(fake.uuid) + 1;
    memcpy(buf, fake.uuid, n < length ? n : length);
    return 0;
}

static const struct gpu_nvml nvml = { f_by_index, f_util, f_mem, f_temp, f_temp, f_uuid };
static const struct gpu_nvml nvml_no_uuid = { f_by_index, f_util, f_mem, f_temp, f_temp, NULL };

static void test_uuid_and_index(void **state)
{
    (void)state;
    struct gpu_status g;
    memset(&fake, 0, sizeof fake);
    fake.uuid = UUID1;
    gpu_query_with(&nvml, 2, &g);
    assert_true(g.valid);
    assert_int_equal(g.index, 2);
    assert_string_equal(g.uuid, UUID1);
    assert_int_equal(g.mem_used, 1LL << 30);

    /* an NVML without nvmlDeviceGetUUID: the figures, no UUID */
    gpu_query_with(&nvml_no_uuid, 1, &g);
    assert_true(g.valid);
    assert_int_equal(g.index, 1);
    assert_string_equal(g.uuid, "");
    /* the call fails (NVML_ERROR_NOT_SUPPORTED) */
    fake.uuid_rc = 3;
    gpu_query_with(&nvml, 1, &g);
    assert_true(g.valid);
    assert_string_equal(g.uuid, "");
    fake.uuid_rc = 0;
    /* garbled: not NUL-terminated in the buffer, not a UUID, empty */
    static char junk[200];
    memset(junk, 'a', sizeof junk);
    fake.uuid = junk;
    fake.uuid_len = sizeof junk;
    gpu_query_with(&nvml, 1, &g);
    assert_string_equal(g.uuid, "");
    fake.uuid_len = 0;
    fake.uuid = "GPU-not hex\"}";
    gpu_query_with(&nvml, 1, &g);
    assert_string_equal(g.uuid, "");
    fake.uuid = "";
    gpu_query_with(&nvml, 1, &g);
    assert_string_equal(g.uuid, "");
    /* MIG devices have their own prefix */
    fake.uuid = "MIG-5c7d8e9f-0a1b-2c3d-4e5f-60718293a4b5";
    gpu_query_with(&nvml, 0, &g);
    assert_string_equal(g.uuid, "MIG-5c7d8e9f-0a1b-2c3d-4e5f-60718293a4b5");
    /* no device: nothing valid, nothing made up */
    fake.by_index_rc = 2;
    gpu_query_with(&nvml, 0, &g);
    assert_false(g.valid);
    assert_string_equal(g.uuid, "");
}

/* agent -> controller: index and uuid in the status document, absent when unknown */
static void test_status_carries_uuid(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st), *back = calloc(1, sizeof *back);
    assert_non_null(st);
    assert_non_null(back);
    strcpy(st->host, "ct");
    st->njobs = 1;
    strcpy(st->jobs[0].job, "train");
    st->jobs[0].nranks = 2;
    for (int k = 0; k < 2; k++) {
        st->jobs[0].ranks[k].rank = k;
        strcpy(st->jobs[0].ranks[k].state, "running");
        st->jobs[0].ranks[k].exit_code = -1;
        st->jobs[0].ranks[k].gpu = (struct gpu_status){ .valid = true, .index = k ? -1 : 3, .util = 50 };
    }
    strcpy(st->jobs[0].ranks[0].gpu.uuid, UUID1);
    char *text = NULL;
    assert_int_equal(status_format(st, &text), 0);
    assert_non_null(strstr(text, "\"index\":3"));
    assert_non_null(strstr(text, "\"uuid\":\"" UUID1 "\""));
    assert_null(strstr(text, "\"uuid\":\"\""));
    assert_null(strstr(text, "\"index\":-1"));
    assert_int_equal(status_parse(text, strlen(text), back), 0);
    assert_int_equal(back->jobs[0].ranks[0].gpu.index, 3);
    assert_string_equal(back->jobs[0].ranks[0].gpu.uuid, UUID1);
    assert_int_equal(back->jobs[0].ranks[1].gpu.index, -1); /* an older agent's document reads the same */
    assert_string_equal(back->jobs[0].ranks[1].gpu.uuid, "");
    /* a peer's junk never reaches a label */
    char *bad = strdup(text), *at = strstr(bad, UUID1);
    memcpy(at, "GPU-\"} 1\nevil", 13);
    assert_int_equal(status_parse(bad, strlen(bad), back), -EINVAL);
    free(bad);
    free(text);
    free(st);
    free(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_and_index),
        cmocka_unit_test(test_status_carries_uuid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
