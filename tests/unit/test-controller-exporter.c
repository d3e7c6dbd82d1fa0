/* Unit tests for controller/exporter.c and common/promtext.c: Prometheus names and labels
 * (drover_job, host, vmid, rank, gpu), numbers without float noise, absent series when nothing is
 * known, and --listen parsing. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/promtext.h"
#include "controller/exporter.h"

static void test_numbers(void **state)
{
    (void)state;
    char b[40];
    assert_string_equal(prom_number(2.995, b, sizeof b), "2.995");
    assert_string_equal(prom_number(0.97, b, sizeof b), "0.97");
    assert_string_equal(prom_number(42, b, sizeof b), "42");
    assert_string_equal(prom_number(-3, b, sizeof b), "-3");
    assert_string_equal(prom_number(1e300, b, sizeof b), "1e+300");
    assert_string_equal(prom_number(NAN, b, sizeof b), "NaN");
    assert_string_equal(prom_number(-INFINITY, b, sizeof b), "-Inf");
    assert_true(strtod(prom_number(0.1 + 0.2, b, sizeof b), NULL) == 0.1 + 0.2);
}

static void test_listen(void **state)
{
    (void)state;
    char h[64];
    int p;
    assert_int_equal(exporter_parse_listen("127.0.0.1:9464", h, sizeof h, &p), 0);
    assert_string_equal(h, "127.0.0.1");
    assert_int_equal(p, 9464);
    assert_int_equal(exporter_parse_listen(":9100", h, sizeof h, &p), 0);
    assert_string_equal(h, "");
    assert_int_equal(exporter_parse_listen("[::1]:80", h, sizeof h, &p), 0);
    assert_string_equal(h, "::1");
    p = 7;
    assert_int_equal(exporter_parse_listen("localhost", h, sizeof h, &p), -EINVAL);
    assert_int_equal(exporter_parse_listen("x:0", h, sizeof h, &p), -EINVAL);
    assert_int_equal(exporter_parse_listen("x:70000", h, sizeof h, &p), -EINVAL);
    assert_int_equal(p, 7);
}

static const char inv_text[] = "[drover]\nstate_dir = /tmp/drover-exporter-test\n"
                               "[host h1]\naddress = 127.0.0.2\n"
                               "[job train]\ncontainers = h1:101 h1:102\nnproc_per_node = 2\ngpus = 2,3\n"
                               "command = bin/drover-train\n";

static void test_render(void **state)
{
    (void)state;
    struct inventory *inv;
    char err[512];
    assert_int_equal(inventory_parse(inv_text, sizeof inv_text - 1, "t.ini", &inv, err, sizeof err), 0);
    struct top_snapshot s;
    assert_int_equal(top_snapshot_init(&s, inv, 5), 0);
    assert_int_equal(s.ncts, 2);
    s.hosts[0].up = true;
    s.jobs[0].baseline_ktok = 96.5;
    s.jobs[0].tolerance = 0.2;
    struct top_ct *ct = &s.cts[0];
    ct->seen = true;
    ct->has_job = true;
    ct->doc_mono = 100;
    ct->gang = GANG_RUNNING;
    strcpy(ct->current, "3f2a9c1b7d6e99");
    ct->nranks = 2;
    for (int k = 0; k < 2; k++) {
        struct top_rank *r = &ct->ranks[k];
        r->rank = k;
        r->has_hb = true;
        r->step = 40 + k;
        r->ktok = 2.995;
        r->loss = 3.25;
        r->loss_finite = k == 0;
        r->hb_age_s = 0.5;
        r->phase = HB_PHASE_TRAIN;
    }
    /* rank 1: NVML answered, with the device's index and UUID (the labels dcgm-exporter uses);
     * rank 0: no NVML, the index from the inventory's gpus and no UUID label at all */
    ct->ranks[1].gpu = (struct gpu_status){ .valid = true, .index = 3, .uuid = "GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab", .util = 97,
                                            .mem_used = 1 << 30, .mem_total = 2LL << 30, .temp = 61 };
    char *t = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&t, &len);
    exporter_render(&s, inv, 100.5, 1764552000.25, 3, m);
    fclose(m);
    assert_non_null(strstr(t, "# TYPE drover_build_info gauge\ndrover_build_info{program=\"drover\",version=\""));
    assert_non_null(strstr(t, "process_start_time_seconds 1764552000.25\n"));
    assert_non_null(strstr(t, "# TYPE drover_exporter_scrapes_total counter\ndrover_exporter_scrapes_total 3\n"));
    assert_non_null(strstr(t, "drover_host_up{host=\"h1\"} 1\n"));
    assert_non_null(strstr(t, "drover_job_baseline_tokens_per_second{drover_job=\"train\"} 96500\n"));
    assert_non_null(strstr(t, "drover_container_up{drover_job=\"train\",host=\"h1\",vmid=\"101\"} 1\n"));
    assert_non_null(strstr(t, "drover_container_up{drover_job=\"train\",host=\"h1\",vmid=\"102\"} 0\n"));
    assert_non_null(strstr(t, "drover_gang_info{drover_job=\"train\",host=\"h1\",vmid=\"101\",state=\"running\",current=\"3f2a9c1b7d6e\",good=\"\"} 1\n"));
    assert_non_null(strstr(t, "drover_rank_step{drover_job=\"train\",host=\"h1\",vmid=\"101\",rank=\"1\",gpu=\"3\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} 41\n"));
    assert_non_null(strstr(t, "drover_rank_tokens_per_second{drover_job=\"train\",host=\"h1\",vmid=\"101\",rank=\"0\",gpu=\"2\"} 2995\n"));
    assert_non_null(strstr(t, "drover_rank_loss{drover_job=\"train\",host=\"h1\",vmid=\"101\",rank=\"1\",gpu=\"3\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} NaN\n"));
    assert_non_null(strstr(t, "drover_rank_loss_finite{drover_job=\"train\",host=\"h1\",vmid=\"101\",rank=\"1\",gpu=\"3\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} 0\n"));
    assert_non_null(strstr(t, "drover_gpu_utilization_ratio{drover_job=\"train\",host=\"h1\",vmid=\"101\",rank=\"1\",gpu=\"3\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} 0.97\n"));
    assert_non_null(strstr(t, "drover_gpu_memory_total_bytes{drover_job=\"train\",host=\"h1\",vmid=\"101\",rank=\"1\",gpu=\"3\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} 2147483648\n"));
    assert_null(strstr(t, "drover_gpu_utilization_ratio{drover_job=\"train\",host=\"h1\",vmid=\"101\",rank=\"0\"")); /* no NVML */
    assert_null(strstr(t, "vmid=\"102\",rank=")); /* nothing known yet: absent, not zero */
    assert_null(strstr(t, "{job="));
    assert_null(strstr(t, "rank=\"0\",gpu=\"2\",UUID")); /* unknown: absent, not "" */
    assert_null(strstr(t, "gpu=\"\"")); /* a label nobody knows is absent, not "" */
    assert_null(strstr(t, "UUID=\"\""));
    assert_null(strstr(t, "00000000001")); /* no float noise anywhere */
    free(t);
    top_snapshot_done(&s);
    inventory_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_listen),
        cmocka_unit_test(test_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
