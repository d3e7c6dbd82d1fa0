/* Unit tests for controller/inventory.c: a full inventory, policy inheritance, container specs,
 * durations, and error messages that name file, line and key. */
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

#include "common/util.h"
#include "controller/inventory.h"

static const char *good_ini =
    "; example\n"
    "[drover]\n"
    "state_dir = /tmp/drover-state\n"
    "known_hosts = keys/known_hosts\n"
    "identity = /tmp/id\n"
    "\n"
    "[policy]\n"
    "healthy_deadline = 45s\n"
    "tolerance = 0.1\n"
    "on_inconclusive = hold\n"
    "max_probation_time = 2m\n"
    "\n"
    "[host h1]\n"
    "address = 127.0.0.2\n"
    "port = 2222\n"
    "\n"
    "[job train]\n"
    "containers = h1:101 h1:102\n"
    "containers = h2:201\n"
    "nproc_per_node = 2\n"
    "gpus = 0,1\n"
    "command = bin/drover-train\n"
    "arg = --config\n"
    "arg = configs/tiny.ini\n"
    "preflight = bin/drover-train\n"
    "preflight_arg = selftest\n"
    "master_addr = 10.0.0.1\n"
    "master_port = 29500\n"
    "grace = 2m\n"
    "warmup_steps = 20\n"
    "min_healthy_time = 1m\n"
    "auto_revert = no\n"
    "\n"
    "[host h2]\n"
    "local = true\n"
    "\n"
    "[job gpu]\n"
    "containers = h2:local:/var/lib/drover-gpu0\n"
    "command = bin/drover-train\n";

static struct inventory *parse_ok(const char *text)
{
    struct inventory *inv = NULL;
    char err[INV_ERR_MAX] = "";
    int r = inventory_parse(text, strlen(text), "/etc/drover/lab.ini", &inv, err, sizeof err);
    if (r < 0)
        fprintf(stderr, "unexpected error: %s\n", err);
    assert_int_equal(r, 0);
    return inv;
}

/* Parse text that must fail; the message must contain each of the needles. */
static void parse_fails(const char *text, const char *n1, const char *n2)
{
    struct inventory *inv = (struct inventory *)0x1;
    char err[INV_ERR_MAX] = "";
    int r = inventory_parse(text, strlen(text), "inv.ini", &inv, err, sizeof err);
    if (r == 0 || !strstr(err, n1) || (n2 && !strstr(err, n2)))
        fprintf(stderr, "message: '%s' (want '%s' and '%s')\n", err, n1, n2 ? n2 : "");
    assert_int_equal(r, -EINVAL);
    assert_ptr_equal(inv, (struct inventory *)0x1); /* untouched on failure */
    assert_non_null(strstr(err, n1));
    if (n2)
        assert_non_null(strstr(err, n2));
}

/* Every duration key says the same of a value that is no duration, whatever its range: "1d"
 * (no day unit) was told by healthy_deadline that it "must be a duration greater than 0", by
 * lease_ttl that it "is not a duration between 10s and 7d" (7d not being one either) */
static void test_duration_not_a_duration(void **state)
{
    (void)state;
    static const struct {
        const char *section, *key;
    } keys[] = {
        { "policy", "healthy_deadline" },   { "policy", "min_healthy_time" },
        { "policy", "progress_deadline" },  { "policy", "first_step_deadline" },
        { "policy", "silence_deadline" },   { "policy", "stall_deadline" },
        { "policy", "checkpoint_deadline" }, { "policy", "warmup_time" },
        { "policy", "warmup_max" },         { "policy", "max_probation_time" },
        { "policy", "hold_time" },          { "policy", "switch_deadline" },
        { "policy", "lease_ttl" },          { "drover", "connect_timeout" },
        { "drover", "exec_timeout" },       { "notify", "timeout" },
        { "job j", "preflight_timeout" },   { "job j", "grace" },
        { "job j", "healthy_deadline" },    { "job j", "lease_ttl" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        char text[256], want[128];
        snprintf(text, sizeof text, "[%s]\n%s = 1d\n", keys[i].section, keys[i].key);
        snprintf(want, sizeof want, "inv.ini:2: [%s] %s: '1d' is not a duration: give a number with a "
                 "unit of ms, s, m or h (like 30s, 5m, 1h, 250ms), or plain seconds",
                 keys[i].section, keys[i].key);
        parse_fails(text, want, NULL);
    }
}

/* An indented line after a key is more of that key's value (libinih): a typo's tab made
 * "\tgpus = 1" under command "command: set twice in this section".  Said as what it is, at its
 * line, with the key it continues and what the line would be as a key; containers continues */
static void test_indented_line(void **state)
{
    (void)state;
#define J "[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\n"
    parse_fails(J "\tgpus = 1\n", "inv.ini:6: [job j]: this indented line ('gpus = 1') is read as more of "
                "the value of command (line 5): only containers continues on an indented line; if it "
                "is the key gpus, remove the indentation", NULL);
    parse_fails(J "  grce = 5\n", "inv.ini:6: [job j]:", "as a key, grce is unknown here: did you mean grace?");
    parse_fails(J "\tzzzzzzzzzz = 5\n", "inv.ini:6:", "as a key, zzzzzzzzzz is unknown here (see docs/config.md)");
    parse_fails(J "  --lr=0.1\n", "inv.ini:6: [job j]: this indented line ('--lr=0.1') is read as more of the "
                "value of command (line 5): only containers continues on an indented line", NULL);
    parse_fails(J "\n; c\n  tolerance = 0.1\n", "inv.ini:8:", "value of command (line 5)");
    parse_fails("[drover]\nstate_dir = /s\n\tkeep = 3\n", "inv.ini:3: [drover]:",
                "more of the value of state_dir (line 2)");
    parse_fails("[host h]\naddress = a\n  port = 2222\n", "inv.ini:3: [host h]:", "value of address");
    /* containers continues, but not with a key = value line */
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\n  command = x\n", "inv.ini:5:",
                "value of containers (line 4)");
    struct inventory *inv = parse_ok("[host h]\naddress=a\n[job j]\ncontainers = h:101\n  h:102\n\th:103\n"
                                     "command = x\n");
    assert_int_equal(inventory_find_job(inv, "j")->ncts, 3);
    inventory_free(inv);
    /* indented right under a header is a key (no value to continue) */
    inv = parse_ok("[host h]\n  address = a\n[job j]\n\tcontainers = h:101\ncommand = x\n");
    assert_string_equal(inv->hosts[0].address, "a");
    inventory_free(inv);
#undef J
}

static void test_full_inventory(void **state)
{
    (void)state;
    struct inventory *inv = parse_ok(good_ini);
    assert_string_equal(inv->state_dir, "/tmp/drover-state");
    assert_string_equal(inv->known_hosts, "/etc/drover/keys/known_hosts"); /* relative to the file */
    assert_string_equal(inv->agent_path, "/usr/local/bin/drover-agent");
    assert_string_equal(inv->staging_dir, "/var/lib/drover-host/blobs");
    assert_int_equal(inv->nhosts, 2);
    assert_int_equal(inv->hosts[0].port, 2222);
    assert_string_equal(inv->hosts[0].user, "root");
    assert_true(inv->hosts[1].local);
    const struct inv_job *j = inventory_find_job(inv, "train");
    assert_non_null(j);
    assert_int_equal(j->ncts, 3);
    assert_int_equal(j->cts[0].vmid, 101);
    assert_int_equal(j->cts[2].host, 1); /* host defined after the job */
    assert_string_equal(j->cts[2].label, "h2:201");
    assert_int_equal(j->nproc_per_node, 2);
    assert_string_equal(j->gpus, "0,1");
    assert_int_equal(j->nargs, 2);
    assert_string_equal(j->args[1], "configs/tiny.ini");
    assert_string_equal(j->preflight_args[0], "selftest");
    assert_int_equal(j->master_port, 29500);
    assert_true(j->grace_s == 120);
    /* policy: own keys win, [policy] fills the rest, defaults after that */
    assert_true(j->policy.healthy_deadline_s == 45);
    assert_true(j->policy.tolerance == 0.1);
    assert_int_equal(j->policy.warmup_steps, 20);
    assert_true(j->policy.min_healthy_time_s == 60);
    assert_false(j->policy.auto_revert);
    assert_true(j->policy.progress_deadline_s == 600);
    /* the statistical verdict's keys: from [policy], else built in */
    assert_true(j->policy.on_inconclusive_hold);
    assert_true(j->policy.max_probation_time_s == 120);
    assert_true(j->policy.confidence == 0.95);
    assert_true(j->policy.warmup_max_s == 300);
    assert_true(j->policy.warmup_time_s == 0);
    assert_true(j->policy.hold_time_s == 3600);
    assert_true(j->policy.switch_deadline_s == 0); /* 0: the job's grace + 60 s */
    assert_true(j->policy.lease_ttl_s == 300);
    const struct inv_job *g = inventory_find_job(inv, "gpu");
    assert_int_equal(g->cts[0].vmid, -1);
    assert_string_equal(g->cts[0].root, "/var/lib/drover-gpu0");
    assert_true(g->policy.auto_revert);
    assert_true(g->policy.healthy_deadline_s == 45);
    char key[256];
    inventory_job_key(j, key, sizeof key);
    assert_string_equal(key, "train@h1:101,h1:102,h2:201");
    inventory_free(inv);
    inventory_free(NULL);
}

/* [drover] keep: how many newest releases GC keeps (controller cache, host stores, container
 * stores) besides every job's current, previous and good releases; 5 unless set. */
static void test_gc_keep(void **state)
{
    (void)state;
    struct inventory *inv = parse_ok("[host h]\naddress = a\n");
    assert_int_equal(inv->keep, 5);
    inventory_free(inv);
    inv = parse_ok("[drover]\nkeep = 2\n[host h]\naddress = a\n");
    assert_int_equal(inv->keep, 2);
    inventory_free(inv);
    /* the bound drover gc --keep shares (it took up to 999999): 1..10000 here, 0..10000 there */
    parse_fails("[drover]\nkeep = 10001\n", "inv.ini:2:", "is not a count 1..10000 (drover gc --keep N takes 0 too");
    inv = parse_ok("[drover]\nkeep = 10000\n[host h]\naddress = a\n");
    assert_int_equal(inv->keep, INV_KEEP_MAX);
    inventory_free(inv);
}

/* A mistyped key names the key it is near, and a key in the wrong section the section it goes
 * in (the newcomer pass: "containres: unknown key (see docs/config.md)", while a mistyped
 * option on the command line already got "did you mean") */
static void test_unknown_key_suggests(void **state)
{
    (void)state;
    parse_fails("[host h]\naddress = a\n[job j]\ncontainres = h:101\ncommand = x\n", "inv.ini:4:",
                "[job j] containres: unknown key: did you mean containers?");
    parse_fails("[host h]\naddress = a\n[job j]\ncontainers = h:101\ncomand = x\n", "inv.ini:5:",
                "did you mean command?");
    parse_fails("[host h]\naddress = a\n[job j]\ncontainers = h:101\ncommand = x\nhealthy_deadlin = 5\n",
                "inv.ini:6:", "did you mean healthy_deadline?");
    parse_fails("[host h]\nadress = a\n", "inv.ini:2:", "[host h] adress: unknown key: did you mean address?");
    parse_fails("[policy]\nsilense_deadline = 5s\n", "inv.ini:2:", "did you mean silence_deadline?");
    parse_fails("[drover]\nstate_dri = /x\n", "inv.ini:2:", "did you mean state_dir?");
    /* in the wrong section */
    parse_fails("[policy]\ngrace = 5s\n", "inv.ini:2:", "[policy] grace: not a key of this section: it goes in [job NAME]");
    parse_fails("[drover]\nhealthy_deadline = 5s\n", "inv.ini:2:", "it goes in [policy] or [job NAME]");
    parse_fails("[host h]\naddress = a\n[job j]\ncontainers = h:101\ncommand = x\nstate_dir = /x\n",
                "inv.ini:6:", "it goes in [drover]");
    /* nothing near: as before */
    parse_fails("[drover]\nstate_dir = /x\nbogus = 1\n", "inv.ini:3:", "[drover] bogus: unknown key (see docs/config.md)");
}

static void test_errors_name_line_and_key(void **state)
{
    (void)state;
    parse_fails("[drover]\nstate_dir = /x\nbogus = 1\n", "inv.ini:3:", "[drover] bogus: unknown key");
    parse_fails("[host h1]\naddress = a\nport = 70000\n", "inv.ini:3:", "[host h1] port");
    parse_fails("[job j]\ncontainers = h9:101\ncommand = x\n", "inv.ini:2:", "no [host h9]");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:99\ncommand = x\n", "inv.ini:4:",
                "vmid '99'");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:1x1\ncommand = x\n", "inv.ini:4:",
                "not a number");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101 h:101\ncommand = x\n",
                "listed twice", NULL);
    /* a deadline under a second ("1ms" for "1m"): a deploy failed at once and marked its release
     * bad, or the agent judged every rank hung */
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\n"
                "healthy_deadline = 1ms\n", "[job j] healthy_deadline: '1ms' is under a second: give "
                "at least 1s (like 30s, 5m)", NULL);
    parse_fails("[policy]\nsilence_deadline = 500ms\n", "'500ms' is under a second: give at least 1s "
                "(like 30s, 5m), or 0 to turn it off", NULL);
    parse_fails("[policy]\nhold_time = 0.2\n", "is under a second", NULL);
    /* two ranks on one GPU */
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\nnproc_per_node = 2\n"
                "gpus = 0,0\n", "inv.ini:7: [job j] gpus: '0,0' names GPU 0 twice", NULL);
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\nnproc_per_node = 3\n"
                "gpus = 1,10,10\n", "inv.ini:7:", "names GPU 10 twice");
    /* one machine under two [host] names (a copied section): the same container twice; a
     * deploy found it running "with another job spec", validate said nothing */
    parse_fails("[host h1]\naddress = 10.0.0.2\n[host h1b]\naddress = 10.0.0.2\n"
                "[job j]\ncontainers = h1:102 h1b:102\ncommand = x\n",
                "'h1:102' and 'h1b:102' are one container: hosts 'h1' and 'h1b' have the same "
                "address 10.0.0.2 and port 22 (one machine under two names?)", NULL);
    parse_fails("[host h1]\naddress = 10.0.0.2\nport = 2222\n[host h1b]\naddress = 10.0.0.2\nport = 2222\n"
                "[job j]\ncontainers = h1:102 h1b:102\ncommand = x\n", "address 10.0.0.2 and port 2222", NULL);
    /* another port, or another vmid: other containers, fine */
    struct inventory *ok = NULL;
    char perr[512];
    const char *two = "[host h1]\naddress = 10.0.0.2\n[host h1b]\naddress = 10.0.0.2\nport = 2222\n"
                      "[job j]\ncontainers = h1:102 h1b:102 h1:103\ncommand = x\n";
    assert_int_equal(inventory_parse(two, strlen(two), "inv.ini", &ok, perr, sizeof perr), 0);
    inventory_free(ok);
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\n", "[job j]: command is missing",
                NULL);
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\ngrace = soon\n",
                "inv.ini:6:", "[job j] grace");
    parse_fails("[policy]\ntolerance = 1.5\n", "inv.ini:2:", "tolerance");
    parse_fails("[drover]\nkeep = 0\n", "inv.ini:2:", "[drover] keep");       /* GC keeps >= 1 */
    parse_fails("[drover]\nkeep = many\n", "inv.ini:2:", "[drover] keep");
    parse_fails("[policy]\nauto_revert = maybe\n", "inv.ini:2:", "auto_revert");
    parse_fails("[policy]\non_inconclusive = pause\n", "inv.ini:2:", "is not revert or hold");
    parse_fails("[policy]\nconfidence = 0.4\n", "inv.ini:2:", "confidence");
    parse_fails("[policy]\nconfidence = 1\n", "inv.ini:2:", "confidence");
    parse_fails("[policy]\nmax_probation_time = 0\n", "inv.ini:2:", "max_probation_time");
    parse_fails("[policy]\nwarmup_max = soon\n", "inv.ini:2:", "warmup_max");
    parse_fails("[policy]\nhold_time = 0s\n", "inv.ini:2:", "hold_time");
    parse_fails("[policy]\nswitch_deadline = soon\n", "inv.ini:2:", "switch_deadline");
    parse_fails("[policy]\nlease_ttl = 5s\n", "inv.ini:2:", "lease_ttl");
    /* past 30 days: said as too large, not as "must be a duration greater than 0" */
    parse_fails("[policy]\nhealthy_deadline = 99999999999h\n", "inv.ini:2:",
                "'99999999999h' is too large (at most 720h (30 days))");
    parse_fails("[drover]\nexec_timeout = 800h\n", "inv.ini:2:", "is too large (at most 720h (30 days))");
    parse_fails("[policy]\nlease_ttl = 800h\n", "inv.ini:2:", "from 10s to 168h (7 days)"); /* its own bound */
    /* a bounded duration shows how one is written: "grace = 2 minutes" read as if the bound
     * were the problem ("is not a duration from 1s to 1h") */
    parse_fails("[job j]\ngrace = 2 minutes\n", "inv.ini:2:",
                "'2 minutes' is not a duration: give a number with a unit of ms, s, m or h");
    parse_fails("[job j]\ngrace = 2h\n", "inv.ini:2:", "'2h' must be a duration from 1s to 1h (like 2m, 90s)");
    parse_fails("[drover]\nexec_timeout = soon\n", "inv.ini:2:", "(like 30s, 5m, 1h, 250ms)");
    parse_fails("[host h]\naddress=a\n[host h]\n", "inv.ini:3:", "host 'h' defined twice (first at line 1): merge");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers=h:101\ncommand=x\n[job j]\n", "inv.ini:6:",
                "job 'j' defined twice (first at line 3): merge");
    parse_fails("[weird]\nx = 1\n", "inv.ini:1:", "unknown section [weird]");
    parse_fails("[host bad/name]\n", "not a valid name", NULL); /* no key: libinih syntax or ours */
    parse_fails("[job ..]\n", "inv.ini:1:", "cannot start with '.'"); /* the agent refuses it */
    /* "-x" reads as an option where the agent takes the job as an argument (history add JOB) */
    parse_fails("[job -x]\n", "inv.ini:1:", "cannot start with '-'");
    parse_fails("[job --help]\n", "inv.ini:1:", "cannot start with '-'");
    /* what the agent would refuse at activate: gpus not one per rank, grace over 1h */
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\nnproc_per_node = 2\n"
                "gpus = 0\n", "inv.ini:7: [job j] gpus", "nproc_per_node = 2"); /* the key's line, not [job j]'s */
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\ngpus = 0,,1\n",
                "inv.ini:6: [job j] gpus", NULL);
    /* gpus before the keys it is checked against, and a second job: still its own line */
    parse_fails("[host h]\naddress=a\n[job i]\ncontainers = h:101\ncommand = x\n[job j]\ngpus = 0,1\n"
                "containers = h:102\ncommand = x\nnproc_per_node = 3\n", "inv.ini:7: [job j] gpus", NULL);
    /* the example fits nproc_per_node: "like 0,1" for one rank was the very value refused */
    {
        static const struct {
            const char *text, *tail;
        } like[] = {
            { "[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\ngpus = 0,1\n",
              "(nproc_per_node = 1), like 0" },
            { "[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\nnproc_per_node = 3\ngpus = 0\n",
              "(nproc_per_node = 3), like 0,1,2" },
        };
        for (size_t i = 0; i < sizeof like / sizeof like[0]; i++) {
            struct inventory *inv = NULL;
            char err[INV_ERR_MAX] = "";
            assert_int_equal(inventory_parse(like[i].text, strlen(like[i].text), "inv.ini", &inv, err, sizeof err),
                             -EINVAL);
            size_t n = strlen(err), t = strlen(like[i].tail);
            if (n < t || strcmp(err + n - t, like[i].tail) != 0)
                fprintf(stderr, "message: '%s' (want it to end in '%s')\n", err, like[i].tail);
            assert_true(n >= t && strcmp(err + n - t, like[i].tail) == 0);
        }
    }
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\ngrace = 2h\n",
                "inv.ini:6:", "1s to 1h");
    parse_fails("x = 1\n", "inv.ini:1:", "outside any section");
    /* "[host h1" without ']': its own line, not the next key's (newcomer pass) */
    parse_fails("[drover]\n\n[host h1\naddress = 10.0.0.1\n", "inv.ini:3:", "syntax error");
    parse_fails("[drover]\nthis line has no equals sign\n", "inv.ini:2:", "syntax error");
    /* libinih reads ':' as '=' and drops text after ']': both refused, saying what to write */
    parse_fails("[host h1]\naddress: 10.0.0.1\n", "inv.ini:2:", "write key = value");
    parse_fails("[host h1] rack 4\naddress = 10.0.0.1\n", "inv.ini:1:", "text after the section's ']'");
    parse_fails("[host h]\n", "[host h]: no address", NULL);
    parse_fails("[host h]\naddress = a b\n", "inv.ini:2:", "[host h] address");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:local:relative\ncommand = x\n",
                "inv.ini:4:", "absolute path");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = ../escape\n",
                "inv.ini:5:", "[job j] command");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\ngpus = 0;1\n",
                "inv.ini:6:", "gpus");
    parse_fails("[host h]\naddress=a\nport = 22\nport = 23\n", "inv.ini:4:", "set twice");
    parse_fails("[policy]\ntolerance = 0.1\ntolerance = 0.2\n", "inv.ini:3:", "set twice");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\ntolerance = 0.1\n"
                "tolerance = 0.3\n", "inv.ini:7:", "set twice");
    parse_fails("[drover]\nstate_dir = /a\n[drover]\n", "inv.ini:3:", "appears twice");
    parse_fails("[policy]\n[policy]\n", "inv.ini:2:", "appears twice");
    /* a value JSON cannot carry is refused with its key (issue 12: a Latin-1 arg was dropped
     * on the way to the worker and the deploy still promoted) */
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\narg = ok\n"
                "arg = caf\xe9\n", "inv.ini:7: [job j] arg", "not valid UTF-8");
    parse_fails("[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\n"
                "preflight = \xff\n", "[job j] preflight", "not valid UTF-8");
    inventory_free(parse_ok("[host h]\naddress = a\n[job j]\ncontainers = h:101\n"
                            "command = x\narg = Grüße\n"));
    /* a UTF-8 BOM before the first section (Windows editors) is skipped, as libinih does */
    inventory_free(parse_ok("\xEF\xBB\xBF[host h]\naddress = a\n[job j]\ncontainers = h:101\n"
                            "command = x\n"));
}

/* issue 9: env = NAME=VALUE (the agent's allow-list, checked here with the key's line),
 * preflight_timeout, and the liveness deadlines ([policy] inherited, a job's own win). */
static void test_env_preflight_timeout_liveness(void **state)
{
    (void)state;
    const char *base = "[host h]\naddress=a\n[job j]\ncontainers = h:101\ncommand = x\n";
    char text[1024];
    snprintf(text, sizeof text, "[policy]\nsilence_deadline = 90s\nstall_deadline = 0\n%s"
             "env = NCCL_DEBUG=INFO\nenv = DROVER_TRAIN_FAULT=hang_at=5\nenv = PYTHONPATH=/opt/x:/opt/y\n"
             "preflight_timeout = 10m\ncheckpoint_deadline = 20m\n", base);
    struct inventory *inv = parse_ok(text);
    const struct inv_job *j = inventory_find_job(inv, "j");
    assert_int_equal(j->nenv, 3);
    assert_string_equal(j->env[0], "NCCL_DEBUG=INFO");
    assert_string_equal(j->env[2], "PYTHONPATH=/opt/x:/opt/y");
    assert_true(j->preflight_timeout_s == 600);
    assert_true(j->gpu_mem_gib == 0); /* not set: gpu-check does not look at memory */
    assert_string_equal(j->cuda, "");
    assert_true(j->policy.silence_deadline_s == 90);   /* [policy] */
    assert_true(j->policy.stall_deadline_s == 0);      /* off */
    assert_true(j->policy.checkpoint_deadline_s == 1200); /* the job's own */
    assert_true(j->policy.first_step_deadline_s == 600);  /* built-in */
    inventory_free(inv);
    /* the GPU environment preflight's keys */
    snprintf(text, sizeof text, "%sgpus = 0\ngpu_mem = 40\ncuda = 12.8\n", base);
    inv = parse_ok(text);
    j = inventory_find_job(inv, "j");
    assert_true(j->gpu_mem_gib == 40);
    assert_string_equal(j->cuda, "12.8");
    inventory_free(inv);
    static const struct {
        const char *line, *n1, *n2;
    } bad[] = {
        {"env = RANK=3\n", "inv.ini:6: [job j] env", "RANK is set by the agent"},
        {"env = DROVER_HEARTBEAT_FD=9\n", "inv.ini:6: [job j] env", "DROVER_HEARTBEAT_FD is set by the agent"},
        {"env = CUDA_VISIBLE_DEVICES=0\n", "[job j] env", "CUDA_VISIBLE_DEVICES"},
        {"env = NOEQUALS\n", "[job j] env", "not NAME=VALUE"},
        {"env = 1X=2\n", "[job j] env", "not a variable name"},
        {"env = NCCL_A=1\nenv = NCCL_A=2\n", "inv.ini:7: [job j] env", "NCCL_A is set twice"},
        /* issue 12: an allow-list; a loader hook is refused with its name */
        {"env = LD_PRELOAD=/tmp/evil.so\n", "inv.ini:6: [job j] env", "LD_PRELOAD is not allowed"},
        {"env = FOO=1\n", "inv.ini:6: [job j] env", "allow-list"},
        {"preflight_timeout = 0\n", "inv.ini:6: [job j] preflight_timeout", "1s to 24h"},
        {"gpu_mem = lots\n", "inv.ini:6: [job j] gpu_mem", "size in GiB"},
        {"gpu_mem = 0\n", "inv.ini:6: [job j] gpu_mem", "size in GiB"},
        {"silence_deadline = soon\n", "inv.ini:6: [job j] silence_deadline", "not a duration"},
        /* '0' was "not a duration (like 30s, ...)": it is one, it must be greater than 0; one
         * rule and one message for every duration that must be */
        {"healthy_deadline = 0\n", "inv.ini:6: [job j] healthy_deadline", "'0' must be a duration greater than 0"},
        {"progress_deadline = 0s\n", "inv.ini:6: [job j] progress_deadline", "'0s' must be a duration greater than 0"},
        {"max_probation_time = 0\n", "inv.ini:6: [job j] max_probation_time", "must be a duration greater than 0"},
        {"hold_time = 0m\n", "inv.ini:6: [job j] hold_time", "must be a duration greater than 0"},
        /* ...but a value that is no duration says that, with the units ('1d' was told it
         * "must be a duration greater than 0", as if it were one and too short) */
        {"healthy_deadline = soon\n", "inv.ini:6: [job j] healthy_deadline", "'soon' is not a duration: give a number with a unit of ms, s, m or h"},
        {"gpu_mem = 0\n", "inv.ini:6: [job j] gpu_mem", "'0' must be a size in GiB greater than 0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        snprintf(text, sizeof text, "%s%s", base, bad[i].line);
        parse_fails(text, bad[i].n1, bad[i].n2);
    }
}

static void test_long_line_is_an_error(void **state)
{
    (void)state;
    char text[1024];
    char val[400];
    memset(val, 'a', sizeof val - 1);
    val[sizeof val - 1] = '\0';
    snprintf(text, sizeof text, "[host h]\naddress = a\n[job j]\ncontainers = h:101\ncommand = x\n"
                                "arg = %s\n", val);
    parse_fails(text, "inv.ini:6:", "longer than");
    /* 196 content bytes are fine, 197 are not */
    char line[200];
    memset(line, 'b', sizeof line);
    memcpy(line, "arg = ", 6);
    line[196] = '\0';
    snprintf(text, sizeof text, "[host h]\naddress = a\n[job j]\ncontainers = h:101\ncommand = x\n%s\n",
             line);
    struct inventory *inv = parse_ok(text);
    assert_int_equal(strlen(inv->jobs[0].args[0]), 190);
    inventory_free(inv);
    line[196] = 'b';
    line[197] = '\0';
    snprintf(text, sizeof text, "[host h]\naddress = a\n[job j]\ncontainers = h:101\ncommand = x\n%s\n",
             line);
    parse_fails(text, "inv.ini:6:", "longer than");
}

static void test_nul_byte_and_limits(void **state)
{
    (void)state;
    const char text[] = "[host h]\naddress = a\0b\n";
    struct inventory *inv = NULL;
    char err[INV_ERR_MAX];
    assert_int_equal(inventory_parse(text, sizeof text - 1, "inv.ini", &inv, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "inv.ini:2:"));
    /* too many args */
    char big[8192];
    size_t off = (size_t)snprintf(big, sizeof big, "[host h]\naddress=a\n[job j]\ncontainers = h:101\n"
                                                   "command = x\n");
    for (int i = 0; i < INV_MAX_ARGS + 1; i++)
        off += (size_t)snprintf(big + off, sizeof big - off, "arg = %d\n", i);
    parse_fails(big, "more than", "arg");
}

static void test_durations(void **state)
{
    (void)state;
    double s = -1;
    assert_int_equal(inventory_parse_duration("30s", &s), 0);
    assert_true(s == 30);
    assert_int_equal(inventory_parse_duration("5m", &s), 0);
    assert_true(s == 300);
    assert_int_equal(inventory_parse_duration("1.5m", &s), 0);
    assert_true(s == 90);
    assert_int_equal(inventory_parse_duration("2h", &s), 0);
    assert_true(s == 7200);
    assert_int_equal(inventory_parse_duration("45", &s), 0);
    assert_true(s == 45);
    assert_int_equal(inventory_parse_duration("250ms", &s), 0);
    assert_true(s == 0.25);
    assert_int_equal(inventory_parse_duration("0", &s), 0);
    assert_true(s == 0);
    s = 7;
    const char *bad[] = { "", "-5s", "5x", "s", "5 s", "nan", "inf", "31d", "5m3s", NULL };
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(inventory_parse_duration(bad[i], &s), -EINVAL);
        assert_true(s == 7); /* untouched */
    }
    const char *large[] = { "99999999999", "800h", NULL }; /* past 30 days: too large, not malformed */
    for (int i = 0; large[i]; i++) {
        assert_int_equal(inventory_parse_duration(large[i], &s), -ERANGE);
        assert_true(s == 7);
    }
    assert_int_equal(inventory_parse_duration(NULL, &s), -EINVAL);
    bool b = false;
    assert_int_equal(inventory_parse_bool("Yes", &b), 0);
    assert_true(b);
    assert_int_equal(inventory_parse_bool("off", &b), 0);
    assert_false(b);
    assert_int_equal(inventory_parse_bool("2", &b), -EINVAL);
}

static void test_parse_ct(void **state)
{
    (void)state;
    struct inventory *inv = parse_ok(good_ini);
    struct inv_ct ct;
    char err[256];
    assert_int_equal(inventory_parse_ct(inv, "h1:105", &ct, err, sizeof err), 0);
    assert_int_equal(ct.vmid, 105);
    assert_int_equal(inventory_parse_ct(inv, "h2:local:/srv/a", &ct, err, sizeof err), 0);
    assert_string_equal(ct.root, "/srv/a");
    ct.vmid = 4242;
    const char *bad[] = { "h1", ":101", "h1:", "h1:abc", "h1:0101", "h1:1000000000", "nope:101",
                          "h1:local:", "h1:local:/a/../b", "h1:-101", "h1:101;reboot", NULL };
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(inventory_parse_ct(inv, bad[i], &ct, err, sizeof err), -EINVAL);
        assert_int_equal(ct.vmid, 4242);
    }
    inventory_free(inv);
}

static void test_load_missing_file(void **state)
{
    (void)state;
    struct inventory *inv = NULL;
    char err[INV_ERR_MAX];
    assert_int_equal(inventory_load("/nonexistent/drover.ini", &inv, err, sizeof err), -ENOENT);
    assert_null(inv);
    assert_non_null(strstr(err, "/nonexistent/drover.ini"));
}

/* `drover -i DIR` said only "DIR: cannot read inventory: Is a directory": name the path and
 * say that the inventory file is wanted, with or without a trailing slash */
static void test_load_directory(void **state)
{
    (void)state;
    char dir[64] = "/tmp/drover-inv-dir.XXXXXX", slash[80], want[200];
    assert_non_null(mkdtemp(dir));
    struct inventory *inv = NULL;
    char err[INV_ERR_MAX];
    snprintf(want, sizeof want, "inventory '%s' is a directory: give the inventory file, e.g. %s/drover.ini",
             dir, dir);
    assert_int_equal(inventory_load(dir, &inv, err, sizeof err), -EISDIR);
    assert_null(inv);
    assert_non_null(strstr(err, want));
    snprintf(slash, sizeof slash, "%s/", dir);
    assert_int_equal(inventory_load(slash, &inv, err, sizeof err), -EISDIR);
    assert_null(inv);
    assert_non_null(strstr(err, "/' is a directory: give the inventory file"));
    snprintf(want, sizeof want, "e.g. %s/drover.ini", dir); /* no "//" */
    assert_non_null(strstr(err, want));
    assert_int_equal(rmdir(dir), 0);
}

/* Two jobs whose gangs share a container share its network namespace: with the same
 * MASTER_PORT (29500 when neither sets master_port) the second gang's rank 0 cannot bind it
 * (EADDRINUSE) and its other ranks may join the first job's rendezvous.  Refused at parse. */
static void test_shared_container_port_gpu(void **state)
{
    (void)state;
    const char *hosts = "[host h1]\naddress = a\n";
    char text[1024];
    snprintf(text, sizeof text, "%s[job a]\ncontainers = h1:101\ncommand = x\n"
             "[job b]\ncontainers = h1:102 h1:101\ncommand = x\n", hosts);
    parse_fails(text, "inv.ini:6: [job b] master_port:",
                "jobs 'a' and 'b' share container h1:101 and both use port 29500 (the agent's "
                "default)");
    snprintf(text, sizeof text, "%s[job a]\ncontainers = h1:101\ncommand = x\nmaster_port = 24000\n"
             "[job b]\ncontainers = h1:101\ncommand = x\nmaster_port = 24000\n", hosts);
    parse_fails(text, "[job b] master_port:", "share container h1:101 and both use port 24000");
    /* distinct ports, or no container in common: fine */
    snprintf(text, sizeof text, "%s[job a]\ncontainers = h1:101\ncommand = x\n"
             "[job b]\ncontainers = h1:101\ncommand = x\nmaster_port = 29501\n", hosts);
    inventory_free(parse_ok(text));
    snprintf(text, sizeof text, "%s[job a]\ncontainers = h1:101\ncommand = x\n"
             "[job b]\ncontainers = h1:102\ncommand = x\n", hosts);
    inventory_free(parse_ok(text));
    /* local roots (vmid -1) are containers of their own root: two roots are two (the verdict
     * bench's jobs, each in its own root on one local host, were refused as sharing one) */
    snprintf(text, sizeof text, "[host me]\nlocal = true\n[job a]\ncontainers = me:local:/r/n0\n"
             "command = x\n[job b]\ncontainers = me:local:/r/n2\ncommand = x\n");
    inventory_free(parse_ok(text));
    snprintf(text, sizeof text, "[host me]\nlocal = true\n[job a]\ncontainers = me:local:/r/n0\n"
             "command = x\n[job b]\ncontainers = me:local:/r/n0\ncommand = x\n");
    parse_fails(text, "[job b] master_port:", "share container me:local:/r/n0");
    /* nor a GPU: both jobs' ranks would run on it (nothing said it; each ran at half its speed) */
    snprintf(text, sizeof text, "%s[job a]\ncontainers = h1:101\ncommand = x\nnproc_per_node = 2\n"
             "gpus = 0,1\n[job b]\ncontainers = h1:101\ncommand = x\nmaster_port = 29501\n"
             "nproc_per_node = 2\ngpus = 2,1\n", hosts);
    parse_fails(text, "inv.ini:13: [job b] gpus:",
                "jobs 'a' and 'b' share container h1:101 and both use GPU 1: each would hold a "
                "model on it; give the jobs GPUs of their own");
    /* the same GPU in two containers, or other GPUs in one: fine */
    snprintf(text, sizeof text, "%s[job a]\ncontainers = h1:101\ncommand = x\ngpus = 10\n"
             "[job b]\ncontainers = h1:102\ncommand = x\ngpus = 10\n"
             "[job c]\ncontainers = h1:101\ncommand = x\nmaster_port = 29502\ngpus = 1\n", hosts);
    inventory_free(parse_ok(text));
}

/* docs/config.md's comment rule on a whole inventory: a ` ;` comment after a section or a value
 * is dropped, a `;` with no blank before it and a `#` after a value are part of the value. */
static void test_inline_comments(void **state)
{
    (void)state;
    struct inventory *inv = parse_ok("# the lab\n"
                                     "[host h1] ; the first host\n"
                                     "address = 127.0.0.2  ; loopback\n"
                                     "[job train]\n"
                                     "  ; an indented comment line\n"
                                     "containers = h1:101 ; one for now\n"
                                     "command = bin/t\t; a tab, then the comment\n"
                                     "arg = --lr=0.1 ; learning rate\n"
                                     "arg = a;b\n"
                                     "arg = x # y\n"
                                     "env = NCCL_DEBUG=INFO ; why\n");
    assert_string_equal(inv->hosts[0].address, "127.0.0.2");
    const struct inv_job *j = &inv->jobs[0];
    assert_int_equal(j->ncts, 1);
    assert_string_equal(j->command, "bin/t");
    assert_int_equal(j->nargs, 3);
    assert_string_equal(j->args[0], "--lr=0.1");
    assert_string_equal(j->args[1], "a;b");
    assert_string_equal(j->args[2], "x # y");
    assert_int_equal(j->nenv, 1);
    assert_string_equal(j->env[0], "NCCL_DEBUG=INFO");
    inventory_free(inv);
    /* no blank before ';': the value keeps it, and a duration refuses it, naming it */
    parse_fails("[host h1]\naddress = 127.0.0.2\n[job train]\ncontainers = h1:101\ncommand = bin/t\n"
                "grace = 5s;no\n", "inv.ini:6:", "'5s;no'");
}

/* A job whose first_step_deadline was raised (torch.compile is slow) under the default
 * healthy_deadline: every deploy failed at 60 s, "no heartbeat ... within healthy_deadline 60s",
 * with nothing said before.  Warned, naming both keys, values, sections and what to write; not
 * when both are set in one section (t-21's fresh2: 12 s and 5 m on purpose), nor for the
 * built-in pair (60 s and 10 m). */
static void test_deadline_warning(void **state)
{
    (void)state;
    char w[1200];
    static const char hosts[] = "[host h1]\naddress = a\n";
    char text[1024];
    /* the report: first_step_deadline = 15m in the job, healthy_deadline left at 60 s */
    snprintf(text, sizeof text, "%s[job drafter]\ncontainers = h1:101\ncommand = ./launch.sh\n"
             "first_step_deadline = 15m\n", hosts);
    struct inventory *inv = parse_ok(text);
    const char *m = inventory_deadline_warning(&inv->jobs[0], w, sizeof w);
    assert_non_null(m);
    assert_string_equal(m, "[job drafter]: healthy_deadline is 60s (the default) but first_step_deadline is 15m "
                           "(in [job drafter]): a deploy fails at 60s when the first step takes longer (\"no "
                           "heartbeat ... within healthy_deadline 60s\"), whatever first_step_deadline allows; "
                           "for a slow first step (torch.compile) write `healthy_deadline = 15m` in [job drafter], "
                           "with `max_probation_time = 20m` and `progress_deadline = 25m` (now 5m and 10m: the "
                           "probation ends at the first of them, with no first step)");
    inventory_free(inv);
    /* [policy] healthy_deadline under a job's own first_step_deadline; probation limits long enough */
    snprintf(text, sizeof text, "[policy]\nhealthy_deadline = 90s\nmax_probation_time = 1h\nprogress_deadline = 2h\n"
             "%s[job a]\ncontainers = h1:101\ncommand = bin/t\nfirst_step_deadline = 3m\n", hosts);
    inv = parse_ok(text);
    m = inventory_deadline_warning(&inv->jobs[0], w, sizeof w);
    assert_non_null(m);
    assert_non_null(strstr(m, "healthy_deadline is 90s (from [policy]) but first_step_deadline is 3m (in [job a])"));
    assert_non_null(strstr(m, "write `healthy_deadline = 3m` in [job a]"));
    assert_null(strstr(m, "max_probation_time"));
    inventory_free(inv);
    /* [policy] first_step_deadline, healthy_deadline the default: every job, in [policy] */
    snprintf(text, sizeof text, "[policy]\nfirst_step_deadline = 20m\nmax_probation_time = 1h\n"
             "%s[job a]\ncontainers = h1:101\ncommand = bin/t\n", hosts);
    inv = parse_ok(text);
    m = inventory_deadline_warning(&inv->jobs[0], w, sizeof w);
    assert_non_null(m);
    assert_non_null(strstr(m, "write `healthy_deadline = 20m` in [policy], with `progress_deadline = 30m` (now 10m"));
    inventory_free(inv);
    /* nothing to say: both in one section (t-21), the built-in pair, a long enough
     * healthy_deadline, first_step_deadline off, a job's healthy_deadline under a [policy] one */
    static const char *const quiet[] = {
        "[job a]\ncontainers = h1:101\ncommand = bin/t\nhealthy_deadline = 12\nfirst_step_deadline = 5m\n",
        "[job a]\ncontainers = h1:101\ncommand = bin/t\n",
        "[job a]\ncontainers = h1:101\ncommand = bin/t\nfirst_step_deadline = 45s\n",
        "[job a]\ncontainers = h1:101\ncommand = bin/t\nfirst_step_deadline = 0\n",
        "[policy]\nfirst_step_deadline = 5m\n[job a]\ncontainers = h1:101\ncommand = bin/t\nhealthy_deadline = 30s\n",
        "[policy]\nfirst_step_deadline = 5m\nhealthy_deadline = 30s\n[job a]\ncontainers = h1:101\ncommand = bin/t\n",
    };
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++) {
        snprintf(text, sizeof text, "%s%s", hosts, quiet[i]);
        if (quiet[i][1] == 'p') /* [policy] first */
            snprintf(text, sizeof text, "%.*s%s%s", (int)(strstr(quiet[i], "[job") - quiet[i]), quiet[i], hosts,
                     strstr(quiet[i], "[job"));
        inv = parse_ok(text);
        if ((m = inventory_deadline_warning(&inv->jobs[0], w, sizeof w)))
            fail_msg("case %zu: %s", i, m);
        inventory_free(inv);
    }
    assert_string_equal(inventory_duration_str(60, w, sizeof w), "60s");
    assert_string_equal(inventory_duration_str(900, w, sizeof w), "15m");
    assert_string_equal(inventory_duration_str(7200, w, sizeof w), "2h");
    assert_string_equal(inventory_duration_str(90, w, sizeof w), "90s");
    assert_string_equal(inventory_duration_str(120, w, sizeof w), "2m");
    assert_string_equal(inventory_duration_str(2.5, w, sizeof w), "2.5s");
}

/* min_healthy_time at or past the probation's end (max_probation_time, at most
 * progress_deadline, from activation): no deploy could ever be judged, each ended "no data" and
 * reverted.  deploy/drover.ini.example set min_healthy_time = 5m under the default
 * max_probation_time 5m.  Refused at load, naming both keys and what to write. */
static void test_min_healthy_time_fits_probation(void **state)
{
    (void)state;
    const char *job = "[host h]\naddress = a\n[job j]\ncontainers = h:101\ncommand = x\n";
    char text[512];
    snprintf(text, sizeof text, "[policy]\nmin_healthy_time = 5m\n%s", job);
    parse_fails(text, "[job j]: min_healthy_time 5m is not shorter than max_probation_time 5m",
                "write `max_probation_time = 10m` (min_healthy_time plus warmup_max)");
    /* the job's own key, and progress_deadline as the end when it comes first */
    snprintf(text, sizeof text, "[policy]\nmax_probation_time = 1h\n%smin_healthy_time = 10m\n", job);
    parse_fails(text, "min_healthy_time 10m is not shorter than progress_deadline 10m",
                "`max_probation_time = 15m` and `progress_deadline = 15m` (now 10m)");
    /* shorter: fine (the lab's, the example's after the fix) */
    snprintf(text, sizeof text, "[policy]\nmin_healthy_time = 5m\nmax_probation_time = 15m\n"
                                "progress_deadline = 20m\n%s", job);
    inventory_free(parse_ok(text));
    /* the example a newcomer copies loads (the tests run from the repository root) */
    struct inventory *ex = NULL;
    char err[INV_ERR_MAX] = "";
    int r = inventory_load("deploy/drover.ini.example", &ex, err, sizeof err);
    if (r < 0)
        fprintf(stderr, "deploy/drover.ini.example: %s\n", err);
    assert_int_equal(r, 0);
    inventory_free(ex);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_inventory),
        cmocka_unit_test(test_duration_not_a_duration),
        cmocka_unit_test(test_indented_line),
        cmocka_unit_test(test_errors_name_line_and_key),
        cmocka_unit_test(test_unknown_key_suggests),
        cmocka_unit_test(test_gc_keep),
        cmocka_unit_test(test_env_preflight_timeout_liveness),
        cmocka_unit_test(test_long_line_is_an_error),
        cmocka_unit_test(test_nul_byte_and_limits),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_parse_ct),
        cmocka_unit_test(test_load_missing_file),
        cmocka_unit_test(test_load_directory),
        cmocka_unit_test(test_shared_container_port_gpu),
        cmocka_unit_test(test_inline_comments),
        cmocka_unit_test(test_deadline_warning),
        cmocka_unit_test(test_min_healthy_time_fits_probation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
