/* controller/cli.c: see cli.h.  The order is the contract: global options, verb, help and
 * version (no inventory), the verb's own arguments (no inventory, no host), the inventory, the
 * verb.  A verb sees args_only set on the first pass and returns EXIT_OK once its arguments
 * parse; what needs the inventory to be judged (a job name, a rank) waits for the second.
 */
#include "controller/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ini.h"
#include "common/log.h"
#include "controller/cmd.h"
#include "controller/inventory.h"
#include "controller/verbs.h"

/* The verb's arguments against an empty inventory: EXIT_OK, or the usage error it reported.
 * *ret_json: what the verb said about -o json (cmd_result_want()). */
static int check_args(const struct verb *vb, int argc, char **argv, struct fleet *ret_json)
{
    struct inventory *none = calloc(1, sizeof *none);
    if (!none) {
        log_error("out of memory");
        return EXIT_FAIL;
    }
    char **copy = calloc((size_t)argc + 1, sizeof *copy); /* getopt_long permutes argv */
    if (!copy) {
        free(none);
        log_error("out of memory");
        return EXIT_FAIL;
    }
    memcpy(copy, argv, (size_t)argc * sizeof *copy);
    struct fleet f;
    fleet_init(&f, none, NULL);
    f.args_only = true;
    int ret = vb->run(&f, argc, copy);
    ret_json->json_kind = f.json_kind;
    ret_json->json_njobs = f.json_njobs;
    memcpy(ret_json->json_jobs, f.json_jobs, sizeof f.json_jobs);
    fleet_done(&f);
    free(copy);
    inventory_free(none);
    return ret;
}

int cli_option_error(const char *verb, int c, const char *optarg_now)
{
    (void)c;
    (void)optarg_now;
    return verb_usage_error(verb, NULL);
}

const char *const cli_output_json[] = { "json", NULL };

int cli_output(char **argv, const char *value, const char *const *takes, int *ret_index)
{
    int n = 0;
    for (; takes[n]; n++)
        if (!strcmp(value, takes[n])) {
            *ret_index = n;
            return EXIT_OK;
        }
    char list[128] = "", typed[32];
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof list; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", sep, takes[i]);
    }
    log_error("%s takes %s, not '%s'", verb_opt_typed(argv, optind, value, typed, sizeof typed),
              list, value);
    return verb_usage_error(argv[0], NULL);
}

/* The value's name after opt in a usage line ("J..." after "--job" in "--job J... | --all-jobs
 * [-o json]"), into buf; "" when the line does not show opt with a value. */
static const char *usage_value(const char *usage, const char *opt, char *buf, size_t size)
{
    size_t ol = strlen(opt);
    buf[0] = '\0';
    for (const char *p = usage; ol && (p = strstr(p, opt)) != NULL; p += ol) {
        bool starts = p == usage || p[-1] == ' ' || p[-1] == '[' || p[-1] == '|';
        if (!starts || p[ol] != ' ')
            continue;
        const char *v = p + ol + 1;
        size_t vl = strcspn(v, " ]");
        if (vl && v[0] != '-' && v[0] != '[' && v[0] != '|')
            snprintf(buf, size, "%.*s", (int)vl, v);
        break;
    }
    return buf;
}

/* cli_getopt(), also for drover's own options (verb NULL: "for drover", usage the global line).
 * getopt_long() matches the options; this only words its ':' and '?' as drover's error. */
static int getopt_said(const char *verb, const char *usage, int argc, char **argv, const char *optstring,
                       const struct option *longopts)
{
    char os[128];
    bool plus = optstring[0] == '+';
    snprintf(os, sizeof os, "%s:%s", plus ? "+" : "", optstring + plus); /* ':': missing value is ':' */
    opterr = 0;
    int c = getopt_long(argc, argv, os, longopts, NULL);
    if (c != ':' && c != '?')
        return c;
    /* A long option's error leaves optind past its word and optopt its val (0: unknown or
     * ambiguous; '?' with a val: "--x=v" for an x that takes none).  A short one's char is
     * optopt, its word maybe still at optind: "-zn" after "--dry-run" or "--job=a". */
    const char *w = optind >= 1 && optind <= argc ? argv[optind - 1] : "";
    size_t nl = strcspn(w, "=");
    bool islong = w[0] == '-' && w[1] == '-' && w[2] && (c == ':' || !optopt || w[nl] == '=');
    const struct option *lo = NULL; /* optopt's long option (any begun so when 0), as typed if long */
    for (const struct option *o = longopts; o && o->name && !lo; o++)
        if ((!optopt || (o->val == optopt && (o->has_arg == required_argument) == (c == ':'))) &&
            (!islong || strncmp(o->name, w + 2, nl - 2) == 0))
            lo = o;
    islong = islong && (lo || !optopt);
    char who[64], typed[64], lname[64] = "", sname[4] = "", val[48];
    snprintf(who, sizeof who, "drover%s%s", verb ? " " : "", verb ? verb : "");
    if (islong)
        snprintf(typed, sizeof typed, "%.*s", (int)nl, w);
    else
        snprintf(typed, sizeof typed, "-%c", optopt);
    if (c == ':') {
        /* the value's name from the usage line, under the long or the short name */
        if (lo)
            snprintf(lname, sizeof lname, "--%.60s", lo->name);
        if (optopt > ' ' && optopt < 127 && strchr(optstring, optopt))
            snprintf(sname, sizeof sname, "-%c", optopt);
        const char *named = islong ? lname : sname;
        if (!*usage_value(usage, named, val, sizeof val))
            usage_value(usage, islong ? sname : lname, val, sizeof val);
        char hint[128] = "";
        if (val[0])
            snprintf(hint, sizeof hint, " (%s %s)", named, val);
        log_error("option '%s' for %s needs a value%s", typed, who, hint);
    } else if (islong && optopt) {
        log_error("option '%s' for %s takes no value", typed, who);
    } else if (islong && lo) {
        log_error("option '%s' for %s is ambiguous: more than one of its options begins so "
                  "(%s --help lists them)", typed, who, who);
    } else {
        log_error("unknown option '%s' for %s", typed, who);
    }
    return '?';
}

int cli_getopt(int argc, char **argv, const char *optstring, const struct option *longopts)
{
    const struct verb *v = verb_find(argv[0]);
    return getopt_said(argv[0], v ? v->args : "", argc, argv, optstring, longopts);
}

/* A bound as a duration reads best: "1m", "10m", "24h", "0.5s" */
static void duration_words(double s, char *buf, size_t sz)
{
    if (s >= 3600 && s == (long long)(s / 3600) * 3600.0)
        snprintf(buf, sz, "%gh", s / 3600);
    else if (s >= 60 && s == (long long)(s / 60) * 60.0)
        snprintf(buf, sz, "%gm", s / 60);
    else
        snprintf(buf, sz, "%gs", s);
}

int cli_duration(const char *opt, const char *value, double lo, bool lo_open, double hi,
                 double *ret_s)
{
    double v;
    int r = ini_parse_duration(value, &v);
    if (r == 0 && (lo_open ? v > lo : v >= lo) && v <= hi) {
        *ret_s = v;
        return EXIT_OK;
    }
    char l[32], h[32];
    duration_words(lo, l, sizeof l);
    duration_words(hi, h, sizeof h);
    log_error("%s takes a duration %s %s %s %s (like 2s, 500ms, 1m; a plain number is seconds), "
              "not '%s'%s",
              opt, lo_open ? "over" : "from", l, lo_open ? "up to" : "to", h, value,
              r == -EDOM ? " (hex and exponent forms are not taken)" : "");
    return EXIT_USAGE;
}

int cli_take_once(const char *verb, const char *opt, const char **slot, const char *value)
{
    if (*slot) { /* the same value twice too: the command line says something other than meant */
        log_error("%s given twice ('%s' and '%s'): give it once", opt, *slot, value);
        return verb_usage_error(verb, NULL);
    }
    *slot = value;
    return EXIT_OK;
}

int cli_job_selection(const char *verb, const char *const *jobs, int njobs, bool all, enum cli_jobs_need need)
{
    for (int k = 1; k < njobs; k++)
        for (int i = 0; i < k; i++)
            if (!strcmp(jobs[i], jobs[k])) { /* deploy: a wave would deploy it twice in a row */
                log_error("--job '%s' given twice: name each job once", jobs[k]);
                return verb_usage_error(verb, NULL);
            }
    if (all && njobs) { /* the usage line alone offered both */
        log_error("--job and --all-jobs cannot be combined: name the jobs with --job, or all of "
                  "them with --all-jobs");
        return verb_usage_error(verb, NULL);
    }
    if (all || njobs || need == CLI_JOBS_ANY)
        return EXIT_OK;
    /* even with one job: a stop ends training, a rollback changes what runs, so it is named */
    if (need == CLI_JOBS_ONE)
        log_error("%s needs --job J", verb);
    else
        log_error("%s needs --job J (repeatable) or --all-jobs", verb);
    return verb_usage_error(verb, NULL);
}

/* "unknown verb 'deplyo': did you mean deploy?"  Returns EXIT_USAGE. */
static int unknown_verb(const char *verb)
{
    const char *near = verb_suggest(verb);
    if (near)
        log_error("unknown verb '%s': did you mean %s? (drover help lists them)", verb, near);
    else
        log_error("unknown verb '%s' (drover help lists them)", verb);
    return EXIT_USAGE;
}

int cli_main(int argc, char **argv, const char *version)
{
    static const struct option opts[] = {
        { "inventory", required_argument, NULL, 'i' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    log_set_level(LOG_LVL_INFO);
    log_set_flush_stdout(true); /* a note under a table stays under it in a pipe (common/log.h) */
    const char *inv_arg = NULL;
    int c;
    optind = 0;
    /* drover's own usage line, for "-i needs a value (-i INVENTORY)" */
    while ((c = getopt_said(NULL, "[-i INVENTORY] [-v] VERB [ARGS]", argc, argv, "+i:vh", opts)) != -1) {
        switch (c) {
        case 'i':
            inv_arg = optarg;
            break;
        case 'v':
            log_set_level(LOG_LVL_DEBUG);
            break;
        case 'h':
            verbs_usage(stdout);
            return EXIT_OK;
        case 'V':
            printf("drover %s\n", version);
            return EXIT_OK;
        default:
            verbs_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        verbs_usage(stderr);
        return EXIT_USAGE;
    }
    const char *verb = argv[optind];
    int vargc = argc - optind;
    char **vargv = argv + optind;
    if (!verbs_take_inventory_arg(&vargc, vargv, &inv_arg)) {
        log_error("-i/--inventory takes a file (drover %s -i FILE ...)", verb);
        return EXIT_USAGE;
    }
    const struct verb *vb = verb_find(verb);
    if (!vb)
        return unknown_verb(verb);
    /* --help is answered from the table, before anything else (a verb's help must work on a
     * machine without an inventory; `version --help` is help, not the version) */
    if (verb_wants_help(vargc, vargv)) {
        verb_help(vb, stdout);
        return EXIT_OK;
    }
    if (strcmp(verb, "help") == 0) {
        const struct verb *hv = vargc > 1 ? verb_find(vargv[1]) : NULL;
        if (hv)
            verb_help(hv, stdout);
        else if (vargc > 1) /* `help nosuch` listed the verbs and exited 0 */
            return unknown_verb(vargv[1]);
        else
            verbs_usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(verb, "version") == 0) {
        if (vargc > 1) {
            log_error("usage: drover version (unexpected '%s')", vargv[1]);
            return EXIT_USAGE;
        }
        printf("drover %s\n", version);
        return EXIT_OK;
    }
    if (vb->run_plain)
        return vb->run_plain(vargc, vargv);
    if (!vb->run) {
        log_error("unknown verb '%s' (drover help lists them)", verb);
        return EXIT_USAGE;
    }
    struct fleet want = { 0 };
    int ret = verb_check_options(vb, vargc, vargv);
    if (ret != EXIT_OK)
        return ret;
    ret = check_args(vb, vargc, vargv, &want);
    if (ret != EXIT_OK)
        return ret;
    const char *path = inv_arg ? inv_arg : getenv("DROVER_INVENTORY");
    if (!path || !*path)
        path = "drover.ini";
    struct inventory *inv;
    char err[1024];
    if (inventory_load(path, &inv, err, sizeof err) < 0) {
        log_error("%s", err);
        /* -o json promised one document on stdout: CI reads why from its "error" */
        return want.json_kind ? cmd_result_early(want.json_kind, want.json_jobs, want.json_njobs, EXIT_USAGE, err)
                              : EXIT_USAGE;
    }
    struct fleet f;
    fleet_init(&f, inv, inv_arg);
    ret = vb->run(&f, vargc, vargv);
    if (f.key_refused && (ret == EXIT_FAIL || ret == EXIT_OK))
        ret = EXIT_HOSTKEY;
    fleet_done(&f);
    inventory_free(inv);
    return ret;
}
