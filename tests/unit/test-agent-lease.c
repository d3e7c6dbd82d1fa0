/* The deploy lease (agent/lease.c): who may take it when (pure, from rows with explicit
 * monotonic times and boot ids), the file round trip, and take/renew/refuse/release between two
 * holders on a temp store root. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/lease.h"
#include "common/util.h"

/* fsync of a file whose path holds fsync_enospc ("" none) fails with ENOSPC, as on a full disk
 * (ext4's delayed allocation reports it there).  Defined here, it interposes on libc's. */
static char fsync_enospc[64];

int fsync(int fd)
{
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = fsync_enospc[0] ? readlink(link, path, sizeof path - 1) : -1;
    if (n > 0) {
        path[n] = '\0';
        if (strstr(path, fsync_enospc)) {
            errno = ENOSPC;
            return -1;
        }
    }
    return (int)syscall(SYS_fsync, fd);
}

static void test_lease_decide(void **state)
{
    (void)state;
    struct lease l = {.holder = "alice@h1/pid-1", .taken = 100, .renewed = 150, .ttl_s = 60, .boot_id = "B1"};
    static const struct {
        const char *who, *boot;
        double now;
        enum lease_verdict want;
    } rows[] = {
        {"alice@h1/pid-1", "B1", 160, LEASE_RENEW},
        {"bob@h2/pid-7", "B1", 160, LEASE_REFUSE},
        {"bob@h2/pid-7", "B1", 210, LEASE_REFUSE},    /* exactly at the TTL: still held */
        {"bob@h2/pid-7", "B1", 210.5, LEASE_TAKEOVER}, /* past it: a controller that died */
        {"bob@h2/pid-7", "B2", 151, LEASE_TAKEOVER},   /* from an earlier boot */
        {"alice@h1/pid-2", "B1", 160, LEASE_REFUSE},  /* the same operator, another drover */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(lease_decide(&l, rows[i].who, rows[i].now, rows[i].boot, NULL), rows[i].want);
    assert_int_equal(lease_decide(NULL, "bob", 1, "B1", NULL), LEASE_TAKE);
}

/* lease take --take-over DEAD: the taker found DEAD's process gone on DEAD's own host.  Only that
 * very holder's live lease is taken over; any other live holder is refused as always, and an
 * expired one is the plain takeover. */
static void test_lease_decide_dead(void **state)
{
    (void)state;
    struct lease l = {.holder = "alice@h1/pid-1", .taken = 100, .renewed = 150, .ttl_s = 60, .boot_id = "B1"};
    assert_int_equal(lease_decide(&l, "alice@h1/pid-2", 160, "B1", "alice@h1/pid-1"), LEASE_TAKEOVER_DEAD);
    assert_int_equal(lease_decide(&l, "alice@h1/pid-2", 160, "B1", "alice@h1/pid-9"), LEASE_REFUSE);
    assert_int_equal(lease_decide(&l, "alice@h1/pid-2", 160, "B1", "alice@h1/pid-1/x"), LEASE_REFUSE);
    assert_int_equal(lease_decide(&l, "alice@h1/pid-2", 211, "B1", "alice@h1/pid-9"), LEASE_TAKEOVER);
    assert_int_equal(lease_decide(&l, "alice@h1/pid-1", 160, "B1", "alice@h1/pid-1"), LEASE_RENEW);
    assert_int_equal(lease_decide(NULL, "alice@h1/pid-2", 160, "B1", "alice@h1/pid-1"), LEASE_TAKE);

    char root[] = "/tmp/drover-lease-test.XXXXXX";
    assert_non_null(mkdtemp(root));
    char over[400] = "untouched";
    assert_int_equal(lease_take(root, "train", "alice@h1/pid-1", 600, NULL, over, sizeof over), 0);
    /* someone else named as dead: bob's take is refused, nothing changes */
    assert_int_equal(lease_take(root, "train", "bob@h2/pid-7", 600, "carol@h1/pid-3", over, sizeof over), -EBUSY);
    assert_string_equal(over, "untouched");
    assert_int_equal(lease_take(root, "train", "alice@h1/pid-2", 600, "alice@h1/pid-1", over, sizeof over), 1);
    assert_non_null(strstr(over, "deploy lease taken over by alice@h1/pid-2 from alice@h1/pid-1 (no longer "
                                 "running on its host, said alice@h1/pid-2;"));
    assert_int_equal(lease_take(root, "train", "alice@h1/pid-1", 600, NULL, NULL, 0), -EBUSY); /* the old one is out */
    assert_int_equal(lease_release(root, "train", "alice@h1/pid-2"), 0);
    assert_int_equal(fs_rm_rf(root), 0);
}

static void test_lease_format_parse(void **state)
{
    (void)state;
    struct lease l = {.holder = "alice@h1/pid-1", .taken = 100, .renewed = 150.5, .ttl_s = 60, .boot_id = "B1"}, back;
    char *text;
    assert_int_equal(lease_format(&l, &text), 0);
    assert_int_equal(lease_parse(text, strlen(text), &back), 0);
    free(text);
    assert_string_equal(back.holder, l.holder);
    assert_true(back.renewed == 150.5 && back.ttl_s == 60);
    memset(&back, 0x5a, sizeof back);
    struct lease untouched = back;
    static const char *bad[] = {"{}", "{\"v\":1,\"holder\":\"\",\"taken_mono\":1,\"renewed_mono\":1,\"ttl_s\":1,\"boot_id\":\"x\"}",
                                "{\"v\":1,\"holder\":\"a\",\"taken_mono\":1,\"renewed_mono\":1,\"ttl_s\":1e9,\"boot_id\":\"x\"}", "nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_true(lease_parse(bad[i], strlen(bad[i]), &back) < 0);
    assert_memory_equal(&back, &untouched, sizeof back);
}

static void test_lease_take_release(void **state)
{
    (void)state;
    char root[] = "/tmp/drover-lease-test.XXXXXX";
    assert_non_null(mkdtemp(root));
    char over[400] = "untouched";
    assert_int_equal(lease_take(root, "train", "alice@h1/pid-1", 600, NULL, over, sizeof over), 0);
    assert_int_equal(lease_take(root, "train", "bob@h2/pid-7", 600, NULL, over, sizeof over), -EBUSY); /* second operator */
    assert_int_equal(lease_take(root, "eval", "bob@h2/pid-7", 600, NULL, NULL, 0), 0);      /* another job */
    assert_int_equal(lease_take(root, "train", "alice@h1/pid-1", 600, NULL, over, sizeof over), 0); /* renewal */
    assert_string_equal(over, "untouched");
    assert_int_equal(lease_release(root, "train", "bob@h2/pid-7"), -EBUSY);   /* not his */
    /* a lease its holder left behind before the container's last boot: taken over, and said
     * (the agent journals the line as a lease-takeover event) */
    char p[256], *text = NULL;
    struct lease dead = {.holder = "carol@h3/pid-9", .taken = 5, .renewed = 6, .ttl_s = 600, .boot_id = "an-earlier-boot"};
    assert_int_equal(lease_format(&dead, &text), 0);
    snprintf(p, sizeof p, "%s/leases/eval.json", root);
    assert_int_equal(fs_write_atomic(p, text, strlen(text), 0600), 0);
    free(text);
    assert_int_equal(lease_take(root, "eval", "alice@h1/pid-1", 600, NULL, over, sizeof over), 1);
    assert_string_equal(over, "deploy lease taken over by alice@h1/pid-1 from carol@h3/pid-9 (taken before the container's last boot)");
    assert_int_equal(lease_take(root, "eval", "alice@h1/pid-1", 600, NULL, over, sizeof over), 0); /* now hers */
    assert_int_equal(lease_release(root, "eval", "alice@h1/pid-1"), 0);
    assert_int_equal(lease_release(root, "train", "alice@h1/pid-1"), 0);
    assert_int_equal(lease_take(root, "train", "bob@h2/pid-7", 600, NULL, NULL, 0), 0);
    assert_int_equal(lease_release(root, "train", "bob@h2/pid-7"), 0);
    assert_int_equal(lease_release(root, "train", "bob@h2/pid-7"), 0); /* none: fine */
    assert_int_equal(fs_rm_rf(root), 0);
}

/* The container's disk is full: the lease file cannot be written.  The take fails with
 * -ENOSPC (drover-agent exits disk_full, and drover start starts nothing), says which file and
 * why on stderr, and leaves no lease: the next taker finds it free. */
static void test_lease_take_disk_full(void **state)
{
    (void)state;
    char root[] = "/tmp/drover-lease-test.XXXXXX", errf[300], want[400];
    assert_non_null(mkdtemp(root));
    snprintf(errf, sizeof errf, "%s/stderr", root);
    (void)str_copy(fsync_enospc, sizeof fsync_enospc, "/leases/train.json.tmp");
    fflush(stderr);
    int save = dup(STDERR_FILENO), fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(save >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    int r = lease_take(root, "train", "alice@h1/pid-1", 600, NULL, NULL, 0);
    fflush(stderr);
    dup2(save, STDERR_FILENO);
    close(save);
    fsync_enospc[0] = '\0';
    assert_int_equal(r, -ENOSPC);
    char *said = NULL;
    size_t len = 0;
    assert_int_equal(fs_read_file(errf, 4096, &said, &len), 0);
    snprintf(want, sizeof want, "lease of job 'train': cannot write '%s/leases/train.json': No space "
             "left on device (the container's disk is full)", root);
    if (!strstr(said, want))
        fail_msg("stderr: %s", said);
    free(said);
    assert_int_equal(lease_take(root, "train", "bob@h2/pid-7", 600, NULL, NULL, 0), 0); /* free */
    assert_int_equal(fs_rm_rf(root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_decide),
        cmocka_unit_test(test_lease_decide_dead),
        cmocka_unit_test(test_lease_format_parse),
        cmocka_unit_test(test_lease_take_release),
        cmocka_unit_test(test_lease_take_disk_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
