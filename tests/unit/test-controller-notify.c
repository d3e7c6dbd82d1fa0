/* Unit tests for controller/notify.c against a real HTTP receiver on 127.0.0.1 (a tiny server in
 * a thread): the payload arrives whole with the bearer secret; a 500 is retried until it is
 * accepted; a 401 is not retried; a receiver that never answers costs the timeout and nothing
 * else; the secret and the URL's path never appear in an error; the exec hook gets event, job
 * and the payload on stdin. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/notify.h"

/* The receiver: answers codes[i] to request i (0 = read and never answer), keeps the last request. */
struct receiver {
    int fd, port;
    int codes[8], ncodes, served;
    char last[16384];
    pthread_t th;
};

static void *serve(void *arg)
{
    struct receiver *rv = arg;
    for (int i = 0; i < rv->ncodes; i++) {
        int c = accept(rv->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        size_t got = 0;
        ssize_t k;
        char *body;
        rv->last[0] = '\0';
        while (got < sizeof rv->last - 1 && (k = read(c, rv->last + got, sizeof rv->last - 1 - got)) > 0) {
            got += (size_t)k;
            rv->last[got] = '\0';
            const char *cl = strcasestr(rv->last, "Content-Length:");
            if ((body = strstr(rv->last, "\r\n\r\n")) && cl &&
                strlen(body + 4) >= (size_t)atoi(cl + 15))
                break;
        }
        rv->served++;
        if (rv->codes[i] == 0) {
            sleep(2); /* longer than the client's timeout */
            close(c);
            continue;
        }
        char resp[128];
        int n = snprintf(resp, sizeof resp, "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                         rv->codes[i]);
        (void)!write(c, resp, (size_t)n);
        close(c);
    }
    return NULL;
}

static void receiver_start(struct receiver *rv, const int *codes, int n)
{
    memset(rv, 0, sizeof *rv);
    memcpy(rv->codes, codes, sizeof(int) * (size_t)n);
    rv->ncodes = n;
    rv->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(rv->fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(rv->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(rv->fd, 8), 0);
    socklen_t al = sizeof a;
    getsockname(rv->fd, (struct sockaddr *)&a, &al);
    rv->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&rv->th, NULL, serve, rv), 0);
}

static void receiver_stop(struct receiver *rv)
{
    shutdown(rv->fd, SHUT_RDWR);
    pthread_join(rv->th, NULL);
    close(rv->fd);
}

static struct history_entry entry(void)
{
    struct history_entry h = { .time = 1764552000.5, .ktok_s = 41.2, .baseline_ktok_s = 96.5 };
    strcpy(h.job, "train");
    strcpy(h.release, "3f2a9c1b7d6e0000000000000000000000000000000000000000000000000000");
    strcpy(h.name, "v2");
    strcpy(h.result, "reverted");
    strcpy(h.reason, "throughput regression: 41.2 Ktok/s < 0.80 x 96.5 Ktok/s baseline");
    strcpy(h.containers, "h1:101 h2:201");
    return h;
}

static void test_payload(void **state)
{
    (void)state;
    struct history_entry h = entry();
    assert_string_equal(notify_event_of(&h), "revert");
    char *t = NULL;
    assert_int_equal(notify_payload("revert", &h, false, &t), 0);
    json_error_t je;
    json_t *o = json_loads(t, 0, &je);
    assert_non_null(o);
    assert_int_equal(json_integer_value(json_object_get(o, "v")), 1);
    assert_string_equal(json_string_value(json_object_get(o, "event")), "revert");
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), h.reason);
    json_t *rec = json_object_get(o, "record");
    assert_string_equal(json_string_value(json_object_get(rec, "result")), "reverted");
    assert_string_equal(json_string_value(json_object_get(rec, "reason_code")), "");
    assert_true(json_real_value(json_object_get(rec, "ktok_s")) > 41.1);
    json_decref(o);
    free(t);
    assert_int_equal(notify_payload("revert", &h, true, &t), 0);
    assert_non_null(strstr(t, "\"text\":\"drover: revert of job train"));
    free(t);
    strcpy(h.result, "failed");
    assert_null(notify_event_of(&h));
    strcpy(h.result, "reverted");
    /* decided on the record's reason code, never its words */
    strcpy(h.reason, "the agent on h1:101 went back to 1a2b3c4d5e6f by itself (crash loop)");
    assert_string_equal(notify_event_of(&h), "revert");
    h.reason_code = HISTORY_RC_AGENT_REVERT;
    assert_string_equal(notify_event_of(&h), "agent-revert");
    strcpy(h.reason, "crash loop");
    assert_string_equal(notify_event_of(&h), "agent-revert");
    assert_int_equal(notify_payload("agent-revert", &h, false, &t), 0);
    assert_non_null(strstr(t, "\"reason_code\":\"agent-revert\""));
    free(t);
    /* an older drover's record (no reason_code) still reads as the agent's revert */
    const char *old = "{\"v\":1,\"time\":1,\"job\":\"train\",\"result\":\"reverted\","
                      "\"reason\":\"the agent on h1:101 went back to 1a2b3c4d5e6f by itself (x)\"}";
    struct history_entry oh;
    assert_int_equal(history_entry_parse(old, strlen(old), &oh), 0);
    assert_int_equal(oh.reason_code, HISTORY_RC_AGENT_REVERT);
    assert_string_equal(notify_event_of(&oh), "agent-revert");
}

static void test_redact(void **state)
{
    (void)state;
    char out[256];
    notify_redact_url("https://hooks.slack.com/services/T000/B000/XXXXSECRET", out, sizeof out);
    assert_string_equal(out, "https://hooks.slack.com/...");
    notify_redact_url("http://user:pw@127.0.0.1:9000/hook?token=s", out, sizeof out);
    assert_string_equal(out, "http://127.0.0.1:9000/...");
    assert_null(strstr(out, "pw"));
}

static void test_post_retry_then_ok(void **state)
{
    (void)state;
    struct receiver rv;
    const int codes[] = { 500, 503, 200 };
    receiver_start(&rv, codes, 3);
    char url[128], err[512] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook/SECRETPATH", rv.port);
    assert_int_equal(notify_post(url, "{\"v\":1}", "s3cr3t-token", 2, 2, err, sizeof err), 0);
    receiver_stop(&rv);
    assert_int_equal(rv.served, 3);
    assert_non_null(strstr(rv.last, "POST /hook/SECRETPATH"));
    assert_non_null(strstr(rv.last, "Authorization: Bearer s3cr3t-token"));
    assert_non_null(strstr(rv.last, "Content-Type: application/json"));
    assert_non_null(strstr(rv.last, "\r\n\r\n{\"v\":1}"));
}

static void test_post_401_not_retried(void **state)
{
    (void)state;
    struct receiver rv;
    const int codes[] = { 401 };
    receiver_start(&rv, codes, 1);
    char url[128], err[512] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook/SECRETPATH", rv.port);
    assert_int_equal(notify_post(url, "{}", "s3cr3t-token", 2, 3, err, sizeof err), -EACCES);
    receiver_stop(&rv);
    assert_int_equal(rv.served, 1);
    assert_non_null(strstr(err, "HTTP 401"));
    assert_null(strstr(err, "s3cr3t"));
    assert_null(strstr(err, "SECRETPATH"));
}

static void test_post_timeout_and_refused(void **state)
{
    (void)state;
    struct receiver rv;
    const int codes[] = { 0 };
    receiver_start(&rv, codes, 1);
    char url[128], err[512] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", rv.port);
    assert_int_equal(notify_post(url, "{}", "", 0.3, 0, err, sizeof err), -ETIMEDOUT);
    receiver_stop(&rv);
    /* nobody listens there any more */
    assert_int_equal(notify_post(url, "{}", "", 0.5, 1, err, sizeof err), -ECONNREFUSED);
}

static void test_secret_sources(void **state)
{
    (void)state;
    struct inv_notify n = { 0 };
    char out[64] = "x";
    assert_int_equal(notify_secret(&n, out, sizeof out), 0);
    assert_string_equal(out, "");
    strcpy(n.secret_env, "DROVER_TEST_NOTIFY_SECRET");
    unsetenv("DROVER_TEST_NOTIFY_SECRET");
    assert_int_equal(notify_secret(&n, out, sizeof out), -ENOENT);
    setenv("DROVER_TEST_NOTIFY_SECRET", "from-env", 1);
    assert_int_equal(notify_secret(&n, out, sizeof out), 0);
    assert_string_equal(out, "from-env");
    char p[] = "/tmp/drover-notify-secret.XXXXXX";
    int fd = mkstemp(p);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "from-file\n", 10), 10);
    close(fd);
    strcpy(n.secret_file, p); /* the file wins */
    assert_int_equal(notify_secret(&n, out, sizeof out), 0);
    assert_string_equal(out, "from-file");
    unlink(p);
    assert_int_equal(notify_secret(&n, out, sizeof out), -ENOENT);
}

static void test_exec_hook(void **state)
{
    (void)state;
    char dir[] = "/tmp/drover-notify-hook.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char hook[128], outp[160], cmd[512], err[512];
    snprintf(hook, sizeof hook, "%s/hook", dir);
    snprintf(outp, sizeof outp, "%s/got", dir);
    FILE *f = fopen(hook, "w");
    fprintf(f, "#!/bin/sh\necho \"$1 $2\" >%s\ncat >>%s\n", outp, outp);
    fclose(f);
    chmod(hook, 0755);
    assert_int_equal(notify_exec(hook, "promote", "train", "{\"v\":1}", 5, err, sizeof err), 0);
    f = fopen(outp, "r");
    char got[256] = "";
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    assert_string_equal(got, "promote train\n{\"v\":1}");
    f = fopen(hook, "w");
    fprintf(f, "#!/bin/sh\nexit 3\n");
    fclose(f);
    assert_int_equal(notify_exec(hook, "promote", "train", "{}", 5, err, sizeof err), -EIO);
    assert_non_null(strstr(err, "exited with 3"));
    f = fopen(hook, "w");
    fprintf(f, "#!/bin/sh\nexec sleep 30\n");
    fclose(f);
    assert_int_equal(notify_exec(hook, "promote", "train", "{}", 0.3, err, sizeof err), -ETIMEDOUT);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payload),
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_post_retry_then_ok),
        cmocka_unit_test(test_post_401_not_retried),
        cmocka_unit_test(test_post_timeout_and_refused),
        cmocka_unit_test(test_secret_sources),
        cmocka_unit_test(test_exec_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
