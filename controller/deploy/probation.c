/* controller/deploy/probation.c: probation verdicts over status documents (see probation.h).  Pure:
 * no I/O, no clocks of its own, no logging; the deploy engine feeds it and reports.
 */
#include "controller/deploy/probation.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/agentcli.h"
#include "common/text.h"
#include "common/trainexit.h"
#include "common/samples.h"
#include "common/specdigest.h"
#include "common/stats.h"
#include "common/util.h"

/* Samples of each rank kept for the straggler test (a ring over the newest job samples). */
#define RANK_SAMPLES 256
/* Warmup: a rolling median over this many samples is "still warming up" while it lies more than
 * WARM_SLACK above the steady level (the median of the newest half). */
#define WARM_ROLL 5
#define WARM_SLACK 0.10
/* The fewest warm samples a comparison is made on. */
#define MIN_WINDOW 5

struct prank {
    bool seen;           /* a train heartbeat from the watched release */
    bool past_warmup;
    long long warm_done; /* steps made since this process started or resumed (warmup_steps') */
    long long step;
    long long resumed_from;
    double step_t;       /* controller time the step last changed */
    double tok_s;
    double step_ms;
    long long sampled_step; /* step at the last job sample: a new one needs a newer step */
    long long tokens;       /* the heartbeat's token counter, and when it was sent (controller */
    double hb_t;            /* time less the agent's heartbeat age) */
    long long sampled_tokens;
    double sampled_t;
    long long bad_lines;    /* the agent's count of lines that were not heartbeats (watched gang) */
    bool none_sent;         /* the watched gang's rank runs and has sent no line at all */
    /* How far it got before its first train heartbeat, as the watched release's init-phase
     * heartbeats said, and when (seconds after t0; the first document that showed it):
     * hello, its heartbeat module started (Heartbeat()); inited, hb.init() came (the
     * rendezvous is behind it). */
    bool hello, inited;
    double hello_t, init_t;
    /* For the frozen-rank rule (probation_find_silent), from every document, the exits' too:
     * the controller time of its last train heartbeat (beat: there is one), that heartbeat's
     * step and phase, the steps it made, and whether it exited or was killed. */
    bool beat, ended;
    double beat_t;
    long long beat_step, done;
    enum hb_phase beat_phase;
};

struct pct_state {
    char label[64];
    char spec[SPEC_DIGEST_LEN + 1]; /* the job spec digest activated here; "" not checked */
    bool have;
    bool went_back; /* its agent went back to another release by itself (named by the FAIL) */
    bool agent_gone; /* its status stream said no agent daemon listens (probation_agent_gone) */
    char agent_said[160];
    double t_seen;
    struct prank ranks[STATUS_MAX_RANKS];
};

struct probation {
    struct inv_policy pol;
    char job[JOB_NAME_MAX];
    char release[RELEASE_ID_LEN + 1];
    int ncts, nproc;
    double baseline, t0, t_warm;
    bool recovery;
    char unjudged[64]; /* probation_unjudged: why the throughput rule is not applied ("" it is) */
    bool rebase;       /* probation_rebase: and its samples become the baseline */
    bool ct_stop_said; /* the verdict is a container stopped under the gang (probation_ct_stopped) */
    int agent_gone_ct; /* the verdict is that container's silence, its agent not running; -1 not */
    struct pct_state *cts;
    /* Job samples, oldest first: time, Ktok/s, cost (step time, or 1/Ktok/s when the ranks do
     * not say), and whether every rank was past warmup_steps. */
    double samples[PROBATION_MAX_SAMPLES];
    double sample_t[PROBATION_MAX_SAMPLES];
    double sample_cost[PROBATION_MAX_SAMPLES];
    double sample_ms[PROBATION_MAX_SAMPLES];
    bool sample_steps_ok[PROBATION_MAX_SAMPLES];
    int nsamples;
    double *rank_tok;    /* [RANK_SAMPLES][world]: each rank's tok_s at job sample i % RANK_SAMPLES */
    double t_train;      /* every rank seen training (warmup_time counts from here); 0 not yet */
    double *base;        /* baseline samples, log Ktok/s; NULL: one number or none */
    int nbase;
    int warm_start;      /* index of the first warm sample; -1 not settled */
    int straggler;
    int judged_n;        /* nsamples at the last comparison: a new one needs a new sample */
    char cmp[PROBATION_REASON_MAX]; /* the last comparison that did not decide */
    enum probation_verdict verdict;
    enum status_reason agent_code; /* the agent's reason code the FAIL quotes */
    bool agent_went_back;          /* the FAIL is an agent going back to another release on its own */
    char back_base[PROBATION_REASON_MAX]; /* that FAIL's reason for its first container, without */
    char back_logs[JOB_NAME_MAX + 48];    /* its pointer at the workers' log (reason = base + others + logs) */
    int back_ct;                          /* that first container */
    int exit_code;                 /* the exit code of the rank the FAIL names; -1 none */
    int peer_stop_ct;              /* the FAIL names a rank of this container that exited
                                      because of a rank elsewhere (peer_lost 8, peer_stopped
                                      12: train_exit_is_peer_effect), so another container's
                                      cause, fed later, replaces it; -1 none */
    double ktok;
    char reason[PROBATION_REASON_MAX];
    char note[PROBATION_REASON_MAX];
};

const char *probation_verdict_name(enum probation_verdict v)
{
    switch (v) {
    case PROBATION_PASS: return "pass";
    case PROBATION_FAIL: return "fail";
    case PROBATION_INCONCLUSIVE: return "inconclusive";
    case PROBATION_NODATA: return "no-data";
    default: return "pending";
    }
}

int probation_new(const struct inv_policy *pol, const char *job, const char *release, int ncts,
                  const char *const *labels, int nproc, double baseline_ktok_s, bool recovery,
                  double t0, struct probation **ret_p)
{
    if (ncts <= 0 || ncts > INV_MAX_CTS || nproc <= 0 || nproc > STATUS_MAX_RANKS || !release ||
        !job)
        return -EINVAL;
    struct probation *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cts = calloc((size_t)ncts, sizeof *p->cts);
    p->rank_tok = calloc((size_t)RANK_SAMPLES * (size_t)(ncts * nproc), sizeof *p->rank_tok);
    if (!p->cts || !p->rank_tok) {
        free(p->cts);
        free(p->rank_tok);
        free(p);
        return -ENOMEM;
    }
    p->pol = *pol;
    if (recovery) {
        p->pol.warmup_steps = 0;
        p->pol.min_healthy_time_s = 0;
    }
    (void)str_copy(p->job, sizeof p->job, job);
    (void)str_copy(p->release, sizeof p->release, release);
    p->ncts = ncts;
    p->nproc = nproc;
    p->baseline = recovery ? 0 : baseline_ktok_s;
    p->recovery = recovery;
    p->t0 = t0;
    p->ktok = -1;
    p->warm_start = -1;
    p->straggler = -1;
    p->exit_code = -1;
    p->peer_stop_ct = -1;
    p->agent_gone_ct = -1;
    if (!(p->pol.confidence > 0.5 && p->pol.confidence < 1))
        p->pol.confidence = 0.95;
    for (int i = 0; i < ncts; i++) {
        (void)str_copy(p->cts[i].label, sizeof p->cts[i].label, labels ? labels[i] : "?");
        for (int k = 0; k < STATUS_MAX_RANKS; k++)
            p->cts[i].ranks[k].resumed_from = -1;
    }
    *ret_p = p;
    return 0;
}

void probation_free(struct probation *p)
{
    if (!p)
        return;
    free(p->cts);
    free(p->rank_tok);
    free(p->base);
    free(p);
}

void probation_unjudged(struct probation *p, const char *why)
{
    snprintf(p->unjudged, sizeof p->unjudged, "%s", why && why[0] ? why : "not asked");
    p->rebase = false;
}

void probation_rebase(struct probation *p, const char *why)
{
    probation_unjudged(p, why);
    p->rebase = true;
}

int probation_set_baseline_samples(struct probation *p, const struct sample_set *s)
{
    if (!s || s->n < 1 || p->recovery)
        return -EINVAL;
    int n = s->n < STATS_MAX_SAMPLES ? s->n : STATS_MAX_SAMPLES;
    double *b = malloc((size_t)n * sizeof *b);
    if (!b)
        return -ENOMEM;
    int k = 0;
    for (int i = s->n - n; i < s->n; i++)
        if (isfinite(s->ktok_s[i]) && s->ktok_s[i] > 0)
            b[k++] = log(s->ktok_s[i]);
    if (k == 0) {
        free(b);
        return -EINVAL;
    }
    free(p->base);
    p->base = b;
    p->nbase = k;
    if (p->baseline <= 0)
        p->baseline = stats_median(s->ktok_s + (s->n - n), n);
    return 0;
}

void probation_expect_spec(struct probation *p, int ct, const char *digest)
{
    if (ct >= 0 && ct < p->ncts && digest && spec_digest_is_valid(digest))
        (void)str_copy(p->cts[ct].spec, sizeof p->cts[ct].spec, digest);
}

bool probation_baseline_fits(const struct sample_set *s, int world_size)
{
    return !s || s->ranks <= 0 || world_size <= 0 || s->ranks == world_size;
}

static void fail(struct probation *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(char *buf, size_t sz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* snprintf for verdict texts: long ones are cut, never overflowed. */
static void say(char *buf, size_t sz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sz, fmt, ap);
    va_end(ap);
}

/* forward: the silent verdict names the first rank to stop (below the frozen-rank rule) */
static void fail_silent(struct probation *p, double now, int rank, double age, enum hb_phase phase);

/* The agent's reason code the next fail() quotes (before it: a verdict already decided keeps
 * its own); the facts of another cause are cleared. */
static void fail_code(struct probation *p, enum status_reason code)
{
    if (p->verdict == PROBATION_PENDING) {
        p->agent_code = code;
        p->agent_went_back = false;
        p->exit_code = -1;
    }
}

/* The next fail() names rank rs's exit: its exit code, typed (-1 for a signal). */
static void fail_exit(struct probation *p, const struct rank_status *rs)
{
    fail_code(p, STATUS_RC_NONE);
    if (p->verdict == PROBATION_PENDING)
        p->exit_code = rs->exit_signal > 0 ? -1 : rs->exit_code;
}

static void fail(struct probation *p, const char *fmt, ...)
{
    if (p->verdict != PROBATION_PENDING)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->reason, sizeof p->reason, fmt, ap);
    va_end(ap);
    /* The verdict quotes workers (a heartbeat's error) and agents (their reasons); it is shown
     * on terminals, kept in history and sent back as a revert reason: escaped once, here. */
    (void)text_escape_inplace(p->reason, sizeof p->reason);
    p->verdict = PROBATION_FAIL;
}

/* The agent's reason for a restart says what it does next ("...; restarting", "...;
 * restarting promoted release"), then maybe the worker's own last word (" [rank N: ...]",
 * agent/jobmachine.c: the exception or missing file that tells the operator what to fix); a
 * failed probation reverts instead, so the verdict quotes the reason without that clause but
 * with the worker's word.  Copies into buf (cut to sz). */
static const char *agent_reason_without_plan(const char *reason, char *buf, size_t sz)
{
    snprintf(buf, sz, "%s", reason);
    char *cut = strstr(buf, "; restarting");
    if (!cut)
        return buf;
    char *rest = cut + strlen("; restarting");
    if (!strncmp(rest, " promoted release", strlen(" promoted release")))
        rest += strlen(" promoted release");
    if (!rest[0] || !strncmp(rest, " [rank ", strlen(" [rank ")))
        memmove(cut, rest, strlen(rest) + 1);
    return buf;
}

/* A crash's verdict ends with where the workers' own output is: the agent's reason quotes a
 * worker's last word at most, the log has the traceback or the missing file (the verdict used
 * to stop at "exited with code 1"). */
const char *probation_logs_pointer(const char *job, const char *inv_arg, char *buf, size_t sz)
{
    snprintf(buf, sz, "; see `drover%s%s logs --job %s`", inv_arg ? " -i " : "", inv_arg ? inv_arg : "",
             job);
    return buf;
}

static const char *logs_pointer(const struct probation *p, char *buf, size_t sz)
{
    return probation_logs_pointer(p->job, NULL, buf, sz);
}

/* The pointer at the workers' log where the agent's reason code is a worker's doing ("" else). */
static const char *logs_pointer_for(const struct probation *p, enum status_reason code, char *buf, size_t sz)
{
    buf[0] = '\0';
    return status_reason_in_workers_log(code) ? logs_pointer(p, buf, sz) : buf;
}

static bool release_matches(const char *reported, const char *want)
{
    size_t n = strlen(reported);
    if (n == 0)
        return false;
    if (strcmp(reported, want) == 0)
        return true;
    /* A worker may report the short form of the id. */
    return n >= RELEASE_SHORT_LEN && strncmp(reported, want, n) == 0;
}

/* Ktok/s with precision that keeps small (CPU) rates readable: 96.5, 4.27, 0.812. */
static const char *ktok_str(double v, char *buf, size_t sz)
{
    snprintf(buf, sz, v >= 10 || v <= -10 ? "%.1f" : v >= 1 || v <= -1 ? "%.2f" : "%.3f", v);
    return buf;
}

double probation_median(const double *v, int n)
{
    double m = stats_median(v, n);
    return isnan(m) ? -1 : m;
}

static const struct rank_status *find_rank(const struct job_status *js, int rank)
{
    for (int i = 0; i < js->nranks && i < STATUS_MAX_RANKS; i++)
        if (js->ranks[i].rank == rank)
            return &js->ranks[i];
    return NULL;
}

/* drover-train's exit codes (common/trainexit.h, the contract), to name an exit for people when
 * the worker did not say why in its last heartbeat.  Foreign workers' codes just show as numbers. */
static const char *exit_code_word(int code)
{
    if (code == TRAIN_EXIT_NOT_FOUND) /* a shell's, env's or the loader's, as preflight says it */
        return TRAIN_EXIT_NOT_FOUND_TEXT;
    const struct train_exit_info *x = code > 0 ? train_exit_info(code) : NULL;
    return x ? x->text : NULL;
}

static void describe_exit(const struct rank_status *rs, char *buf, size_t sz)
{
    const char *why = rs->has_hb && rs->hb.error[0] ? rs->hb.error : exit_code_word(rs->exit_code);
    char at[64];
    if (rs->has_hb && rs->hb.phase != HB_PHASE_INIT)
        snprintf(at, sizeof at, "at step %lld", (long long)rs->hb.step);
    else
        snprintf(at, sizeof at, "at start");
    if (rs->exit_signal > 0)
        snprintf(buf, sz, "killed by signal %d%s%s%s %s", rs->exit_signal, why ? " (" : "",
                 why ? why : "", why ? ")" : "", at);
    else
        snprintf(buf, sz, "exited with code %d%s%s%s %s", rs->exit_code, why ? " (" : "",
                 why ? why : "", why ? ")" : "", at);
}

int probation_find_silent(const struct rank_silence *r, int n, int *ret_next)
{
    int first = -1;
    for (int i = 0; i < n; i++)
        if (r[i].hb_age_s >= 0 && r[i].steps >= PROBATION_SILENT_MIN_STEPS &&
            (first < 0 || r[i].hb_age_s > r[first].hb_age_s))
            first = i;
    if (first < 0 || r[first].ended || r[first].hb_age_s < PROBATION_QUIET_S)
        return -1;
    int next = -1;
    for (int i = 0; i < n; i++)
        if (i != first && !r[i].ended && r[i].hb_age_s >= 0 && (next < 0 || r[i].hb_age_s > r[next].hb_age_s))
            next = i;
    *ret_next = next;
    return first;
}

void probation_rank_silence(const struct rank_status *rs, const char *release, struct rank_silence *ret)
{
    const struct heartbeat *hb = &rs->hb;
    ret->ended = rs->exit_code >= 0 || rs->exit_signal > 0 || strcmp(rs->state, "exited") == 0 ||
                 strcmp(rs->state, "killed") == 0;
    ret->hb_age_s = -1;
    ret->steps = 0;
    if (!rs->has_hb || rs->hb_age_s < 0 || !release_matches(hb->release, release) ||
        (hb->phase != HB_PHASE_TRAIN && hb->phase != HB_PHASE_CHECKPOINT))
        return;
    ret->hb_age_s = rs->hb_age_s;
    ret->steps = hb->resumed_from >= 0 && hb->step >= hb->resumed_from ? hb->step - hb->resumed_from : hb->step;
}

/* Container ct's document js: each rank's last train heartbeat of the watched release and
 * whether it ended, for the frozen-rank rule (kept apart from the sampling's figures, which
 * only a live train heartbeat moves). */
static void note_beats(struct probation *p, int ct, const struct job_status *js, double now)
{
    if (js->release[0] && !release_matches(js->release, p->release))
        return; /* the old gang's */
    for (int lr = 0; lr < p->nproc; lr++) {
        const struct rank_status *rs = find_rank(js, ct * p->nproc + lr);
        struct prank *pr = &p->cts[ct].ranks[lr];
        struct rank_silence rsl;
        if (!rs)
            continue;
        probation_rank_silence(rs, p->release, &rsl);
        pr->ended = rsl.ended;
        if (rsl.hb_age_s < 0)
            continue;
        pr->beat = true;
        pr->beat_t = now - rsl.hb_age_s;
        pr->beat_step = rs->hb.step;
        pr->beat_phase = rs->hb.phase;
        pr->done = rsl.steps;
    }
}

/* probation_find_silent() over every rank at time now: the global rank that froze, or -1. */
static int frozen_rank(const struct probation *p, double now, int *ret_next)
{
    struct rank_silence r[INV_MAX_CTS * STATUS_MAX_RANKS];
    int n = p->ncts * p->nproc;
    for (int i = 0; i < n; i++) {
        const struct prank *pr = &p->cts[i / p->nproc].ranks[i % p->nproc];
        r[i] = (struct rank_silence){pr->beat ? now - pr->beat_t : -1, pr->done, pr->ended};
    }
    return probation_find_silent(r, n, ret_next);
}

static const struct prank *rank_of(const struct probation *p, int rank)
{
    return &p->cts[rank / p->nproc].ranks[rank % p->nproc];
}

/* A rank exited (what_exited: the verdict that would name it, "rank 0 on h1:101 exited with
 * code 8 (peer lost) at step 38; see ..."), while another froze before it: the frozen rank is
 * the cause, its peers only followed it (they timed out in a collective it never joined, or
 * lost it as a peer).  The verdict used to name the exit, sending the operator to a rank that
 * was fine.  It is a cause: no exit fed later replaces it; and no exit code of its own (-1).
 * true when it decided the verdict. */
static bool fail_frozen(struct probation *p, double now, const char *what_exited)
{
    int next, f = p->verdict == PROBATION_PENDING ? frozen_rank(p, now, &next) : -1;
    if (f < 0)
        return false;
    const struct prank *fr = rank_of(p, f);
    fail_code(p, STATUS_RC_NONE);
    p->peer_stop_ct = -1;
    fail(p, "rank %d on %s stopped sending heartbeats %.0f s before the others exited (last step %lld), "
         "and the others followed it: %s", f, p->cts[f / p->nproc].label, now - fr->beat_t, fr->beat_step,
         what_exited);
    return true;
}

/* Rank `rank` has sent no heartbeat for age seconds (past healthy_deadline; in phase phase).
 * When every rank still running is silent (PROBATION_QUIET_S or more), the whole gang hung
 * behind the one that froze first: that one is named, with how much later the next stopped,
 * not whichever this document's loop reached first (the verdict named rank 0 of the container
 * read first, the ranks that only waited for the frozen one included). */
static void fail_silent(struct probation *p, double now, int rank, double age, enum hb_phase phase)
{
    int next = -1, f = frozen_rank(p, now, &next);
    bool all = f >= 0 && next >= 0; /* a gang of one names no first */
    for (int i = 0; all && i < p->ncts * p->nproc; i++) {
        const struct prank *r = rank_of(p, i);
        all = r->ended || (r->beat && now - r->beat_t >= PROBATION_QUIET_S);
    }
    if (!all || now - rank_of(p, f)->beat_t < age) {
        fail(p, "silent: no heartbeat from rank %d (%s) for %.0fs in phase %s (healthy_deadline %.0fs)",
             rank, p->cts[rank / p->nproc].label, age, hb_phase_name(phase), p->pol.healthy_deadline_s);
        return;
    }
    const struct prank *fr = rank_of(p, f);
    char then[160];
    say(then, sizeof then, ", %.0fs before rank %d (%s)", rank_of(p, next)->beat_t - fr->beat_t, next,
        p->cts[next / p->nproc].label);
    fail(p, "silent: no heartbeat from rank %d (%s) for %.0fs in phase %s (healthy_deadline %.0fs); every "
         "rank fell silent, rank %d first (last step %lld)%s", f, p->cts[f / p->nproc].label, now - fr->beat_t,
         hb_phase_name(fr->beat_phase), p->pol.healthy_deadline_s, f, fr->beat_step, then);
}

static void feed_one(struct probation *p, int ct, const struct agent_status *st, double now);

/* Has the agent (its job's view js) gone back to a release other than the one on probation by
 * itself? */
static bool went_back(const struct probation *p, const struct job_status *js)
{
    return js->state == GANG_REVERTED || (js->current[0] && !release_matches(js->current, p->release));
}

/* The containers named after the first in a went-back FAIL: at most this many, then "and N more". */
#define BACK_NAMED_MAX 4

/* A went-back FAIL's reason names every container whose agent went back, not the first only:
 * "the agent on h1:101 went back to X by itself (why), and so did the agents on h1:102 and
 * h2:201; see ...", the others in inventory order, at most BACK_NAMED_MAX of them named. */
static void went_back_reason(struct probation *p)
{
    char others[PROBATION_REASON_MAX] = "";
    const char *names[INV_MAX_CTS];
    int n = 0, first = p->back_ct;
    for (int i = 0; i < p->ncts; i++)
        if (p->cts[i].went_back && i != first)
            names[n++] = p->cts[i].label;
    if (!n)
        return;
    size_t off = 0;
    text_join_names(names, n, BACK_NAMED_MAX, others, sizeof others, &off);
    say(p->reason, sizeof p->reason, "%s, and so did the %s on %s%s", p->back_base,
        n == 1 ? "agent" : "agents", others, p->back_logs);
}

/* After a went-back FAIL: another container whose agent went back too is named in it. */
static void note_went_back(struct probation *p, int ct, const struct agent_status *st)
{
    const struct job_status *js = status_find_job(st, p->job);
    if (!js || p->cts[ct].went_back || !went_back(p, js))
        return;
    p->cts[ct].went_back = true;
    went_back_reason(p);
}

void probation_feed(struct probation *p, int ct, const struct agent_status *st, double now)
{
    if (ct < 0 || ct >= p->ncts)
        return;
    if (p->verdict == PROBATION_PENDING) {
        feed_one(p, ct, st, now);
        return;
    }
    if (p->verdict == PROBATION_FAIL && p->agent_went_back && !p->recovery) {
        note_went_back(p, ct, st);
        return;
    }
    /* A FAIL that names a peer_lost or peer_stopped exit names no cause: the rank ended because
     * a rank in another container did (crashed, hung, was stopped).  That container's document,
     * fed in the deploy's settle look after the FAIL, names the cause instead; nothing found
     * there leaves the verdict as it was. */
    if (p->verdict != PROBATION_FAIL || p->peer_stop_ct < 0 || ct == p->peer_stop_ct)
        return;
    struct {
        enum status_reason agent_code;
        bool agent_went_back;
        int exit_code;
        char reason[PROBATION_REASON_MAX];
    } was = {p->agent_code, p->agent_went_back, p->exit_code, ""};
    memcpy(was.reason, p->reason, sizeof was.reason);
    int was_ct = p->peer_stop_ct;
    p->verdict = PROBATION_PENDING;
    p->peer_stop_ct = -1;
    feed_one(p, ct, st, now);
    if (p->verdict == PROBATION_FAIL && p->peer_stop_ct < 0)
        return; /* a cause */
    p->verdict = PROBATION_FAIL;
    p->peer_stop_ct = was_ct;
    p->agent_code = was.agent_code;
    p->agent_went_back = was.agent_went_back;
    p->exit_code = was.exit_code;
    memcpy(p->reason, was.reason, sizeof p->reason);
}

static void feed_one(struct probation *p, int ct, const struct agent_status *st, double now)
{
    struct pct_state *cs = &p->cts[ct];
    const struct job_status *js = status_find_job(st, p->job);
    char sid[RELEASE_SHORT_LEN + 1], sid2[RELEASE_SHORT_LEN + 1];
    cs->agent_gone = false; /* a document came: its agent runs (again) */
    if (!js)
        return; /* not there yet: the healthy_deadline rule decides */
    cs->have = true;
    cs->t_seen = now;
    if (!p->recovery) {
        if (went_back(p, js)) {
            char logs[JOB_NAME_MAX + 48];
            fail_code(p, js->reason_code);
            if (p->verdict != PROBATION_PENDING)
                return;
            p->agent_went_back = true;
            cs->went_back = true;
            logs_pointer_for(p, js->reason_code, logs, sizeof logs);
            fail(p, "the agent on %s went back to %s by itself (%s)", cs->label,
                 release_short(js->current, "none", sid), js->reason[0] ? js->reason : "no reason given");
            /* kept apart, so that the containers whose agents went back too go in between */
            memcpy(p->back_base, p->reason, sizeof p->back_base);
            p->back_ct = ct;
            (void)str_copy(p->back_logs, sizeof p->back_logs, logs);
            size_t n = strlen(p->reason);
            snprintf(p->reason + n, sizeof p->reason - n, "%s", logs);
            return;
        }
        /* the same release with another job spec than this deploy's: another operator's deploy
         * of it (the agents promote whatever pair is current), never this deploy's to pass */
        if (cs->spec[0] && js->spec_digest[0] && strcmp(js->spec_digest, cs->spec) != 0) {
            fail(p, "the agent on %s runs %s with another job spec (%.12s) than this deploy's "
                 "(%.12s): another deploy of the same release?", cs->label,
                 release_short(js->current, "none", sid), js->spec_digest, cs->spec);
            return;
        }
    } else if (js->current[0] && !release_matches(js->current, p->release)) {
        /* a two-phase revert whose stop was slow here: the agent's revert is queued behind it
         * (it replaced the stop) and switches once the old gang is gone; the healthy deadline
         * decides if it never does */
        if (js->state == GANG_STOPPING)
            return;
        if (js->state == GANG_REVERTED && js->good[0] && release_matches(js->current, js->good)) {
            /* a rollback to an earlier (or, with --force, a bad) release that then failed: the
             * agent went back to the good release on its own, and says why.  It read as "runs
             * G, not the release X we reverted to", the cause dropped, ROLLBACK FAILED (exit 4)
             * though the job ran its good release (the caller confirms that one now). */
            char logs[JOB_NAME_MAX + 48];
            fail_code(p, js->reason_code);
            p->agent_went_back = true;
            cs->went_back = true;
            fail(p, "the agent on %s went back to %s by itself (%s)%s", cs->label,
                 release_short(js->current, "none", sid), js->reason[0] ? js->reason : "no reason given",
                 logs_pointer_for(p, js->reason_code, logs, sizeof logs));
            return;
        }
        fail(p, "%s runs %s, not the release %s the job was sent back to", cs->label,
             release_short(js->current, "none", sid), release_short(p->release, "none", sid2));
        return;
    }
    if (js->state == GANG_FAILED) {
        char logs[JOB_NAME_MAX + 48];
        fail_code(p, js->reason_code);
        fail(p, "the gang on %s failed: %s%s", cs->label, js->reason[0] ? js->reason : "no reason given",
             logs_pointer_for(p, js->reason_code, logs, sizeof logs));
        return;
    }
    /* activate and revert return once the gang has started: a stopped gang has ended (a worker
     * that exits 0 at once is as useless as one that crashes). */
    if (js->state == GANG_STOPPED && (!js->current[0] || release_matches(js->current, p->release))) {
        char logs[JOB_NAME_MAX + 48];
        fail_code(p, js->reason_code);
        fail(p, "the gang on %s stopped: %s%s", cs->label, js->reason[0] ? js->reason : "no reason given",
             logs_pointer_for(p, js->reason_code, logs, sizeof logs));
        return;
    }
    note_beats(p, ct, js, now);
    for (int lr = 0; lr < p->nproc; lr++) {
        int rank = ct * p->nproc + lr;
        const struct rank_status *rs0 = find_rank(js, rank);
        /* Exits count only for the gang of the watched release, not the old one stopping. */
        if (rs0 && release_matches(js->release, p->release) && (rs0->exit_code >= 0 || rs0->exit_signal > 0)) {
            char what[256], logs[JOB_NAME_MAX + 48], exited[PROBATION_REASON_MAX];
            describe_exit(rs0, what, sizeof what);
            say(exited, sizeof exited, "rank %d on %s %s%s", rank, cs->label, what, logs_pointer(p, logs, sizeof logs));
            if (fail_frozen(p, now, exited))
                return;
            bool first = p->verdict == PROBATION_PENDING;
            fail_exit(p, rs0);
            fail(p, "%s", exited);
            if (first && rs0->exit_signal <= 0 && train_exit_is_peer_effect(rs0->exit_code))
                p->peer_stop_ct = ct;
            return;
        }
    }
    if (!p->recovery && (js->restarts > 0 || js->state == GANG_BACKOFF)) {
        char why[sizeof js->reason], logs[JOB_NAME_MAX + 48], lost[PROBATION_REASON_MAX];
        say(lost, sizeof lost, "the gang on %s %s (restarts %d): %s%s", cs->label,
            js->state == GANG_BACKOFF ? "lost a rank and is backing off" : "restarted",
            js->restarts, js->reason[0] ? agent_reason_without_plan(js->reason, why, sizeof why) : "no reason given",
            logs_pointer(p, logs, sizeof logs));
        /* its ranks ended for a rank elsewhere (peer_exit): maybe one that froze */
        if (js->peer_exit && fail_frozen(p, now, lost))
            return;
        bool first = p->verdict == PROBATION_PENDING;
        fail_code(p, js->reason_code);
        fail(p, "%s", lost);
        if (first && js->peer_exit)
            p->peer_stop_ct = ct; /* its ranks ended for a rank elsewhere: no cause here */
        return;
    }
    /* The agent stopping the watched gang on its own (a liveness trip, non-finite loss, a rank
     * that exited): never a pass, whatever the samples so far say; its reason names the rule. */
    if (!p->recovery && js->state == GANG_STOPPING && release_matches(js->current, p->release) &&
        status_reason_stops_gang(js->reason_code)) {
        char logs[JOB_NAME_MAX + 48];
        fail_code(p, js->reason_code);
        fail(p, "the gang on %s is being stopped by its agent: %s%s", cs->label, js->reason,
             logs_pointer_for(p, js->reason_code, logs, sizeof logs));
        return;
    }
    for (int lr = 0; lr < p->nproc; lr++) {
        int rank = ct * p->nproc + lr;
        const struct rank_status *rs = find_rank(js, rank);
        if (!rs)
            continue;
        if (release_matches(js->release, p->release) &&
            (strcmp(rs->state, "exited") == 0 || strcmp(rs->state, "killed") == 0)) {
            char what[256], logs[JOB_NAME_MAX + 48], exited[PROBATION_REASON_MAX];
            describe_exit(rs, what, sizeof what);
            say(exited, sizeof exited, "rank %d on %s %s%s", rank, cs->label, what, logs_pointer(p, logs, sizeof logs));
            if (fail_frozen(p, now, exited))
                return;
            fail_exit(p, rs);
            fail(p, "%s", exited);
            return;
        }
        struct prank *pr = &cs->ranks[lr];
        if (release_matches(js->release, p->release)) {
            pr->bad_lines = rs->bad_lines; /* said when it never sends a heartbeat */
            pr->none_sent = !rs->has_hb && !rs->bad_lines;
            if (rs->has_hb && rs->hb.phase == HB_PHASE_INIT && release_matches(rs->hb.release, p->release)) {
                double at = now - (rs->hb_age_s > 0 ? rs->hb_age_s : 0) - p->t0;
                if (!(at > 0))
                    at = 0; /* sent just before the switch's t0: "+0s", never "+-0s" */
                if (rs->hb.hello && !pr->hello) {
                    pr->hello = true;
                    pr->hello_t = at;
                } else if (!rs->hb.hello && !pr->inited) {
                    pr->inited = true;
                    pr->init_t = at;
                }
            }
        }
        if (!rs->has_hb || !release_matches(rs->hb.release, p->release) ||
            (js->release[0] && !release_matches(js->release, p->release)))
            continue; /* heartbeat of the old gang, or none yet */
        const struct heartbeat *hb = &rs->hb;
        if (hb->phase != HB_PHASE_TRAIN && hb->phase != HB_PHASE_CHECKPOINT)
            continue;
        if (hb->nonfinite > 0 || (hb->phase == HB_PHASE_TRAIN && hb->has_loss && !hb->loss_finite)) {
            fail(p, "non-finite loss at step %lld on rank %d (%s)", (long long)hb->step, rank,
                 cs->label);
            return;
        }
        if (!pr->seen || hb->step != pr->step) {
            pr->step = hb->step;
            pr->step_t = now;
        } else if (hb->phase == HB_PHASE_TRAIN && now - pr->step_t > p->pol.healthy_deadline_s &&
                   rs->hb_age_s < (now - pr->step_t) / 2) {
            /* only while heartbeats flow: a frozen rank (SIGSTOP, a hung host) also stops
             * stepping, and is the silent case below, not "stalled ... while heartbeats flow" */
            fail(p, "stalled: rank %d on %s at step %lld for %.0fs while heartbeats flow (healthy_deadline %.0fs)",
                 rank, cs->label, (long long)hb->step, now - pr->step_t, p->pol.healthy_deadline_s);
            return;
        }
        if (rs->hb_age_s > p->pol.healthy_deadline_s) {
            fail_silent(p, now, rank, rs->hb_age_s, hb->phase);
            return;
        }
        pr->tokens = hb->tokens;
        pr->hb_t = now - (rs->hb_age_s > 0 ? rs->hb_age_s : 0);
        if (!pr->seen) { /* the first heartbeat shows where it starts */
            pr->sampled_step = hb->step;
            pr->sampled_tokens = hb->tokens;
            pr->sampled_t = pr->hb_t;
        }
        pr->seen = true;
        pr->resumed_from = hb->resumed_from;
        pr->tok_s = isfinite(hb->tok_s) && hb->tok_s > 0 ? hb->tok_s : 0;
        pr->step_ms = isfinite(hb->step_ms) && hb->step_ms > 0 ? hb->step_ms : 0;
        long long done = hb->step;
        if (hb->resumed_from >= 0 && hb->step >= hb->resumed_from)
            done = hb->step - hb->resumed_from;
        pr->warm_done = done;
        if (done >= p->pol.warmup_steps)
            pr->past_warmup = true;
    }
    /* A job sample once every rank has stepped since the last one (fresh) and says its rate.
     * Each rank's rate is over the interval since the last sample (tokens counted / heartbeat
     * time), so one slow step (evaluation, a checkpoint) weighs what it cost in the interval;
     * the last step's tok_s stands in when the worker does not count tokens. */
    double sum = 0, ms = 0;
    bool steps_ok = true, fresh = true;
    int world = p->ncts * p->nproc;
    double rate[INV_MAX_CTS * STATUS_MAX_RANKS];
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++) {
            const struct prank *r = &p->cts[c].ranks[lr];
            if (!r->seen)
                return;
            fresh = fresh && r->step > r->sampled_step && r->tok_s > 0;
            steps_ok = steps_ok && r->past_warmup;
            double dt = r->hb_t - r->sampled_t, x = r->tok_s;
            long long dtok = r->tokens - r->sampled_tokens;
            if (dt > 0.05 && dtok > 0 && r->tokens > 0)
                x = (double)dtok / dt;
            double m = r->step > r->sampled_step && dt > 0.05
                           ? dt * 1000.0 / (double)(r->step - r->sampled_step)
                           : r->step_ms;
            rate[c * p->nproc + lr] = x;
            sum += x;
            if (m > ms)
                ms = m;
        }
    if (p->t_train == 0)
        p->t_train = now;
    if (!fresh || p->nsamples >= PROBATION_MAX_SAMPLES)
        return;
    int i = p->nsamples++;
    p->samples[i] = sum / 1000.0;
    p->sample_t[i] = now;
    p->sample_ms[i] = ms;
    p->sample_cost[i] = ms > 0 ? ms : 1000.0 / p->samples[i];
    p->sample_steps_ok[i] = steps_ok;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++) {
            struct prank *r = &p->cts[c].ranks[lr];
            r->sampled_step = r->step;
            r->sampled_tokens = r->tokens;
            r->sampled_t = r->hb_t;
            p->rank_tok[(size_t)(i % RANK_SAMPLES) * (size_t)world + (size_t)(c * p->nproc + lr)] =
                rate[c * p->nproc + lr];
        }
}

/* Where warmup ends, over the samples so far: the first sample past warmup_steps and
 * warmup_time, then past the leading run of samples whose rolling median step time lies more than
 * WARM_SLACK above the steady level (the newest half's median).  -1 while that cannot be told
 * yet: too few samples, or the step time is still falling (the newest quarter's median clearly
 * below the quarter's before).  warmup_max caps all of it; *ret_capped = 1 when the cap decided. */
static int find_warm_start(const struct probation *p, int *ret_capped)
{
    int n = p->nsamples, i0 = n, icap = n, start = -1;
    *ret_capped = 0;
    for (int i = 0; i < n; i++)
        if (p->sample_t[i] - p->t_train >= p->pol.warmup_max_s) {
            icap = i;
            break;
        }
    for (int i = 0; i < n; i++)
        if (p->sample_steps_ok[i] && p->sample_t[i] - p->t_train >= p->pol.warmup_time_s) {
            i0 = i;
            break;
        }
    int len = n - i0;
    if (i0 < n && len >= 2 * WARM_ROLL) {
        const double *cost = p->sample_cost + i0;
        double steady = stats_median(cost + len / 2, len - len / 2);
        int q = len / 4;
        bool falling = q >= 3 && stats_median(cost + len - q, q) <
                                     (1 - WARM_SLACK) * stats_median(cost + len - 2 * q, q);
        int j = 0;
        while (!falling && j < len) {
            int a = j - WARM_ROLL / 2, b = j + WARM_ROLL / 2 + 1;
            if (a < 0)
                a = 0;
            if (b > len)
                b = len;
            if (stats_median(cost + a, b - a) <= (1 + WARM_SLACK) * steady)
                break;
            j++;
        }
        if (!falling && j < len)
            start = i0 + j;
    }
    if (icap < n && (start < 0 || start > icap)) {
        *ret_capped = 1;
        return icap;
    }
    return start;
}

/* A relative change for people: the shift of log Ktok/s as "-14.8%". */
static const char *pct_str(double log_shift, char *buf, size_t sz)
{
    double v = (exp(log_shift) - 1) * 100;
    snprintf(buf, sz, "%+.1f%%", fabs(v) < 0.05 ? 0.0 : v);
    return buf;
}

static const char *p_str(double pv, char *buf, size_t sz)
{
    if (pv < 0.001)
        snprintf(buf, sz, "p<0.001");
    else
        snprintf(buf, sz, "p=%.3f", pv);
    return buf;
}

/* Straggler: with 3+ ranks, each rank's log tok_s against the per-sample median of its peers'
 * over the newest window samples.  Returns the slowest rank beyond the tolerance, or -1. */
static int find_straggler(struct probation *p, int from, double thr, struct stats_shift *ret)
{
    int world = p->ncts * p->nproc, n = p->nsamples - from;
    if (world < 3)
        return -1;
    if (n > RANK_SAMPLES)
        n = RANK_SAMPLES;
    if (n < MIN_WINDOW)
        return -1;
    double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y),
           *peers = malloc((size_t)world * sizeof *peers);
    int worst = -1;
    if (!x || !y || !peers)
        goto out;
    for (int r = 0; r < world; r++) {
        bool ok = true;
        for (int k = 0; k < n && ok; k++) {
            int i = p->nsamples - n + k;
            const double *row = p->rank_tok + (size_t)(i % RANK_SAMPLES) * (size_t)world;
            int np = 0;
            for (int q = 0; q < world; q++)
                if (q != r)
                    peers[np++] = row[q];
            ok = row[r] > 0;
            x[k] = ok ? log(row[r]) : 0;
            double pm = stats_median(peers, np);
            ok = ok && pm > 0;
            y[k] = ok ? log(pm) : 0;
        }
        struct stats_shift sh;
        if (!ok || stats_mann_whitney(x, n, y, n, p->pol.confidence, &sh) < 0)
            continue;
        if (sh.hi < thr && (worst < 0 || sh.shift < ret->shift)) {
            worst = r;
            *ret = sh;
        }
    }
out:
    free(x);
    free(y);
    free(peers);
    return worst;
}

/* The throughput comparison over the warm window: true when it decided (PASS or FAIL). */
static bool judge(struct probation *p, double now)
{
    int capped;
    int ws = find_warm_start(p, &capped);
    if (ws < 0)
        return false;
    p->warm_start = ws;
    int n = p->nsamples - ws;
    /* The samples themselves must span min_healthy_time: a gang that stops stepping stops
     * sampling, and is judged by the stall rule, never passed on its last good minute. */
    if (n < MIN_WINDOW || p->sample_t[p->nsamples - 1] - p->sample_t[ws] < p->pol.min_healthy_time_s ||
        p->nsamples == p->judged_n)
        return false;
    p->judged_n = p->nsamples;
    if (n > STATS_MAX_SAMPLES)
        n = STATS_MAX_SAMPLES;
    const double *win = p->samples + p->nsamples - n;
    double x[STATS_MAX_SAMPLES];
    for (int i = 0; i < n; i++)
        x[i] = log(win[i]);
    p->ktok = stats_median(win, n);
    double thr = log(1 - p->pol.tolerance);
    char a[32], b[32], c1[16], c2[16], c3[16], ps[16], conf[16], excl[96];
    say(conf, sizeof conf, "%.0f%%", p->pol.confidence * 100);
    say(excl, sizeof excl, "%d warmup samples excluded%s", ws,
             capped ? " (warmup_max reached)" : "");
    struct stats_shift sh;
    int sr = find_straggler(p, ws, thr, &sh);
    if (sr >= 0) {
        p->straggler = sr;
        fail(p, "straggler: rank %d (%s) runs %s [%s, %s] against the median of its %d peers, "
             "beyond tolerance %s (Mann-Whitney U, %s interval of the Hodges-Lehmann shift; %d "
             "samples each, %s)", sr, p->cts[sr / p->nproc].label, pct_str(sh.shift, c1, sizeof c1),
             pct_str(sh.lo, c2, sizeof c2), pct_str(sh.hi, c3, sizeof c3),
             p->ncts * p->nproc - 1, pct_str(thr, a, sizeof a), conf, sh.n, p_str(sh.p, ps, sizeof ps));
        return true;
    }
    char test[400];
    if (p->base) {
        if (stats_mann_whitney(x, n, p->base, p->nbase, p->pol.confidence, &sh) < 0)
            return false;
        say(test, sizeof test, "Mann-Whitney U, %s interval of the Hodges-Lehmann shift; "
                 "%s vs %s Ktok/s median; %d samples vs %d baseline samples, %s; %s", conf,
                 ktok_str(p->ktok, a, sizeof a), ktok_str(exp(stats_median(p->base, p->nbase)), b,
                 sizeof b), n, p->nbase, p_str(sh.p, ps, sizeof ps), excl);
    } else if (p->baseline > 0) {
        if (stats_sign_interval(x, n, log(p->baseline), p->pol.confidence, &sh) < 0)
            return false;
        say(test, sizeof test, "sign test, %s interval of the median against the recorded "
                 "%s Ktok/s baseline; median %s Ktok/s of %d samples, %s; %s", conf,
                 ktok_str(p->baseline, b, sizeof b), ktok_str(p->ktok, a, sizeof a), n,
                 p_str(sh.p, ps, sizeof ps), excl);
    } else {
        say(p->reason, sizeof p->reason, "%s Ktok/s (median of %d samples over %.0fs; %s)",
                 ktok_str(p->ktok, a, sizeof a), n, now - p->sample_t[ws], excl);
        if (!p->unjudged[0])
            say(p->note, sizeof p->note, "no baseline on these containers yet: throughput "
                     "rule skipped; these %d samples (median %s Ktok/s) become the baseline", n, a);
        else if (p->rebase) /* a baseline there is, but not one to compare with */
            say(p->note, sizeof p->note, "throughput rule skipped (%s); these %d samples (median "
                     "%s Ktok/s) become the baseline", p->unjudged, n, a);
        p->verdict = PROBATION_PASS;
        return true;
    }
    char tol[16];
    pct_str(thr, tol, sizeof tol);
    pct_str(sh.shift, c1, sizeof c1);
    pct_str(sh.lo, c2, sizeof c2);
    pct_str(sh.hi, c3, sizeof c3);
    if (sh.hi < thr) {
        fail(p, "throughput regression: %s [%s, %s] against the baseline, beyond tolerance %s "
             "(%s)", c1, c2, c3, tol, test);
        return true;
    }
    if (sh.lo >= thr) {
        say(p->reason, sizeof p->reason, "throughput %s [%s, %s] against the baseline, within "
                 "tolerance %s (%s)", c1, c2, c3, tol, test);
        p->verdict = PROBATION_PASS;
        return true;
    }
    say(p->cmp, sizeof p->cmp, "throughput %s [%s, %s] against the baseline straddles "
             "tolerance %s (%s)", c1, c2, c3, tol, test);
    return false;
}

/* Container c sent a status document once but none for PROBATION_QUIET_S or more: its figures
 * are those of when its agent last answered. */
static bool ct_quiet(const struct probation *p, int c, double now)
{
    return p->cts[c].have && now - p->cts[c].t_seen >= PROBATION_QUIET_S;
}

/* How far a rank that never sent a train heartbeat got: 0 lines that are not heartbeats, 1 no
 * line at all, 2 not known (nothing of the watched release yet), 3 a hello only (its module
 * started, no hb.init()), 4 init (past the rendezvous); 5 it trains. */
static int start_level(const struct prank *pr)
{
    if (pr->seen)
        return 5;
    if (pr->inited)
        return 4;
    if (pr->hello)
        return 3;
    if (pr->bad_lines > 0)
        return 0;
    return pr->none_sent ? 1 : 2;
}

/* "0, 2, 5" into buf: the ranks whose start_level is (at_least ? >= : <) level; "none". */
static void rank_list(const struct probation *p, int level, bool at_least, char *buf, size_t sz)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->ncts * p->nproc; i++) {
        int l = start_level(&p->cts[i / p->nproc].ranks[i % p->nproc]);
        if ((l >= level) != at_least)
            continue;
        char one[16];
        int k = snprintf(one, sizeof one, "%s%d", n ? ", " : "", i);
        if (n + (size_t)k + 4 >= sz) {
            snprintf(buf + n, sz - n, "%s...", n ? ", " : "");
            return;
        }
        memcpy(buf + n, one, (size_t)k + 1);
        n += (size_t)k;
    }
    if (!n)
        snprintf(buf, sz, "none");
}

/* Has some rank got as far as level (start_level) or further? */
static bool any_level(const struct probation *p, int level)
{
    for (int i = 0; i < p->ncts * p->nproc; i++)
        if (start_level(&p->cts[i / p->nproc].ranks[i % p->nproc]) >= level)
            return true;
    return false;
}

/* At healthy_deadline, a rank with no train heartbeat of the watched release: the one that got
 * least far is named (a peer that never came, not rank 0 waiting for it in the rendezvous), with
 * what it did send.  False when every rank trains. */
static bool fail_no_train_beat(struct probation *p)
{
    int worst = -1, wl = 5;
    for (int i = 0; i < p->ncts * p->nproc; i++) {
        int l = start_level(&p->cts[i / p->nproc].ranks[i % p->nproc]);
        if (l < wl) {
            worst = i;
            wl = l;
        }
    }
    if (worst < 0)
        return false;
    const struct prank *pr = &p->cts[worst / p->nproc].ranks[worst % p->nproc];
    const char *label = p->cts[worst / p->nproc].label;
    char sid[RELEASE_SHORT_LEN + 1], did[64], didnt[64];
    double dl = p->pol.healthy_deadline_s;
    release_short(p->release, "none", sid);
    if (wl == 4) { /* the rendezvous is behind it: a slow compile, a data loader, a hang */
        fail(p, "rank %d (%s) with release %s started (init at +%.0fs) but never reached its first "
             "training step within healthy_deadline %.0fs", worst, label, sid, pr->init_t, dl);
        return true;
    }
    if (wl == 3 && p->ncts * p->nproc > 1 && !any_level(p, 4)) {
        /* every rank sent its hello, none its init: they all wait for each other, and naming
         * rank 0 (the first found) sent the operator to a rank that was no more at fault */
        double first = -1, last = -1;
        for (int i = 0; i < p->ncts * p->nproc; i++) {
            double t = p->cts[i / p->nproc].ranks[i % p->nproc].hello_t;
            first = first < 0 || t < first ? t : first;
            last = t > last ? t : last;
        }
        char at[48];
        if (last - first >= 0.5)
            snprintf(at, sizeof at, "at +%.0fs to +%.0fs", first, last);
        else
            snprintf(at, sizeof at, "at +%.0fs", first);
        fail(p, "every rank (%d) with release %s sent its hello (drover_heartbeat started, %s) and none "
             "called hb.init() within healthy_deadline %.0fs: %s", p->ncts * p->nproc, sid, at, dl,
             HB_ALL_HELLO_HINT);
        return true;
    }
    if (wl == 3) {
        rank_list(p, 4, true, did, sizeof did);
        rank_list(p, 4, false, didnt, sizeof didnt);
        fail(p, "rank %d (%s) with release %s started drover_heartbeat (at +%.0fs) but never called "
             "hb.init() within healthy_deadline %.0fs: %s (ranks that sent init: %s; did not: %s)",
             worst, label, sid, pr->hello_t, dl, HB_HELLO_ONLY_HINT, did, didnt);
        return true;
    }
    /* a worker that writes another format is not only told it sent nothing: the agent's
     * first_step_deadline says so too, but this deadline may come first */
    char bad[240] = "";
    if (wl == 0)
        snprintf(bad, sizeof bad, "; it wrote %lld %s (`drover logs --job %.64s --agent` says why)",
                 pr->bad_lines, text_plural(pr->bad_lines, "line that is not a heartbeat",
                                            "lines that are not heartbeats"), p->job);
    else if (wl == 1) {
        rank_list(p, 3, true, did, sizeof did);
        if (strcmp(did, "none")) /* the same script got further elsewhere: it does report */
            snprintf(bad, sizeof bad, "; it sent none, while rank%s %s started drover_heartbeat: it "
                     "is stuck before Heartbeat() or never started (`drover logs --job %.64s`)",
                     strchr(did, ',') ? "s" : "", did, p->job);
        else
            snprintf(bad, sizeof bad, "; %s", HB_NONE_SENT_HINT);
    }
    fail(p, "no heartbeat from rank %d (%s) with release %s within healthy_deadline %.0fs%s", worst,
         label, sid, dl, bad);
    return true;
}

/* Every rank past warmup_steps, with two steps or more since its first train heartbeat, and
 * not one token nor rate from any (tokens 0, tok_s 0): no sample will ever come, and waiting
 * for max_probation_time (5 minutes by default) only delays the same "no data".  Said now, as
 * no data (on_inconclusive decides).  A worker that sends tok_s without tokens, or tokens on
 * some steps, is sampled as before. */
static bool no_tokens(struct probation *p)
{
    if (p->nsamples > 0)
        return false;
    long long step = -1;
    for (int i = 0; i < p->ncts * p->nproc; i++) {
        const struct prank *r = &p->cts[i / p->nproc].ranks[i % p->nproc];
        if (!r->seen || !r->past_warmup || r->tokens > 0 || r->tok_s > 0 || r->step < r->sampled_step + 2)
            return false;
        if (step < 0 || r->step < step)
            step = r->step;
    }
    say(p->reason, sizeof p->reason, "no data: the workers report steps with no tokens: every rank "
        "is past warmup (the slowest at step %lld) and none reported a token or a rate (tokens 0, "
        "tok_s 0), so throughput cannot be measured; pass each step's tokens to hb.step(step, loss, "
        "tokens=...) (docs/pytorch.md)", step);
    p->verdict = PROBATION_NODATA;
    return true;
}

enum probation_verdict probation_check(struct probation *p, double now)
{
    if (p->verdict != PROBATION_PENDING)
        return p->verdict;
    if (now - p->t0 > p->pol.healthy_deadline_s) {
        /* A container whose agent is not running sends nothing more: its ranks' missing
         * heartbeats and its silence are its agent's, not the release's (the gang there may run
         * on unwatched).  Said first, whatever else its old figures would say. */
        for (int c = 0; c < p->ncts; c++) {
            const struct pct_state *cs = &p->cts[c];
            double quiet = now - (cs->have ? cs->t_seen : p->t0);
            if (cs->agent_gone && quiet > p->pol.healthy_deadline_s) {
                fail_code(p, STATUS_RC_NONE);
                fail(p, "no status from %s for %.0fs (healthy_deadline %.0fs): its drover-agent is "
                     "not running (%s)", cs->label, quiet, p->pol.healthy_deadline_s,
                     cs->agent_said[0] ? cs->agent_said : AGENT_NO_DAEMON_SAID);
                p->agent_gone_ct = c;
                return p->verdict;
            }
        }
        for (int c = 0; c < p->ncts; c++) {
            if (!p->cts[c].have) {
                fail(p, "no status for job '%s' from %s within healthy_deadline %.0fs", p->job,
                     p->cts[c].label, p->pol.healthy_deadline_s);
                return p->verdict;
            }
        }
        /* A container whose documents stopped coming (its agent stopped or frozen, its host
         * gone): its figures are those of when its agent last answered, so no verdict on the
         * workers comes from them (a rank read "never called hb.init()" from a frozen agent's
         * first document, while it trained, and the release was marked bad).  Nothing else is
         * judged meanwhile (its ranks are part of every rendezvous and collective); its silence
         * decides once it passes healthy_deadline, as an agent that is not running: not the
         * release's failure (probation_agent_gone_ct()). */
        int quiet = -1;
        bool stale = false;
        for (int c = 0; c < p->ncts; c++) {
            stale = stale || ct_quiet(p, c, now);
            if (p->cts[c].have && (quiet < 0 || p->cts[c].t_seen < p->cts[quiet].t_seen))
                quiet = c;
        }
        if (quiet >= 0 && now - p->cts[quiet].t_seen > p->pol.healthy_deadline_s) {
            fail_code(p, STATUS_RC_NONE);
            fail(p, "no status from %s for %.0fs (healthy_deadline %.0fs): its drover-agent is not "
                 "answering (stopped or frozen, or its host is down); its workers' figures that old "
                 "are not judged", p->cts[quiet].label, now - p->cts[quiet].t_seen,
                 p->pol.healthy_deadline_s);
            p->agent_gone_ct = quiet;
            return p->verdict;
        }
        if (!stale && fail_no_train_beat(p))
            return p->verdict;
    }
    bool all_seen = true;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++)
            all_seen = all_seen && p->cts[c].ranks[lr].seen;
    if (p->recovery && all_seen) {
        snprintf(p->reason, sizeof p->reason, "every rank heartbeats in phase train");
        p->verdict = PROBATION_PASS;
        return p->verdict;
    }
    if (all_seen && !p->recovery && judge(p, now))
        return p->verdict;
    if (all_seen && !p->recovery && no_tokens(p))
        return p->verdict;
    double tmax = p->pol.progress_deadline_s;
    const char *tname = "progress_deadline";
    if (!p->recovery && p->pol.max_probation_time_s > 0 && p->pol.max_probation_time_s < tmax) {
        tmax = p->pol.max_probation_time_s;
        tname = "max_probation_time";
    }
    if (now - p->t0 <= tmax)
        return p->verdict;
    if (p->recovery) {
        fail(p, "probation did not finish within progress_deadline %.0fs", p->pol.progress_deadline_s);
        return p->verdict;
    }
    if (p->cmp[0]) {
        say(p->reason, sizeof p->reason, "inconclusive after %.0fs (%s): %s", tmax, tname,
                 p->cmp);
        p->verdict = PROBATION_INCONCLUSIVE;
        return p->verdict;
    }
    const struct prank *low = NULL;
    int low_rank = -1;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++) {
            const struct prank *pr = &p->cts[c].ranks[lr];
            if (!pr->past_warmup && (!low || pr->warm_done < low->warm_done)) {
                low = pr;
                low_rank = c * p->nproc + lr;
            }
        }
    char why[160], at[48] = "";
    /* warmup_steps count from the process's start or resume, not the run's step (a resumed rank
     * "at step 4649 of 100000 warmup steps" read as if it were nearly through) */
    if (low && low->resumed_from >= 0 && low->step >= low->resumed_from)
        snprintf(at, sizeof at, " since it resumed at step %lld", low->resumed_from);
    if (low)
        snprintf(why, sizeof why, "rank %d has made %lld of %lld warmup steps%s", low_rank,
                 low->warm_done, (long long)p->pol.warmup_steps, at);
    else if (p->nsamples == 0)
        snprintf(why, sizeof why, "no rank reported a rate (tok_s) on a new step");
    else if (p->warm_start < 0)
        snprintf(why, sizeof why, "%d samples, all warmup: the step time was still falling",
                 p->nsamples);
    else
        snprintf(why, sizeof why, "%d warm samples over %.0fs, fewer than min_healthy_time %.0fs "
                 "needs", p->nsamples - p->warm_start, now - p->sample_t[p->warm_start],
                 p->pol.min_healthy_time_s);
    snprintf(p->reason, sizeof p->reason, "no data: no throughput verdict within %s %.0fs (%s)",
             tname, tmax, why);
    p->verdict = PROBATION_NODATA;
    return p->verdict;
}

const char *probation_reason(const struct probation *p)
{
    return p->reason;
}

enum status_reason probation_agent_code(const struct probation *p)
{
    return p->verdict == PROBATION_FAIL ? p->agent_code : STATUS_RC_NONE;
}

int probation_exit_code(const struct probation *p)
{
    return p->verdict == PROBATION_FAIL ? p->exit_code : -1;
}

bool probation_agent_went_back(const struct probation *p)
{
    return p->verdict == PROBATION_FAIL && p->agent_went_back;
}

const char *probation_note(const struct probation *p)
{
    return p->note;
}

double probation_ktok_s(const struct probation *p)
{
    return p->ktok;
}

int probation_warmup_excluded(const struct probation *p)
{
    return p->warm_start >= 0 ? p->warm_start : p->nsamples;
}

void probation_agent_gone(struct probation *p, int ct, const char *said)
{
    if (ct < 0 || ct >= p->ncts)
        return;
    p->cts[ct].agent_gone = true;
    snprintf(p->cts[ct].agent_said, sizeof p->cts[ct].agent_said, "%s", said ? said : "");
}

int probation_agent_gone_ct(const struct probation *p)
{
    return p->verdict == PROBATION_FAIL ? p->agent_gone_ct : -1;
}

void probation_ct_stopped(struct probation *p, int ct, const char *pct_said)
{
    if (ct < 0 || ct >= p->ncts || p->ct_stop_said)
        return;
    if (p->verdict == PROBATION_FAIL)
        p->verdict = PROBATION_PENDING; /* the stop explains it: its peers lost a rank */
    p->ct_stop_said = p->verdict == PROBATION_PENDING;
    if (p->ct_stop_said) {
        p->peer_stop_ct = -1; /* the stop is the cause: nothing fed later replaces it */
        p->agent_gone_ct = -1;
    }
    fail_code(p, STATUS_RC_NONE);
    fail(p, "container %s stopped during %s (pct: %s)", p->cts[ct].label,
         p->recovery ? "the recovery" : "probation", pct_said && pct_said[0] ? pct_said : "not running");
}

int probation_straggler(const struct probation *p)
{
    return p->straggler;
}

int probation_samples(const struct probation *p, struct sample_set *ret_s)
{
    int ws = p->warm_start;
    if (ws < 0 || ws >= p->nsamples)
        return -ENODATA;
    int n = p->nsamples - ws;
    if (n > SAMPLES_MAX)
        n = SAMPLES_MAX;
    ret_s->n = n;
    (void)str_copy(ret_s->release, sizeof ret_s->release, p->release);
    (void)str_copy(ret_s->job, sizeof ret_s->job, p->job);
    ret_s->ranks = p->ncts * p->nproc;
    ret_s->warmup_excluded = ws;
    memcpy(ret_s->ktok_s, p->samples + p->nsamples - n, (size_t)n * sizeof(double));
    memcpy(ret_s->step_ms, p->sample_ms + p->nsamples - n, (size_t)n * sizeof(double));
    return 0;
}

void probation_progress(const struct probation *p, long long *ret_step, long long *ret_resumed)
{
    long long low = -1;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++)
            if (p->cts[c].ranks[lr].seen && (low < 0 || p->cts[c].ranks[lr].step < low))
                low = p->cts[c].ranks[lr].step;
    *ret_step = low;
    *ret_resumed = p->cts[0].ranks[0].resumed_from;
}

void probation_describe(const struct probation *p, double now, char *buf, size_t buf_sz)
{
    int seen = 0, warm = 0, total = p->ncts * p->nproc;
    double sum = 0;
    for (int c = 0; c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++) {
            seen += p->cts[c].ranks[lr].seen;
            warm += p->cts[c].ranks[lr].past_warmup;
            sum += p->cts[c].ranks[lr].tok_s;
        }
    long long step, resumed;
    probation_progress(p, &step, &resumed);
    char base[96] = "no baseline", a[32], b[32];
    if (p->recovery) /* its rule is "every rank trains again": the job's baseline is not used, not missing */
        snprintf(base, sizeof base, "throughput not judged in a recovery");
    else if (p->unjudged[0])
        snprintf(base, sizeof base, "throughput not judged: %s", p->unjudged);
    else if (p->baseline > 0)
        snprintf(base, sizeof base, "baseline %s", ktok_str(p->baseline, b, sizeof b));
    const char *phase = seen < total ? "waiting for heartbeats"
                        : warm < total || p->warm_start < 0 ? "warmup"
                                                            : "measuring";
    char st[32] = "-";
    if (step >= 0)
        snprintf(st, sizeof st, "%lld", step);
    /* A container whose documents stopped coming (its host's SSH hangs): the figures above are
     * its last ones, not live, so say so until the healthy_deadline decides */
    int quiet = -1, nquiet = 0;
    for (int c = 0; c < p->ncts; c++)
        if (ct_quiet(p, c, now)) {
            nquiet++;
            if (quiet < 0 || p->cts[c].t_seen < p->cts[quiet].t_seen)
                quiet = c;
        }
    char q[200] = "";
    if (quiet >= 0)
        snprintf(q, sizeof q, "; no status from %s%s for %.0fs%s: its figures are that old "
                 "(healthy_deadline %.0fs)", p->cts[quiet].label, nquiet > 1 ? " and others" : "",
                 now - p->cts[quiet].t_seen,
                 p->cts[quiet].agent_gone ? " (its drover-agent is not running)" : "",
                 p->pol.healthy_deadline_s);
    /* A rank that stopped beating in a container that still answers (SIGSTOP, a rank blocked
     * in the kernel): "3/3 ranks heartbeating" with its last step and Ktok/s looked live for
     * the whole healthy_deadline.  Name the quietest such rank, and how many others are quiet
     * too (the rest of a gang blocks in its next collective and falls silent with it, so the
     * quietest is a hint, not a verdict). */
    int qc = -1, qr = -1, nq = 0;
    for (int c = 0; quiet < 0 && c < p->ncts; c++)
        for (int lr = 0; lr < p->nproc; lr++) {
            const struct prank *r = &p->cts[c].ranks[lr];
            if (!r->seen || now - r->hb_t < PROBATION_QUIET_S)
                continue;
            nq++;
            if (qc < 0 || r->hb_t < p->cts[qc].ranks[qr].hb_t) {
                qc = c;
                qr = lr;
            }
        }
    if (qc >= 0) {
        char others[48] = "";
        if (nq > 1)
            snprintf(others, sizeof others, " and %d other %s", nq - 1, nq > 2 ? "ranks" : "rank");
        snprintf(q, sizeof q, "; no heartbeat from rank %d (%s)%s for %.0fs: their figures are that "
                 "old (healthy_deadline %.0fs)", qc * p->nproc + qr, p->cts[qc].label, others,
                 now - p->cts[qc].ranks[qr].hb_t, p->pol.healthy_deadline_s);
    }
    /* ranks whose hello came and no init: "0/2 ranks heartbeating" for the whole deadline gave
     * no hint that they had started and wait in the rendezvous */
    int nhello = 0;
    for (int i = 0; i < total; i++)
        nhello += start_level(&p->cts[i / p->nproc].ranks[i % p->nproc]) == 3;
    char hello[80] = "";
    if (nhello > 0)
        snprintf(hello, sizeof hello, " (%d in rendezvous: sent hello, no init yet)", nhello);
    snprintf(buf, buf_sz, "%4.0fs %s: %d/%d ranks heartbeating%s, step %s, %s Ktok/s (%s)%s",
             now - p->t0, phase, seen, total, hello, st, ktok_str(sum / 1000.0, a, sizeof a), base, q);
}
