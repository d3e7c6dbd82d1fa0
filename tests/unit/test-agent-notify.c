/* Unit tests for agent/notify.c (sd_notify spoken directly) and agent/rpc.c's request parser
 * error paths. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/notify.h"
#include "agent/rpc.h"

static void test_notify(void **state)
{
    (void)state;
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(notify_send("READY=1"), 0); /* not under systemd: nothing to do */
    char path[] = "/tmp/drover-notify-test.XXXXXX";
    int tfd = mkstemp(path);
    assert_true(tfd >= 0);
    close(tfd);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    setenv("NOTIFY_SOCKET", path, 1);
    assert_int_equal(notify_send("READY=1\nSTATUS=x"), 1);
    char buf[64] = {0};
    assert_int_equal(recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT), 16);
    assert_string_equal(buf, "READY=1\nSTATUS=x");
    close(fd);
    unlink(path);
    assert_true(notify_send("WATCHDOG=1") < 0); /* nobody listens any more */
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    assert_int_equal(notify_send("READY=1"), -EINVAL);
    unsetenv("NOTIFY_SOCKET");

    unsetenv("WATCHDOG_USEC");
    assert_true(notify_watchdog_interval() == 0);
    setenv("WATCHDOG_USEC", "30000000", 1);
    unsetenv("WATCHDOG_PID");
    assert_true(notify_watchdog_interval() == 15);
    setenv("WATCHDOG_PID", "1", 1); /* meant for another process */
    assert_true(notify_watchdog_interval() == 0);
    setenv("WATCHDOG_USEC", "abc", 1);
    unsetenv("WATCHDOG_PID");
    assert_true(notify_watchdog_interval() == 0);
}

static int parse(const char *text, struct rpc_request *q)
{
    return rpc_parse_request(text, strlen(text), q);
}

static void test_rpc_parse_errors(void **state)
{
    (void)state;
    struct rpc_request q;
    memset(&q, 0x5a, sizeof q);
    unsigned char before = ((unsigned char *)&q)[0];
    assert_int_equal(parse("", &q), -EINVAL);
    assert_int_equal(parse("[]", &q), -EINVAL);
    assert_int_equal(parse("{\"v\":2,\"op\":\"status\"}", &q), -EPROTONOSUPPORT);
    assert_int_equal(parse("{\"v\":1,\"op\":\"dance\"}", &q), -EINVAL);
    assert_int_equal(parse("{\"v\":1,\"op\":\"stop\"}", &q), -EINVAL);                 /* no job */
    assert_int_equal(parse("{\"v\":1,\"op\":\"stop\",\"job\":\"../x\"}", &q), -EINVAL); /* bad job */
    assert_int_equal(parse("{\"v\":1,\"op\":\"promote\",\"job\":\"t\"}", &q), -EINVAL);  /* no id */
    assert_int_equal(parse("{\"v\":1,\"op\":\"promote\",\"job\":\"t\",\"release\":\"abc\"}", &q), -EINVAL);
    assert_int_equal(parse("{\"v\":1,\"op\":\"watch\",\"interval_s\":0}", &q), -EINVAL);
    assert_int_equal(parse("{\"v\":1,\"op\":\"watch\",\"count\":-1}", &q), -EINVAL);
    char id[65];
    memset(id, 'a', 64);
    id[64] = '\0';
    char text[512];
    snprintf(text, sizeof text, "{\"v\":1,\"op\":\"activate\",\"job\":\"t\",\"release\":\"%s\"}", id);
    assert_int_equal(parse(text, &q), -EINVAL); /* no spec */
    snprintf(text, sizeof text,
             "{\"v\":1,\"op\":\"activate\",\"job\":\"t\",\"release\":\"%s\",\"spec\":{\"argv\":[\"x\"],\"nproc\":2,\"gpus\":\"0\"}}",
             id);
    assert_int_equal(parse(text, &q), -EINVAL); /* gpus do not match nproc */
    assert_int_equal(((unsigned char *)&q)[0], before); /* ret untouched on failure */
    char *big = malloc(RPC_MAX_BYTES + 2);
    memset(big, ' ', RPC_MAX_BYTES + 1);
    big[RPC_MAX_BYTES + 1] = '\0';
    assert_int_equal(rpc_parse_request(big, RPC_MAX_BYTES + 1, &q), -E2BIG);
    free(big);
    snprintf(text, sizeof text,
             "{\"v\":1,\"op\":\"activate\",\"job\":\"t\",\"release\":\"%s\",\"spec\":{\"argv\":[\"x\",\"y\"],\"nproc\":2,\"gpus\":\"0,1\",\"env\":[\"NCCL_DEBUG=1\"]},\"probation_s\":5}",
             id);
    assert_int_equal(parse(text, &q), 0);
    assert_int_equal(q.op, RPC_ACTIVATE);
    {
        /* a request naming an environment variable off the allow-list is refused */
        struct rpc_request q2;
        char bad[512];
        snprintf(bad, sizeof bad,
                 "{\"v\":1,\"op\":\"activate\",\"job\":\"t\",\"release\":\"%s\",\"spec\":{\"argv\":[\"x\"],\"env\":[\"LD_PRELOAD=/e.so\"]}}",
                 id);
        assert_int_equal(parse(bad, &q2), -EPERM);
    }
    assert_string_equal(q.spec.release, id);
    assert_int_equal(q.spec.argc, 2);
    assert_int_equal(q.spec.nenv, 1);
    assert_false(q.spec.promoted);
    assert_true(q.probation_s == 5);
    rpc_request_done(&q);
    /* start (an aborted switch): job required, an optional rendezvous generation, checked */
    assert_int_equal(parse("{\"v\":1,\"op\":\"start\"}", &q), -EINVAL);
    assert_int_equal(parse("{\"v\":1,\"op\":\"start\",\"job\":\"t\",\"rdzv\":\"a b\"}", &q), -EINVAL);
    assert_int_equal(parse("{\"v\":1,\"op\":\"start\",\"job\":\"t\",\"rdzv\":\"g-7\"}", &q), 0);
    assert_int_equal(q.op, RPC_START);
    assert_string_equal(q.rdzv, "g-7");
    char *fmt = NULL;
    assert_int_equal(rpc_format_request(&q, &fmt), 0);
    assert_non_null(strstr(fmt, "\"rdzv\":\"g-7\""));
    free(fmt);
    rpc_request_done(&q);
    /* revert --no-mark (an operator's Ctrl-C): a boolean, carried both ways, absent = false */
    assert_int_equal(parse("{\"v\":1,\"op\":\"revert\",\"job\":\"t\",\"no_mark\":1}", &q), -EINVAL);
    assert_int_equal(parse("{\"v\":1,\"op\":\"revert\",\"job\":\"t\"}", &q), 0);
    assert_false(q.no_mark);
    rpc_request_done(&q);
    assert_int_equal(parse("{\"v\":1,\"op\":\"revert\",\"job\":\"t\",\"no_mark\":true}", &q), 0);
    assert_true(q.no_mark);
    assert_int_equal(rpc_format_request(&q, &fmt), 0);
    assert_non_null(strstr(fmt, "\"no_mark\":true"));
    free(fmt);
    rpc_request_done(&q);
    /* the client side: nobody listening */
    assert_int_equal(rpc_call("/tmp/drover-no-such-socket", "{}", 1, NULL, NULL), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notify),
        cmocka_unit_test(test_rpc_parse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
