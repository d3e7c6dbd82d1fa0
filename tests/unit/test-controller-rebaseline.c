/* Unit tests for `drover rebaseline` (controller/deploy/rebaseline.c) against local roots whose
 * agent is a script that prints a status document: what it refuses up front, before measuring,
 * the baseline unchanged. */
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
#include <unistd.h>

#include <cmocka.h>

#include "common/status.h"
#include "controller/cmd.h"
#include "controller/deploy/probation.h"
#include "controller/exitcode.h"
#include "controller/inventory.h"
#include "tests/unit/capture.h"

#define GOOD "2ab918e64d0050a3735a94c0d07ca241638eb2f15a7c54bfcd3cb48c36b1e548"

/* Job train runs GOOD, promoted, in both containers (the fake agent answers the same for each):
 * rank 0 trains at step 40; rank 1 stopped heartbeating at step 37, silent_s ago. */
static void train_runs(struct agent_status *st, double silent_s, long long frozen_steps)
{
    fake_agent_status_init(st);
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    strcpy(js->job, "train");
    strcpy(js->current, GOOD);
    strcpy(js->good, GOOD);
    strcpy(js->release, GOOD);
    js->state = GANG_RUNNING;
    js->nproc = 2;
    js->world_size = 2;
    js->nranks = 2;
    fake_rank_training(&js->ranks[0], 0, 0, GOOD, 40, 1000, 3.5);
    fake_rank_training(&js->ranks[1], 1, 1, GOOD, frozen_steps, 1000, 3.5);
    js->ranks[1].hb_age_s = silent_s;
}

/* A rank frozen while its gang runs (no heartbeat for PROBATION_QUIET_S or more after it ran:
 * the verdict's rule) gives a measurement of nothing: refused up front, exit 1, naming the rank,
 * how long, and what to do, and nothing on stdout.  A rank quiet for less does not stop it
 * there (the fake agent answers nothing but that document, so the measurement then fails on its
 * own after healthy_deadline, also exit 1). */
static void test_rebaseline_refuses_silent_rank(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-test-rebaseline-XXXXXX", out[128], err[128];
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    struct agent_status st;
    train_runs(&st, PROBATION_QUIET_S + 4, 37);
    fake_agent(dir, &st);
    struct inventory *inv = fake_agent_inventory(dir, "exec_timeout = 10s\n",
                                                 "nproc_per_node = 2\nhealthy_deadline = 2\n", "c");
    char *argv[] = { "rebaseline", "--job", "train", NULL };
    assert_int_equal(capture_verb(cmd_rebaseline, inv, argv, 3, out, err), EXIT_FAIL);
    char *said = capture_slurp(err), want[1024];
    snprintf(want, sizeof want, "rebaseline of job 'train' refused, the baseline is unchanged: rank 1 on "
             "h1:local:%s/a has sent no heartbeat for 14 s (last step 37) while its gang runs: it is "
             "frozen (hung in a collective or its data loader?), and the gang behind it measures "
             "nothing; see why with `drover logs --job train`, restart the job (`drover stop --job "
             "train`, then `drover start --job train`), and rebaseline once every rank steps again", dir);
    if (!strstr(said, want))
        fail_msg("stderr:\n%s", said);
    assert_null(strstr(said, "measuring")); /* refused before it measured */
    free(said);
    char *none = capture_slurp(out);
    assert_string_equal(none, "");
    free(none);

    /* quiet for less than PROBATION_QUIET_S: not frozen by the rule (test-controller-probation,
     * test_find_silent_rule, has the rest of it); it goes on to measure */
    train_runs(&st, PROBATION_QUIET_S - 1, 37);
    fake_agent(dir, &st);
    assert_int_equal(capture_verb(cmd_rebaseline, inv, argv, 3, out, err), EXIT_FAIL);
    said = capture_slurp(err);
    assert_null(strstr(said, "refused"));
    assert_non_null(strstr(said, "rebaseline: measuring the good release of job 'train'"));
    free(said);
    inventory_free(inv);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rebaseline_refuses_silent_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
