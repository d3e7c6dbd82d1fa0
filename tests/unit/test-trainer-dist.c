/* tests/unit/test-trainer-dist.c: the TCP star between ranks on loopback: allreduce in rank
 * order, broadcast, and the deadlines (no peer, a peer that leaves, a silent peer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "trainer/dist.h"

static int base_port;

struct rank_job {
    int rank, world, port;
    double timeout;
    int rc_open, rc_reduce, rc_bcast, rc_barrier;
    float buf[1000];
    char bc[16];
    int leave_early; /* close right after joining */
    int stay_silent; /* join, then sleep past the deadline */
    const char *rdzv; /* rendezvous token (NULL none) */
};

static void *rank_main(void *p)
{
    struct rank_job *j = p;
    struct dist *d = NULL;
    j->rc_open = dist_open_rdzv(j->rank, j->world, "127.0.0.1", j->port, j->timeout, j->rdzv, &d);
    if (j->rc_open < 0)
        return NULL;
    if (j->leave_early) {
        dist_free(d);
        return NULL;
    }
    if (j->stay_silent) {
        usleep((useconds_t)(j->timeout * 2e6));
        dist_free(d);
        return NULL;
    }
    for (int i = 0; i < 1000; i++)
        j->buf[i] = (float)(j->rank + 1) * (float)i;
    j->rc_reduce = dist_allreduce_sum_f32(d, j->buf, 1000);
    if (j->rank == 0)
        strcpy(j->bc, "nccl-id-xyz");
    j->rc_bcast = j->rc_reduce < 0 ? j->rc_reduce : dist_broadcast(d, j->bc, sizeof j->bc);
    j->rc_barrier = j->rc_bcast < 0 ? j->rc_bcast : dist_barrier(d);
    dist_free(d);
    return NULL;
}

static void run_gang(struct rank_job *jobs, int world)
{
    pthread_t th[8];
    for (int r = 0; r < world; r++)
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
}

static void test_allreduce_and_broadcast(void **state)
{
    (void)state;
    struct rank_job jobs[3];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < 3; r++)
        jobs[r] = (struct rank_job){.rank = r, .world = 3, .port = base_port, .timeout = 10};
    run_gang(jobs, 3);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(jobs[r].rc_open, 0);
        assert_int_equal(jobs[r].rc_reduce, 0);
        assert_int_equal(jobs[r].rc_bcast, 0);
        assert_int_equal(jobs[r].rc_barrier, 0);
        assert_true(jobs[r].buf[10] == 60.0f); /* (1+2+3)*10 */
        assert_true(jobs[r].buf[999] == 6.0f * 999.0f);
        assert_string_equal(jobs[r].bc, "nccl-id-xyz");
    }
}

/* Issue 11: ranks of different releases never form one gang: a rank 0 of release B refuses a
 * rank of release A (both time out), while ranks with the same token join. */
static void test_rendezvous_token_keeps_gangs_apart(void **state)
{
    (void)state;
    struct rank_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < 2; r++) {
        jobs[r].rank = r;
        jobs[r].world = 2;
        jobs[r].port = base_port + 5;
        jobs[r].timeout = 1.0;
    }
    jobs[0].rdzv = "release-B";
    jobs[1].rdzv = "release-A";
    run_gang(jobs, 2);
    assert_int_equal(jobs[0].rc_open, -ETIMEDOUT);
    assert_int_equal(jobs[1].rc_open, -ETIMEDOUT);
    jobs[1].rdzv = "release-B";
    jobs[0].port = jobs[1].port = base_port + 6;
    /* the matching pair must join: a deadline a loaded 2-core machine cannot miss */
    jobs[0].timeout = jobs[1].timeout = 20.0;
    run_gang(jobs, 2);
    assert_int_equal(jobs[0].rc_open, 0);
    assert_int_equal(jobs[1].rc_open, 0);
    assert_int_equal(jobs[1].rc_reduce, 0);
}

static void test_no_peer_times_out(void **state)
{
    (void)state;
    struct dist *d = (struct dist *)0x1;
    double t0 = time_mono();
    assert_int_equal(dist_open(0, 2, "127.0.0.1", base_port + 1, 0.5, &d), -ETIMEDOUT);
    /* the 0.5 s deadline fired, not some later one: a loose bound that still tells them apart */
    assert_true(time_mono() - t0 < 10);
    assert_ptr_equal(d, (struct dist *)0x1);
    /* a worker with nobody listening */
    assert_int_equal(dist_open(1, 2, "127.0.0.1", base_port + 2, 0.5, &d), -ETIMEDOUT);
    assert_int_equal(dist_open(2, 2, "127.0.0.1", base_port, 1, &d), -EINVAL);
    assert_int_equal(dist_open(0, 1, "127.0.0.1", base_port, 1, &d), -EINVAL);
    dist_free(NULL);
}

static void test_peer_leaves_or_goes_silent(void **state)
{
    (void)state;
    struct rank_job jobs[2];
    memset(jobs, 0, sizeof jobs);
    jobs[0] = (struct rank_job){.rank = 0, .world = 2, .port = base_port + 3, .timeout = 60};
    jobs[1] = (struct rank_job){.rank = 1, .world = 2, .port = base_port + 3, .timeout = 60, .leave_early = 1};
    double t0 = time_mono();
    run_gang(jobs, 2);
    assert_int_equal(jobs[0].rc_open, 0);
    assert_int_equal(jobs[0].rc_reduce, -ECONNRESET);
    assert_true(time_mono() - t0 < 30); /* noticed at once, not at the 60 s deadline */

    memset(jobs, 0, sizeof jobs);
    jobs[0] = (struct rank_job){.rank = 0, .world = 2, .port = base_port + 4, .timeout = 3};
    jobs[1] = (struct rank_job){.rank = 1, .world = 2, .port = base_port + 4, .timeout = 3, .stay_silent = 1};
    run_gang(jobs, 2);
    assert_int_equal(jobs[0].rc_reduce, -ETIMEDOUT);
}

int main(void)
{
    base_port = 20000 + (int)(getpid() % 20000);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_and_broadcast),
        cmocka_unit_test(test_no_peer_times_out),
        cmocka_unit_test(test_rendezvous_token_keeps_gangs_apart),
        cmocka_unit_test(test_peer_leaves_or_goes_silent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
