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
    j->rc_open = dist_open_rdzv(j->rank, j->world, "127.0.0.1", j->port, j->timeout, j->rdzv, NULL, &d);
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
    assert_int_equal(dist_open(0, 2, "127.0.0.1", base_port + 1, 0.5, NULL, &d), -ETIMEDOUT);
    /* the 0.5 s deadline fired, not some later one: a loose bound that still tells them apart */
    assert_true(time_mono() - t0 < 10);
    assert_ptr_equal(d, (struct dist *)0x1);
    /* a worker with nobody listening */
    assert_int_equal(dist_open(1, 2, "127.0.0.1", base_port + 2, 0.5, NULL, &d), -ETIMEDOUT);
    assert_int_equal(dist_open(2, 2, "127.0.0.1", base_port, 1, NULL, &d), -EINVAL);
    assert_int_equal(dist_open(0, 1, "127.0.0.1", base_port, 1, NULL, &d), -EINVAL);
    dist_free(NULL);
}

/* A gang stopped while it forms (t-32 saw it): SIGTERM kills a rank that has not yet installed
 * its handler, and the ranks that have wait in the rendezvous for it.  They used to wait out
 * the rendezvous timeout (60 s by default, past the agent's grace: SIGKILL); with the stop flag
 * set they give up within 0.1 s, rank 0 waiting for peers and a worker waiting for rank 0. */
static volatile sig_atomic_t stop_flag;

static void *set_stop_later(void *p)
{
    (void)p;
    usleep(300 * 1000);
    stop_flag = 1;
    return NULL;
}

static void test_stop_during_rendezvous(void **state)
{
    (void)state;
    for (int rank = 0; rank < 2; rank++) {
        /* rank 0 with no peer coming; rank 1 with no rank 0 listening */
        stop_flag = 0;
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, set_stop_later, NULL), 0);
        struct dist *d = (struct dist *)0x1;
        double t0 = time_mono();
        int r = dist_open(rank, 3, "127.0.0.1", base_port + 7 + rank, 30.0, &stop_flag, &d);
        double took = time_mono() - t0;
        pthread_join(t, NULL);
        assert_int_equal(r, -ECANCELED);
        assert_ptr_equal(d, (struct dist *)0x1);
        assert_true(took >= 0.25 && took < 5); /* the flag, not the 30 s deadline */
    }
    /* a worker that joined and waits for rank 0's answer (rank 0 waits for a third rank) */
    stop_flag = 0;
    struct rank_job jobs[2] = {{.rank = 0, .world = 3, .port = base_port + 9, .timeout = 3.0},
                               {.rank = 1, .world = 3, .port = base_port + 9, .timeout = 30.0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, set_stop_later, NULL), 0);
    pthread_t r0;
    assert_int_equal(pthread_create(&r0, NULL, rank_main, &jobs[0]), 0);
    usleep(50 * 1000);
    struct dist *d = NULL;
    double t0 = time_mono();
    int r = dist_open(1, 3, "127.0.0.1", base_port + 9, 30.0, &stop_flag, &d);
    double took = time_mono() - t0;
    pthread_join(t, NULL);
    pthread_join(r0, NULL);
    assert_int_equal(r, -ECANCELED);
    assert_true(took < 2.5); /* before rank 0's own 3 s deadline */
    assert_int_equal(jobs[0].rc_open, -ETIMEDOUT);
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
        cmocka_unit_test(test_stop_during_rendezvous),
        cmocka_unit_test(test_peer_leaves_or_goes_silent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
