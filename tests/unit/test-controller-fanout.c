/* Unit tests for controller/transport/fanout.c: every item runs exactly once, never more than
 * max_parallel at a time, and max_parallel 1 runs in order in the caller's thread. */
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/transport/fanout.h"

struct count {
    pthread_mutex_t mu;
    int runs[64], order[64], norder, now, peak;
    pthread_t caller;
    bool other_thread;
};

static void item(int i, void *ctx)
{
    struct count *c = ctx;
    pthread_mutex_lock(&c->mu);
    c->runs[i]++;
    c->order[c->norder++] = i;
    if (++c->now > c->peak)
        c->peak = c->now;
    if (!pthread_equal(pthread_self(), c->caller))
        c->other_thread = true;
    pthread_mutex_unlock(&c->mu);
    usleep(2000); /* let the others pile up if the bound were not kept */
    pthread_mutex_lock(&c->mu);
    c->now--;
    pthread_mutex_unlock(&c->mu);
}

static void test_bounded(void **state)
{
    (void)state;
    static struct count c = { .mu = PTHREAD_MUTEX_INITIALIZER };
    c.caller = pthread_self();
    fanout_run(40, 4, item, &c);
    for (int i = 0; i < 40; i++)
        assert_int_equal(c.runs[i], 1);
    assert_true(c.peak <= 4);
    assert_int_equal(c.now, 0);
}

static void test_serial(void **state)
{
    (void)state;
    static struct count c = { .mu = PTHREAD_MUTEX_INITIALIZER };
    c.caller = pthread_self();
    fanout_run(10, 1, item, &c);
    assert_int_equal(c.peak, 1);
    assert_false(c.other_thread);
    for (int i = 0; i < 10; i++)
        assert_int_equal(c.order[i], i);
    fanout_run(0, 8, item, &c); /* nothing to do */
    assert_int_equal(c.norder, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_serial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
