/* Unit tests for controller/cli.c, drover's command line from argv to exit code, run in this
 * process with stdout and stderr captured (the newcomer pass): a usage error is reported as
 * such with no inventory anywhere (it showed as the inventory error); every verb's usage error
 * is the line its --help shows (plan's differed); rollback without --job says so before any
 * host is contacted; top -n abc names -n, as typed; version --help is help; the job selection
 * the verbs share (cli_job_selection) says the same for each; a flag without its value is
 * drover's error, not getopt's text (cli_getopt). */
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
#include <jansson.h>

#include "common/util.h"
#include "controller/cli.h"
#include "controller/verbs.h"
#include "tests/unit/capture.h"

static char tmpd[64];
static char out[16384], err[16384];

static int setup(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-cli-test.XXXXXX");
    if (!mkdtemp(tmpd) || chdir(tmpd) < 0) /* no ./drover.ini here */
        return -1;
    unsetenv("DROVER_INVENTORY");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (chdir("/") < 0)
        return -1;
    return fs_rm_rf(tmpd);
}

static void slurp(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
}

/* stdout and stderr into out and err, between capture_begin() and capture_end() */
struct capture {
    int fo, fe, so, se;
};

static void capture_begin(struct capture *c)
{
    char po[128], pe[128];
    snprintf(po, sizeof po, "%s/out", tmpd);
    snprintf(pe, sizeof pe, "%s/err", tmpd);
    c->fo = open(po, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    c->fe = open(pe, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(c->fo >= 0 && c->fe >= 0);
    fflush(stdout);
    fflush(stderr);
    c->so = dup(STDOUT_FILENO);
    c->se = dup(STDERR_FILENO);
    assert_true(dup2(c->fo, STDOUT_FILENO) >= 0 && dup2(c->fe, STDERR_FILENO) >= 0);
}

static void capture_end(struct capture *c)
{
    fflush(stdout);
    fflush(stderr);
    assert_true(dup2(c->so, STDOUT_FILENO) >= 0 && dup2(c->se, STDERR_FILENO) >= 0);
    close(c->so);
    close(c->se);
    slurp(c->fo, out, sizeof out);
    slurp(c->fe, err, sizeof err);
    close(c->fo);
    close(c->fe);
}

/* drover ARGS... (NULL-terminated): the exit code; out and err hold what it printed. */
static int drover(const char *first, ...)
{
    char *argv[32] = { "drover" };
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    struct capture cap;
    capture_begin(&cap);
    int rc = cli_main(argc, argv, "test");
    capture_end(&cap);
    return rc;
}

static void want(const char *text, const char *has)
{
    if (!strstr(text, has))
        fail_msg("want '%s' in:\n%s", has, text);
}

static void want_not(const char *text, const char *has)
{
    if (strstr(text, has))
        fail_msg("did not want '%s' in:\n%s", has, text);
}

/* Arguments each verb accepts; every verb of the table that needs an inventory is here. */
static const struct {
    const char *verb, *a1, *a2;
} good_args[] = {
    { "trust", "h1", NULL },      { "install", NULL, NULL },      { "plan", ".", NULL },
    { "deploy", ".", NULL },      { "gc", NULL, NULL },           { "status", NULL, NULL },
    { "rollback", "--job", "a" }, { "promote", "--job", "a" },    { "revert", "--job", "a" },
    { "history", NULL, NULL },    { "top", "--once", NULL },      { "logs", "--job", "a" },
    { "events", NULL, NULL },     { "exporter", NULL, NULL },     { "validate", NULL, NULL },
    { "stop", "--all-jobs", NULL }, { "start", "--job", "a" },   { "rebaseline", "--job", "a" },
};

static void test_usage_before_inventory(void **state)
{
    (void)state;
    for (size_t i = 0; i < verbs_n; i++) {
        const struct verb *v = &verbs[i];
        if (!v->run)
            continue;
        /* a bad option: the usage error, the same line as --help's, and no word of inventories */
        assert_int_equal(drover(v->name, "--no-such-option", NULL), 2);
        char line[512];
        snprintf(line, sizeof line, "usage: drover %s %s\n", v->name, v->args);
        want(err, line);
        want_not(err, "inventory");
        assert_int_equal(drover(v->name, "--help", NULL), 0);
        snprintf(line, sizeof line, "usage: drover [-i INVENTORY] %s %s\n", v->name, v->args);
        want(out, line);
        /* good arguments: now the missing inventory is the error */
        size_t k = 0;
        while (k < sizeof good_args / sizeof good_args[0] && strcmp(good_args[k].verb, v->name))
            k++;
        if (k == sizeof good_args / sizeof good_args[0])
            fail_msg("verb '%s' has no entry in good_args", v->name);
        assert_int_equal(drover(v->name, good_args[k].a1, good_args[k].a2, NULL), 2);
        want(err, "drover.ini: cannot read inventory");
        want_not(err, "usage:");
    }
    /* a stray argument is named */
    assert_int_equal(drover("plan", "a", "b", NULL), 2);
    want(err, "usage: drover plan DIR");
    want(err, "(unexpected 'b')");
}

/* A job named twice in a wave (`deploy DIR --job a --job a`) was deployed twice in a row:
 * "wave: job 'a' (1 of 2)", a second probation, and a failure of the second rolling back the
 * first.  A usage error, named, before any inventory is read. */
static void test_job_twice(void **state)
{
    (void)state;
    assert_int_equal(drover("deploy", ".", "--job", "a", "--job", "b", "--job", "a", NULL), 2);
    want(err, "--job 'a' given twice");
    want(err, "usage: drover deploy DIR");
    want_not(err, "inventory");
    assert_int_equal(drover("plan", ".", "--job", "a", "--job", "a", NULL), 2);
    want(err, "--job 'a' given twice");
}

/* `deploy DIR --job J --all-jobs` printed only the usage line, which offers both: name the two
 * flags that cannot go together, exit 2 like every usage error, and contact nothing (the
 * inventory is not even read). */
static void test_job_and_all_jobs(void **state)
{
    (void)state;
    static const char *const verbs_[] = { "deploy", "plan" };
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(drover(verbs_[i], ".", "--job", "a", "--all-jobs", NULL), 2);
        want(err, "--job and --all-jobs cannot be combined");
        want_not(err, "inventory");
        assert_string_equal(out, "");
        assert_int_equal(drover(verbs_[i], "--all-jobs", ".", "--job", "a", NULL), 2);
        want(err, "--job and --all-jobs cannot be combined");
    }
    /* with an inventory that names the job: still nothing but the error */
    FILE *fp = fopen("one.ini", "w");
    assert_non_null(fp);
    fprintf(fp, "[drover]\nstate_dir = %s/state1\nknown_hosts = %s/kh\n[host h1]\naddress = 127.0.0.1\n"
                "[job a]\ncontainers = h1:101\ncommand = x\n",
            tmpd, tmpd);
    fclose(fp);
    assert_int_equal(drover("-i", "one.ini", "deploy", ".", "--job", "a", "--all-jobs", NULL), 2);
    want(err, "--job and --all-jobs cannot be combined");
    want_not(err, "h1");
    struct stat sb;
    char sd[128];
    snprintf(sd, sizeof sd, "%s/state1", tmpd);
    assert_int_not_equal(stat(sd, &sb), 0); /* no lock, no history: nothing was started */
}

/* deploy without --job: an inventory of no job says to add one (it said "has 0 jobs: say which
 * with --job NAME"); one of several names them. */
static void test_deploy_which_job(void **state)
{
    (void)state;
    FILE *fp = fopen("none.ini", "w");
    assert_non_null(fp);
    fprintf(fp, "[drover]\nstate_dir = %s/state\nknown_hosts = %s/kh\n[host h1]\naddress = 127.0.0.1\n",
            tmpd, tmpd);
    fclose(fp);
    assert_int_not_equal(drover("-i", "none.ini", "deploy", ".", NULL), 0);
    want(err, "has no job: add a [job NAME] section");
    want_not(err, "say which with --job");
    fp = fopen("two.ini", "w");
    assert_non_null(fp);
    fprintf(fp, "[drover]\nstate_dir = %s/state\nknown_hosts = %s/kh\n[host h1]\naddress = 127.0.0.1\n"
                "[job a]\ncontainers = h1:101\ncommand = x\n[job b]\ncontainers = h1:102\ncommand = x\n",
            tmpd, tmpd);
    fclose(fp);
    assert_int_not_equal(drover("-i", "two.ini", "deploy", ".", NULL), 0);
    want(err, "has 2 jobs (a, b): say which with --job NAME");
}

static void test_rollback_needs_job(void **state)
{
    (void)state;
    assert_int_equal(drover("rollback", NULL), 2);
    want(err, "rollback needs --job J");
    want_not(err, "inventory");
    /* with an inventory of one job on a host nothing answers: said before connecting */
    FILE *fp = fopen("one.ini", "w");
    assert_non_null(fp);
    fprintf(fp, "[drover]\nstate_dir = %s/state\nknown_hosts = %s/kh\nconnect_timeout = 1s\n"
                "[host h1]\naddress = 127.0.0.1\nport = 1\n[job a]\ncontainers = h1:101\ncommand = x\n",
            tmpd, tmpd);
    fclose(fp);
    assert_int_equal(drover("-i", "one.ini", "rollback", NULL), 2);
    want(err, "rollback needs --job J");
    want_not(err, "h1");
    assert_int_equal(drover("rollback", "-i", "one.ini", "--now", NULL), 2);
    want(err, "rollback needs --job J");
    want_not(err, "connect");
    /* with --job it goes on (h1 refuses the connection at once); a state_dir no deploy has made
     * yet is no "another drover is deploying" */
    assert_int_equal(drover("-i", "one.ini", "rollback", "--job", "a", NULL), 1);
    want(err, "h1");
    want_not(err, "another drover");
    /* promote and revert decide on a held release: named too, before the inventory (they took
     * the inventory's only job on their own) */
    static const char *const held[] = { "promote", "revert" };
    for (size_t i = 0; i < ARRAY_SIZE(held); i++) {
        char says[64];
        snprintf(says, sizeof says, "%s needs --job J", held[i]);
        assert_int_equal(drover("-i", "one.ini", held[i], NULL), 2);
        want(err, says);
        want_not(err, "h1");
        assert_int_equal(drover(held[i], NULL), 2);
        want(err, says);
        want_not(err, "inventory");
    }
}

/* rebaseline: the job is named (usage, exit 2, before the inventory); stray words are usage
 * errors; a host that does not answer is named, exit 1, and the baseline is not touched */
static void test_rebaseline(void **state)
{
    (void)state;
    assert_int_equal(drover("rebaseline", NULL), 2);
    want(err, "rebaseline needs --job J");
    want_not(err, "inventory");
    assert_int_equal(drover("rebaseline", "--job", "a", "now", NULL), 2);
    want(err, "unexpected 'now'");
    assert_int_equal(drover("rebaseline", "--to", "x", NULL), 2);
    FILE *fp = fopen("one.ini", "w");
    assert_non_null(fp);
    fprintf(fp, "[drover]\nstate_dir = %s/state\nknown_hosts = %s/kh\nconnect_timeout = 1s\n"
                "[host h1]\naddress = 127.0.0.1\nport = 1\n[job a]\ncontainers = h1:101\ncommand = x\n",
            tmpd, tmpd);
    fclose(fp);
    assert_int_equal(drover("-i", "one.ini", "rebaseline", "--job", "b", NULL), 2);
    want(err, "no [job b]");
    assert_int_equal(drover("-i", "one.ini", "rebaseline", "--job", "a", NULL), 1);
    want(err, "h1");
    char path[600];
    snprintf(path, sizeof path, "%s/state/baselines.json", tmpd);
    assert_int_equal(access(path, F_OK), -1);
}

/* stop and start: the jobs are always named (even with one job), before the inventory is read
 * and before any host is contacted; --dry-run contacts nothing; a host that does not answer is
 * named and the exit is 1 */
static void test_stop_start_need_jobs(void **state)
{
    (void)state;
    assert_int_equal(drover("stop", NULL), 2);
    want(err, "stop needs --job J (repeatable) or --all-jobs");
    want(err, "usage: drover stop --job J... | --all-jobs");
    want_not(err, "inventory");
    assert_int_equal(drover("start", "--job", "a", "--all-jobs", NULL), 2);
    want(err, "--job and --all-jobs cannot be combined");
    assert_int_equal(drover("stop", "--job", "a", "--job", "a", NULL), 2);
    want(err, "--job 'a' given twice");
    FILE *fp = fopen("one.ini", "w");
    assert_non_null(fp);
    fprintf(fp, "[drover]\nstate_dir = %s/state\nknown_hosts = %s/kh\nconnect_timeout = 1s\n"
                "[host h1]\naddress = 127.0.0.1\nport = 1\n[job a]\ncontainers = h1:101\ncommand = x\n",
            tmpd, tmpd);
    fclose(fp);
    assert_int_equal(drover("-i", "one.ini", "stop", NULL), 2);
    want(err, "stop needs --job J");
    want_not(err, "h1");
    assert_int_equal(drover("-i", "one.ini", "stop", "--job", "a", "--dry-run", NULL), 0);
    want(out, "stop of job 'a' (dry run, nothing contacted)");
    want(out, "h1:101");
    want_not(err, "connect");
    assert_int_equal(drover("-i", "one.ini", "stop", "--job", "nosuch", NULL), 2);
    /* h1 refuses the connection at once: named, with what to do, exit 1 */
    assert_int_equal(drover("-i", "one.ini", "start", "--all-jobs", NULL), 1);
    want(out, "h1:101");
    want(out, "UNREACHABLE");
    want(err, "run `drover start --job a` again");
}

/* Command-line durations read as the inventory's: `top --timeout 30s`, `--interval 2s` and
 * `status --watch 2s` were refused (strtod wanted a plain number), though the inventory took
 * 90s and 2m; `exporter --interval abc` printed only the usage line.  Hex and exponent forms
 * are refused, saying so. */
static void test_durations_take_units(void **state)
{
    (void)state;
    double v = -1;
    assert_int_equal(cli_duration("--timeout", "30s", 0, true, 600, &v), EXIT_OK);
    assert_true(v == 30);
    assert_int_equal(cli_duration("--interval", "500ms", 0.5, false, 60, &v), EXIT_OK);
    assert_true(v == 0.5);
    assert_int_equal(cli_duration("--watch", "2m", 0, true, 86400, &v), EXIT_OK);
    assert_true(v == 120);
    assert_int_equal(cli_duration("--watch", "2", 0, true, 86400, &v), EXIT_OK); /* plain: seconds */
    assert_true(v == 2);
    v = -1;
    assert_int_equal(cli_duration("--timeout", "0", 0, true, 600, &v), EXIT_USAGE); /* open bound */
    assert_int_equal(cli_duration("--timeout", "11m", 0, true, 600, &v), EXIT_USAGE);
    assert_int_equal(cli_duration("--interval", "499ms", 0.5, false, 60, &v), EXIT_USAGE);
    assert_true(v == -1); /* untouched */
    /* what a user types, through the verbs: accepted as far as the inventory (none here) */
    assert_int_equal(drover("top", "--timeout", "30s", "--interval", "2s", NULL), 2);
    want_not(err, "takes");
    want(err, "inventory");
    assert_int_equal(drover("status", "--watch", "2s", NULL), 2);
    want_not(err, "takes");
    want(err, "inventory");
    assert_int_equal(drover("top", "--watch", "1.5m", "--width", "100", NULL), 2);
    want_not(err, "takes");
    assert_int_equal(drover("top", "--timeout", "1e2", NULL), 2);
    want(err, "--timeout takes a duration over 0s up to 10m (like 2s, 500ms, 1m; a plain number is seconds), "
              "not '1e2' (hex and exponent forms are not taken)");
    assert_int_equal(drover("status", "--watch", "0x10", NULL), 2);
    want(err, "not '0x10' (hex and exponent forms are not taken)");
    assert_int_equal(drover("top", "--watch", "2h", NULL), 2);
    want(err, "--watch takes a duration from 0.5s to 1h");
    assert_int_equal(drover("exporter", "--interval", "abc", NULL), 2);
    want(err, "--interval takes a duration from 0.5s to 720h");
    assert_int_equal(drover("exporter", "--interval", "10s", NULL), 2);
    want_not(err, "takes");
}

static void test_values_name_the_option_typed(void **state)
{
    (void)state;
    assert_int_equal(drover("top", "-n", "abc", NULL), 2);
    want(err, "-n takes a duration from 0.5s to 1m (like 2s, 500ms, 1m; a plain number is seconds), not 'abc'");
    want_not(err, "--interval takes");
    assert_int_equal(drover("top", "--interval=abc", NULL), 2);
    want(err, "--interval takes a duration from 0.5s to 1m (like 2s, 500ms, 1m; a plain number is seconds), "
              "not 'abc'");
    assert_int_equal(drover("top", "--once", "-nabc", NULL), 2);
    want(err, "-n takes");
    /* --watch won silently over --once (the run never ended); atoi took "80abc" as 80 */
    assert_int_equal(drover("top", "--once", "--watch", "2", NULL), 2);
    want(err, "--once and --watch cannot go together");
    assert_int_equal(drover("top", "--once", "--width", "80abc", NULL), 2);
    want(err, "--width takes 40..1000 columns, not '80abc'");
    assert_int_equal(drover("status", "--output", "yaml", NULL), 2);
    want(err, "--output takes json or wide, not 'yaml'");
    assert_int_equal(drover("status", "--watch", "abc", NULL), 2);
    want(err, "--watch takes a duration over 0s up to 24h (like 2s, 500ms, 1m; a plain number is seconds), "
              "not 'abc'");
    assert_int_equal(drover("status", "--watch", "5x", NULL), 2); /* atof took it as 5 */
    want(err, "not '5x'");
    /* these printed only the usage line */
    assert_int_equal(drover("logs", "--rank", "-1", NULL), 2);
    want(err, "--rank takes a rank from 0 to 1048576, not '-1'");
    assert_int_equal(drover("gc", "--keep", "-3", NULL), 2);
    want(err, "--keep takes a count from 0 to 10000, not '-3'");
    /* the inventory's keep's bound: --keep took up to 999999, [drover] keep 10000 */
    assert_int_equal(drover("gc", "--keep", "10001", NULL), 2);
    want(err, "--keep takes a count from 0 to 10000, not '10001' (0: keep only the releases in use "
              "and the ways back, for this run)");
    assert_int_equal(drover("gc", "--keep", "999999", NULL), 2);
    want(err, "not '999999'");
    assert_int_equal(drover("gc", "--keep", "10000", NULL), 2); /* good arguments: no inventory */
    want(err, "cannot read inventory");
    want_not(err, "--keep takes");
    assert_int_equal(drover("gc", "--keep", "0", NULL), 2); /* 0: the command line's, on purpose */
    want(err, "cannot read inventory");
    want_not(err, "--keep takes");

    char buf[32];
    char *a[] = { "top", "--once", "-n", "abc", NULL };
    assert_string_equal(verb_opt_typed(a, 4, a[3], buf, sizeof buf), "-n");
    char *b[] = { "top", "--interval=abc", NULL };
    assert_string_equal(verb_opt_typed(b, 2, b[1] + 11, buf, sizeof buf), "--interval");
    char *c[] = { "top", "--interval", "abc", NULL };
    assert_string_equal(verb_opt_typed(c, 3, c[2], buf, sizeof buf), "--interval");
    char *d[] = { "top", "-1nabc", NULL };
    assert_string_equal(verb_opt_typed(d, 2, d[1] + 3, buf, sizeof buf), "-n");
    char *e[] = { "top", "-1n", "abc", NULL };
    assert_string_equal(verb_opt_typed(e, 3, e[2], buf, sizeof buf), "-n");
}

static void test_version_and_help(void **state)
{
    (void)state;
    assert_int_equal(drover("version", "--help", NULL), 0);
    want(out, "usage: drover [-i INVENTORY] version");
    want_not(out, "drover test");
    assert_int_equal(drover("version", NULL), 0);
    assert_string_equal(out, "drover test\n");
    assert_int_equal(drover("--version", NULL), 0);
    assert_string_equal(out, "drover test\n");
    assert_int_equal(drover("help", "plan", NULL), 0);
    want(out, "usage: drover [-i INVENTORY] plan DIR");
    assert_int_equal(drover("deploi", NULL), 2);
    want(err, "unknown verb 'deploi'");
    assert_int_equal(drover("help", "nosuch", NULL), 2); /* listed the verbs, exit 0 */
    want(err, "unknown verb 'nosuch'");
    assert_int_equal(drover("help", NULL), 0);
    want(out, "usage: drover [-i INVENTORY]");
    assert_int_equal(drover(NULL), 2);
    want(err, "usage: drover [-i INVENTORY]");
}

/* a typo gets the nearest name from the verb table (kubectl and git do it): options before the
 * verb parses anything, verbs before anything else; still usage errors (exit 2), no inventory */
static void test_did_you_mean(void **state)
{
    (void)state;
    assert_int_equal(drover("deplyo", ".", NULL), 2);
    want(err, "unknown verb 'deplyo': did you mean deploy? (drover help lists them)");
    assert_int_equal(drover("stauts", NULL), 2);
    want(err, "did you mean status?");
    assert_int_equal(drover("help", "rolback", NULL), 2);
    want(err, "unknown verb 'rolback': did you mean rollback?");
    assert_int_equal(drover("frobnicate", NULL), 2); /* nothing near: no guess */
    want(err, "unknown verb 'frobnicate' (drover help lists them)");
    want_not(err, "did you mean");

    assert_int_equal(drover("deploy", ".", "--jbo", "train", NULL), 2);
    want(err, "unknown option '--jbo' for drover deploy: did you mean --job?\n");
    want(err, "usage: drover deploy DIR");
    want_not(err, "inventory");
    assert_int_equal(drover("status", "--wtch=3", NULL), 2);
    want(err, "unknown option '--wtch' for drover status: did you mean --watch?");
    assert_int_equal(drover("top", "--onec", NULL), 2);
    want(err, "did you mean --once?");
    assert_int_equal(drover("rollback", "--job", "a", "--xyzzy", NULL), 2);
    want(err, "unknown option '--xyzzy' for drover rollback\n");
    want_not(err, "did you mean");
    /* another verb's option is not this verb's */
    assert_int_equal(drover("plan", ".", "--force", NULL), 2);
    want(err, "unknown option '--force' for drover plan");
    /* abbreviations getopt_long takes, values after "--" and --help stay as they were */
    assert_int_equal(drover("deploy", ".", "--jo", "train", "--dry", NULL), 2);
    want(err, "drover.ini: cannot read inventory");
    assert_int_equal(drover("logs", "--job", "a", "--", "--jbo", NULL), 2);
    want_not(err, "unknown option"); /* logs's own usage error: no command after -- */
    assert_int_equal(drover("status", "--help", NULL), 0);
    want(out, "usage: drover [-i INVENTORY] status");
    /* every option of the table is known to its verb (the table is what the check reads) */
    for (size_t i = 0; i < verbs_n; i++) {
        if (!verbs[i].run)
            continue;
        char opts[512];
        snprintf(opts, sizeof opts, "%s", verbs[i].opts);
        for (char *save = NULL, *o = strtok_r(opts, " ", &save); o; o = strtok_r(NULL, " ", &save)) {
            (void)drover(verbs[i].name, o, NULL);
            want_not(err, "unknown option");
            want_not(err, "unrecognized option");
        }
    }
}

/* an option without its value printed getopt's own text ("stop: option '--job' requires an
 * argument", "status: option requires an argument -- 'o'"), not drover's error and what to
 * type: cli_getopt() says it for every verb, long and short, with the verb's usage line */
static void test_missing_value(void **state)
{
    (void)state;
    assert_int_equal(drover("stop", "--job", NULL), 2);
    want(err, "error: option '--job' for drover stop needs a value (--job J...)\n");
    want(err, "usage: drover stop --job J...");
    want_not(err, "requires an argument");
    assert_int_equal(drover("start", "--job", "a", "--jo", NULL), 2); /* an abbreviation */
    want(err, "option '--jo' for drover start needs a value (--job J...)");
    assert_int_equal(drover("status", "-o", NULL), 2);
    want(err, "error: option '-o' for drover status needs a value (-o json|wide)\n");
    want(err, "usage: drover status");
    want_not(err, "requires an argument");
    assert_int_equal(drover("status", "--output", NULL), 2); /* the short form's value */
    want(err, "option '--output' for drover status needs a value (--output json|wide)");
    assert_int_equal(drover("stop", "--all-jobs", "-o", NULL), 2);
    want(err, "option '-o' for drover stop needs a value (-o json)");
    assert_int_equal(drover("logs", "--job", "a", "-fn", NULL), 2); /* last of a cluster */
    want(err, "option '-n' for drover logs needs a value (-n LINES)");
    assert_int_equal(drover("rollback", "--job", "a", "--to", NULL), 2);
    want(err, "option '--to' for drover rollback needs a value (--to ID)");
    want_not(err, "inventory");
    /* drover's own -i, before the verb */
    assert_int_equal(drover("-i", NULL), 2);
    want(err, "option '-i' for drover needs a value (-i INVENTORY)");
    want_not(err, "requires an argument");
    /* getopt's other texts: an unknown short option, an ambiguous abbreviation, a value
     * for an option that takes none */
    assert_int_equal(drover("stop", "--all-jobs", "-z", NULL), 2);
    want(err, "unknown option '-z' for drover stop\n");
    want_not(err, "invalid option");
    assert_int_equal(drover("stop", "--dry-run", "-zn", "--all-jobs", NULL), 2);
    want(err, "unknown option '-z' for drover stop\n");
    assert_int_equal(drover("deploy", ".", "--a", NULL), 2);
    want(err, "option '--a' for drover deploy is ambiguous");
    want_not(err, "is ambiguous; possibilities");
    assert_int_equal(drover("stop", "--all-jobs=yes", NULL), 2);
    want(err, "option '--all-jobs' for drover stop takes no value");
    want_not(err, "doesn't allow an argument");
    /* getopt_long matches, abbreviations too; cli_getopt names what was typed */
    assert_int_equal(drover("stop", "--jo", NULL), 2);
    want(err, "error: option '--jo' for drover stop needs a value (--job J...)\n");
    assert_int_equal(drover("stop", "--all=yes", NULL), 2);
    want(err, "error: option '--all' for drover stop takes no value\n");
    assert_int_equal(drover("--verbose=1", "status", NULL), 2);
    want(err, "option '--verbose' for drover takes no value");
    assert_int_equal(drover("--ver", "status", NULL), 2);
    want(err, "option '--ver' for drover is ambiguous");
    assert_int_equal(drover("--nosuch", "status", NULL), 2);
    want(err, "unknown option '--nosuch' for drover\n");
    /* "--e=x" took its value: the '?' after it is the cluster's -e, not "--e takes no value" */
    assert_int_equal(drover("validate", "--e=x", "-ez", NULL), 2);
    want(err, "unknown option '-e' for drover validate\n");
    want_not(err, "takes no value");
    /* every option of every verb, last on the line: drover's words or none, never getopt's */
    for (size_t i = 0; i < verbs_n; i++) {
        if (!verbs[i].run)
            continue;
        char opts[512];
        snprintf(opts, sizeof opts, "%s", verbs[i].opts);
        for (char *save = NULL, *o = strtok_r(opts, " ", &save); o; o = strtok_r(NULL, " ", &save)) {
            (void)drover(verbs[i].name, o, NULL);
            want_not(err, "requires an argument");
            want_not(err, "invalid option");
            if (strstr(err, "needs a value")) {
                char said[128];
                snprintf(said, sizeof said, "option '%s' for drover %s needs a value", o, verbs[i].name);
                want(err, said);
            }
        }
    }
}

static void mkfile(const char *rel, const char *text, mode_t mode)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmpd, rel);
    assert_int_equal(fs_write_atomic(p, text, strlen(text), mode), 0);
    assert_int_equal(chmod(p, mode), 0);
}

/* drover ARGS... with stdout and stderr into one file, as `drover ... 2>&1 | cat` has them: the
 * exit code; out holds both, in the order they reached the file. */
static int drover_merged(const char *first, ...)
{
    char *argv[32] = { "drover" };
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    char p[128];
    snprintf(p, sizeof p, "%s/merged", tmpd);
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    fflush(stdout);
    fflush(stderr);
    int so = dup(STDOUT_FILENO), se = dup(STDERR_FILENO);
    assert_true(dup2(fd, STDOUT_FILENO) >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    int rc = cli_main(argc, argv, "test");
    fflush(stdout);
    fflush(stderr);
    assert_true(dup2(so, STDOUT_FILENO) >= 0 && dup2(se, STDERR_FILENO) >= 0);
    close(so);
    close(se);
    slurp(fd, out, sizeof out);
    close(fd);
    return rc;
}

/* `drover status 2>&1 | cat`: the warnings said under the table came above it, because stdout
 * is block-buffered in a pipe and stderr is not (the newcomer pass: "rank 0 wrote 27 lines that
 * are not heartbeats" was the first line).  Each note now follows the rows before it. */
static void test_status_notes_under_table(void **state)
{
    (void)state;
    char ini[2048];
    mkfile("drover.ini", fake_agent_inventory_text(ini, sizeof ini, tmpd, "", "", "a"), 0644);
    struct agent_status st;
    fake_agent_status_init(&st);
    st.njobs = 1;
    struct job_status *js = &st.jobs[0];
    strcpy(js->job, "train");
    js->state = GANG_RUNNING;
    memset(js->current, 'a', RELEASE_ID_LEN);
    memcpy(js->release, js->current, sizeof js->release);
    js->nranks = 1;
    fake_rank_training(&js->ranks[0], 0, 0, js->current, 12, 1000, 2.5);
    js->ranks[0].bad_lines = 27;
    fake_agent(tmpd, &st);
    assert_int_equal(drover_merged("status", "--job", "train", NULL), 0);
    const char *head = strstr(out, "JOB "), *row = strstr(out, "\ntrain "),
               *note = strstr(out, "wrote 27 lines that are not heartbeats");
    if (!head || !row || !note || !(head < row && row < note))
        fail_msg("want the table's header, then a row, then the note:\n%s", out);
}

/* top --once --filter X where X matches nothing: exit 0 as before (the question was answered,
 * kubectl's "No resources found"), but the empty table is said to be the filter's doing, on
 * stderr; a filter that matches says nothing */
static void test_top_filter_hides_all(void **state)
{
    (void)state;
    char ini[2048];
    mkfile("drover.ini", fake_agent_inventory_text(ini, sizeof ini, tmpd, "", "", "c"), 0644);
    assert_int_equal(fs_mkdir_p("a", 0755) | fs_mkdir_p("b", 0755) | fs_mkdir_p("c", 0755), 0);
    struct agent_status st;
    fake_agent_status_init(&st);
    st.njobs = 1;
    strcpy(st.jobs[0].job, "train");
    st.jobs[0].state = GANG_RUNNING;
    fake_agent(tmpd, &st);
    /* top reads `watch` documents a line each: the fake's document ends its line */
    char agent[600];
    snprintf(agent, sizeof agent, "#!/bin/sh\ncat '%s/status.json'; echo\n", tmpd);
    mkfile("agent", agent, 0755);
    assert_int_equal(drover("top", "--once", "--timeout", "5", "--filter", "no-such-job", NULL), 0);
    want(err, "--filter 'no-such-job' matches no host, container, job, rank, state or release: it "
              "hides every row");
    want_not(out, "h1");
    /* the job's name: its two containers (running) and their host; eval's (no-job) hidden */
    assert_int_equal(drover("top", "--once", "--timeout", "5", "--filter", "TRAIN", NULL), 0);
    int lines = 0;
    for (const char *q = out; (q = strchr(q, '\n')) != NULL; q++)
        lines++;
    assert_int_equal(lines, 3 + 1 + 2); /* header, title, h1, train's two containers */
    want(out, "running");
    want_not(err, "hides every row");
}

/* validate --env: the environment is walked by plan's rules (manifest2_from_dir) and a job's
 * command under .drover-env/ must be an executable in it; a plain venv's bin/python symlink to
 * the system interpreter is refused, the message suggesting --copies. */
static void test_validate_env(void **state)
{
    (void)state;
    mkfile("drover.ini",
           "[host h1]\nlocal = true\n[job train]\ncontainers = h1:101\n"
           "command = .drover-env/bin/python\narg = train.py\n", 0644);
    assert_int_equal(fs_mkdir_p("rel", 0755), 0);
    assert_int_equal(fs_mkdir_p("venv/bin", 0755), 0);
    mkfile("rel/train.py", "print(1)\n", 0644);
    mkfile("venv/pyvenv.cfg", "home = /usr/bin\n", 0644);
    /* --env needs DIR */
    assert_int_equal(drover("validate", "--env", "venv", NULL), 2);
    /* no interpreter in the environment: named */
    assert_int_equal(drover("validate", "rel", "--env", "venv", NULL), 1);
    want(err, "environment directory 'venv': 'bin/python' (the command of [job train] in the inventory) "
              "is missing: add it to the environment, or fix the inventory");
    /* there but not executable: says chmod +x (newcomer pass: "has no executable" for a file
     * that is there) */
    mkfile("venv/bin/python", "#!/bin/sh\n", 0644);
    assert_int_equal(drover("validate", "rel", "--env", "venv", NULL), 1);
    want(err, "'bin/python' (the command of [job train]) is not executable: chmod +x 'venv/bin/python'");
    assert_int_equal(unlink("venv/bin/python"), 0);
    /* a plain venv: bin/python -> /usr/bin/python3 is refused, --copies suggested */
    assert_int_equal(symlink("/usr/bin/python3", "venv/bin/python"), 0);
    assert_int_equal(drover("validate", "rel", "--env", "venv", NULL), 1);
    want(err, "'venv/bin/python' -> '/usr/bin/python3' points outside the release");
    want(err, "python3 -m venv --copies");
    /* and says what a release may hold, as plan and deploy do (it said "cannot be bundled:
     * Invalid argument") */
    want(err, "cannot read environment directory 'venv': a release holds directories");
    want_not(err, "Invalid argument");
    /* a --copies venv: ok */
    assert_int_equal(unlink("venv/bin/python"), 0);
    mkfile("venv/bin/python", "#!/bin/sh\n", 0755);
    assert_int_equal(drover("validate", "rel", "--env", "venv", NULL), 0);
    want(out, "environment venv: ok (2 files)");
    want(out, "release rel for job train: ok (1 file)\n"); /* it said "1 files" */
    /* without --env a command in the environment cannot run: the release alone has no
     * .drover-env/ (it was "ok", and a deploy without --env started workers that were not
     * there); validate says so, and deploy refuses before any host is contacted (exit 2) */
    assert_int_equal(drover("validate", "rel", NULL), 1);
    want(err, "the command of [job train], '.drover-env/bin/python', is in the environment, and no "
              "--env ENVDIR was given: release 'rel' alone has no .drover-env/; give --env ENVDIR again");
    assert_int_equal(drover("deploy", "rel", NULL), 2);
    want(err, "give --env ENVDIR again (an environment already on the hosts is hashed here, not sent "
              "again); nothing was contacted, nothing changed");
}

/* validate's summary counts containers, not job-container pairs (two jobs sharing h1:101 said
 * 2 containers for it), and says "1 job", not "1 jobs" */
static void test_validate_counts(void **state)
{
    (void)state;
    mkfile("drover.ini",
           "[host h1]\nlocal = true\n[host h2]\naddress = 127.0.0.1\n"
           "[job train]\ncontainers = h1:101 h1:102 h2:201\ncommand = bin/t\n"
           "[job pt]\ncontainers = h1:101 h2:201\ncommand = ./launch.sh\nmaster_port = 29501\n"
           "[job lr]\ncontainers = h1:local:/srv/a h1:local:/srv/b\ncommand = ./launch.sh\n"
           "[job lr2]\ncontainers = h1:local:/srv/a\ncommand = ./launch.sh\nmaster_port = 29502\n",
           0644);
    assert_int_equal(drover("validate", NULL), 0);
    want(out, ": ok (2 hosts, 4 jobs, 5 containers)\n");
    mkfile("drover.ini", "[host h1]\nlocal = true\n[job train]\ncontainers = h1:101\ncommand = bin/t\n", 0644);
    assert_int_equal(drover("validate", NULL), 0);
    want(out, ": ok (1 host, 1 job, 1 container)\n");
    /* an identity that is not there: validate said ok, every connection then failed */
    mkfile("drover.ini", "[drover]\nidentity = no-such-key\n[host h1]\naddress = 127.0.0.1\n"
           "[job train]\ncontainers = h1:101\ncommand = bin/t\n", 0644);
    assert_int_equal(drover("validate", NULL), 0); /* a warning: the key may live elsewhere */
    want(err, "warning: ");
    want(err, "[drover] identity 'no-such-key' cannot be read here (No such file or directory): "
              "every connection from this machine would fail; give the private key drover logs in "
              "with");
    mkfile("no-such-key", "key\n", 0600);
    assert_int_equal(drover("validate", NULL), 0);
    want_not(err, "identity");
    /* local hosts alone need no key */
    mkfile("drover.ini", "[drover]\nidentity = gone\n[host h1]\nlocal = true\n"
           "[job train]\ncontainers = h1:101\ncommand = bin/t\n", 0644);
    assert_int_equal(drover("validate", NULL), 0);
}

/* A release without the job's command is refused before any host is contacted (the newcomer
 * pass: deploy connected to every host first, so an unknown host key or a dead host came before,
 * or instead of, "bin/drover-train is missing", and the exit code was the host's, 5) */
static void test_release_checked_before_hosts(void **state)
{
    (void)state;
    char ini[512];
    snprintf(ini, sizeof ini,
             "[drover]\nstate_dir = %s/state\nknown_hosts = %s/known_hosts\nconnect_timeout = 2s\n"
             "[host h1]\naddress = 127.0.0.1\nport = 1\n"
             "[job train]\ncontainers = h1:101\ncommand = bin/drover-train\n", tmpd, tmpd);
    mkfile("drover.ini", ini, 0644);
    assert_int_equal(fs_mkdir_p("rel/etc", 0755), 0);
    mkfile("rel/etc/train.ini", "[train]\n", 0644);
    /* bad input found before any host is contacted: exit 2 and "nothing was contacted", as for
     * a release directory that does not exist (it was 1, the code of a deploy that failed) */
    const char *verb[] = { "deploy", "plan" };
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(drover(verb[i], "rel", "--job", "train", NULL), 2);
        want(err, "'bin/drover-train' (the command of [job train] in the inventory) is missing: add it "
                  "to the release, or fix the inventory; nothing was contacted, nothing changed");
        want_not(err, "host 'h1'"); /* no connection attempted, no connect error */
    }
    /* not executable, and a release that cannot be read as one: the same */
    assert_int_equal(fs_mkdir_p("rel/bin", 0755), 0);
    mkfile("rel/bin/drover-train", "#!/bin/sh\n", 0644);
    assert_int_equal(drover("deploy", "rel", "--job", "train", NULL), 2);
    want(err, "is not executable: chmod +x");
    want(err, "; nothing was contacted, nothing changed");
    assert_int_equal(chmod("rel/bin/drover-train", 0755), 0);
    /* a launcher saved with DOS line endings: "#!/bin/sh\r" is no container's interpreter.  It was
     * found only at activate, after the old gang was stopped (the newcomer pass), or not at all
     * by validate */
    mkfile("rel/bin/drover-train", "#!/bin/sh\r\nexec true\r\n", 0755);
    const char *verb3[] = { "deploy", "plan", "validate" };
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(drover(verb3[i], "rel", "--job", "train", NULL), i < 2 ? 2 : 1);
        want(err, "'bin/drover-train' (the command of [job train]) has DOS line endings: its #! line "
                  "ends in a carriage return: no container can run it; convert the file to Unix line "
                  "endings (sed -i 's/\\r$//' 'rel/bin/drover-train', or dos2unix)");
    }
    want_not(err, "host 'h1'");
    mkfile("rel/bin/drover-train", "#!/bin/sh\nexec true\r\n", 0755); /* the #! line is what counts */
    assert_int_equal(drover("validate", "rel", "--job", "train", NULL), 0);
    want_not(err, "DOS line endings");
    assert_int_equal(symlink("/etc/passwd", "rel/outside"), 0);
    assert_int_equal(drover("plan", "rel", "--job", "train", NULL), 2);
    want(err, "cannot read release directory 'rel'");
    want(err, "; nothing was contacted, nothing changed");
    /* -o json: the document says it, "outcome": "usage" */
    assert_int_equal(drover("deploy", "rel", "--job", "train", "-o", "json", NULL), 2);
    want(out, "\"outcome\": \"usage\"");
}

/* healthy_deadline left at 60 s under a raised first_step_deadline: validate, plan and deploy
 * warn (every deploy failed at 60 s without a word before); exit codes are untouched. */
static void test_deadline_warning_said(void **state)
{
    (void)state;
    char ini[512];
    snprintf(ini, sizeof ini,
             "[drover]\nstate_dir = %s/state\n[host h1]\naddress = 127.0.0.1\nport = 1\n"
             "[job drafter]\ncontainers = h1:101\ncommand = ./launch.sh\nfirst_step_deadline = 15m\n", tmpd);
    mkfile("drover.ini", ini, 0644);
    assert_int_equal(drover("validate", NULL), 0);
    want(err, "warning: [job drafter]: healthy_deadline is 60s (the default) but first_step_deadline is 15m");
    want(err, "write `healthy_deadline = 15m` in [job drafter]");
    assert_int_equal(fs_mkdir_p("empty", 0755), 0);
    const char *verb[] = { "deploy", "plan" };
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(drover(verb[i], "empty", NULL), 2); /* no ./launch.sh: refused as before */
        want(err, "warning: [job drafter]: healthy_deadline is 60s (the default) but first_step_deadline is 15m");
    }
}

/* A mistyped --job names the nearest job (the newcomer pass: "no [job trian] in 'drover.ini'"
 * with nothing more, and `history --job trian` showed an empty history, exit 0) */
static void test_unknown_job_suggests(void **state)
{
    (void)state;
    char ini[512];
    snprintf(ini, sizeof ini,
             "[drover]\nstate_dir = %s/state\n[host h1]\nlocal = true\n"
             "[job train]\ncontainers = h1:101\ncommand = bin/drover-train\n"
             "[job drafter]\ncontainers = h1:101\ncommand = ./launch.sh\nmaster_port = 29501\n", tmpd);
    mkfile("drover.ini", ini, 0644);
    assert_int_equal(drover("status", "--job", "trian", NULL), 2);
    want(err, "no [job trian] in 'drover.ini': did you mean train?");
    assert_int_equal(drover("validate", "--job", "xyz", NULL), 2);
    want(err, "no [job xyz] in 'drover.ini': its jobs are train, drafter");
    assert_int_equal(drover("logs", "--job", "draftr", NULL), 2);
    want(err, "did you mean drafter?");
    assert_int_equal(drover("deploy", ".", "--job", "trian", NULL), 2);
    want(err, "did you mean train?");
    /* trust names hosts as jobs are named, and knows an address given for a host's name */
    mkfile("hosts.ini", "[host gpu1]\naddress = 10.0.0.7\n[host gpu2]\naddress = 10.0.0.8\n"
                        "[job t]\ncontainers = gpu1:101\ncommand = x\n", 0644);
    assert_int_equal(drover("-i", "hosts.ini", "trust", "gpu3", NULL), 2);
    want(err, "no [host gpu3] in 'hosts.ini': did you mean gpu1?");
    assert_int_equal(drover("-i", "hosts.ini", "trust", "dgx", NULL), 2);
    want(err, "no [host dgx] in 'hosts.ini': its hosts are gpu1, gpu2");
    assert_int_equal(drover("-i", "hosts.ini", "trust", "10.0.0.8", NULL), 2);
    want(err, "10.0.0.8 is the address of [host gpu2]; name the host: gpu2");
    assert_int_equal(drover("history", "--job", "trian", "--local", NULL), 2);
    want(err, "no history of job 'trian'");
    want(err, "did you mean train?");
    /* a job of the inventory with no history yet: an empty table, exit 0 */
    assert_int_equal(drover("history", "--job", "train", "--local", NULL), 0);
    /* validate DIR without --job: a release made for one job fails on the other, and says how
     * to check it for its own job only */
    assert_int_equal(fs_mkdir_p("ptrel", 0755), 0);
    mkfile("ptrel/launch.sh", "#!/bin/sh\n", 0755);
    assert_int_equal(drover("validate", "ptrel", NULL), 1);
    want(out, "release ptrel for job drafter: ok");
    want(err, "'bin/drover-train' (the command of [job train] in the inventory) is missing");
    want(err, "`drover validate ptrel --job J` checks it for job J only");
    assert_int_equal(drover("validate", "ptrel", "--job", "drafter", NULL), 0);
    want_not(err, "--job J");
}

/* stdout is exactly one JSON object: its member key as a string ("" when absent or not one). */
static json_t *doc_of(const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!json_is_object(o))
        fail_msg("stdout is not one JSON object (%s):\n%s", je.text, text);
    return o;
}

static void want_doc(const char *kind, int code, const char *error_has)
{
    json_t *o = doc_of(out);
    assert_int_equal(json_integer_value(json_object_get(o, "v")), 1);
    assert_string_equal(json_string_value(json_object_get(o, "kind")), kind);
    assert_int_equal(json_integer_value(json_object_get(o, "exit")), code);
    assert_string_equal(json_string_value(json_object_get(o, "outcome")), code == 2 ? "usage" : "failed");
    assert_true(json_is_array(json_object_get(o, "records")));
    const char *e = json_string_value(json_object_get(o, "error"));
    if (!e || !strstr(e, error_has))
        fail_msg("want '%s' in the document's error:\n%s", error_has, out);
    json_decref(o);
}

/* For the refusals before any host is contacted: the inventory of fake_agent_inventory_text(),
 * whose agent is a script that leaves a mark (the file `mark` names, cut to mark_sz) when
 * anything runs it. */
static void marking_agent_inventory(char *mark, size_t mark_sz)
{
    char ini[2048], script[256];
    snprintf(mark, mark_sz, "%s/agent-was-run", tmpd);
    mkfile("drover.ini", fake_agent_inventory_text(ini, sizeof ini, tmpd, "", "", "c"), 0644);
    snprintf(script, sizeof script, "#!/bin/sh\ntouch '%s'\nexit 1\n", mark);
    mkfile("agent", script, 0755);
}

/* Nothing ran anywhere: the agent left no mark, and what the verb leaves when it gets that far
 * (left: a path under tmpd, the history a deploy records, the binary an install stages) is not
 * there. */
static void want_nothing_ran(const char *mark, const char *left)
{
    assert_int_equal(access(mark, F_OK), -1);
    char p[256];
    snprintf(p, sizeof p, "%s/%s", tmpd, left);
    assert_int_equal(access(p, F_OK), -1);
}

/* A release (or --env) directory that does not exist is bad input: exit 2, the usage code, with
 * the path and what to give instead, before any host is contacted (it exited 1, the code of a
 * deploy that failed). */
static void test_missing_release_dir(void **state)
{
    (void)state;
    char mark[128];
    marking_agent_inventory(mark, sizeof mark);
    assert_int_equal(fs_mkdir_p("rel/bin", 0755), 0);
    mkfile("rel/bin/t", "#!/bin/sh\n", 0755);
    mkfile("afile", "", 0644);
    assert_int_equal(drover("deploy", "nope", "--job", "train", NULL), 2);
    want(err, "release directory 'nope' does not exist: give the directory that holds the release, "
              "with the job's command in it (drover deploy DIR); nothing was contacted, nothing changed");
    assert_int_equal(drover("plan", "nope", "--job", "train", NULL), 2);
    want(err, "release directory 'nope' does not exist");
    want(err, "(drover plan DIR)");
    assert_int_equal(drover("deploy", "nope", "--all-jobs", NULL), 2); /* a wave too */
    want(err, "release directory 'nope' does not exist");
    assert_int_equal(drover("deploy", "afile", "--job", "train", NULL), 2);
    want(err, "release directory 'afile' is not a directory");
    assert_int_equal(drover("deploy", "rel", "--env", "novenv", "--job", "train", NULL), 2);
    want(err, "environment directory 'novenv' does not exist: give the directory that holds the "
              "environment, a venv say (drover deploy DIR --env ENVDIR)");
    /* -o json: the document says it, exit 2 there too */
    assert_int_equal(drover("deploy", "nope", "--job", "train", "-o", "json", NULL), 2);
    want_doc("deploy", 2, "release directory 'nope' does not exist");
    want_nothing_ran(mark, "state/history.jsonl"); /* no agent call, no lease, no history */
}

/* `drover deploy` without DIR printed only the usage line: say what is missing first, then the
 * usage, exit 2, before any inventory */
static void test_deploy_without_dir(void **state)
{
    (void)state;
    static const char *const verbs_[] = { "deploy", "plan" };
    for (size_t i = 0; i < 2; i++) {
        char line[128];
        snprintf(line, sizeof line, "%s: missing the release directory (drover %s DIR)\n", verbs_[i], verbs_[i]);
        assert_int_equal(drover(verbs_[i], NULL), 2);
        want(err, line);
        snprintf(line, sizeof line, "usage: drover %s DIR", verbs_[i]);
        want(err, line);
        assert_true(strstr(err, "missing the release directory") < strstr(err, "usage:"));
        want_not(err, "cannot read inventory");
        assert_int_equal(drover(verbs_[i], "--job", "train", NULL), 2);
        want(err, "missing the release directory");
    }
    /* a bad option is its own error, with no word of a missing directory */
    assert_int_equal(drover("deploy", "-o", "yaml", NULL), 2);
    want(err, "-o takes json, not 'yaml'");
    want_not(err, "missing the release directory");
    /* a stray argument is not a missing one */
    assert_int_equal(drover("deploy", "a", "b", NULL), 2);
    want_not(err, "missing the release directory");
}

/* A wave's bad input is found before anything is deployed: every job's command is checked in the
 * release before any host is contacted (a later job's missing command was found only once the
 * jobs before it had been deployed: the hosts were contacted first, the first job went through
 * its lease, survey and switch, and the wave then rolled it back; exit 1). */
static void test_wave_checked_before_hosts(void **state)
{
    (void)state;
    char mark[128];
    marking_agent_inventory(mark, sizeof mark); /* train runs bin/t, eval bin/e */
    assert_int_equal(fs_mkdir_p("rel/bin", 0755), 0);
    mkfile("rel/bin/t", "#!/bin/sh\n", 0755);
    const char *missing = "release directory 'rel': 'bin/e' (the command of [job eval] in the inventory) is "
                          "missing: add it to the release, or fix the inventory; nothing was contacted, "
                          "nothing changed";
    assert_int_equal(drover("deploy", "rel", "--all-jobs", NULL), 2);
    want(err, missing);
    want_not(err, "wave: job 'train'"); /* the first job was not started */
    assert_int_equal(drover("deploy", "rel", "--job", "train", "--job", "eval", NULL), 2);
    want(err, missing);
    assert_int_equal(drover("plan", "rel", "--all-jobs", NULL), 2);
    want(err, missing);
    assert_int_equal(drover("plan", "rel", NULL), 2); /* plan of an inventory of two jobs: both */
    want(err, missing);
    /* -o json: the document says it, exit 2 there too */
    assert_int_equal(drover("deploy", "rel", "--all-jobs", "-o", "json", NULL), 2);
    want_doc("deploy", 2, "'bin/e' (the command of [job eval] in the inventory) is missing");
    /* every job's problem at once, whatever the order: both jobs named */
    assert_int_equal(unlink("rel/bin/t"), 0);
    mkfile("rel/bin/e", "#!/bin/sh\n", 0644);
    assert_int_equal(drover("deploy", "rel", "--job", "eval", "--job", "train", NULL), 2);
    want(err, "'bin/t' (the command of [job train] in the inventory) is missing");
    want(err, "'bin/e' (the command of [job eval]) is not executable: chmod +x 'rel/bin/e'; nothing was contacted");
    /* a release that cannot be read as one: the same, before any host */
    mkfile("rel/bin/t", "#!/bin/sh\n", 0755);
    assert_int_equal(chmod("rel/bin/e", 0755), 0);
    assert_int_equal(symlink("/etc/passwd", "rel/outside"), 0);
    assert_int_equal(drover("deploy", "rel", "--all-jobs", NULL), 2);
    want(err, "cannot read release directory 'rel'");
    want(err, "; nothing was contacted, nothing changed");
    want_nothing_ran(mark, "state/history.jsonl"); /* no agent call, no lease, no history */
    /* and a good release goes on to the hosts (here the agent, which fails: exit 1, not 2) */
    assert_int_equal(unlink("rel/outside"), 0);
    assert_int_equal(drover("deploy", "rel", "--all-jobs", NULL), 1);
    want(err, "wave: job 'train' (1 of 2)");
    assert_int_equal(access(mark, F_OK), 0);
}

/* An absolute command (or preflight) is the container's, as validate has it: deploy and plan
 * do not look for it in the release (they said "'/usr/bin/python3' ... is missing", exit 2) */
static void test_absolute_command_not_in_release(void **state)
{
    (void)state;
    char mark[128], ini[1024];
    marking_agent_inventory(mark, sizeof mark);
    snprintf(ini, sizeof ini,
             "[drover]\nstate_dir = %s/state\n[host h1]\nlocal = true\nagent_path = %s/agent\n"
             "[job abs]\ncontainers = h1:local:%s/a\ncommand = /usr/bin/python3\n", tmpd, tmpd, tmpd);
    mkfile("drover.ini", ini, 0644);
    assert_int_equal(fs_mkdir_p("rel", 0755), 0);
    mkfile("rel/train.py", "print(1)\n", 0644);
    assert_int_equal(drover("validate", "rel", NULL), 0);
    assert_int_equal(drover("plan", "rel", NULL), 1); /* on to the agent, which fails here */
    want_not(err, "is missing");
    assert_int_equal(access(mark, F_OK), 0);
}

/* An --agent-binary that does not exist (or is a directory) is bad input, as a missing release
 * directory is to deploy: exit 2, the path and what to give instead, and no container touched (it
 * exited 1, the code of an install that failed). */
static void test_missing_agent_binary(void **state)
{
    (void)state;
    char mark[128];
    marking_agent_inventory(mark, sizeof mark);
    assert_int_equal(drover("install", "--job", "train", "--agent-binary", "nope/drover-agent", NULL), 2);
    want(err, "agent binary 'nope/drover-agent' does not exist: build it (make builds "
              "build/drover-agent next to drover), or give the drover-agent to push "
              "(drover install --agent-binary PATH); nothing was contacted, nothing changed");
    assert_int_equal(fs_mkdir_p("adir", 0755), 0);
    assert_int_equal(drover("install", "--job", "train", "--agent-binary", "adir", NULL), 2);
    want(err, "agent binary 'adir' is a directory");
    /* -o json: the document says it, exit 2 there too */
    assert_int_equal(drover("install", "--job", "train", "--agent-binary", "nope", "-o", "json", NULL), 2);
    want_doc("install", 2, "agent binary 'nope' does not exist");
    want_nothing_ran(mark, "agent.new"); /* nothing ran in any container, nothing was put there */
}

/* `drover history -o json` shows each record's reason_code (added beside reason): the one the
 * record carries, or for a record an older drover wrote, the one its words meant.  (history
 * built its own copy of the record's JSON and left the code out.) */
static void test_history_json_reason_code(void **state)
{
    (void)state;
    char mark[128];
    marking_agent_inventory(mark, sizeof mark);
    assert_int_equal(fs_mkdir_p("state", 0700), 0);
    mkfile("state/history.jsonl",
           "{\"v\":1,\"time\":1,\"job\":\"train\",\"release\":\"r1\",\"result\":\"failed\","
           "\"reason\":\"promote failed\"}\n"
           "{\"v\":1,\"time\":2,\"job\":\"train\",\"release\":\"r2\",\"result\":\"reverted\","
           "\"reason\":\"crash loop\",\"reason_code\":\"agent-revert\"}\n",
           0600);
    assert_int_equal(drover("history", "--job", "train", "--local", "-o", "json", NULL), 0);
    json_t *o = doc_of(out), *h = json_object_get(o, "history");
    assert_int_equal(json_array_size(h), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(h, 0), "reason_code")), "promote-failed");
    assert_string_equal(json_string_value(json_object_get(json_array_get(h, 1), "reason_code")), "agent-revert");
    assert_string_equal(json_string_value(json_object_get(json_array_get(h, 1), "reason")), "crash loop");
    json_decref(o);
    want_nothing_ran(mark, "agent.new"); /* --local: no container asked */
}

/* -o json promises one document on stdout whatever happens: an inventory that does not load
 * wrote nothing there (every verb that takes -o json), nor did install failing before it began */
static void test_json_without_inventory(void **state)
{
    (void)state;
    static const struct {
        const char *kind, *a[8]; /* NULL-padded */
    } verbs_json[] = {
        { "deploy", { "deploy", ".", "--job", "train", "-o", "json" } },
        { "plan", { "plan", ".", "-o", "json" } },
        { "plan", { "deploy", ".", "--dry-run", "-o", "json" } },
        { "rollback", { "rollback", "--job", "train", "-o", "json" } },
        { "install", { "install", "-o", "json" } },
        { "trust", { "trust", "h1", "-o", "json" } },
        { "status", { "status", "-o", "json" } },
        { "history", { "history", "--job", "train", "--output=json" } },
        { "events", { "events", "-ojson" } },
    };
    for (size_t i = 0; i < sizeof verbs_json / sizeof verbs_json[0]; i++) {
        const char *const *a = verbs_json[i].a;
        assert_int_equal(drover(a[0], a[1], a[2], a[3], a[4], a[5], a[6], NULL), 2);
        want_doc(verbs_json[i].kind, 2, "drover.ini: cannot read inventory");
        want(err, "drover.ini: cannot read inventory"); /* and on stderr, as without -o json */
    }
    json_t *o = doc_of(out); /* events: its jobs are the --job given, here none */
    assert_int_equal(json_array_size(json_object_get(o, "jobs")), 0);
    json_decref(o);
    assert_int_equal(drover("history", "--job", "train", "-o", "json", NULL), 2);
    o = doc_of(out);
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "jobs"), 0)), "train");
    json_decref(o);
    /* without -o json stdout stays empty */
    assert_int_equal(drover("status", NULL), 2);
    assert_string_equal(out, "");

    /* install -o json failing before it begins: an unknown job, a container not in the
     * inventory, no agent binary */
    mkfile("drover.ini", "[host h1]\nlocal = true\n[job train]\ncontainers = h1:101\n"
                         "command = bin/drover-train\n", 0644);
    assert_int_equal(drover("install", "--job", "nosuch", "-o", "json", NULL), 2);
    want_doc("install", 2, "no [job nosuch]");
    o = doc_of(out);
    assert_true(json_is_array(json_object_get(o, "containers")));
    assert_true(json_is_null(json_object_get(o, "sha256")));
    json_decref(o);
    assert_int_equal(drover("install", "h9:101", "-o", "json", NULL), 2);
    want_doc("install", 2, "h9");
    assert_int_equal(drover("install", "--agent-binary", "nonexistent-agent", "-o", "json", NULL), 2);
    want_doc("install", 2, "agent binary 'nonexistent-agent' does not exist");
    o = doc_of(out);
    assert_string_equal(json_string_value(json_object_get(o, "agent_binary")), "nonexistent-agent");
    json_decref(o);
}

/* cli_job_selection() and cli_option_error(), the one check of --job/--all-jobs that deploy, plan, rollback, stop and
 * start share: the same words for each verb, the verb's own usage line, exit 2 */
static int selection(const char *verb, const char *const *jobs, int njobs, bool all, enum cli_jobs_need need)
{
    struct capture cap;
    capture_begin(&cap);
    int rc = cli_job_selection(verb, jobs, njobs, all, need);
    capture_end(&cap);
    return rc;
}

static void test_job_selection(void **state)
{
    (void)state;
    const char *const two[] = { "a", "b" }, *const again[] = { "a", "b", "a" };
    /* fine: nothing is said */
    assert_int_equal(selection("deploy", NULL, 0, false, CLI_JOBS_ANY), 0);
    assert_string_equal(err, "");
    assert_int_equal(selection("stop", two, 2, false, CLI_JOBS_SOME), 0);
    assert_int_equal(selection("start", NULL, 0, true, CLI_JOBS_SOME), 0);
    assert_int_equal(selection("rollback", two, 1, false, CLI_JOBS_ONE), 0);
    assert_string_equal(err, "");
    /* a job named twice, whatever the verb needs */
    for (int need = CLI_JOBS_ANY; need <= CLI_JOBS_ONE; need++) {
        assert_int_equal(selection("deploy", again, 3, false, (enum cli_jobs_need)need), 2);
        want(err, "--job 'a' given twice: name each job once");
        want(err, "usage: drover deploy DIR");
    }
    /* both */
    assert_int_equal(selection("plan", two, 1, true, CLI_JOBS_ANY), 2);
    want(err, "--job and --all-jobs cannot be combined: name the jobs with --job, or all of them "
              "with --all-jobs");
    want(err, "usage: drover plan");
    assert_int_equal(selection("stop", two, 2, true, CLI_JOBS_SOME), 2);
    want(err, "--job and --all-jobs cannot be combined");
    /* neither */
    assert_int_equal(selection("stop", NULL, 0, false, CLI_JOBS_SOME), 2);
    want(err, "stop needs --job J (repeatable) or --all-jobs");
    want(err, "usage: drover stop --job J... | --all-jobs");
    assert_int_equal(selection("rollback", NULL, 0, false, CLI_JOBS_ONE), 2);
    want(err, "rollback needs --job J");
    want_not(err, "--all-jobs");
    want(err, "usage: drover rollback");
    /* the option a verb does not take */
    struct capture cap;
    capture_begin(&cap);
    int rc = cli_option_error("rollback", '?', NULL);
    capture_end(&cap);
    assert_int_equal(rc, 2);
    want_not(err, "-o takes");
    want(err, "usage: drover rollback");
    assert_int_equal(drover("rollback", "--job", "a", "-o", "yaml", NULL), 2);
    want(err, "-o takes json, not 'yaml'");
    assert_int_equal(drover("stop", "--job", "a", "-o", "yaml", NULL), 2);
    want(err, "-o takes json, not 'yaml'");
}

/* Every verb's -o says what it takes, in one helper's words (cli_output): history, logs (events)
 * and trust printed only the usage line for `-o yaml` or `-o wide`, while status said "-o takes
 * json or wide" and deploy "-o takes json". */
static void test_output_values(void **state)
{
    (void)state;
    static const char *const cmds[][4] = {
        { "history", NULL }, { "events", NULL }, { "trust", "h1", NULL }, { "deploy", "dir", NULL },
        { "plan", "dir", NULL }, { "install", NULL }, { "rollback", "--job", "a", NULL },
        { "stop", "--job", "a", NULL }, { "start", "--job", "a", NULL },
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        for (int form = 0; form < 3; form++) {
            const char *bad = form == 1 ? "wide" : "yaml";
            char *argv[8], eq[32];
            int n = 0;
            argv[n++] = "drover";
            for (int k = 0; cmds[i][k]; k++)
                argv[n++] = (char *)cmds[i][k];
            snprintf(eq, sizeof eq, "--output=%s", bad);
            if (form == 2)
                argv[n++] = eq;
            else {
                argv[n++] = "-o";
                argv[n++] = (char *)bad;
            }
            argv[n] = NULL;
            struct capture cap;
            capture_begin(&cap);
            int rc = cli_main(n, argv, "test");
            capture_end(&cap);
            char want_line[64];
            snprintf(want_line, sizeof want_line, "%s takes json, not '%s'", form == 2 ? "--output" : "-o", bad);
            if (rc != 2 || !strstr(err, want_line) || !strstr(err, "usage: drover "))
                fail_msg("drover %s -o %s: rc %d, stderr:\n%s", cmds[i][0], bad, rc, err);
        }
    /* status takes two; the helper's list */
    assert_int_equal(drover("status", "-o", "yaml", NULL), 2);
    want(err, "-o takes json or wide, not 'yaml'");
    const char *const three[] = { "json", "wide", "name", NULL };
    char *argv[] = { "x", "-o", "yaml", NULL };
    int k = 7;
    optind = 3;
    struct capture cap;
    capture_begin(&cap);
    assert_int_equal(cli_output(argv, argv[2], three, &k), 2);
    capture_end(&cap);
    want(err, "-o takes json, wide or name, not 'yaml'");
    assert_int_equal(k, 7); /* untouched */
    argv[2] = "wide";
    assert_int_equal(cli_output(argv, argv[2], three, &k), 0);
    assert_int_equal(k, 1);
}

/* --to and --job are taken once by the verbs that act on one job (getopt kept the last one
 * silently: `rollback --job a --job b` rolled back b): a usage error naming the option and both
 * values, said before any inventory (cli_take_once) */
static void test_option_given_twice(void **state)
{
    (void)state;
    static const char *const verbs1[] = { "rollback", "promote", "revert", "rebaseline" };
    for (size_t i = 0; i < ARRAY_SIZE(verbs1); i++) {
        assert_int_equal(drover(verbs1[i], "--job", "a", "--job", "b", NULL), 2);
        want(err, "--job given twice ('a' and 'b'): give it once");
        char usage[64];
        snprintf(usage, sizeof usage, "usage: drover %s", verbs1[i]);
        want(err, usage);
        want_not(err, "inventory");
        /* the same job twice says the same: the line is not what was meant either */
        assert_int_equal(drover(verbs1[i], "--job=a", "-j", "a", NULL), 2);
        want(err, "--job given twice ('a' and 'a'): give it once");
    }
    /* the verbs that read one job: the last --job was the one shown or logged, silently */
    static const char *const verbs2[] = { "status", "history", "logs", "events", "validate", "install" };
    for (size_t i = 0; i < ARRAY_SIZE(verbs2); i++) {
        assert_int_equal(drover(verbs2[i], "--job", "a", "--job", "b", NULL), 2);
        want(err, "--job given twice ('a' and 'b'): give it once");
        want_not(err, "inventory");
    }
    assert_int_equal(drover("rollback", "--job", "a", "--to", "abcdef", "--to", "123456", NULL), 2);
    want(err, "--to given twice ('abcdef' and '123456'): give it once");
    want(err, "usage: drover rollback");
    want_not(err, "inventory");
    /* once each is fine: on to the inventory */
    assert_int_equal(drover("rollback", "--job", "a", "--to", "abcdef", NULL), 2);
    want(err, "cannot read inventory");
    want_not(err, "given twice");
    const char *slot = NULL;
    assert_int_equal(cli_take_once("rollback", "--to", &slot, "x"), 0);
    assert_string_equal(slot, "x");
    assert_int_equal(cli_take_once("rollback", "--to", &slot, "y"), 2);
    assert_string_equal(slot, "x"); /* untouched */
}

/* rollback --force without --to: --force only lets --to name a release that failed probation,
 * so alone it changed nothing, silently; now a usage error before the inventory */
static void test_rollback_force_needs_to(void **state)
{
    (void)state;
    assert_int_equal(drover("rollback", "--job", "a", "--force", NULL), 2);
    want(err, "--force only applies with --to ID");
    want(err, "usage: drover rollback");
    want_not(err, "inventory");
    assert_int_equal(drover("rollback", "--force", "--job", "a", "--now", NULL), 2);
    want(err, "--force only applies with --to ID");
    assert_int_equal(drover("rollback", "--job", "a", "--to", "abcdef", "--force", NULL), 2);
    want(err, "cannot read inventory"); /* with --to: on to the inventory */
    want_not(err, "--force only applies");
}

/* rollback --to: a malformed prefix (not hex, under 6 digits) is a usage error said before any
 * inventory or host; a well-formed one that matches no release of the job (`--to deadbeef` said
 * "give at least 6 hex digits of one", as if 8 were too few, and exit 2 after the survey) is a
 * refusal, exit 1, pointing at the history; one that matches several names them. */
static void test_rollback_to_prefix(void **state)
{
    (void)state;
    static const char *const malformed[] = { "v1", "abc12", "deadbeeg", "-1",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" /* 65 */ };
    for (size_t i = 0; i < ARRAY_SIZE(malformed); i++) {
        assert_int_equal(drover("rollback", "--job", "train", "--to", malformed[i], NULL), 2);
        char line[200];
        snprintf(line, sizeof line, "--to '%s' is not a release id: give 6 to 64 hex digits of one "
                 "(`drover history --job train` lists the job's releases)", malformed[i]);
        want(err, line);
        want_not(err, "cannot read inventory"); /* before the inventory, so before any host */
    }
    assert_int_equal(drover("rollback", "--job", "train", "--to", "DEADBEEF", NULL), 2);
    want(err, "cannot read inventory"); /* well formed: on to the inventory */
    want_not(err, "is not a release id");

    char ini[2048];
    mkfile("drover.ini", fake_agent_inventory_text(ini, sizeof ini, tmpd, "", "", "c"), 0644);
    struct agent_status st;
    fake_agent_status_init(&st);
    st.njobs = 1;
    struct job_status *js = &st.jobs[0];
    strcpy(js->job, "train");
    js->state = GANG_RUNNING;
    memset(js->current, 'a', RELEASE_ID_LEN);
    memcpy(js->good, js->current, sizeof js->good);
    memset(js->previous, 'b', RELEASE_ID_LEN);
    js->ngoods = 3;
    memcpy(js->goods[0], js->current, sizeof js->goods[0]);
    memcpy(js->goods[1], js->previous, sizeof js->goods[1]);
    memset(js->goods[2], 'a', RELEASE_ID_LEN);
    memset(js->goods[2] + 16, '1', RELEASE_ID_LEN - 16); /* shares a...'s first 16 digits */
    fake_agent(tmpd, &st);
    assert_int_equal(drover("rollback", "--job", "train", "--to", "deadbeef", "--dry-run", NULL), 1);
    want(err, "rollback of job 'train' refused, nothing changed: no release the job ran (good, previous, "
              "promoted or bad) begins with 'deadbeef'; `drover history --job train` lists its releases");
    want_not(err, "at least 6");
    assert_int_equal(drover("rollback", "--job", "train", "--to", "aaaaaaaa", "--dry-run", NULL), 1);
    want(err, "2 releases the job ran begin with 'aaaaaaaa' (aaaaaaaaaaaa, aaaaaaaaaaaa); give more hex digits");
    assert_int_equal(drover("rollback", "--job", "train", "--to", "aaaaaaaaaaaaa", "--dry-run", NULL), 1);
    want(err, "(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, aaaaaaaaaaaaaaaa1111");
}

/* `drover -i DIR`: the path and what to give, exit 2 */
static void test_inventory_is_directory(void **state)
{
    (void)state;
    assert_int_equal(fs_mkdir_p("conf", 0755), 0);
    assert_int_equal(drover("-i", "conf", "status", NULL), 2);
    want(err, "inventory 'conf' is a directory: give the inventory file, e.g. conf/drover.ini");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_usage_before_inventory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deploy_which_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_needs_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_top_filter_hides_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_option_given_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_force_needs_to, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_to_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebaseline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inventory_is_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_and_all_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values_name_the_option_typed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_durations_take_units, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version_and_help, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_without_inventory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_did_you_mean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_checked_before_hosts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_release_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deploy_without_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wave_checked_before_hosts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_absolute_command_not_in_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_agent_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history_json_reason_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_job_suggests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_start_need_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_selection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_notes_under_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_warning_said, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
