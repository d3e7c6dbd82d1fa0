/* Unit tests for common/agentcli.c, the agent's command line: every builder's argv is parsed
 * back with the getopt table the agent parses with (an option the agent does not know, or one
 * missing its value, fails here instead of in the lab), overflow is reported, and the verbs,
 * options and exit codes all appear in the docs (docs/protocol.md, docs/errors.md). */
#include <errno.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/agentcli.h"
#include "common/util.h"

struct parsed {
    int verb;
    int nopts;
    int opt[32];
    const char *val[32];
    int npos;
    const char *pos[16]; /* positionals after the verb, before "--" */
    int ncmd;
    const char *cmd[16]; /* after "--" */
};

/* Parse like agent/main.c: argv[0] is the verb, options from agent_cli_longopts, "--" ends them. */
static void parse(const struct agent_argv *a, struct parsed *p)
{
    memset(p, 0, sizeof *p);
    assert_int_equal(agent_argv_end(a), 0);
    assert_true(a->argc >= 1);
    assert_null(a->argv[a->argc]);
    p->verb = agent_verb_parse(a->argv[0]);
    assert_true(p->verb >= 0);
    char *v[AGENT_ARGV_MAX + 1];
    int end = a->argc;
    for (int i = 0; i < a->argc; i++) {
        v[i] = (char *)a->argv[i];
        if (strcmp(v[i], "--") == 0 && end == a->argc)
            end = i;
    }
    v[a->argc] = NULL;
    optind = 0;
    opterr = 0;
    int c;
    /* GNU getopt permutes positionals behind the options, as the agent's cli_permute() does */
    while ((c = getopt_long(end, v, "vh", agent_cli_longopts, NULL)) != -1) {
        assert_true(c >= AGENT_OPT_ROOT && c < AGENT_OPT_END); /* known, with its value */
        p->opt[p->nopts] = c;
        p->val[p->nopts++] = optarg;
    }
    for (int i = optind; i < end; i++)
        p->pos[p->npos++] = v[i];
    for (int i = end + 1; i < a->argc; i++)
        p->cmd[p->ncmd++] = v[i];
}

static const char *opt_val(const struct parsed *p, enum agent_opt o)
{
    for (int i = 0; i < p->nopts; i++)
        if (p->opt[i] == (int)o)
            return p->val[i] ? p->val[i] : "";
    return NULL;
}

static void test_status_watch_events(void **state)
{
    (void)state;
    struct agent_argv a;
    struct parsed p;
    agent_argv_init(&a);
    agent_argv_status(&a);
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_STATUS);
    assert_non_null(opt_val(&p, AGENT_OPT_JSON));

    agent_argv_init(&a);
    agent_argv_watch(&a, 0.5);
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_WATCH);
    assert_string_equal(opt_val(&p, AGENT_OPT_INTERVAL), "0.5");

    agent_argv_init(&a);
    agent_argv_watch(&a, 1);
    parse(&a, &p);
    assert_string_equal(opt_val(&p, AGENT_OPT_INTERVAL), "1");

    agent_argv_init(&a);
    agent_argv_events(&a);
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_EVENTS);
    assert_non_null(opt_val(&p, AGENT_OPT_JSON));
}

static void test_release_promote_revert_stop(void **state)
{
    (void)state;
    struct agent_argv a;
    struct parsed p;
    agent_argv_init(&a);
    agent_argv_release_add(&a, "/var/lib/drover/incoming/x.bundle", "abc123");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_RELEASE);
    assert_int_equal(p.npos, 2);
    assert_string_equal(p.pos[0], "add");
    assert_string_equal(p.pos[1], "/var/lib/drover/incoming/x.bundle");
    assert_string_equal(opt_val(&p, AGENT_OPT_ID), "abc123");

    agent_argv_init(&a);
    agent_argv_promote(&a, &(struct agent_promote){ .id = "abc123", .job = "train", .ktok_s = 12.34567 });
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_PROMOTE);
    assert_string_equal(p.pos[0], "abc123");
    assert_string_equal(opt_val(&p, AGENT_OPT_JOB), "train");
    assert_string_equal(opt_val(&p, AGENT_OPT_KTOK), "12.346");
    assert_null(opt_val(&p, AGENT_OPT_SPEC_DIGEST)); /* none given: left out (older agents) */

    agent_argv_init(&a);
    agent_argv_promote(&a, &(struct agent_promote){ .id = "abc123", .job = "train", .spec_digest = "d1d1" });
    parse(&a, &p);
    assert_null(opt_val(&p, AGENT_OPT_KTOK)); /* unknown throughput: left out */
    assert_string_equal(opt_val(&p, AGENT_OPT_SPEC_DIGEST), "d1d1");

    agent_argv_init(&a);
    agent_argv_activate_recorded(&a, "abc123", "train", "d1d1", 300, "g1");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_ACTIVATE);
    assert_string_equal(p.pos[0], "abc123");
    assert_string_equal(opt_val(&p, AGENT_OPT_SPEC_DIGEST), "d1d1");
    assert_non_null(opt_val(&p, AGENT_OPT_RECORDED));
    assert_string_equal(opt_val(&p, AGENT_OPT_PROBATION), "300");
    assert_string_equal(opt_val(&p, AGENT_OPT_RDZV), "g1");

    agent_argv_init(&a);
    agent_argv_revert(&a, "train", "drover: crash", false);
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_REVERT);
    assert_string_equal(opt_val(&p, AGENT_OPT_REASON), "drover: crash");
    assert_null(opt_val(&p, AGENT_OPT_NO_MARK));
    assert_null(opt_val(&p, AGENT_OPT_NO_START));

    /* a deploy onto a stopped job: back to the good release, left stopped */
    agent_argv_init(&a);
    agent_argv_revert(&a, "train", "drover: crash", false);
    agent_argv_revert_no_start(&a);
    agent_argv_rdzv(&a, "g2");
    parse(&a, &p);
    assert_int_equal(agent_argv_end(&a), 0);
    assert_int_equal(p.verb, AGENT_VERB_REVERT);
    assert_non_null(opt_val(&p, AGENT_OPT_NO_START));
    assert_string_equal(opt_val(&p, AGENT_OPT_RDZV), "g2");

    agent_argv_init(&a);
    agent_argv_revert(&a, "train", "drover: interrupted", true); /* Ctrl-C during probation */
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_REVERT);
    assert_non_null(opt_val(&p, AGENT_OPT_NO_MARK));

    agent_argv_init(&a);
    agent_argv_stop(&a, "train");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_STOP);
    assert_string_equal(opt_val(&p, AGENT_OPT_JOB), "train");

    agent_argv_init(&a);
    agent_argv_start(&a, "train", "5f1c0e2a");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_START);
    assert_string_equal(opt_val(&p, AGENT_OPT_JOB), "train");
    assert_string_equal(opt_val(&p, AGENT_OPT_RDZV), "5f1c0e2a");
    agent_argv_init(&a);
    agent_argv_history_add(&a, "train", "{\"v\":1,\"job\":\"train\",\"time\":1}");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_HISTORY);
    assert_int_equal(p.npos, 3);
    assert_string_equal(p.pos[0], "add");
    assert_string_equal(p.pos[2], "{\"v\":1,\"job\":\"train\",\"time\":1}");
    assert_null(opt_val(&p, AGENT_OPT_LEASE_RELEASE));
    /* a deploy's record of its outcome gives the lease back (its last call into a container) */
    agent_argv_history_lease_release(&a, "alice@h/pid-1");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_HISTORY);
    assert_int_equal(p.npos, 3);
    assert_string_equal(p.pos[1], "train");
    assert_string_equal(opt_val(&p, AGENT_OPT_LEASE_RELEASE), "alice@h/pid-1");
    assert_null(opt_val(&p, AGENT_OPT_JOB));
    agent_argv_init(&a);
    agent_argv_history_list(&a, "train");
    parse(&a, &p);
    assert_int_equal(p.npos, 2);
    assert_string_equal(p.pos[1], "train");
    agent_argv_init(&a);
    agent_argv_start(&a, "train", NULL);
    parse(&a, &p);
    assert_null(opt_val(&p, AGENT_OPT_RDZV));
}

static void test_preflight_activate(void **state)
{
    (void)state;
    struct agent_argv a;
    struct parsed p;
    agent_argv_init(&a);
    agent_argv_preflight(&a, "abc123", "train", "0,1", 90.2);
    agent_argv_env(&a, "NCCL_DEBUG=INFO");
    agent_argv_command(&a, "bin/drover-train");
    agent_argv_add(&a, "selftest");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_PREFLIGHT);
    assert_string_equal(p.pos[0], "abc123");
    assert_string_equal(opt_val(&p, AGENT_OPT_GPUS), "0,1");
    assert_string_equal(opt_val(&p, AGENT_OPT_TIMEOUT), "90");
    assert_string_equal(opt_val(&p, AGENT_OPT_ENV), "NCCL_DEBUG=INFO");
    assert_int_equal(p.ncmd, 2);
    assert_string_equal(p.cmd[0], "bin/drover-train");
    assert_string_equal(p.cmd[1], "selftest");

    agent_argv_init(&a);
    agent_argv_preflight(&a, "abc123", "train", "", 0);
    agent_argv_command(&a, "bin/x");
    parse(&a, &p);
    assert_null(opt_val(&p, AGENT_OPT_GPUS));
    assert_null(opt_val(&p, AGENT_OPT_TIMEOUT));

    struct agent_activate act = {
        .id = "abc123", .job = "train", .nnodes = 3, .node_rank = 2, .nproc_per_node = 2,
        .gpus = "0,1", .master_addr = "10.0.0.1", .master_port = 29500, .grace_s = 30,
        .probation_deadline_s = 600.4, .first_step_deadline_s = 300, .silence_deadline_s = 0,
        .stall_deadline_s = 2.5, .checkpoint_deadline_s = 1800, .rdzv = "0a1b2c3d4e5f6789",
    };
    agent_argv_init(&a);
    agent_argv_activate(&a, &act);
    agent_argv_command(&a, "bin/drover-train");
    agent_argv_add(&a, "train");
    agent_argv_add(&a, "--config");
    agent_argv_add(&a, "--job"); /* after "--": the worker's, never the agent's */
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_ACTIVATE);
    assert_string_equal(p.pos[0], "abc123");
    assert_string_equal(opt_val(&p, AGENT_OPT_JOB), "train");
    assert_string_equal(opt_val(&p, AGENT_OPT_NNODES), "3");
    assert_string_equal(opt_val(&p, AGENT_OPT_NODE_RANK), "2");
    assert_string_equal(opt_val(&p, AGENT_OPT_NPROC), "2");
    assert_string_equal(opt_val(&p, AGENT_OPT_MASTER_ADDR), "10.0.0.1");
    assert_string_equal(opt_val(&p, AGENT_OPT_MASTER_PORT), "29500");
    assert_string_equal(opt_val(&p, AGENT_OPT_GRACE), "30");
    assert_string_equal(opt_val(&p, AGENT_OPT_PROBATION), "600");
    assert_string_equal(opt_val(&p, AGENT_OPT_RDZV), "0a1b2c3d4e5f6789");
    assert_string_equal(opt_val(&p, AGENT_OPT_FIRST_STEP_DEADLINE), "300");
    assert_string_equal(opt_val(&p, AGENT_OPT_SILENCE_DEADLINE), "0");
    assert_string_equal(opt_val(&p, AGENT_OPT_STALL_DEADLINE), "2.5");
    assert_string_equal(opt_val(&p, AGENT_OPT_CHECKPOINT_DEADLINE), "1800");
    assert_int_equal(p.ncmd, 4);
    assert_string_equal(p.cmd[3], "--job");

    struct agent_activate bare = { .id = "i", .job = "j", .nnodes = 1, .nproc_per_node = 1 };
    agent_argv_init(&a);
    agent_argv_activate(&a, &bare);
    agent_argv_command(&a, "c");
    parse(&a, &p);
    assert_null(opt_val(&p, AGENT_OPT_GPUS));
    assert_null(opt_val(&p, AGENT_OPT_MASTER_ADDR));
    assert_null(opt_val(&p, AGENT_OPT_MASTER_PORT));
    assert_null(opt_val(&p, AGENT_OPT_GRACE));
    assert_null(opt_val(&p, AGENT_OPT_RDZV));
}

/* gpu-check's whole numbers: --nproc-per-node was formatted from an int as a double (garbage
 * such as '-173806642' on the GPU machine: the agent refused every deploy with gpus set) */
static void test_gpu_check(void **state)
{
    (void)state;
    struct agent_argv a;
    struct parsed p;
    agent_argv_init(&a);
    agent_argv_gpu_check(&a, 8, "0,1,2,3,4,5,6,7", "580.159.04", "12.8", 80.0 * 1073741824.0);
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_GPU_CHECK);
    assert_string_equal(opt_val(&p, AGENT_OPT_NPROC), "8");
    assert_string_equal(opt_val(&p, AGENT_OPT_GPUS), "0,1,2,3,4,5,6,7");
    assert_string_equal(opt_val(&p, AGENT_OPT_HOST_DRIVER), "580.159.04");
    assert_string_equal(opt_val(&p, AGENT_OPT_CUDA), "12.8");
    assert_string_equal(opt_val(&p, AGENT_OPT_GPU_MEM), "85899345920");
    agent_argv_init(&a);
    agent_argv_gpu_check(&a, 1, "", "", "", 0);
    parse(&a, &p);
    assert_string_equal(opt_val(&p, AGENT_OPT_NPROC), "1");
    assert_null(opt_val(&p, AGENT_OPT_GPUS));
    assert_null(opt_val(&p, AGENT_OPT_GPU_MEM));
}

static void test_globals_daemon(void **state)
{
    (void)state;
    struct agent_argv a;
    agent_argv_init(&a);
    agent_argv_globals(&a, "/srv/a", "/srv/a/agent.sock");
    agent_argv_daemon(&a, true);
    assert_int_equal(agent_argv_end(&a), 0);
    assert_int_equal(a.argc, 6);
    assert_string_equal(a.argv[0], "--root");
    assert_string_equal(a.argv[2], "--socket");
    assert_int_equal(agent_verb_parse(a.argv[4]), AGENT_VERB_DAEMON);
    assert_string_equal(a.argv[5], agent_opt_flag(AGENT_OPT_DETACH));
    /* drover install passes the inventory's keep to the container store's GC */
    agent_argv_init(&a);
    agent_argv_daemon(&a, true);
    agent_argv_keep_releases(&a, 7);
    assert_int_equal(agent_argv_end(&a), 0);
    assert_int_equal(a.argc, 4);
    assert_string_equal(a.argv[2], "--keep-releases");
    assert_string_equal(a.argv[3], "7");
    /* and `release have ID` is how a deploy asks first */
    agent_argv_init(&a);
    agent_argv_release_have(&a, "abc");
    assert_int_equal(agent_argv_end(&a), 0);
    assert_int_equal(a.argc, 3);
    assert_string_equal(a.argv[1], "have");
    assert_string_equal(a.argv[2], "abc");
    /* `drover gc` asks each container for what interrupted installs left: `release clean` */
    agent_argv_init(&a);
    agent_argv_release_clean(&a);
    assert_int_equal(agent_argv_end(&a), 0);
    assert_int_equal(a.argc, 2);
    assert_string_equal(a.argv[0], "release");
    assert_string_equal(a.argv[1], "clean");
}

/* release clean's line (agent/main.c prints it, controller/cmd_gc.c reads it) */
static void test_clean_parse(void **state)
{
    (void)state;
    size_t n = 99;
    uint64_t bytes = 99;
    bool kept = true;
    assert_int_equal(agent_clean_parse("removed 2 734003200\n", &n, &bytes, &kept), 0);
    assert_int_equal(n, 2);
    assert_true(bytes == 734003200u);
    assert_false(kept);
    assert_int_equal(agent_clean_parse("removed 0 0 " AGENT_CLEAN_KEPT "\n", &n, &bytes, &kept), 0);
    assert_int_equal(n, 0);
    assert_true(kept);
    /* anything else: ret_* untouched */
    n = 5;
    assert_int_equal(agent_clean_parse("release: expected 'add', 'list' or 'verify'", &n, &bytes, &kept), -EINVAL);
    assert_int_equal(agent_clean_parse("removed 2", &n, &bytes, &kept), -EINVAL);
    assert_int_equal(agent_clean_parse("removed 2 3 more", &n, &bytes, &kept), -EINVAL);
    assert_int_equal(agent_clean_parse(NULL, &n, &bytes, &kept), -EINVAL);
    assert_int_equal(n, 5);
}

/* the deploy's first call: the lease and the status document at once */
static void test_lease(void **state)
{
    (void)state;
    struct agent_argv a;
    struct parsed p;
    agent_argv_init(&a);
    agent_argv_lease(&a, "train", "alice@h/pid-1", 300);
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_LEASE);
    assert_int_equal(p.npos, 4);
    assert_string_equal(p.pos[0], "take");
    assert_string_equal(p.pos[3], "300");
    assert_null(opt_val(&p, AGENT_OPT_STATUS));
    agent_argv_init(&a);
    agent_argv_lease_status(&a, "train", "alice@h/pid-1", 300);
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_LEASE);
    assert_int_equal(p.npos, 4);
    assert_string_equal(p.pos[0], "take");
    assert_string_equal(p.pos[1], "train");
    assert_string_equal(p.pos[2], "alice@h/pid-1");
    assert_non_null(opt_val(&p, AGENT_OPT_STATUS));
    assert_string_equal(a.argv[a.argc - 1], "--status");
    agent_argv_init(&a);
    agent_argv_lease(&a, "train", "alice@h/pid-1", 0);
    parse(&a, &p);
    assert_int_equal(p.npos, 3);
    assert_string_equal(p.pos[0], "release");
    /* deploy --stage-only: the install gives the lease back */
    agent_argv_init(&a);
    agent_argv_release_install(&a, "/var/lib/drover/incoming/x.manifest", "-", "abc");
    agent_argv_install_lease_release(&a, "train", "alice@h/pid-1");
    parse(&a, &p);
    assert_int_equal(p.verb, AGENT_VERB_RELEASE);
    assert_string_equal(opt_val(&p, AGENT_OPT_ID), "abc");
    assert_string_equal(opt_val(&p, AGENT_OPT_JOB), "train");
    assert_string_equal(opt_val(&p, AGENT_OPT_LEASE_RELEASE), "alice@h/pid-1");
    assert_int_equal(p.npos, 3);
    assert_string_equal(p.pos[2], "-");
    /* a dead holder of this host taken over at once */
    agent_argv_init(&a);
    agent_argv_lease_status(&a, "train", "alice@h/pid-2", 300);
    agent_argv_lease_take_over(&a, "alice@h/pid-1/boot-1234abcd/start-99");
    parse(&a, &p);
    assert_int_equal(p.npos, 4);
    assert_non_null(opt_val(&p, AGENT_OPT_STATUS));
    assert_string_equal(opt_val(&p, AGENT_OPT_TAKE_OVER), "alice@h/pid-1/boot-1234abcd/start-99");
}

/* the holder named by a refused lease take, as the agent says it (agent/lease.c prints it with
 * the same two pieces) */
static void test_lease_holder_of(void **state)
{
    (void)state;
    char h[64] = "untouched";
    assert_int_equal(agent_lease_holder_of("job 'train' is being deployed by alice@h1/pid-7/boot-0a1b2c3d/start-42 "
                                           "(lease taken 3 s ago, renewed 3 s ago, expires in 297 s)", h, sizeof h), 0);
    assert_string_equal(h, "alice@h1/pid-7/boot-0a1b2c3d/start-42");
    assert_int_equal(agent_lease_holder_of("pct: exit 7: job 'train' is being deployed by bob@x/pid-1 (lease taken 1 s ago", h, sizeof h), 0);
    assert_string_equal(h, "bob@x/pid-1");
    (void)str_copy(h, sizeof h, "untouched");
    assert_int_equal(agent_lease_holder_of("job 'train' is being deployed by  (lease taken", h, sizeof h), -ENOENT);
    assert_int_equal(agent_lease_holder_of("job 'train' is being deployed by x", h, sizeof h), -ENOENT);
    assert_int_equal(agent_lease_holder_of("lease of job 'train': busy", h, sizeof h), -ENOENT);
    assert_int_equal(agent_lease_holder_of(NULL, h, sizeof h), -ENOENT);
    char small[4] = "abc";
    assert_int_equal(agent_lease_holder_of("is being deployed by alice@h/pid-1 (lease taken 1 s", small, sizeof small), -ENAMETOOLONG);
    assert_string_equal(small, "abc");
    assert_string_equal(h, "untouched");
}

static void test_overflow(void **state)
{
    (void)state;
    struct agent_argv a;
    agent_argv_init(&a);
    for (int i = 0; i < AGENT_ARGV_MAX; i++)
        agent_argv_add(&a, "x");
    assert_int_equal(agent_argv_end(&a), 0);
    agent_argv_add(&a, "one too many");
    assert_int_equal(agent_argv_end(&a), -E2BIG);
    assert_int_equal(a.argc, AGENT_ARGV_MAX);
    assert_null(a.argv[AGENT_ARGV_MAX]);
    agent_argv_init(&a);
    agent_argv_add(&a, NULL);
    assert_int_equal(agent_argv_end(&a), -E2BIG);
}

static void test_tables(void **state)
{
    (void)state;
    for (int v = 0; v < AGENT_VERB_COUNT; v++) {
        assert_non_null(agent_verb_name(v));
        assert_int_equal(agent_verb_parse(agent_verb_name(v)), v);
    }
    assert_int_equal(agent_verb_parse("nonsense"), -EINVAL);
    assert_null(agent_verb_name(AGENT_VERB_COUNT));
    /* the verbs a step message names by two words (pct_agent_timeout_msg) */
    assert_true(agent_verb_has_sub(AGENT_VERB_RELEASE));
    assert_true(agent_verb_has_sub(AGENT_VERB_LEASE));
    assert_true(agent_verb_has_sub(AGENT_VERB_HISTORY));
    assert_false(agent_verb_has_sub(AGENT_VERB_ACTIVATE));
    assert_false(agent_verb_has_sub(AGENT_VERB_COUNT));
    for (int o = AGENT_OPT_ROOT; o < AGENT_OPT_END; o++) {
        const char *f = agent_opt_flag(o);
        assert_non_null(f); /* every id has a name in the table */
        assert_true(strncmp(f, "--", 2) == 0);
    }
    assert_null(agent_opt_flag(AGENT_OPT_END));
    assert_string_equal(agent_exit_name(AGENT_EXIT_BUSY), "busy");
    assert_null(agent_exit_name(99));
}

/* The controller tells an agent that is not running (its daemon killed during a probation) from
 * a host it cannot reach by the agent CLI's own words: the daemon gone, not one that is wedged
 * (the same exit code 3, other words). */
static void test_said_no_daemon(void **state)
{
    (void)state;
    assert_true(agent_said_no_daemon("watch: no drover-agent daemon listening on '/run/drover/agent.sock'"));
    assert_true(agent_said_no_daemon("revert: " AGENT_NO_DAEMON_SAID " '/x.sock'"));
    assert_false(agent_said_no_daemon("watch: the drover-agent daemon on '/run/drover/agent.sock' sent "
                                      "nothing for 30 s: it is stopped or wedged"));
    assert_false(agent_said_no_daemon("Connection timed out"));
    assert_false(agent_said_no_daemon(""));
    assert_false(agent_said_no_daemon(NULL));
}

static void read_doc(const char *path, char **ret_text)
{
    size_t len;
    assert_int_equal(fs_read_file(path, 1 << 20, ret_text, &len), 0);
}

/* docs/protocol.md names every verb and every option; docs/errors.md has a row per exit code. */
static void test_docs(void **state)
{
    (void)state;
    char *proto, *agentdoc, *errors;
    read_doc("docs/protocol.md", &proto);
    read_doc("docs/agent.md", &agentdoc);
    for (int v = 0; v < AGENT_VERB_COUNT; v++) {
        char want[64];
        snprintf(want, sizeof want, "`%s", agent_verb_name(v));
        if (!strstr(proto, want))
            fail_msg("docs/protocol.md does not document the agent verb '%s'", agent_verb_name(v));
    }
    for (int o = AGENT_OPT_ROOT; o < AGENT_OPT_END; o++)
        if (!strstr(proto, agent_opt_flag(o)) && !strstr(agentdoc, agent_opt_flag(o)))
            fail_msg("neither docs/protocol.md nor docs/agent.md documents '%s'", agent_opt_flag(o));
    free(proto);
    free(agentdoc);
    read_doc("docs/errors.md", &errors);
    const char *sec = strstr(errors, "## drover-agent");
    assert_non_null(sec);
    for (int code = 0; code < 256; code++) {
        const char *name = agent_exit_name(code);
        if (!name)
            continue;
        char row[64];
        snprintf(row, sizeof row, "| %d | %s |", code, name);
        if (!strstr(sec, row))
            fail_msg("docs/errors.md (drover-agent) lacks the row '%s'", row);
    }
    free(errors);
}

/* A stop's ok line: the agent's SIGKILL after the grace is read from it; an older agent's line
 * (without it), NULL, and a grace that does not read say what they can. */
static void test_stop_sigkilled(void **state)
{
    (void)state;
    double g = 7;
    assert_false(agent_stop_was_sigkilled(NULL, &g));
    assert_false(agent_stop_was_sigkilled("ok release aaaaaaaaaaaa generation 3: stopped: no process of the gang is left", &g));
    assert_true(g == 7); /* untouched */
    assert_true(agent_stop_was_sigkilled("ok: stopped: no process of the gang is left; " AGENT_STOP_SIGKILLED
                                         "30 s (a rank ignored SIGTERM)", &g));
    assert_true(g == 30);
    assert_true(agent_stop_was_sigkilled("ok: stopped; " AGENT_STOP_SIGKILLED "?", &g));
    assert_true(g == -1);
    assert_true(agent_stop_was_sigkilled("ok: stopped; " AGENT_STOP_SIGKILLED "5 s", NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_watch_events), cmocka_unit_test(test_release_promote_revert_stop),
        cmocka_unit_test(test_preflight_activate),  cmocka_unit_test(test_globals_daemon),
        cmocka_unit_test(test_overflow),            cmocka_unit_test(test_tables), cmocka_unit_test(test_said_no_daemon),
        cmocka_unit_test(test_clean_parse),
        cmocka_unit_test(test_docs),               cmocka_unit_test(test_lease),
        cmocka_unit_test(test_lease_holder_of),    cmocka_unit_test(test_gpu_check),
        cmocka_unit_test(test_stop_sigkilled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
