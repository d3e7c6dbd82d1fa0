/* common/heartbeat.c: see heartbeat.h; the only file that knows the heartbeat line format. */
#include "common/heartbeat.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/jsonfield.h"
#include "common/text.h"
#include "common/util.h"

static const char *const phase_names[] = {"init", "train", "checkpoint", "done"};

const char *hb_phase_name(enum hb_phase p)
{
    return (unsigned)p < ARRAY_SIZE(phase_names) ? phase_names[p] : "unknown";
}

int hb_phase_from_name(const char *name, enum hb_phase *ret_phase)
{
    for (unsigned i = 0; i < ARRAY_SIZE(phase_names); i++)
        if (!strcmp(name, phase_names[i])) {
            *ret_phase = (enum hb_phase)i;
            return 0;
        }
    return -EINVAL;
}

void heartbeat_init(struct heartbeat *hb)
{
    memset(hb, 0, sizeof *hb);
    hb->resumed_from = -1;
    hb->ckpt_step = -1;
    hb->mfu = -1;
    hb->mem_peak = -1;
    hb->phase = HB_PHASE_INIT;
    hb->has_loss = true;
}

json_t *heartbeat_to_json(const struct heartbeat *hb)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "rank", json_integer(hb->rank));
    json_object_set_new(o, "pid", json_integer(hb->pid));
    json_object_set_new(o, "step", json_integer(hb->step));
    json_object_set_new(o, "tokens", json_integer(hb->tokens));
    if (hb->has_loss || hb->loss_finite)
        json_object_set_new(o, "loss", hb->loss_finite && isfinite(hb->loss) ? json_real(hb->loss) : json_null());
    json_object_set_new(o, "nonfinite", json_integer(hb->nonfinite));
    json_object_set_new(o, "tok_s", json_real(isfinite(hb->tok_s) ? hb->tok_s : 0.0));
    json_object_set_new(o, "step_ms", json_real(isfinite(hb->step_ms) ? hb->step_ms : 0.0));
    json_object_set_new(o, "phase", json_string(hb_phase_name(hb->phase)));
    json_object_set_new(o, "resumed_from", json_integer(hb->resumed_from));
    json_object_set_new(o, "ckpt_step", json_integer(hb->ckpt_step));
    if (hb->mfu >= 0 && isfinite(hb->mfu))
        json_object_set_new(o, "mfu", json_real(hb->mfu));
    if (hb->mem_peak >= 0)
        json_object_set_new(o, "mem_peak", json_integer(hb->mem_peak));
    json_object_set_new(o, "release", json_string(hb->release));
    json_object_set_new(o, "backend", json_string(hb->backend));
    if (hb->hello)
        json_object_set_new(o, "kind", json_string("hello"));
    if (hb->error[0]) {
        /* cut to fit on parse, possibly mid-character: kept, escaped, rather than dropped */
        char e[4 * sizeof hb->error];
        json_object_set_new(o, "error", json_string(text_json_safe(hb->error, e, sizeof e)));
    }
    return o;
}

int heartbeat_format(const struct heartbeat *hb, char *out, size_t outsz)
{
    json_t *o = heartbeat_to_json(hb);
    if (!o)
        return -ENOMEM;
    json_object_set_new(o, "v", json_integer(HEARTBEAT_VERSION));
    size_t cap = outsz < HEARTBEAT_LINE_MAX ? outsz : HEARTBEAT_LINE_MAX;
    size_t n = json_dumpb(o, out, cap, JSON_COMPACT | JSON_REAL_PRECISION(7));
    json_decref(o);
    if (n == 0 || n + 2 > cap)
        return -ENOSPC;
    out[n] = '\n';
    out[n + 1] = '\0';
    return (int)(n + 1);
}

/* The one reading of a heartbeat object: every rule is checked here, and why (when not NULL)
 * says which one failed, so heartbeat_refusal never restates them. */
static int hb_from_json(json_t *o, struct heartbeat *ret_hb, char *why, size_t wsz)
{
#define HB_BAD(...)                                                                                                    \
    do {                                                                                                               \
        if (why)                                                                                                       \
            snprintf(why, wsz, __VA_ARGS__);                                                                           \
        return -EINVAL;                                                                                                \
    } while (0)
    struct heartbeat hb;
    heartbeat_init(&hb);
    if (!json_is_object(o))
        HB_BAD("not a JSON object");
    int64_t rank = 0, nonfinite = 0;
    if (!json_object_get(o, "rank"))
        HB_BAD("no \"rank\" (the global rank, $RANK)");
    if (jf_int(o, "rank", 0, HB_RANK_MAX, true, &rank) < 0)
        HB_BAD("\"rank\" is not an integer 0..%d", HB_RANK_MAX);
    if (!json_object_get(o, "step"))
        HB_BAD("no \"step\" (optimizer steps completed)");
    if (jf_int(o, "step", 0, INT64_MAX, true, &hb.step) < 0)
        HB_BAD("\"step\" is not a non-negative integer");
    /* the optional keys, each absent or of its type */
    struct {
        const char *key;
        int64_t *i, lo, hi;
    } ints[] = { { "pid", &hb.pid, INT64_MIN, INT64_MAX },
                 { "tokens", &hb.tokens, INT64_MIN, INT64_MAX },
                 { "nonfinite", &nonfinite, 0, 1 << 30 },
                 { "resumed_from", &hb.resumed_from, INT64_MIN, INT64_MAX },
                 { "ckpt_step", &hb.ckpt_step, INT64_MIN, INT64_MAX },
                 { "mem_peak", &hb.mem_peak, INT64_MIN, INT64_MAX } };
    for (size_t k = 0; k < ARRAY_SIZE(ints); k++)
        if (jf_int(o, ints[k].key, ints[k].lo, ints[k].hi, false, ints[k].i) < 0)
            HB_BAD("\"%s\" has the wrong type or value", ints[k].key);
    struct {
        const char *key;
        double *d;
    } nums[] = { { "tok_s", &hb.tok_s }, { "step_ms", &hb.step_ms }, { "mfu", &hb.mfu } };
    for (size_t k = 0; k < ARRAY_SIZE(nums); k++)
        if (jf_num(o, nums[k].key, nums[k].d) < 0)
            HB_BAD("\"%s\" has the wrong type or value", nums[k].key);
    struct {
        const char *key;
        char *dst;
        size_t sz;
    } strs[] = { { "release", hb.release, sizeof hb.release },
                 { "backend", hb.backend, sizeof hb.backend },
                 { "error", hb.error, sizeof hb.error } };
    for (size_t k = 0; k < ARRAY_SIZE(strs); k++)
        if (jf_str(o, strs[k].key, strs[k].dst, strs[k].sz, true) < 0)
            HB_BAD("\"%s\" has the wrong type or value", strs[k].key);
    /* "kind": absent for a heartbeat; "hello" when the module started; another word is read as
     * a heartbeat, as an older agent reads every line whatever its kind */
    json_t *kind = json_object_get(o, "kind");
    if (kind && !json_is_string(kind))
        HB_BAD("\"kind\" has the wrong type or value");
    hb.hello = kind && !strcmp(json_string_value(kind), "hello");
    hb.rank = (int)rank;
    hb.nonfinite = (int)nonfinite;
    json_t *loss = json_object_get(o, "loss");
    hb.has_loss = loss != NULL;
    if (loss && json_is_number(loss)) {
        hb.loss = json_number_value(loss);
        hb.loss_finite = isfinite(hb.loss);
    } else if (loss && !json_is_null(loss))
        HB_BAD("\"loss\" has the wrong type or value");
    json_t *ph = json_object_get(o, "phase");
    if (ph && (!json_is_string(ph) || hb_phase_from_name(json_string_value(ph), &hb.phase) < 0))
        HB_BAD("\"phase\" has the wrong type or value");
#undef HB_BAD
    if (!ph && hb.step > 0)
        hb.phase = HB_PHASE_TRAIN;
    if (hb.hello) /* nothing has started but the module: whatever else the line says */
        hb.phase = HB_PHASE_INIT;
    if (!isfinite(hb.tok_s) || hb.tok_s < 0)
        hb.tok_s = 0;
    *ret_hb = hb;
    return 0;
}

int heartbeat_from_json(json_t *o, struct heartbeat *ret_hb)
{
    return hb_from_json(o, ret_hb, NULL, 0);
}

static bool tok_at(const char *s, size_t len, size_t i, const char *tok)
{
    size_t n = strlen(tok);
    if (len - i < n || memcmp(s + i, tok, n) != 0)
        return false;
    if (i + n < len) { /* the token must end there: NaNx stays invalid JSON */
        char c = s[i + n];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
            return false;
    }
    return true;
}

/* Copy line into out (cap 2 * len + 1 suffices), replacing the bare tokens NaN, Infinity,
 * -Infinity, -NaN outside strings by null (never longer than twice the token).  Returns the
 * new length. */
static size_t nonfinite_to_null(const char *line, size_t len, char *out)
{
    static const char *const toks[] = {"-Infinity", "Infinity", "-NaN", "NaN"};
    size_t o = 0;
    bool in_str = false;
    for (size_t i = 0; i < len;) {
        char c = line[i];
        if (in_str) {
            out[o++] = c;
            if (c == '\\' && i + 1 < len)
                out[o++] = line[++i];
            else if (c == '"')
                in_str = false;
            i++;
            continue;
        }
        if (c == '"')
            in_str = true;
        size_t k = 0;
        while (k < ARRAY_SIZE(toks) && !tok_at(line, len, i, toks[k]))
            k++;
        if (k < ARRAY_SIZE(toks)) {
            memcpy(out + o, "null", 4);
            o += 4;
            i += strlen(toks[k]);
            continue;
        }
        out[o++] = c;
        i++;
    }
    return o;
}

int heartbeat_parse(const char *line, size_t len, struct heartbeat *ret_hb)
{
    json_t *o;
    if (len > HEARTBEAT_LINE_MAX)
        return -E2BIG;
    char buf[2 * HEARTBEAT_LINE_MAX + 1];
    size_t n = nonfinite_to_null(line, len, buf);
    int r = jf_load(buf, n, sizeof buf, HEARTBEAT_VERSION, &o);
    if (r < 0)
        return r;
    r = heartbeat_from_json(o, ret_hb);
    json_decref(o);
    return r;
}

const char *heartbeat_refusal(const char *line, size_t len, char *buf, size_t sz)
{
    if (len > HEARTBEAT_LINE_MAX) {
        snprintf(buf, sz, "longer than %d bytes", HEARTBEAT_LINE_MAX);
        return buf;
    }
    char tmp[2 * HEARTBEAT_LINE_MAX + 1];
    size_t n = nonfinite_to_null(line, len, tmp);
    json_error_t jerr;
    json_t *o = json_loadb(tmp, n, JSON_REJECT_DUPLICATES, &jerr);
    json_t *v = o && json_is_object(o) ? json_object_get(o, "v") : NULL;
    struct heartbeat hb;
    if (!o)
        snprintf(buf, sz, "not JSON: %s", jerr.text);
    else if (!json_is_object(o))
        snprintf(buf, sz, "not a JSON object");
    else if (!json_is_integer(v))
        snprintf(buf, sz, "no integer \"v\" (heartbeats carry \"v\": %d)", HEARTBEAT_VERSION);
    else if (json_integer_value(v) != HEARTBEAT_VERSION)
        snprintf(buf, sz, "\"v\" is %lld: this agent reads version %d", (long long)json_integer_value(v),
                 HEARTBEAT_VERSION);
    else if (hb_from_json(o, &hb, buf, sz) == 0)
        snprintf(buf, sz, "not a heartbeat"); /* read here: the refusal was jf_load's own */
    json_decref(o);
    return buf;
}
