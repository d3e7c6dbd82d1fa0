/* Unit tests for ssh_resolve() (controller/transport/ssh.c): an OpenSSH client config applied
 * through libssh's own parser: Host aliases, HostName, User, Port, ProxyJump; what the inventory
 * writes explicitly wins; no config leaves the inventory's values alone.  Connects nowhere. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/inventory.h"
#include "controller/transport/ssh.h"

static char cfg[] = "/tmp/drover-sshconfig-test.XXXXXX";

static int setup(void **state)
{
    (void)state;
    int fd = mkstemp(cfg);
    if (fd < 0)
        return -1;
    const char text[] = "Host gpu1\n  HostName 10.9.8.7\n  User deploy\n  Port 2222\n"
                        "Host gpu2\n  HostName 10.9.8.8\n  ProxyJump bastion.example.com\n";
    ssize_t n = write(fd, text, sizeof text - 1);
    close(fd);
    return n == (ssize_t)sizeof text - 1 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    (void)unlink(cfg);
    return 0;
}

static struct ssh_params params(const char *address, const char *config)
{
    return (struct ssh_params){ .name = "h", .address = address, .port = 22, .user = "root",
                                .known_hosts = "/dev/null", .ssh_config = config };
}

static void test_alias(void **state)
{
    (void)state;
    struct ssh_params p = params("gpu1", cfg);
    struct ssh_target t;
    char err[256];
    assert_int_equal(ssh_resolve(&p, &t, err, sizeof err), 0);
    assert_string_equal(t.host, "10.9.8.7");
    assert_string_equal(t.user, "deploy");
    assert_int_equal(t.port, 2222);
    assert_string_equal(t.proxy, "");
}

static void test_inventory_wins(void **state)
{
    (void)state;
    struct ssh_params p = params("gpu1", cfg);
    p.port_set = p.user_set = true;
    p.port = 2200;
    struct ssh_target t;
    char err[256];
    assert_int_equal(ssh_resolve(&p, &t, err, sizeof err), 0);
    assert_string_equal(t.host, "10.9.8.7");
    assert_string_equal(t.user, "root");
    assert_int_equal(t.port, 2200);
}

static void test_proxyjump_and_default_user(void **state)
{
    (void)state;
    struct ssh_params p = params("gpu2", cfg);
    struct ssh_target t;
    char err[256];
    assert_int_equal(ssh_resolve(&p, &t, err, sizeof err), 0);
    assert_string_equal(t.host, "10.9.8.8");
    assert_string_equal(t.user, "root"); /* the config names none: the inventory's default */
    assert_int_equal(t.port, 22);
    assert_non_null(strstr(t.proxy, "-W"));
    assert_non_null(strstr(t.proxy, "bastion.example.com"));
    /* libssh 0.10 hands the first hop to OpenSSH's ssh: it is told the inventory's config and
     * known_hosts, and never asks (it read ~/.ssh/config and ~/.ssh/known_hosts, and an unknown
     * jump host key was a prompt nobody answers) */
    char want[256];
    snprintf(want, sizeof want, "ssh -F '%s' ", cfg);
    assert_int_equal(strncmp(t.proxy, want, strlen(want)), 0);
    assert_non_null(strstr(t.proxy, " -o BatchMode=yes -o StrictHostKeyChecking=yes "));
    assert_non_null(strstr(t.proxy, " -o 'UserKnownHostsFile=/dev/null' -o GlobalKnownHostsFile=/dev/null "));
    assert_non_null(strstr(t.proxy, " -W '[%h]:%p' bastion.example.com"));
    /* its log file (for ssh's own reason on a failure) is not left behind by a resolve */
    const char *e = strstr(t.proxy, " -E '/tmp/drover-jump-");
    assert_non_null(e);
    char logp[64];
    assert_int_equal(sscanf(e + 5, "%63[^']", logp), 1);
    assert_int_equal(access(logp, F_OK), -1);
}

static void test_proxyjump_command(void **state)
{
    (void)state;
    struct ssh_params p = params("gpu2", "/etc/drover/ssh_config");
    p.known_hosts = "/var/lib/drover/known_hosts";
    p.identity = "/root/.ssh/id_drover";
    p.connect_timeout_s = 7;
    char out[1024] = "untouched";
    assert_int_equal(ssh_proxyjump_command("ssh -l ops -p 2222 -W '[%h]:%p' bastion", &p, "/tmp/j.log", out, sizeof out), 1);
    assert_string_equal(out, "ssh -F '/etc/drover/ssh_config' -i '/root/.ssh/id_drover' -o BatchMode=yes "
                             "-o StrictHostKeyChecking=yes -o 'UserKnownHostsFile=/var/lib/drover/known_hosts' "
                             "-o GlobalKnownHostsFile=/dev/null -o ConnectTimeout=7 -E '/tmp/j.log' -l ops -p 2222 -W '[%h]:%p' bastion");
    /* a user's own ProxyCommand is theirs */
    strcpy(out, "untouched");
    assert_int_equal(ssh_proxyjump_command("nc -X connect -x proxy:3128 %h %p", &p, NULL, out, sizeof out), 0);
    assert_string_equal(out, "untouched");
    /* a path libssh would expand or the shell would split is refused, not half-quoted */
    p.known_hosts = "/tmp/it's";
    assert_int_equal(ssh_proxyjump_command("ssh -W '[%h]:%p' b", &p, NULL, out, sizeof out), -EINVAL);
    p.known_hosts = "/tmp/100%h";
    assert_int_equal(ssh_proxyjump_command("ssh -W '[%h]:%p' b", &p, NULL, out, sizeof out), -EINVAL);
    p.known_hosts = "/k";
    assert_int_equal(ssh_proxyjump_command("ssh -W '[%h]:%p' b", &p, NULL, out, 40), -ENAMETOOLONG);
}

static void test_no_config(void **state)
{
    (void)state;
    struct ssh_params p = params("gpu1", NULL);
    struct ssh_target t;
    char err[256];
    assert_int_equal(ssh_resolve(&p, &t, err, sizeof err), 0);
    assert_string_equal(t.host, "gpu1");
    assert_string_equal(t.user, "root");
    assert_int_equal(t.port, 22);
}

static void test_inventory_key(void **state)
{
    (void)state;
    static const char a[] = "[drover]\nssh_config = none\n[host h1]\naddress = gpu1\nport = 22\n"
                            "[job t]\ncontainers = h1:101\ncommand = bin/x\n";
    struct inventory *inv;
    char err[512];
    assert_int_equal(inventory_parse(a, sizeof a - 1, "/etc/drover/x.ini", &inv, err, sizeof err), 0);
    assert_string_equal(inv->ssh_config, "");
    assert_true(inv->hosts[0].port_set);
    assert_false(inv->hosts[0].user_set);
    inventory_free(inv);
    static const char b[] = "[drover]\nssh_config = ssh/config\n[host h1]\naddress = gpu1\n"
                            "[job t]\ncontainers = h1:101\ncommand = bin/x\n";
    assert_int_equal(inventory_parse(b, sizeof b - 1, "/etc/drover/x.ini", &inv, err, sizeof err), 0);
    assert_string_equal(inv->ssh_config, "/etc/drover/ssh/config");
    assert_false(inv->hosts[0].port_set);
    inventory_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alias),
        cmocka_unit_test(test_inventory_wins),
        cmocka_unit_test(test_proxyjump_and_default_user),
        cmocka_unit_test(test_proxyjump_command),
        cmocka_unit_test(test_no_config),
        cmocka_unit_test(test_inventory_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
