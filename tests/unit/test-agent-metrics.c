/* Unit tests for agent/metrics.c: the Prometheus text of a status document. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/metrics.h"

static char *render(const struct agent_status *st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(metrics_write(st, f), 0);
    fclose(f);
    return buf;
}

static void test_metrics_text(void **state)
{
    (void)state;
    struct agent_status *st = calloc(1, sizeof *st);
    st->uptime_s = 12.5;
    st->njobs = 1;
    struct job_status *j = &st->jobs[0];
    strcpy(j->job, "tr\"ain");
    strcpy(j->current, "0123456789abcdef");
    j->state = GANG_RUNNING;
    j->restarts = 2;
    j->nranks = 3;
    for (int i = 0; i < 3; i++) {
        j->ranks[i].rank = i;
        heartbeat_init(&j->ranks[i].hb);
    }
    j->ranks[0].has_hb = true;
    j->ranks[0].hb.step = 42;
    j->ranks[0].hb.tok_s = 1500.5;
    j->ranks[0].hb.loss = 3.25;
    j->ranks[0].hb.loss_finite = true;
    j->ranks[0].hb_age_s = 0.5;
    j->ranks[1].has_hb = true;
    j->ranks[1].hb.loss_finite = false;
    j->ranks[1].hb.nonfinite = 2;
    j->ranks[1].gpu.valid = true;
    j->ranks[1].gpu.index = 1;
    strcpy(j->ranks[1].gpu.uuid, "GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab");
    j->ranks[1].gpu.util = 97;
    j->ranks[1].gpu.mem_used = 1024;
    /* rank 2: no heartbeat yet, no GPU: no samples at all */
    char *t = render(st);
    assert_non_null(strstr(t, "# TYPE drover_rank_step gauge\n"));
    assert_non_null(strstr(t, "drover_agent_uptime_seconds 12.5\n"));
    assert_non_null(strstr(t, "drover_build_info{program=\"drover-agent\",version=\""));
    assert_null(strstr(t, "{job=")); /* Prometheus's own target label: would become exported_job */
    assert_non_null(strstr(t, "drover_job_info{drover_job=\"tr\\\"ain\",state=\"running\",current=\"0123456789ab\",good=\"\"} 1\n"));
    assert_non_null(strstr(t, "drover_job_restarts{drover_job=\"tr\\\"ain\"} 2\n"));
    assert_non_null(strstr(t, "drover_rank_step{drover_job=\"tr\\\"ain\",rank=\"0\"} 42\n"));
    assert_non_null(strstr(t, "drover_rank_tokens_per_second{drover_job=\"tr\\\"ain\",rank=\"0\"} 1500.5\n"));
    assert_non_null(strstr(t, "drover_rank_loss{drover_job=\"tr\\\"ain\",rank=\"1\",gpu=\"1\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} NaN\n"));
    assert_non_null(strstr(t, "drover_rank_nonfinite_steps{drover_job=\"tr\\\"ain\",rank=\"1\",gpu=\"1\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} 2\n"));
    assert_non_null(strstr(t, "drover_gpu_utilization_ratio{drover_job=\"tr\\\"ain\",rank=\"1\",gpu=\"1\",UUID=\"GPU-8e0ae0c6-1f0b-7d4e-9a7c-0123456789ab\"} 0.97\n"));
    assert_null(strstr(t, "drover_gpu_utilization_ratio{drover_job=\"tr\\\"ain\",rank=\"0\"}")); /* no NVML there */
    assert_null(strstr(t, "rank=\"2\"")); /* nothing known yet: absent, not zero */
    free(t);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_metrics_text)};
    return cmocka_run_group_tests_name("agent-metrics", tests, NULL, NULL);
}
