/* controller/inventory.c: parses the inventory INI (libinih) into struct inventory and checks
 * it (hosts exist, containers unique, jobs complete).  Owns the key names and defaults that
 * docs/config.md documents.  It never connects to a host or reads anything but the one file.
 *
 * The file is read by common/ini.c (line numbers, over-long lines refused, every section header
 * seen); numbers, durations and booleans are rows of one typed key table (keys[] below), the
 * string keys with their own checks are handled per section.
 */
#include "controller/inventory.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

#include "common/text.h"
#include "common/workerenv.h"
#include "common/ini.h"
#include "common/util.h"

#define INV_LINE_MAX 196 /* content bytes a line may have (libinih's buffer is 200) */
#define INV_FILE_MAX (1u << 20)

/* Policy keys, one bit each, so a job inherits [policy] keys it did not set itself. */
enum {
    POL_HEALTHY_DEADLINE = 1 << 0,
    POL_MIN_HEALTHY_TIME = 1 << 1,
    POL_WARMUP_STEPS = 1 << 2,
    POL_TOLERANCE = 1 << 3,
    POL_AUTO_REVERT = 1 << 4,
    POL_PROGRESS_DEADLINE = 1 << 5,
    POL_MAX_PARALLEL = 1 << 6,
    POL_CANARY = 1 << 7,
    POL_FIRST_STEP_DEADLINE = 1 << 8,
    POL_SILENCE_DEADLINE = 1 << 9,
    POL_STALL_DEADLINE = 1 << 10,
    POL_CHECKPOINT_DEADLINE = 1 << 11,
    POL_WARMUP_TIME = 1 << 12,
    POL_WARMUP_MAX = 1 << 13,
    POL_MAX_PROBATION_TIME = 1 << 14,
    POL_ON_INCONCLUSIVE = 1 << 15,
    POL_CONFIDENCE = 1 << 16,
    POL_HOLD_TIME = 1 << 17,
    POL_SWITCH_DEADLINE = 1 << 18,
    POL_LEASE_TTL = 1 << 19,
};

struct pending_ct {
    int job, line;
    char spec[INV_VALUE_MAX];
};

struct parse_ctx {
    struct inventory *inv;
    const char *path;
    int line;     /* of the line being handled */
    int key_line; /* of the last key = value line, which an indented line continues */
    /* current section */
    char section[INV_VALUE_MAX];
    int kind; /* 0 none, 1 drover, 2 policy, 3 host, 4 job */
    int idx;
    /* policy inheritance */
    struct inv_policy policy;
    unsigned policy_set;
    unsigned job_policy_set[INV_MAX_JOBS];
    int gpus_line[INV_MAX_JOBS]; /* each job's gpus key, for the checks made once the job is whole */
    /* scalar keys already seen in this section, to refuse duplicates */
    char seen[48][INV_NAME_MAX];
    int nseen;
    bool ssh_config_set; /* [drover] ssh_config given (else ~/.ssh/config when it exists) */
    bool had_drover, had_policy, had_notify; /* [drover], [policy], [notify] may appear once each */
    /* containers resolved after the whole file (hosts may come later) */
    struct pending_ct pending[INV_MAX_JOBS * INV_MAX_CTS];
    int npending;
    int failed;
    char *err;
    size_t err_sz;
};

static void ctx_fail(struct parse_ctx *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void ctx_fail(struct parse_ctx *c, const char *key, const char *fmt, ...)
{
    if (c->failed)
        return; /* keep the first error: later ones are often consequences */
    c->failed = 1;
    char what[INV_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (key && c->section[0])
        snprintf(c->err, c->err_sz, "%s:%d: [%s] %s: %s", c->path, c->line, c->section, key, what);
    else if (key)
        snprintf(c->err, c->err_sz, "%s:%d: %s: %s", c->path, c->line, key, what);
    else
        snprintf(c->err, c->err_sz, "%s:%d: %s", c->path, c->line, what);
}

static int ctx_enter_section(struct parse_ctx *c, const char *section);

static bool name_is_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= INV_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

int inventory_parse_duration(const char *s, double *ret_s)
{
    return ini_parse_duration(s, ret_s);
}

int inventory_parse_bool(const char *s, bool *ret_b)
{
    return ini_parse_bool(s, ret_b);
}

const char *inventory_duration_str(double s, char *buf, size_t sz)
{
    if (s >= 3600 && fmod(s, 3600) == 0)
        snprintf(buf, sz, "%.0fh", s / 3600);
    else if (s > 60 && fmod(s, 60) == 0) /* "60s", as the verdicts say it */
        snprintf(buf, sz, "%.0fm", s / 60);
    else
        snprintf(buf, sz, "%gs", s);
    return buf;
}

const char *inventory_deadline_warning(const struct inv_job *j, char *buf, size_t sz)
{
    const struct inv_policy *p = &j->policy;
    double fsd = p->first_step_deadline_s, hd = p->healthy_deadline_s;
    if (j->first_step_deadline_from == INV_FROM_DEFAULT || fsd <= 0 || hd >= fsd ||
        j->healthy_deadline_from >= j->first_step_deadline_from)
        return NULL;
    char fsec[INV_NAME_MAX + 16], hfrom[INV_NAME_MAX + 32], f[32], h[32], more[300] = "";
    if (j->first_step_deadline_from == INV_FROM_JOB)
        snprintf(fsec, sizeof fsec, "[job %s]", j->name);
    else
        snprintf(fsec, sizeof fsec, "[policy]");
    snprintf(hfrom, sizeof hfrom, "%s", j->healthy_deadline_from == INV_FROM_POLICY ? "from [policy]"
                                        : "the default");
    inventory_duration_str(fsd, f, sizeof f);
    inventory_duration_str(hd, h, sizeof h);
    /* the probation also ends at max_probation_time (at most progress_deadline) with no first
     * step: No data, reverted by default.  Suggested: the first step's time plus what they allow
     * after it today. */
    bool mpt = p->max_probation_time_s > 0 && p->max_probation_time_s <= fsd, pd = p->progress_deadline_s <= fsd;
    char a[32], b[32], c[32], d[32];
    if (mpt && pd)
        snprintf(more, sizeof more, ", with `max_probation_time = %s` and `progress_deadline = %s` (now %s and %s: "
                 "the probation ends at the first of them, with no first step)",
                 inventory_duration_str(fsd + p->max_probation_time_s, a, sizeof a),
                 inventory_duration_str(fsd + p->progress_deadline_s, b, sizeof b),
                 inventory_duration_str(p->max_probation_time_s, c, sizeof c),
                 inventory_duration_str(p->progress_deadline_s, d, sizeof d));
    else if (mpt || pd)
        snprintf(more, sizeof more, ", with `%s = %s` (now %s: the probation ends then, with no first step)",
                 mpt ? "max_probation_time" : "progress_deadline",
                 inventory_duration_str(fsd + (mpt ? p->max_probation_time_s : p->progress_deadline_s), a, sizeof a),
                 inventory_duration_str(mpt ? p->max_probation_time_s : p->progress_deadline_s, c, sizeof c));
    snprintf(buf, sz, "[job %s]: healthy_deadline is %s (%s) but first_step_deadline is %s (in %s): a deploy "
             "fails at %s when the first step takes longer (\"no heartbeat ... within healthy_deadline %s\"), "
             "whatever first_step_deadline allows; for a slow first step (torch.compile) write "
             "`healthy_deadline = %s` in %s%s",
             j->name, h, hfrom, f, fsec, h, h, f, fsec, more);
    return buf;
}

void inventory_policy_defaults(struct inv_policy *p)
{
    p->healthy_deadline_s = 60;
    p->min_healthy_time_s = 30;
    p->warmup_steps = 10;
    p->tolerance = 0.20;
    p->auto_revert = true;
    p->progress_deadline_s = 600;
    p->max_parallel = 1;
    p->canary = 0;
    p->first_step_deadline_s = 600;
    p->silence_deadline_s = 120;
    p->stall_deadline_s = 300;
    p->checkpoint_deadline_s = 900;
    p->warmup_time_s = 0;
    p->warmup_max_s = 300;
    p->max_probation_time_s = 300;
    p->on_inconclusive_hold = false;
    p->confidence = 0.95;
    p->hold_time_s = 3600;
    p->switch_deadline_s = 0; /* the job's grace + 60 s */
    p->lease_ttl_s = 300;
}

/* Expand "~/" with $HOME and make relative paths relative to the inventory's directory. */
static int resolve_path(const char *inv_path, const char *value, char *out, size_t out_sz)
{
    if (value[0] == '~' && (value[1] == '/' || value[1] == '\0')) {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return -EINVAL;
        if ((size_t)snprintf(out, out_sz, "%s%s", home, value + 1) >= out_sz)
            return -ENAMETOOLONG;
        return 0;
    }
    if (value[0] == '/' || !inv_path || !strchr(inv_path, '/'))
        return str_copy(out, out_sz, value);
    const char *slash = strrchr(inv_path, '/');
    int dlen = (int)(slash - inv_path);
    if ((size_t)snprintf(out, out_sz, "%.*s/%s", dlen, inv_path, value) >= out_sz)
        return -ENAMETOOLONG;
    return 0;
}

/* A duration row's hint is said for a duration out of its range ("must be ..."); a value that
 * is no duration at all ('soon', '1d') is said by ini_key_set() the same way for every key, with
 * the units the parser takes ('1d' was told it "must be a duration greater than 0") */
#define DURATION_HINT "is not a duration (like 30s, 5m, 1h, or plain seconds)"
/* One rule for every duration that must be > 0 (INI_MIN_OPEN at 0): say so for '0' ('0' was
 * told it is "not a duration", though it is one) */
#define POSITIVE_DURATION_HINT "must be a duration greater than 0 (like 30s, 5m, 1h, or plain seconds)"
#define INV_STR_(x) #x
#define INV_STR(x) INV_STR_(x) /* a bound into its hint: one number, said where it is checked */
/* section (kind), key, type, field of struct T, min, max, flags, hint, policy bit */
#define ROW(sec, key, type, T, field, lo, hi, fl, hint, bit) \
    { sec, key, type, offsetof(T, field), 0, lo, hi, fl, hint, bit }
#define POL(key, type, field, lo, hi, fl, hint, bit) \
    ROW("policy", key, type, struct inv_policy, field, lo, hi, fl, hint, bit)
/* a policy duration that must be > 0: one range, one message */
#define POL_POSITIVE_DURATION(key, field, bit) \
    POL(key, INI_DURATION, field, 0, 1e18, INI_MIN_OPEN, POSITIVE_DURATION_HINT, bit)

/* Every number, duration and boolean of the inventory (docs/config.md).  "policy" keys are also
 * accepted in [job NAME], where they override [policy] for that job. */
static const struct ini_key keys[] = {
    POL_POSITIVE_DURATION("healthy_deadline", healthy_deadline_s, POL_HEALTHY_DEADLINE),
    POL("min_healthy_time", INI_DURATION, min_healthy_time_s, 0, 1e18, 0, DURATION_HINT,
        POL_MIN_HEALTHY_TIME),
    POL_POSITIVE_DURATION("progress_deadline", progress_deadline_s, POL_PROGRESS_DEADLINE),
    POL("first_step_deadline", INI_DURATION, first_step_deadline_s, 0, 1e18, 0, DURATION_HINT,
        POL_FIRST_STEP_DEADLINE),
    POL("silence_deadline", INI_DURATION, silence_deadline_s, 0, 1e18, 0, DURATION_HINT,
        POL_SILENCE_DEADLINE),
    POL("stall_deadline", INI_DURATION, stall_deadline_s, 0, 1e18, 0, DURATION_HINT,
        POL_STALL_DEADLINE),
    POL("checkpoint_deadline", INI_DURATION, checkpoint_deadline_s, 0, 1e18, 0, DURATION_HINT,
        POL_CHECKPOINT_DEADLINE),
    POL("warmup_steps", INI_I64, warmup_steps, 0, 100000000, 0,
        "is not a step count (0..100000000)", POL_WARMUP_STEPS),
    POL("tolerance", INI_DOUBLE, tolerance, 0, 1, INI_MAX_OPEN,
        "is not a fraction in [0, 1) (0.2 means 20% slower is allowed)", POL_TOLERANCE),
    POL("auto_revert", INI_BOOL, auto_revert, 0, 0, 0, "is not a boolean (true/false)",
        POL_AUTO_REVERT),
    POL("max_parallel", INI_INT, max_parallel, 1, 1000, 0, "is not a count 1..1000",
        POL_MAX_PARALLEL),
    POL("canary", INI_INT, canary, 0, 1000, 0, "is not a count 0..1000", POL_CANARY),
    POL("warmup_time", INI_DURATION, warmup_time_s, 0, 1e18, 0, DURATION_HINT, POL_WARMUP_TIME),
    POL("warmup_max", INI_DURATION, warmup_max_s, 0, 1e18, 0, DURATION_HINT, POL_WARMUP_MAX),
    POL_POSITIVE_DURATION("max_probation_time", max_probation_time_s, POL_MAX_PROBATION_TIME),
    POL_POSITIVE_DURATION("hold_time", hold_time_s, POL_HOLD_TIME),
    POL("switch_deadline", INI_DURATION, switch_deadline_s, 0, 1e18, 0, DURATION_HINT,
        POL_SWITCH_DEADLINE),
    POL("lease_ttl", INI_DURATION, lease_ttl_s, 10, 7 * 86400, 0,
        "must be a duration from 10s to 168h (7 days) (like 5m, 1h)", POL_LEASE_TTL),
    POL("confidence", INI_DOUBLE, confidence, 0.5, 0.999, 0,
        "is not a confidence in [0.5, 0.999] (0.95 is usual)", POL_CONFIDENCE),
    ROW("drover", "connect_timeout", INI_DURATION, struct inventory, connect_timeout_s, 1, 1e18, 0,
        "must be a duration of at least 1s (like 10s, 1m)", 0),
    ROW("drover", "parallel", INI_INT, struct inventory, parallel, 1, 256, 0,
        "is not a count 1..256", 0),
    ROW("drover", "keep", INI_INT, struct inventory, keep, 1, INV_KEEP_MAX, 0,
        "is not a count 1.." INV_STR(INV_KEEP_MAX) " (drover gc --keep N takes 0 too, for one run)", 0),
    ROW("drover", "exec_timeout", INI_DURATION, struct inventory, exec_timeout_s, 1, 1e18, 0,
        "must be a duration of at least 1s (like 2m, 90s)", 0),
    ROW("notify", "timeout", INI_DURATION, struct inventory, notify.timeout_s, 0.1, 300, 0,
        "must be a duration from 100ms to 5m (like 5s, 500ms)", 0),
    ROW("notify", "retries", INI_INT, struct inventory, notify.retries, 0, 10, 0,
        "is not a count 0..10", 0),
    ROW("host", "port", INI_INT, struct inv_host, port, 1, 65535, 0, "is not a port (1..65535)", 0),
    ROW("host", "local", INI_BOOL, struct inv_host, local, 0, 0, 0, "is not a boolean (true/false)",
        0),
    ROW("job", "preflight_timeout", INI_DURATION, struct inv_job, preflight_timeout_s, 1, 86400, 0,
        "must be a duration from 1s to 24h (like 5m, 1h)", 0),
    ROW("job", "nproc_per_node", INI_INT, struct inv_job, nproc_per_node, 1, 16, 0,
        "is not a count 1..16", 0),
    ROW("job", "master_port", INI_INT, struct inv_job, master_port, 1, 65535, 0,
        "is not a port (1..65535)", 0),
    /* the GPU environment preflight (drover-agent gpu-check, docs/agent.md) */
    ROW("job", "gpu_mem", INI_DOUBLE, struct inv_job, gpu_mem_gib, 0, 1e6, INI_MIN_OPEN,
        "must be a size in GiB greater than 0 (like 40 or 0.5)", 0),
    { "job", "cuda", INI_STRING, offsetof(struct inv_job, cuda), sizeof(((struct inv_job *)0)->cuda),
      0, 0, 0, "is not a CUDA version (like 12.8)", 0 },
    /* 1h: the agent's limit (agent/spec.c) */
    ROW("job", "grace", INI_DURATION, struct inv_job, grace_s, 1, 3600, 0,
        "must be a duration from 1s to 1h (like 2m, 90s)", 0),
};

/* The keys each section takes besides the table's rows (docs/config.md). */
static const char *const drover_keys[] = { "state_dir", "known_hosts", "identity", "ssh_config",
                                           "agent_path", "staging_dir", NULL };
static const char *const notify_keys[] = { "webhook", "format", "secret_file", "secret_env", "exec", NULL };
static const char *const host_keys[] = { "address", "user", "agent_path", NULL };
static const char *const policy_keys[] = { "on_inconclusive", NULL };
static const char *const job_keys[] = { "containers", "arg", "preflight_arg", "env", "gpus", "command",
                                        "preflight", "master_addr", "on_inconclusive", NULL };

/* Every key of section kind sec ("drover", "notify", "host", "job", "policy") into cands (the
 * policy keys are a job's too); returns how many. */
static size_t section_keys(const char *sec, const char **cands, size_t max)
{
    const char *const *extra = !strcmp(sec, "drover") ? drover_keys : !strcmp(sec, "notify") ? notify_keys
                             : !strcmp(sec, "host")   ? host_keys   : !strcmp(sec, "job")    ? job_keys
                                                                                             : policy_keys;
    bool pol = !strcmp(sec, "job") || !strcmp(sec, "policy");
    size_t n = 0;
    for (size_t i = 0; extra[i] && n < max; i++)
        cands[n++] = extra[i];
    for (size_t i = 0; i < ARRAY_SIZE(keys) && n < max; i++)
        if (!strcmp(keys[i].section, sec) || (pol && !strcmp(keys[i].section, "policy")))
            cands[n++] = keys[i].name;
    return n;
}

/* "unknown key": with the nearest key of the section ("containres: unknown key: did you mean
 * containers?") or the section the key belongs in ("grace: not a key of [policy]: it goes in
 * [job NAME]"), so that a typo in the inventory is as plain as one on the command line. */
static void unknown_key(struct parse_ctx *c, const char *sec, const char *name)
{
    const char *cands[128];
    size_t n = section_keys(sec, cands, ARRAY_SIZE(cands));
    static const char *const secs[] = { "policy", "job", "drover", "host", "notify" };
    static const char *const shown[] = { "[policy] or [job NAME]", "[job NAME]", "[drover]", "[host NAME]",
                                         "[notify]" };
    for (size_t s = 0; s < ARRAY_SIZE(secs); s++) {
        if (!strcmp(secs[s], sec))
            continue;
        const char *other[128];
        size_t m = section_keys(secs[s], other, ARRAY_SIZE(other));
        for (size_t i = 0; i < m; i++)
            if (!strcmp(other[i], name)) {
                ctx_fail(c, name, "not a key of this section: it goes in %s (see docs/config.md)", shown[s]);
                return;
            }
    }
    const char *near = str_nearest(name, cands, n);
    if (near)
        ctx_fail(c, name, "unknown key: did you mean %s? (see docs/config.md)", near);
    else
        ctx_fail(c, name, "unknown key (see docs/config.md)");
}

/* Set key `name` of section kind sec from the table into base: 1 set, 0 bad value (reported),
 * -ENOENT not a key of the table.  *set gets the row's bit. */
static int table_key(struct parse_ctx *c, const char *sec, void *base, unsigned *set,
                     const char *name, const char *value)
{
    const struct ini_key *k = ini_key_find(keys, ARRAY_SIZE(keys), sec, name, NULL);
    if (!k)
        return -ENOENT;
    char why[INV_ERR_MAX];
    if (ini_key_set(k, base, value, why, sizeof why) < 0) {
        ctx_fail(c, name, "%s", why);
        return 0;
    }
    /* A deadline under a second is a slip ("1ms" for "1m"): a deploy failed at once and its
     * release was marked bad, or the agent judged every rank hung.  0 stays "off" where it is */
    static const char *const whole_seconds[] = { "healthy_deadline", "progress_deadline",
                                                  "max_probation_time", "hold_time",
                                                  "switch_deadline" };
    static const char *const or_off[] = { "first_step_deadline", "silence_deadline",
                                          "stall_deadline", "checkpoint_deadline" };
    bool off = false, check = false;
    for (size_t i = 0; i < ARRAY_SIZE(or_off); i++)
        off = off || !strcmp(name, or_off[i]);
    for (size_t i = 0; i < ARRAY_SIZE(whole_seconds); i++)
        check = check || !strcmp(name, whole_seconds[i]);
    if ((off || check) && k->type == INI_DURATION) {
        double v = *(const double *)((const char *)base + k->off);
        if (v > 0 && v < 1) {
            ctx_fail(c, name, "'%s' is under a second: give at least 1s (like 30s, 5m)%s", value,
                     off ? ", or 0 to turn it off" : "");
            return 0;
        }
    }
    if (set)
        *set |= k->bit;
    return 1;
}

static int policy_key(struct parse_ctx *c, struct inv_policy *p, unsigned *set, const char *name,
                      const char *value)
{
    if (strcmp(name, "on_inconclusive") == 0) {
        if (strcmp(value, "revert") != 0 && strcmp(value, "hold") != 0) {
            ctx_fail(c, name, "'%s' is not revert or hold", value);
            return 0;
        }
        p->on_inconclusive_hold = strcmp(value, "hold") == 0;
        *set |= POL_ON_INCONCLUSIVE;
        return 1;
    }
    return table_key(c, "policy", p, set, name, value);
}

static bool ctx_seen(struct parse_ctx *c, const char *name)
{
    for (int i = 0; i < c->nseen; i++)
        if (strcmp(c->seen[i], name) == 0)
            return true;
    if (c->nseen < (int)ARRAY_SIZE(c->seen))
        (void)str_copy(c->seen[c->nseen++], INV_NAME_MAX, name);
    return false;
}

static int set_string(struct parse_ctx *c, const char *name, const char *value, char *dst,
                      size_t dst_sz)
{
    if (str_copy(dst, dst_sz, value) < 0) {
        ctx_fail(c, name, "value is longer than %zu bytes", dst_sz - 1);
        return 0;
    }
    return 1;
}

static int set_path(struct parse_ctx *c, const char *name, const char *value, char *dst, size_t dst_sz)
{
    if (!*value) {
        ctx_fail(c, name, "empty path");
        return 0;
    }
    if (resolve_path(c->path, value, dst, dst_sz) < 0) {
        ctx_fail(c, name, "cannot resolve path '%s' (too long, or ~ without $HOME)", value);
        return 0;
    }
    return 1;
}

static int section_drover(struct parse_ctx *c, const char *name, const char *value)
{
    struct inventory *inv = c->inv;
    int r = table_key(c, "drover", inv, NULL, name, value);
    if (r != -ENOENT)
        return r;
    if (strcmp(name, "state_dir") == 0)
        return set_path(c, name, value, inv->state_dir, sizeof inv->state_dir);
    if (strcmp(name, "known_hosts") == 0)
        return set_path(c, name, value, inv->known_hosts, sizeof inv->known_hosts);
    if (strcmp(name, "identity") == 0)
        return set_path(c, name, value, inv->identity, sizeof inv->identity);
    if (strcmp(name, "ssh_config") == 0) {
        c->ssh_config_set = true;
        if (strcmp(value, "none") == 0) {
            inv->ssh_config[0] = '\0';
            return 1;
        }
        return set_path(c, name, value, inv->ssh_config, sizeof inv->ssh_config);
    }
    if (strcmp(name, "agent_path") == 0 || strcmp(name, "staging_dir") == 0) {
        if (value[0] != '/' || strstr(value, "..")) {
            ctx_fail(c, name, "'%s' must be an absolute path without '..'", value);
            return 0;
        }
        return strcmp(name, "agent_path") == 0
                   ? set_string(c, name, value, inv->agent_path, sizeof inv->agent_path)
                   : set_string(c, name, value, inv->staging_dir, sizeof inv->staging_dir);
    }
    unknown_key(c, "drover", name);
    return 0;
}

static int section_notify(struct parse_ctx *c, const char *name, const char *value)
{
    struct inv_notify *n = &c->inv->notify;
    if (strcmp(name, "webhook") == 0) { /* repeatable */
        if (strncmp(value, "http://", 7) != 0 && strncmp(value, "https://", 8) != 0) {
            ctx_fail(c, name, "'%s' is not an http:// or https:// URL", value);
            return 0;
        }
        if (n->nwebhooks >= INV_MAX_WEBHOOKS) {
            ctx_fail(c, name, "more than %d webhooks", INV_MAX_WEBHOOKS);
            return 0;
        }
        return set_string(c, name, value, n->webhook[n->nwebhooks++], sizeof n->webhook[0]);
    }
    if (ctx_seen(c, name)) {
        ctx_fail(c, name, "set twice in this section");
        return 0;
    }
    int r = table_key(c, "notify", c->inv, NULL, name, value);
    if (r != -ENOENT)
        return r;
    if (strcmp(name, "format") == 0) {
        if (strcmp(value, "json") != 0 && strcmp(value, "slack") != 0) {
            ctx_fail(c, name, "'%s' is not json or slack", value);
            return 0;
        }
        n->slack = strcmp(value, "slack") == 0;
        return 1;
    }
    if (strcmp(name, "secret_file") == 0)
        return set_path(c, name, value, n->secret_file, sizeof n->secret_file);
    if (strcmp(name, "secret_env") == 0)
        return set_string(c, name, value, n->secret_env, sizeof n->secret_env);
    if (strcmp(name, "exec") == 0)
        return set_path(c, name, value, n->exec, sizeof n->exec);
    unknown_key(c, "notify", name);
    return 0;
}

static int section_host(struct parse_ctx *c, const char *name, const char *value)
{
    struct inv_host *h = &c->inv->hosts[c->idx];
    h->port_set |= strcmp(name, "port") == 0;
    h->user_set |= strcmp(name, "user") == 0;
    int r = table_key(c, "host", h, NULL, name, value);
    if (r != -ENOENT)
        return r;
    if (strcmp(name, "address") == 0) {
        if (!*value || strpbrk(value, " \t'\"\\;$`")) {
            ctx_fail(c, name, "'%s' is not a host name or address", value);
            return 0;
        }
        return set_string(c, name, value, h->address, sizeof h->address);
    }
    if (strcmp(name, "user") == 0) {
        if (!name_is_valid(value)) {
            ctx_fail(c, name, "'%s' is not a user name", value);
            return 0;
        }
        return set_string(c, name, value, h->user, sizeof h->user);
    }
    if (strcmp(name, "agent_path") == 0) {
        if (value[0] != '/' || strstr(value, "..")) {
            ctx_fail(c, name, "'%s' must be an absolute path without '..'", value);
            return 0;
        }
        return set_string(c, name, value, h->agent_path, sizeof h->agent_path);
    }
    unknown_key(c, "host", name);
    return 0;
}

static int add_arg(struct parse_ctx *c, const char *name, const char *value,
                   char (*args)[INV_VALUE_MAX], int *nargs)
{
    if (*nargs >= INV_MAX_ARGS) {
        ctx_fail(c, name, "more than %d of these keys", INV_MAX_ARGS);
        return 0;
    }
    if (!set_string(c, name, value, args[*nargs], INV_VALUE_MAX))
        return 0;
    (*nargs)++;
    return 1;
}

static bool release_path_ok(const char *v)
{
    if (!*v || strstr(v, "/../") || strncmp(v, "../", 3) == 0 || strcmp(v, "..") == 0)
        return false;
    size_t n = strlen(v);
    return !(n >= 3 && strcmp(v + n - 3, "/..") == 0);
}

static int section_job(struct parse_ctx *c, const char *name, const char *value)
{
    struct inv_job *j = &c->inv->jobs[c->idx];
    bool repeatable = !strcmp(name, "containers") || !strcmp(name, "arg") || !strcmp(name, "preflight_arg") ||
                      !strcmp(name, "env");
    if (!repeatable && ctx_seen(c, name)) {
        ctx_fail(c, name, "set twice in this section");
        return 0;
    }
    int r = policy_key(c, &j->policy, &c->job_policy_set[c->idx], name, value);
    if (r == -ENOENT)
        r = table_key(c, "job", j, NULL, name, value);
    if (r != -ENOENT)
        return r;
    if (strcmp(name, "containers") == 0) {
        /* Repeated keys and continuation lines append. */
        char buf[INV_VALUE_MAX];
        (void)str_copy(buf, sizeof buf, value);
        char *save = NULL;
        for (char *tok = strtok_r(buf, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
            if (c->npending >= (int)ARRAY_SIZE(c->pending)) {
                ctx_fail(c, name, "too many containers");
                return 0;
            }
            struct pending_ct *pc = &c->pending[c->npending++];
            pc->job = c->idx;
            pc->line = c->line;
            (void)str_copy(pc->spec, sizeof pc->spec, tok);
        }
        return 1;
    }
    if (strcmp(name, "arg") == 0)
        return add_arg(c, name, value, j->args, &j->nargs);
    if (strcmp(name, "preflight_arg") == 0)
        return add_arg(c, name, value, j->preflight_args, &j->npreflight_args);
    if (strcmp(name, "env") == 0) {
        /* the agent's allow-list (common/workerenv.c), reported here with the key's line */
        char why[200];
        if (worker_env_check(value, why, sizeof why) < 0) {
            ctx_fail(c, name, "%s", why);
            return 0;
        }
        size_t klen = (size_t)(strchr(value, '=') - value);
        for (int i = 0; i < j->nenv; i++)
            if (!strncmp(j->env[i], value, klen + 1)) {
                ctx_fail(c, name, "%.*s is set twice", (int)klen, value);
                return 0;
            }
        if (j->nenv >= (int)ARRAY_SIZE(j->env) || j->nenv >= WORKER_ENV_MAX) {
            ctx_fail(c, name, "more than %d env keys", WORKER_ENV_MAX);
            return 0;
        }
        (void)str_copy(j->env[j->nenv++], sizeof j->env[0], value);
        return 1;
    }
    if (strcmp(name, "gpus") == 0) {
        for (const char *q = value; *q; q++)
            if (!isdigit((unsigned char)*q) && *q != ',') {
                ctx_fail(c, name, "'%s' is not a list of GPU indexes like 0,1", value);
                return 0;
            }
        c->gpus_line[c->idx] = c->line;
        return set_string(c, name, value, j->gpus, sizeof j->gpus);
    }
    if (strcmp(name, "command") == 0 || strcmp(name, "preflight") == 0) {
        if (!release_path_ok(value)) {
            ctx_fail(c, name, "'%s' must be a path inside the release (or absolute), without '..'",
                     value);
            return 0;
        }
        return name[0] == 'c' ? set_string(c, name, value, j->command, sizeof j->command)
                              : set_string(c, name, value, j->preflight, sizeof j->preflight);
    }
    if (strcmp(name, "master_addr") == 0) {
        if (strpbrk(value, " \t'\"\\;$`")) {
            ctx_fail(c, name, "'%s' is not a host name or address", value);
            return 0;
        }
        return set_string(c, name, value, j->master_addr, sizeof j->master_addr);
    }
    unknown_key(c, "job", name);
    return 0;
}

static int ctx_enter_section(struct parse_ctx *c, const char *section)
{
    struct inventory *inv = c->inv;
    (void)str_copy(c->section, sizeof c->section, section);
    c->nseen = 0;
    if (strcmp(section, "drover") == 0 || strcmp(section, "policy") == 0) {
        bool *had = section[0] == 'd' ? &c->had_drover : &c->had_policy;
        if (*had) {
            ctx_fail(c, NULL, "section [%s] appears twice (merge the two)", section);
            return 0;
        }
        *had = true;
        c->kind = section[0] == 'd' ? 1 : 2;
        return 1;
    }
    if (strcmp(section, "notify") == 0) {
        if (c->had_notify) {
            ctx_fail(c, NULL, "section [%s] appears twice (merge the two)", section);
            return 0;
        }
        c->had_notify = true;
        c->kind = 5;
        return 1;
    }
    const char *sp = strchr(section, ' ');
    if (!sp) {
        ctx_fail(c, NULL, "unknown section [%s] (expected [drover], [policy], [notify], [host NAME], [job NAME])",
                 section);
        return 0;
    }
    size_t klen = (size_t)(sp - section);
    const char *nm = sp + 1;
    while (*nm == ' ')
        nm++;
    if (!name_is_valid(nm)) {
        ctx_fail(c, NULL, "[%s]: '%s' is not a valid name (letters, digits, - _ . ; under %d bytes)",
                 section, nm, INV_NAME_MAX);
        return 0;
    }
    if (klen == 4 && strncmp(section, "host", 4) == 0) {
        int first = inventory_find_host(inv, nm);
        if (first >= 0) {
            ctx_fail(c, NULL, "host '%s' defined twice (first at line %d): merge the two sections",
                     nm, inv->hosts[first].line);
            return 0;
        }
        if (inv->nhosts >= INV_MAX_HOSTS) {
            ctx_fail(c, NULL, "more than %d hosts", INV_MAX_HOSTS);
            return 0;
        }
        c->kind = 3;
        c->idx = inv->nhosts++;
        struct inv_host *h = &inv->hosts[c->idx];
        (void)str_copy(h->name, sizeof h->name, nm);
        h->line = c->line;
        h->port = 22;
        (void)str_copy(h->user, sizeof h->user, "root");
        return 1;
    }
    if (klen == 3 && strncmp(section, "job", 3) == 0) {
        if (nm[0] == '.') { /* the agent refuses these (agent/spec.c job_name_is_valid) */
            ctx_fail(c, NULL, "[%s]: a job name cannot start with '.'", section);
            return 0;
        }
        /* the agent takes the job name as an argument of its own (`history add JOB LINE`, `lease
         * take JOB HOLDER`): "-x" there is an unknown option, so such a job deployed and was
         * promoted while its history and lease calls failed in every container */
        if (nm[0] == '-') {
            ctx_fail(c, NULL, "[%s]: a job name cannot start with '-' (it would read as an option "
                     "on the agent's command line): rename the job", section);
            return 0;
        }
        const struct inv_job *fj = inventory_find_job(inv, nm);
        if (fj) {
            ctx_fail(c, NULL, "job '%s' defined twice (first at line %d): merge the two sections",
                     nm, fj->line);
            return 0;
        }
        if (inv->njobs >= INV_MAX_JOBS) {
            ctx_fail(c, NULL, "more than %d jobs", INV_MAX_JOBS);
            return 0;
        }
        c->kind = 4;
        c->idx = inv->njobs++;
        struct inv_job *j = &inv->jobs[c->idx];
        (void)str_copy(j->name, sizeof j->name, nm);
        j->nproc_per_node = 1;
        j->line = c->line;
        return 1;
    }
    ctx_fail(c, NULL, "unknown section [%s] (expected [drover], [policy], [notify], [host NAME], [job NAME])",
             section);
    return 0;
}

static int ctx_handle(void *user, const char *section, const char *name, const char *value)
{
    struct parse_ctx *c = user;
    if (c->failed)
        return 0;
    if (c->kind == 0 || strcmp(section, c->section) != 0) {
        ctx_fail(c, name, "key outside any section");
        return 0;
    }
    /* Values travel as JSON (the agent's job spec, state.json, history): refuse what JSON cannot
     * carry here, naming the key, instead of losing it on the way (issue 12: one arg of ten). */
    if (!text_is_utf8(name, strlen(name)) || !text_is_utf8(value, strlen(value))) {
        char shown[64];
        ctx_fail(c, text_escape(name, strlen(name), shown, sizeof shown),
                 "value is not valid UTF-8");
        return 0;
    }
    switch (c->kind) {
    case 1:
        if (ctx_seen(c, name)) {
            ctx_fail(c, name, "set twice in this section");
            return 0;
        }
        return section_drover(c, name, value);
    case 2: {
        if (ctx_seen(c, name)) {
            ctx_fail(c, name, "set twice in this section");
            return 0;
        }
        int r = policy_key(c, &c->policy, &c->policy_set, name, value);
        if (r == -ENOENT) {
            unknown_key(c, "policy", name);
            return 0;
        }
        return r;
    }
    case 3:
        if (ctx_seen(c, name)) {
            ctx_fail(c, name, "set twice in this section");
            return 0;
        }
        return section_host(c, name, value);
    case 4:
        return section_job(c, name, value);
    case 5:
        return section_notify(c, name, value);
    }
    return 0;
}

static bool ctx_section(void *user, const char *section, int line)
{
    struct parse_ctx *c = user;
    c->line = line;
    return !c->failed && ctx_enter_section(c, section);
}

static bool ctx_key(void *user, const char *section, const char *name, const char *value, int line)
{
    struct parse_ctx *c = user;
    c->line = line;
    c->key_line = line;
    return ctx_handle(c, section, name, value) != 0;
}

/* An indented line after a key: libinih reads it as more of that key's value.  Only
 * containers continues so (docs/config.md); under any other key it was a slip of indentation
 * ("\tgpus = 1" under command), which was said as "command: set twice in this section" (or
 * silently took the key's value, in [drover] and [host]).  Say what happened, at this line. */
static bool ctx_continued(void *user, const char *section, const char *name, const char *value, int line)
{
    struct parse_ctx *c = user;
    c->line = line;
    if (c->failed)
        return false;
    if (!strcmp(name, "containers") && c->kind == 4 && !strchr(value, '='))
        return ctx_handle(c, section, name, value) != 0;
    /* "gpus = 1": which key the line meant, and whether the section has it */
    char what[INV_ERR_MAX / 2] = "";
    size_t klen = strcspn(value, "= \t");
    if (value[klen] == ' ' || value[klen] == '\t' || value[klen] == '=') {
        static const char *const kinds[] = { "", "drover", "policy", "host", "job", "notify" };
        const char *cands[128];
        char meant[INV_NAME_MAX];
        size_t n = section_keys(kinds[c->kind], cands, ARRAY_SIZE(cands)), i;
        snprintf(meant, sizeof meant, "%.*s", (int)klen, value);
        for (i = 0; i < n && strcmp(cands[i], meant); i++)
            ;
        const char *near = i < n ? NULL : str_nearest(meant, cands, n);
        bool kv = value[klen + strspn(value + klen, " \t")] == '='; /* else nothing more to say */
        if (kv && i < n)
            snprintf(what, sizeof what, "; if it is the key %s, remove the indentation", meant);
        else if (kv && near)
            snprintf(what, sizeof what, "; as a key, %s is unknown here: did you mean %s?", meant, near);
        else if (kv)
            snprintf(what, sizeof what, "; as a key, %s is unknown here (see docs/config.md)", meant);
    }
    ctx_fail(c, NULL, "[%s]: this indented line ('%.60s') is read as more of the value of %s "
             "(line %d): only containers continues on an indented line%s", c->section, value, name,
             c->key_line, what);
    return false;
}

int inventory_find_host(const struct inventory *inv, const char *name)
{
    for (int i = 0; i < inv->nhosts; i++)
        if (strcmp(inv->hosts[i].name, name) == 0)
            return i;
    return -1;
}

const struct inv_job *inventory_find_job(const struct inventory *inv, const char *name)
{
    for (int i = 0; i < inv->njobs; i++)
        if (strcmp(inv->jobs[i].name, name) == 0)
            return &inv->jobs[i];
    return NULL;
}

/* "no [KIND name] in 'PATH'" and the nearest of names[0..n), else all of them ("its KINDs are"),
 * else that there is none. */
static const char *no_section(const struct inventory *inv, const char *kind, const char *name,
                              const char *const *names, int n, char *buf, size_t sz)
{
    const char *near = str_nearest(name, names, (size_t)n);
    int w = snprintf(buf, sz, "no [%s %s] in '%s'", kind, name, inv->path);
    if (w < 0 || (size_t)w >= sz)
        return buf;
    if (near)
        snprintf(buf + w, sz - (size_t)w, ": did you mean %s?", near);
    else if (n == 0)
        snprintf(buf + w, sz - (size_t)w, ": it has no [%s NAME] section", kind);
    else {
        size_t used = (size_t)w;
        for (int i = 0; i < n && used < sz; i++) {
            int m = i ? snprintf(buf + used, sz - used, ", %s", names[i])
                      : snprintf(buf + used, sz - used, ": its %ss are %s", kind, names[i]);
            if (m < 0)
                break;
            used += (size_t)m;
        }
    }
    return buf;
}

const char *inventory_no_job(const struct inventory *inv, const char *name, char *buf, size_t sz)
{
    const char *names[INV_MAX_JOBS];
    for (int i = 0; i < inv->njobs; i++)
        names[i] = inv->jobs[i].name;
    return no_section(inv, "job", name, names, inv->njobs, buf, sz);
}

const char *inventory_no_host(const struct inventory *inv, const char *name, char *buf, size_t sz)
{
    const char *names[INV_MAX_HOSTS];
    int addr = -1;
    for (int i = 0; i < inv->nhosts; i++) {
        names[i] = inv->hosts[i].name;
        if (addr < 0 && !strcmp(inv->hosts[i].address, name))
            addr = i;
    }
    if (addr >= 0) { /* an address where the section's name goes */
        snprintf(buf, sz, "no [host %s] in '%s': %s is the address of [host %s]; name the host: %s",
                 name, inv->path, name, inv->hosts[addr].name, inv->hosts[addr].name);
        return buf;
    }
    return no_section(inv, "host", name, names, inv->nhosts, buf, sz);
}

const char *inventory_no_jobs(const struct inventory *inv, char *buf, size_t sz)
{
    snprintf(buf, sz, "'%s' has no job: add a [job NAME] section with its containers and command "
             "(docs/config.md)", inv->path);
    return buf;
}

int inventory_parse_ct(const struct inventory *inv, const char *spec, struct inv_ct *ret_ct,
                       char *err, size_t err_sz)
{
    struct inv_ct ct = { .vmid = -1 };
    const char *colon = strchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= INV_NAME_MAX) {
        snprintf(err, err_sz, "container '%s' is not HOST:VMID or HOST:local:/ROOT", spec);
        return -EINVAL;
    }
    char host[INV_NAME_MAX];
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    ct.host = inventory_find_host(inv, host);
    if (ct.host < 0) {
        snprintf(err, err_sz, "container '%s': no [host %s] in the inventory", spec, host);
        return -EINVAL;
    }
    const char *rest = colon + 1;
    if (strncmp(rest, "local:", 6) == 0) {
        const char *root = rest + 6;
        if (root[0] != '/' || strstr(root, "..") || strpbrk(root, " \t")) {
            snprintf(err, err_sz, "container '%s': the root after local: must be an absolute path "
                                  "without '..' or spaces", spec);
            return -EINVAL;
        }
        if (str_copy(ct.root, sizeof ct.root, root) < 0 ||
            (size_t)snprintf(ct.socket, sizeof ct.socket, "%s/agent.sock", root) >= sizeof ct.socket) {
            snprintf(err, err_sz, "container '%s': root path too long (its control socket "
                                  "ROOT/agent.sock must fit in %zu bytes)", spec, sizeof ct.socket - 1);
            return -EINVAL;
        }
    } else {
        /* Proxmox vmids are 100..999999999; digits only, so they never need quoting. */
        if (!str_is_digits(rest, 9) || rest[0] == '0' || atol(rest) < 100) {
            snprintf(err, err_sz, "container '%s': vmid '%s' is not a number 100..999999999", spec,
                     rest);
            return -EINVAL;
        }
        ct.vmid = atoi(rest);
    }
    if (str_copy(ct.label, sizeof ct.label, spec) < 0) {
        snprintf(err, err_sz, "container '%s': too long", spec);
        return -EINVAL;
    }
    *ret_ct = ct;
    return 0;
}

static void apply_policy(struct inv_policy *dst, unsigned set, const struct inv_policy *src)
{
    if (!(set & POL_HEALTHY_DEADLINE))
        dst->healthy_deadline_s = src->healthy_deadline_s;
    if (!(set & POL_MIN_HEALTHY_TIME))
        dst->min_healthy_time_s = src->min_healthy_time_s;
    if (!(set & POL_WARMUP_STEPS))
        dst->warmup_steps = src->warmup_steps;
    if (!(set & POL_TOLERANCE))
        dst->tolerance = src->tolerance;
    if (!(set & POL_AUTO_REVERT))
        dst->auto_revert = src->auto_revert;
    if (!(set & POL_PROGRESS_DEADLINE))
        dst->progress_deadline_s = src->progress_deadline_s;
    if (!(set & POL_MAX_PARALLEL))
        dst->max_parallel = src->max_parallel;
    if (!(set & POL_CANARY))
        dst->canary = src->canary;
    if (!(set & POL_FIRST_STEP_DEADLINE))
        dst->first_step_deadline_s = src->first_step_deadline_s;
    if (!(set & POL_SILENCE_DEADLINE))
        dst->silence_deadline_s = src->silence_deadline_s;
    if (!(set & POL_STALL_DEADLINE))
        dst->stall_deadline_s = src->stall_deadline_s;
    if (!(set & POL_CHECKPOINT_DEADLINE))
        dst->checkpoint_deadline_s = src->checkpoint_deadline_s;
    if (!(set & POL_WARMUP_TIME))
        dst->warmup_time_s = src->warmup_time_s;
    if (!(set & POL_WARMUP_MAX))
        dst->warmup_max_s = src->warmup_max_s;
    if (!(set & POL_MAX_PROBATION_TIME))
        dst->max_probation_time_s = src->max_probation_time_s;
    if (!(set & POL_ON_INCONCLUSIVE))
        dst->on_inconclusive_hold = src->on_inconclusive_hold;
    if (!(set & POL_CONFIDENCE))
        dst->confidence = src->confidence;
    if (!(set & POL_HOLD_TIME))
        dst->hold_time_s = src->hold_time_s;
    if (!(set & POL_SWITCH_DEADLINE))
        dst->switch_deadline_s = src->switch_deadline_s;
    if (!(set & POL_LEASE_TTL))
        dst->lease_ttl_s = src->lease_ttl_s;
}

/* The first GPU index two jobs' gpus lists ("0,1", checked by then) both name, and its length
 * in *ret_len; NULL when either is empty or they name none in common. */
static const char *gpus_in_common(const char *a, const char *b, size_t *ret_len)
{
    for (; *a; a += strcspn(a, ",") + (a[strcspn(a, ",")] == ',')) {
        size_t alen = strcspn(a, ",");
        for (const char *q = b; *q; q += strcspn(q, ",") + (q[strcspn(q, ",")] == ','))
            if (strcspn(q, ",") == alen && !strncmp(a, q, alen)) {
                *ret_len = alen;
                return a;
            }
    }
    return NULL;
}

static int ctx_finish(struct parse_ctx *c)
{
    struct inventory *inv = c->inv;
    char msg[INV_ERR_MAX];
    for (int i = 0; i < c->npending; i++) {
        struct pending_ct *pc = &c->pending[i];
        struct inv_job *j = &inv->jobs[pc->job];
        c->line = pc->line;
        snprintf(c->section, sizeof c->section, "job %s", j->name);
        if (j->ncts >= INV_MAX_CTS) {
            ctx_fail(c, "containers", "more than %d containers in one job", INV_MAX_CTS);
            return -EINVAL;
        }
        struct inv_ct ct;
        if (inventory_parse_ct(inv, pc->spec, &ct, msg, sizeof msg) < 0) {
            ctx_fail(c, "containers", "%s", msg);
            return -EINVAL;
        }
        for (int k = 0; k < j->ncts; k++) {
            if (j->cts[k].host == ct.host && j->cts[k].vmid == ct.vmid &&
                strcmp(j->cts[k].root, ct.root) == 0) {
                ctx_fail(c, "containers", "'%s' listed twice", pc->spec);
                return -EINVAL;
            }
            /* one machine under two [host] names (a copied section): the same container twice,
             * which a deploy then found running "with another job spec" */
            const struct inv_host *a = &inv->hosts[j->cts[k].host], *b = &inv->hosts[ct.host];
            if (j->cts[k].host != ct.host && ct.vmid >= 0 && j->cts[k].vmid == ct.vmid &&
                !a->local && !b->local && !strcmp(a->address, b->address) && a->port == b->port) {
                ctx_fail(c, "containers", "'%s' and '%s' are one container: hosts '%s' and '%s' have "
                         "the same address %s and port %d (one machine under two names?): give each "
                         "host its own address, or list the container once", j->cts[k].label,
                         pc->spec, a->name, b->name, a->address, a->port);
                return -EINVAL;
            }
        }
        j->cts[j->ncts++] = ct;
    }
    for (int i = 0; i < inv->nhosts; i++) {
        struct inv_host *h = &inv->hosts[i];
        if (!h->local && !h->address[0]) {
            c->line = 0;
            snprintf(c->err, c->err_sz, "%s: [host %s]: no address (or set local = true)", c->path,
                     h->name);
            return -EINVAL;
        }
    }
    for (int i = 0; i < inv->njobs; i++) {
        struct inv_job *j = &inv->jobs[i];
        if (j->ncts == 0 || !j->command[0]) {
            snprintf(c->err, c->err_sz, "%s:%d: [job %s]: %s is missing", c->path, j->line, j->name,
                     j->ncts == 0 ? "containers" : "command");
            return -EINVAL;
        }
        if (j->gpus[0]) {
            /* the agent wants one index per local rank (agent/spec.c); said at the gpus key's
             * line, as every other key's error is (it named the [job] line) */
            int n = 1;
            bool empty = j->gpus[0] == ',' || j->gpus[strlen(j->gpus) - 1] == ',' ||
                         strstr(j->gpus, ",,");
            for (const char *q = j->gpus; *q; q++)
                n += *q == ',';
            if (empty || n != j->nproc_per_node) {
                char like[64] = ""; /* the example fits nproc_per_node: "0", "0,1", ... */
                size_t len = 0;
                for (int g = 0; g < j->nproc_per_node && len < sizeof like - 8; g++)
                    len += (size_t)snprintf(like + len, sizeof like - len, "%s%d", g ? "," : "", g);
                if (len >= sizeof like - 8 && j->nproc_per_node > 1)
                    snprintf(like + len, sizeof like - len, ",...");
                snprintf(c->err, c->err_sz, "%s:%d: [job %s] gpus: '%s' must name one GPU per "
                         "rank in a container (nproc_per_node = %d), like %s", c->path, c->gpus_line[i],
                         j->name, j->gpus, j->nproc_per_node, like);
                return -EINVAL;
            }
            /* two ranks on one GPU ("0,0"): each rank's CUDA_VISIBLE_DEVICES names the same
             * device, which then holds two models (out of memory, or half the speed each) */
            const char *a = j->gpus;
            for (int g = 0; g < n; g++) {
                size_t alen = strcspn(a, ",");
                for (const char *b = a + alen; *b == ','; b += 1 + strcspn(b + 1, ",")) {
                    size_t blen = strcspn(b + 1, ",");
                    if (blen == alen && !strncmp(a, b + 1, alen)) {
                        snprintf(c->err, c->err_sz, "%s:%d: [job %s] gpus: '%s' names GPU %.*s "
                                 "twice: each rank of a container needs a GPU of its own",
                                 c->path, c->gpus_line[i], j->name, j->gpus, (int)alen, a);
                        return -EINVAL;
                    }
                }
                a += alen + (a[alen] == ',');
            }
        }
        if (j->npreflight_args && !j->preflight[0]) {
            snprintf(c->err, c->err_sz, "%s:%d: [job %s]: preflight_arg without preflight", c->path,
                     j->line, j->name);
            return -EINVAL;
        }
        apply_policy(&j->policy, c->job_policy_set[i], &c->policy);
        /* the probation ends at max_probation_time (at most progress_deadline) from activation,
         * warmup included: warm samples that must span as long or longer never can, and every
         * deploy with a baseline would end "no data" and revert (deploy/drover.ini.example had
         * min_healthy_time = 5m under the default max_probation_time 5m) */
        const struct inv_policy *jp = &j->policy;
        double pend = jp->max_probation_time_s > 0 && jp->max_probation_time_s < jp->progress_deadline_s
                          ? jp->max_probation_time_s : jp->progress_deadline_s;
        if (jp->min_healthy_time_s > 0 && jp->min_healthy_time_s >= pend) {
            char a[32], b[32], sg[32], pd[32], more[96] = "";
            bool mpt = jp->max_probation_time_s > 0 && jp->max_probation_time_s <= jp->progress_deadline_s;
            double sugg = jp->min_healthy_time_s + jp->warmup_max_s; /* the samples, after the longest warmup */
            inventory_duration_str(sugg, sg, sizeof sg);
            if (sugg > jp->progress_deadline_s)
                snprintf(more, sizeof more, " and `progress_deadline = %s` (now %s)", sg,
                         inventory_duration_str(jp->progress_deadline_s, pd, sizeof pd));
            snprintf(c->err, c->err_sz, "%s:%d: [job %s]: min_healthy_time %s is not shorter than %s %s: the "
                     "probation ends then (counted from activation, warmup included), before the warm samples "
                     "can span min_healthy_time, so every deploy would end with no throughput verdict and "
                     "revert; write `max_probation_time = %s`%s (min_healthy_time plus warmup_max), or a "
                     "shorter min_healthy_time", c->path, j->line, j->name,
                     inventory_duration_str(jp->min_healthy_time_s, a, sizeof a),
                     mpt ? "max_probation_time" : "progress_deadline", inventory_duration_str(pend, b, sizeof b), sg,
                     more);
            return -EINVAL;
        }
        j->healthy_deadline_from = c->job_policy_set[i] & POL_HEALTHY_DEADLINE ? INV_FROM_JOB
                                   : c->policy_set & POL_HEALTHY_DEADLINE      ? INV_FROM_POLICY
                                                                               : INV_FROM_DEFAULT;
        j->first_step_deadline_from = c->job_policy_set[i] & POL_FIRST_STEP_DEADLINE ? INV_FROM_JOB
                                      : c->policy_set & POL_FIRST_STEP_DEADLINE      ? INV_FROM_POLICY
                                                                                     : INV_FROM_DEFAULT;
    }
    /* Several jobs may share a container (the agent keys everything by job), but not a GPU:
     * each job's ranks would get the same CUDA_VISIBLE_DEVICES index, and the device would hold
     * two models (out of memory, or each job at half its speed, judged a regression); nor a
     * rendezvous port: their gangs share the container's network namespace, so the second
     * rank 0 cannot bind MASTER_PORT (EADDRINUSE) and its other ranks may join the first job's
     * rendezvous.  Containers of one vmid on one host share it whatever their agent root. */
    for (int b = 1; b < inv->njobs; b++)
        for (int a = 0; a < b; a++) {
            const struct inv_job *ja = &inv->jobs[a], *jb = &inv->jobs[b];
            int pa = ja->master_port ? ja->master_port : INV_AGENT_MASTER_PORT;
            int pb = jb->master_port ? jb->master_port : INV_AGENT_MASTER_PORT;
            size_t glen;
            const char *g = gpus_in_common(ja->gpus, jb->gpus, &glen);
            if (pa != pb && !g)
                continue;
            for (int x = 0; x < ja->ncts; x++)
                for (int y = 0; y < jb->ncts; y++) {
                    const struct inv_ct *cx = &ja->cts[x], *cy = &jb->cts[y];
                    if (!inventory_same_ct(cx, cy))
                        continue; /* local roots: one per agent root */
                    if (g) {
                        snprintf(c->err, c->err_sz, "%s:%d: [job %s] gpus: jobs '%s' and '%s' "
                                 "share container %s and both use GPU %.*s: each would hold a "
                                 "model on it; give the jobs GPUs of their own (gpus = ...)",
                                 c->path, c->gpus_line[b], jb->name, ja->name, jb->name, cy->label,
                                 (int)glen, g);
                        return -EINVAL;
                    }
                    snprintf(c->err, c->err_sz, "%s:%d: [job %s] master_port: jobs '%s' and '%s' "
                             "share container %s and both use port %d%s: their gangs would "
                             "meet on it; give one of them its own master_port", c->path,
                             jb->line, jb->name, ja->name, jb->name, cy->label, pb,
                             !ja->master_port && !jb->master_port ? " (the agent's default)" : "");
                    return -EINVAL;
                }
        }
    return 0;
}

int inventory_parse(const char *text, size_t len, const char *path, struct inventory **ret_inv,
                    char *err, size_t err_sz)
{
    struct inventory *inv = calloc(1, sizeof *inv);
    struct parse_ctx *c = calloc(1, sizeof *c);
    int r = -ENOMEM;
    if (!inv || !c)
        goto out;
    if (!path)
        path = "inventory";
    c->inv = inv;
    c->path = path;
    c->err = err;
    c->err_sz = err_sz;
    (void)str_copy(inv->path, sizeof inv->path, path);
    inventory_policy_defaults(&c->policy);
    (void)str_copy(inv->agent_path, sizeof inv->agent_path, "/usr/local/bin/drover-agent");
    (void)str_copy(inv->staging_dir, sizeof inv->staging_dir, "/var/lib/drover-host/blobs");
    inv->connect_timeout_s = 10;
    inv->exec_timeout_s = 120;
    inv->parallel = 16;
    inv->keep = 5;
    inv->notify.timeout_s = 5;
    inv->notify.retries = 2;
    static const struct ini_ops ops = { .section = ctx_section, .key = ctx_key, .continued = ctx_continued };
    struct ini_error e;
    r = ini_read(text, len, INV_LINE_MAX, &ops, c, &e);
    if (r < 0 && !c->failed) {
        c->line = e.line;
        if (e.kind == INI_ERR_NUL)
            ctx_fail(c, NULL, "NUL byte in line");
        else if (e.kind == INI_ERR_LONG)
            ctx_fail(c, NULL, "line is %zu bytes, longer than the %d libinih reads; "
                              "split the value (repeated arg = keys, or a launcher script)",
                     e.len, INV_LINE_MAX);
        else if (ini_shape_words(e.kind))
            snprintf(err, err_sz, "%s:%d: %s", path, e.line, ini_shape_words(e.kind));
        else /* libinih's own syntax errors: missing '=' or ']' and the like. */
            snprintf(err, err_sz, "%s:%d: syntax error (expected [section], key = value, or a "
                     "comment)", path, e.line);
    }
    if (r < 0 || c->failed) {
        r = -EINVAL;
        goto out;
    }
    r = ctx_finish(c);
    if (r < 0)
        goto out;
    if (!inv->state_dir[0] && resolve_path(path, "~/.local/state/drover", inv->state_dir,
                                           sizeof inv->state_dir) < 0)
        (void)str_copy(inv->state_dir, sizeof inv->state_dir, ".drover-state");
    if (!inv->known_hosts[0] && resolve_path(path, "~/.ssh/known_hosts", inv->known_hosts,
                                             sizeof inv->known_hosts) < 0)
        (void)str_copy(inv->known_hosts, sizeof inv->known_hosts, "known_hosts");
    /* OpenSSH users expect their ~/.ssh/config to apply (Host aliases, ProxyJump). */
    if (!c->ssh_config_set &&
        resolve_path(path, "~/.ssh/config", inv->ssh_config, sizeof inv->ssh_config) == 0 &&
        access(inv->ssh_config, R_OK) != 0)
        inv->ssh_config[0] = '\0';
    *ret_inv = inv;
    inv = NULL;
    r = 0;
out:
    free(c);
    free(inv);
    return r;
}

int inventory_load(const char *path, struct inventory **ret_inv, char *err, size_t err_sz)
{
    char *text;
    size_t len;
    int r = fs_read_file(path, INV_FILE_MAX, &text, &len);
    if (r == -EISDIR) { /* `-i DIR` said only "Is a directory" */
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/')
            n--;
        snprintf(err, err_sz, "inventory '%s' is a directory: give the inventory file, e.g. "
                 "%.*s/drover.ini (docs/config.md)", path, (int)n, path);
        return r;
    }
    if (r < 0) {
        snprintf(err, err_sz, "%s: cannot read inventory: %s%s", path,
                 r == -EFBIG ? "larger than 1 MiB" : strerror(-r),
                 r == -ENOENT ? " (pass -i PATH or set $DROVER_INVENTORY; "
                                "deploy/drover.ini.example is a start, docs/config.md the keys)" : "");
        return r;
    }
    r = inventory_parse(text, len, path, ret_inv, err, err_sz);
    free(text);
    return r;
}

void inventory_free(struct inventory *inv)
{
    free(inv);
}

bool inventory_same_ct(const struct inv_ct *a, const struct inv_ct *b)
{
    return a->host == b->host && a->vmid == b->vmid && (a->vmid >= 0 || !strcmp(a->root, b->root));
}

int inventory_count_cts(const struct inventory *inv)
{
    int n = 0;
    for (int j = 0; j < inv->njobs; j++)
        for (int c = 0; c < inv->jobs[j].ncts; c++) {
            const struct inv_ct *ct = &inv->jobs[j].cts[c];
            bool seen = false; /* before this one, in this job or an earlier one */
            for (int k = 0; k <= j && !seen; k++)
                for (int d = 0; d < (k < j ? inv->jobs[k].ncts : c) && !seen; d++)
                    seen = inventory_same_ct(&inv->jobs[k].cts[d], ct);
            n += !seen;
        }
    return n;
}

void inventory_job_key(const struct inv_job *job, char *out, size_t out_sz)
{
    size_t off = (size_t)snprintf(out, out_sz, "%s@", job->name);
    for (int i = 0; i < job->ncts && off < out_sz; i++)
        off += (size_t)snprintf(out + off, out_sz - off, "%s%s", i ? "," : "", job->cts[i].label);
}
