/* controller/deploy/rbtarget.c: see rbtarget.h. */
#include "controller/deploy/rbtarget.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/text.h"
#include "common/util.h"
#include "controller/ui.h"

static void say(struct rb_target *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct rb_target *t, const char *fmt, ...)
{
    size_t n = strlen(t->why);
    if (n >= sizeof t->why - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why + n, sizeof t->why - n, fmt, ap);
    va_end(ap);
}

static bool marked_bad(const struct rb_ct *cts, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; cts[i].js && k < cts[i].js->nbad; k++)
            if (!strcmp(cts[i].js->bad[k], id))
                return true;
    return false;
}

static bool on_good(const struct job_status *js)
{
    return js->good[0] && !strcmp(js->current, js->good) &&
           !strcmp(js->spec_digest, js->good_spec_digest);
}

/* The releases the caller says failed probation since they were promoted (rbtarget_decide_skip). */
struct skip_list {
    const char *const *ids;
    int n;
};

static bool skipped_by_history(const struct skip_list *sk, const char *id)
{
    for (int k = 0; sk && k < sk->n; k++)
        if (sk->ids[k] && !strcmp(sk->ids[k], id))
            return true;
    return false;
}

static void note_skipped(struct rb_target *t, const char *id)
{
    for (int k = 0; k < t->nskipped; k++)
        if (!strcmp(t->skipped[k], id))
            return;
    if (t->nskipped < RB_MAX_SKIPPED)
        (void)str_copy(t->skipped[t->nskipped++], sizeof t->skipped[0], id);
}

/* The newest promoted pair of js other than the one it runs (and, with only, of that release):
 * its index in goods, or -1.  A pair of the running release whose spec is unknown ("": an agent
 * older than the pairs, or a record dropped) cannot be told from the running one: skipped.
 * Without only, a release marked bad (by a container, or the caller's history) is passed over
 * and noted in t (t NULL: not noted). */
static int earlier_pair(const struct rb_ct *cts, int n, const struct job_status *js, const char *only,
                        const struct skip_list *sk, struct rb_target *t)
{
    for (int k = 0; k < js->ngoods; k++) {
        const char *rel = js->goods[k], *dg = js->goods_spec[k];
        if (only && strcmp(rel, only) != 0)
            continue;
        if (!strcmp(rel, js->current) && (!dg[0] || !strcmp(dg, js->spec_digest)))
            continue;
        if (!only && (marked_bad(cts, n, rel) || skipped_by_history(sk, rel))) {
            if (t && strcmp(rel, js->current) != 0)
                note_skipped(t, rel);
            continue;
        }
        return k;
    }
    return -1;
}

/* The newest promoted pair of release `rel` in js, the one it runs included: its index in goods,
 * or -1. */
static int newest_pair(const struct job_status *js, const char *rel)
{
    for (int k = 0; k < js->ngoods; k++)
        if (!strcmp(js->goods[k], rel))
            return k;
    return -1;
}

/* Container i goes to pair k of its goods (k < 0: the release with the inventory's spec). */
static void take_pair(struct rb_target *t, const struct rb_ct *c, int i, int k)
{
    const char *dg = k >= 0 ? c->js->goods_spec[k] : "";
    t->recorded[i] = dg[0] && strcmp(dg, c->want ? c->want : "") != 0;
    (void)str_copy(t->digest[i], sizeof t->digest[i], t->recorded[i] ? dg : "");
    t->nrecorded += t->recorded[i];
}


int rbtarget_decide_skip(const char *job, const struct rb_ct *cts, int n, const char *to,
                         const char *const *skip, int nskip, struct rb_target *ret)
{
    const struct skip_list skl = { .ids = skip, .n = skip ? nskip : 0 }, *sk = &skl;
    if (n < 1 || n > INV_MAX_CTS)
        return -EINVAL;
    struct rb_target *t = ret;
    memset(t, 0, sizeof *t);
    char sid[RELEASE_SHORT_LEN + 1], sid2[RELEASE_SHORT_LEN + 1];
    /* every container must know the job */
    for (int i = 0; i < n; i++)
        if (!cts[i].js) {
            t->kind = RB_REFUSED;
            say(t, "%s does not know job '%s' (its agent never ran it): a rollback has nothing to "
                "go back to there; deploy the release the job should run instead", cts[i].label, job);
            return 0;
        }
    bool agree = true;
    for (int i = 1; i < n; i++)
        agree = agree && !strcmp(cts[i].js->good, cts[0].js->good);
    if (agree)
        (void)str_copy(t->good, sizeof t->good, cts[0].js->good);
    if (to) {
        /* Every container runs `to` already: the operator asks for an earlier spec of it, so
         * each goes to its newest promoted pair of `to` other than what runs.  Otherwise each
         * goes to its newest promoted pair of `to`, the one it runs included: a container left
         * on `to` while the others moved on keeps its spec (picking "another" pair there sent it
         * to a spec the job ran long ago). */
        t->kind = RB_EARLIER;
        (void)str_copy(t->release, sizeof t->release, to);
        t->spec_only = true;
        for (int i = 0; i < n; i++)
            t->spec_only = t->spec_only && !strcmp(cts[i].js->current, to);
        /* every container already runs `to` with the inventory's spec and has no other
         * promoted spec of it: nothing to go to.  Going on restarted every gang as it was,
         * said as "the job spec it was promoted with before" when there was none. */
        bool same = t->spec_only;
        for (int i = 0; i < n; i++) {
            int k = t->spec_only ? earlier_pair(cts, n, cts[i].js, to, NULL, NULL) : newest_pair(cts[i].js, to);
            same = same && k < 0 && cts[i].want && cts[i].want[0] &&
                   !strcmp(cts[i].want, cts[i].js->spec_digest);
            take_pair(t, &cts[i], i, k);
        }
        (void)str_copy(t->current, sizeof t->current, cts[0].js->current);
        if (same) {
            t->kind = RB_NONE;
            t->nrecorded = 0;
            say(t, "every container of job '%s' already runs %s with the inventory's job spec, and "
                "no other spec of it was promoted there: a rollback to it would only restart the "
                "gang as it runs (`drover stop --job %s` then `drover start --job %s` does that); "
                "`drover history --job %s` lists the releases to name with --to ID", job,
                ui_short(to, sid), job, job, job);
        }
        return 0;
    }
    if (!agree) {
        t->kind = RB_REFUSED;
        say(t, "the containers of job '%s' disagree on its good release:", job);
        for (int i = 0; i < n; i++)
            say(t, "%s %s runs %s, good %s", i ? ";" : "", cts[i].label,
                cts[i].js->current[0] ? ui_short(cts[i].js->current, sid) : "nothing",
                cts[i].js->good[0] ? ui_short(cts[i].js->good, sid2) : "none");
        say(t, ".  A rollback from one container's view would take the others elsewhere: name the "
            "release every container should go to with --to ID, or deploy it");
        return 0;
    }
    /* anything unpromoted anywhere: back to the good pair everywhere (the agents' revert) */
    for (int i = 0; i < n; i++)
        if (t->good[0] && !on_good(cts[i].js)) {
            t->kind = RB_REVERT;
            (void)str_copy(t->current, sizeof t->current, cts[i].js->current);
            return 0;
        }
    (void)str_copy(t->current, sizeof t->current, t->good);
    int k0 = -1, have = 0, none_at = -1;
    for (int i = 0; i < n; i++) {
        int k = t->good[0] ? earlier_pair(cts, n, cts[i].js, NULL, sk, t) : -1;
        if (k < 0) {
            none_at = none_at < 0 ? i : none_at;
            continue;
        }
        const char *rel = cts[i].js->goods[k];
        if (!have++) {
            k0 = i;
            (void)str_copy(t->release, sizeof t->release, rel);
        } else if (strcmp(rel, t->release) != 0) {
            t->kind = RB_REFUSED;
            say(t, "the containers of job '%s' would roll back to different releases: %s to %s, %s "
                "to %s (their promoted histories differ): name the release with --to ID", job,
                cts[k0].label, ui_short(t->release, sid), cts[i].label, ui_short(rel, sid2));
            return 0;
        }
        take_pair(t, &cts[i], i, k);
    }
    if (!have) {
        t->kind = RB_NONE;
        t->release[0] = '\0';
        return 0;
    }
    if (have < n) {
        t->kind = RB_REFUSED;
        say(t, "only %d of the %d %s of job '%s' %s an earlier good release to go back "
            "to (%s; %s has none): name the release with --to ID", have, n,
            text_plural(n, "container", "containers"), job, text_plural(have, "has", "have"),
            ui_short(t->release, sid), cts[none_at].label);
        return 0;
    }
    t->kind = RB_EARLIER;
    t->spec_only = !strcmp(t->release, t->current);
    return 0;
}

int rbtarget_decide(const char *job, const struct rb_ct *cts, int n, const char *to, struct rb_target *ret)
{
    return rbtarget_decide_skip(job, cts, n, to, NULL, 0, ret);
}

bool rbtarget_prefix_ok(const char *s)
{
    size_t n = strspn(s, "0123456789abcdefABCDEF");
    return !s[n] && n >= RB_PREFIX_MIN && n <= RELEASE_ID_LEN;
}

int rbtarget_match_prefix(const char *const *known, int n, const char *prefix, const char **ret_hits, int max)
{
    size_t pl = strlen(prefix);
    int hits = 0;
    for (int k = 0; k < n; k++) {
        if (!known[k][0] || strncasecmp(known[k], prefix, pl) != 0)
            continue;
        bool seen = false; /* the same release from another container, or as good and previous */
        for (int e = 0; e < k && !seen; e++)
            seen = !strcmp(known[e], known[k]);
        if (seen)
            continue;
        if (hits < max)
            ret_hits[hits] = known[k];
        hits++;
    }
    return hits;
}
