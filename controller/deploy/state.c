/* controller/deploy/state.c: the controller's own records (history, baselines, per-job locks) under
 * state_dir, as JSON through jansson.  Never stores anything a container needs: the agent's
 * state.json is the truth about what runs there; this is what the controller decided and saw.
 */
#include "controller/deploy/state.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/log.h"
#include "common/manifest2.h"
#include "common/samples.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/text.h"
#include "common/util.h"

#define HISTORY_MAX_BYTES (64u << 20)
#define BASELINES_MAX_BYTES (4u << 20)

int state_init(const char *state_dir)
{
    char p[1024];
    int r = fs_mkdir_p(state_dir, 0700);
    if (r < 0)
        return r;
    snprintf(p, sizeof p, "%s/bundles", state_dir);
    return fs_mkdir_p(p, 0700);
}

int state_history_append(const char *state_dir, const struct history_entry *e)
{
    char *line;
    int fr = history_entry_format(e, &line);
    if (fr < 0)
        return fr;
    char p[1024];
    snprintf(p, sizeof p, "%s/history.jsonl", state_dir);
    int r = 0;
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
    } else {
        size_t n = strlen(line);
        line[n] = '\n'; /* replaces the NUL; we write n + 1 bytes */
        r = fd_write_all(fd, line, n + 1);
        if (r == 0 && fsync(fd) < 0)
            r = -errno;
        close(fd);
    }
    free(line);
    return r;
}

static bool same_record(const struct history_entry *a, const struct history_entry *b)
{
    return a->time == b->time && !strcmp(a->job, b->job) && !strcmp(a->release, b->release) &&
           !strcmp(a->result, b->result);
}

static int by_time(const void *pa, const void *pb)
{
    const struct history_entry *a = pa, *b = pb;
    return a->time < b->time ? -1 : a->time > b->time;
}

/* Whether word is one of the space-separated words of list. */
static bool has_word(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, " ");
        if (l == wl && !strncmp(p, word, wl))
            return true;
        p += l;
        p += strspn(p, " ");
    }
    return false;
}

/* The agent's record e (its container named) folded into an agent's record of the same outcome
 * in v[0..n): true when one tells it (e's container added there when missing and it fits). */
static bool fold_agent_record(struct history_entry *v, size_t n, const struct history_entry *e)
{
    for (size_t k = 0; k < n; k++) {
        struct history_entry *o = &v[k];
        if (strcmp(o->by, HISTORY_BY_AGENT) != 0 || strcmp(o->job, e->job) != 0 ||
            strcmp(o->release, e->release) != 0 || strcmp(o->result, e->result) != 0 ||
            strcmp(o->previous, e->previous) != 0 || fabs(o->time - e->time) > STATE_HISTORY_FOLD_S)
            continue;
        size_t l = strlen(o->containers);
        if (e->containers[0] && !has_word(o->containers, e->containers) &&
            l + 1 + strlen(e->containers) < sizeof o->containers)
            snprintf(o->containers + l, sizeof o->containers - l, "%s%s", l ? " " : "", e->containers);
        return true;
    }
    return false;
}

/* Whether e is an agent's own record of a revert that a drover's verdict in v[0..n) tells: a
 * drover's record of the release's probation ending, near it in time ("held" ends nothing). */
static bool told_by_drover(const struct history_entry *v, size_t n, const struct history_entry *e)
{
    /* an agent's stop of the promoted release (agent-stopped) comes after the drover's verdict,
     * `promoted`, which tells nothing of it: dropped, the NaN a release produced minutes after
     * its promote was in no history, and rollback's skip could not say when and why */
    if (strcmp(e->by, HISTORY_BY_AGENT) != 0 || e->reason_code == HISTORY_RC_AGENT_STOPPED ||
        e->reason_code == HISTORY_RC_AGENT_STOPPED_HUNG)
        return false;
    for (size_t k = 0; k < n; k++)
        if (!v[k].by[0] && strcmp(v[k].result, "held") != 0 && !strcmp(v[k].job, e->job) &&
            !strcmp(v[k].release, e->release) && fabs(v[k].time - e->time) <= STATE_HISTORY_FOLD_S)
            return true;
    return false;
}

int state_history_merge(struct history_entry **entries, size_t *n, const struct history_entry *more,
                        size_t nmore, const char *from)
{
    size_t add = 0;
    struct history_entry *v = realloc(*entries, (*n + nmore + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    *entries = v;
    for (size_t i = 0; i < nmore; i++) {
        struct history_entry e = more[i];
        bool agent = !strcmp(e.by, HISTORY_BY_AGENT);
        if (agent && !e.containers[0] && from)
            (void)str_copy(e.containers, sizeof e.containers, from);
        bool dup = false;
        for (size_t k = 0; k < *n + add && !dup; k++)
            dup = same_record(&v[k], &e);
        if (!dup && agent)
            dup = fold_agent_record(v, *n + add, &e);
        if (!dup)
            v[*n + add++] = e;
    }
    size_t n0 = *n, kept = 0;
    *n += add;
    for (size_t i = 0; i < *n; i++)
        if (!told_by_drover(v, *n, &v[i]))
            v[kept++] = v[i];
    *n = kept;
    add = kept > n0 ? kept - n0 : 0;
    qsort(v, *n, sizeof *v, by_time); /* records of one run differ in time: ties are dups */
    if (*n > STATE_HISTORY_MAX) {
        memmove(v, v + (*n - STATE_HISTORY_MAX), STATE_HISTORY_MAX * sizeof *v);
        *n = STATE_HISTORY_MAX;
    }
    return (int)add;
}

int state_history_parse_lines(const char *text, const char *job, struct history_entry **ret_entries,
                              size_t *ret_n, size_t *ret_skipped)
{
    struct history_entry *v = NULL;
    size_t n = 0, cap = 0, skipped = 0;
    for (const char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        struct history_entry e;
        if (len == 0)
            continue;
        if (history_entry_parse(p, len, &e) < 0) {
            skipped++;
            continue;
        }
        if (strcmp(e.job, job) != 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct history_entry *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                free(v);
                return -ENOMEM;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = e;
    }
    *ret_entries = v;
    *ret_n = n;
    if (ret_skipped)
        *ret_skipped = skipped;
    return 0;
}

/* Warn of the unreadable lines of history file path once in this process: a deploy reads its
 * history several times (survey, rollback target, status), a line said once is enough. */
static void history_warn_skipped(const char *path, size_t skipped, size_t first_line)
{
    static char warned[4][1024];
    static size_t nwarned;
    for (size_t i = 0; i < nwarned; i++)
        if (!strcmp(warned[i], path))
            return;
    if (nwarned < sizeof warned / sizeof warned[0])
        (void)str_copy(warned[nwarned++], sizeof warned[0], path);
    log_warn("'%s': %zu unreadable %s skipped (the first at line %zu): a torn append or a hand edit; "
             "the other records are read", path, skipped, text_plural((long long)skipped, "line", "lines"), first_line);
}

int state_history_read(const char *state_dir, const char *job, struct history_entry **ret_entries,
                       size_t *ret_n, size_t *ret_skipped)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/history.jsonl", state_dir);
    char *text;
    size_t len;
    int r = fs_read_file(p, HISTORY_MAX_BYTES, &text, &len);
    if (r == -ENOENT) {
        *ret_entries = NULL;
        *ret_n = 0;
        if (ret_skipped)
            *ret_skipped = 0;
        return 0;
    }
    if (r < 0)
        return r;
    struct history_entry *v = NULL;
    size_t n = 0, cap = 0, skipped = 0, first_bad = 0, lineno = 0;
    for (char *line = text, *nl; line && line < text + len; line = nl ? nl + 1 : NULL) {
        nl = memchr(line, '\n', len - (size_t)(line - text));
        size_t ll = nl ? (size_t)(nl - line) : len - (size_t)(line - text);
        lineno++;
        struct history_entry e;
        if (ll == 0)
            continue;
        if (history_entry_parse(line, ll, &e) < 0) {
            if (!skipped++)
                first_bad = lineno;
            continue;
        }
        if (job && strcmp(job, e.job) != 0)
            continue;
        if (n == STATE_HISTORY_MAX) { /* keep the newest */
            memmove(v, v + 1, (n - 1) * sizeof *v);
            n--;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct history_entry *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                free(v);
                free(text);
                return -ENOMEM;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = e;
    }
    free(text);
    if (skipped)
        history_warn_skipped(p, skipped, first_bad);
    *ret_entries = v;
    *ret_n = n;
    if (ret_skipped)
        *ret_skipped = skipped;
    return 0;
}

bool history_name_is_verb(const char *name)
{
    static const char *const verbs[] = { "rollback", "promote", "revert", "stop", "start", "rebaseline" };
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (!strcmp(name, verbs[i]))
            return true;
    return false;
}

int state_manifest_head(const char *state_dir, const char *id, char *head, size_t sz, size_t *ret_len)
{
    if (!id || !sha256_is_hex(id)) /* ids come from records and agents' documents: never a path */
        return -EINVAL;
    char p[1200];
    snprintf(p, sizeof p, "%s/manifests/%s", state_dir, id);
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, head, sz);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    *ret_len = (size_t)n;
    return 0;
}

int state_release_name(const char *state_dir, const char *id, char ret_name[MANIFEST_NAME_MAX])
{
    char head[STATE_MANIFEST_HEAD];
    size_t n;
    int r = state_manifest_head(state_dir, id, head, sizeof head, &n);
    return r < 0 ? r : manifest2_name_of(head, n, ret_name);
}

void state_history_release_name(const char *state_dir, const struct history_entry *h, size_t n, size_t i,
                                char ret_name[MANIFEST_NAME_MAX])
{
    const struct history_entry *e = &h[i];
    if (e->name[0] && !history_name_is_verb(e->name)) {
        (void)str_copy(ret_name, MANIFEST_NAME_MAX, e->name);
        return;
    }
    if (e->release[0] && state_release_name(state_dir, e->release, ret_name) == 0 && ret_name[0])
        return;
    for (size_t k = n; e->release[0] && k-- > 0;)
        if (!strcmp(h[k].release, e->release) && h[k].name[0] && !history_name_is_verb(h[k].name)) {
            (void)str_copy(ret_name, MANIFEST_NAME_MAX, h[k].name);
            return;
        }
    (void)str_copy(ret_name, MANIFEST_NAME_MAX, "-");
}

static json_t *baselines_load(const char *state_dir)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/baselines.json", state_dir);
    char *text;
    size_t len;
    json_t *root = NULL;
    if (fs_read_file(p, BASELINES_MAX_BYTES, &text, &len) == 0) {
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        free(text);
    }
    if (!json_is_object(root) || !json_is_object(json_object_get(root, "baselines"))) {
        json_decref(root);
        root = json_pack("{s:i,s:{}}", "v", 1, "baselines");
    }
    return root;
}

int state_baseline_get(const char *state_dir, const char *key, double *ret_ktok_s,
                       char ret_release[RELEASE_ID_LEN + 1])
{
    json_t *root = baselines_load(state_dir);
    if (!root)
        return -ENOMEM;
    json_t *b = json_object_get(json_object_get(root, "baselines"), key);
    json_t *k = json_object_get(b, "ktok_s");
    const char *rel = json_string_value(json_object_get(b, "release"));
    int r = -ENOENT;
    if (json_is_number(k) && json_number_value(k) > 0) {
        *ret_ktok_s = json_number_value(k);
        (void)str_copy(ret_release, RELEASE_ID_LEN + 1, rel ? rel : "");
        r = 0;
    }
    json_decref(root);
    return r;
}

int state_baseline_set(const char *state_dir, const char *key, const char *release, double ktok_s)
{
    json_t *root = baselines_load(state_dir);
    if (!root)
        return -ENOMEM;
    json_object_set_new(json_object_get(root, "baselines"), key,
                        json_pack("{s:s,s:f,s:f}", "release", release, "ktok_s", ktok_s, "time",
                                  time_wall()));
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(root);
    if (!text)
        return -ENOMEM;
    char p[1024];
    snprintf(p, sizeof p, "%s/baselines.json", state_dir);
    int r = fs_write_atomic(p, text, strlen(text), 0600);
    free(text);
    return r;
}

/* samples/<sha256(key)>[.held].json: the key holds container labels, which may hold '/'. */
/* samples/<sha256(key)><suffix>.json: "" the baseline, ".held" a held release's, ".r-<id>" one
 * release's own (state_samples_get_release) */
static int samples_path(const char *state_dir, const char *key, const char *suffix, char *p, size_t sz)
{
    char hex[SHA256_HEX_LEN + 1];
    sha256_buf_hex(key, strlen(key), hex);
    if ((size_t)snprintf(p, sz, "%s/samples/%s%s.json", state_dir, hex, suffix) >= sz)
        return -ENAMETOOLONG;
    return 0;
}

static int samples_read(const char *state_dir, const char *key, const char *suffix, struct sample_set *ret_s)
{
    char p[1024], *text;
    size_t len;
    int r = samples_path(state_dir, key, suffix, p, sizeof p);
    if (r < 0 || (r = fs_read_file(p, SAMPLES_MAX_BYTES, &text, &len)) < 0)
        return r;
    struct sample_set *s = malloc(sizeof *s);
    r = s ? samples_parse(text, len, s) : -ENOMEM;
    if (r == 0 && strcmp(s->containers, key) != 0)
        r = -ENOENT; /* a hash collision, or a hand-edited file */
    if (r == 0)
        memcpy(ret_s, s, sizeof *s);
    free(s);
    free(text);
    return r;
}

static int samples_write(const char *state_dir, const char *key, const char *suffix, const struct sample_set *s)
{
    char p[1024], *text;
    int r = samples_path(state_dir, key, suffix, p, sizeof p);
    if (r < 0)
        return r;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/samples", state_dir);
    if ((r = fs_mkdir_p(dir, 0700)) < 0 || (r = samples_format(s, &text)) < 0)
        return r;
    r = fs_write_atomic(p, text, strlen(text), 0600);
    free(text);
    return r;
}

/* ".r-<id>" for release id into suffix[RELEASE_ID_LEN + 4]; -EINVAL for a malformed id (it names
 * a file) */
static int release_suffix(const char *id, char *suffix)
{
    if (!sha256_is_hex(id))
        return -EINVAL;
    snprintf(suffix, RELEASE_ID_LEN + 4, ".r-%s", id);
    return 0;
}

int state_samples_get(const char *state_dir, const char *key, bool held, struct sample_set *ret_s)
{
    return samples_read(state_dir, key, held ? ".held" : "", ret_s);
}

int state_samples_set(const char *state_dir, const char *key, bool held, const struct sample_set *s)
{
    int r = samples_write(state_dir, key, held ? ".held" : "", s);
    char suffix[RELEASE_ID_LEN + 4];
    /* the baseline is also kept as its release's own, for a rollback to that release later */
    if (r >= 0 && !held && release_suffix(s->release, suffix) == 0)
        r = samples_write(state_dir, key, suffix, s);
    return r;
}

int state_samples_get_release(const char *state_dir, const char *key, const char *id, struct sample_set *ret_s)
{
    char suffix[RELEASE_ID_LEN + 4];
    struct sample_set *s = malloc(sizeof *s);
    int r = s ? release_suffix(id, suffix) : -ENOMEM;
    if (r == 0)
        r = samples_read(state_dir, key, suffix, s);
    if (r == 0 && strcmp(s->release, id) != 0)
        r = -ENOENT; /* a hand-edited file */
    if (r == 0)
        memcpy(ret_s, s, sizeof *s);
    free(s);
    return r;
}

int state_samples_drop(const char *state_dir, const char *key, bool held)
{
    char p[1024];
    int r = samples_path(state_dir, key, held ? ".held" : "", p, sizeof p);
    if (r < 0)
        return r;
    return unlink(p) < 0 && errno != ENOENT ? -errno : 0;
}

int state_lock_job(const char *state_dir, const char *job)
{
    char p[1024];
    int r = fs_mkdir_p(state_dir, 0700); /* rollback, promote and revert may come first */
    if (r < 0)
        return r;
    snprintf(p, sizeof p, "%s/lock-%s", state_dir, job);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    /* the holder's pid, for the next drover's refusal (state_lock_holder) */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0)
        (void)!pwrite(fd, pid, (size_t)n, 0); /* without it the refusal names no pid */
    return fd;
}

int state_lock_holder(const char *state_dir, const char *job, long *ret_pid)
{
    char p[1024], buf[32];
    snprintf(p, sizeof p, "%s/lock-%s", state_dir, job);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -ENODATA; /* a drover from before the pid was written */
    buf[n] = '\0';
    char *end;
    errno = 0;
    long pid = strtol(buf, &end, 10);
    if (errno || end == buf || pid <= 0 || (*end && *end != '\n'))
        return -EINVAL;
    *ret_pid = pid;
    return 0;
}

/* The pid of the flock on (dev, ino) among the lines of /proc/locks (text, NUL-terminated): 1 and
 * *ret_pid when one is held ("N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE START END", major and
 * minor in hex), 0 when none is; lines of waiters ("N: -> FLOCK ...") do not hold it. */
static int proc_locks_find(const char *text, dev_t dev, ino_t ino, long *ret_pid)
{
    for (const char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        char type[16];
        long pid;
        unsigned maj, min;
        unsigned long long inode;
        if (sscanf(l, "%*d: %15s %*s %*s %ld %x:%x:%llu", type, &pid, &maj, &min, &inode) == 5 &&
            !strcmp(type, "FLOCK") && maj == major(dev) && min == minor(dev) && inode == (unsigned long long)ino) {
            *ret_pid = pid;
            return 1;
        }
    }
    return 0;
}

int state_lock_in_use(const char *state_dir, const char *job, struct state_lock_use *ret)
{
    struct state_lock_use u = { 0 };
    snprintf(u.lock, sizeof u.lock, "%s/lock-%s", state_dir, job);
    struct stat sb;
    if (stat(u.lock, &sb) < 0)
        return errno == ENOENT ? 0 : -errno;
    char *text;
    size_t len;
    int r = fs_read_file("/proc/locks", 4u << 20, &text, &len);
    if (r < 0)
        return r;
    long pid = 0;
    r = proc_locks_find(text, sb.st_dev, sb.st_ino, &pid);
    free(text);
    if (r <= 0 || !ret)
        return r;
    /* the file's pid first: /proc/locks names the pid that took the flock as this pid
     * namespace sees it, 0 from another one */
    if (state_lock_holder(state_dir, job, &u.holder_pid) < 0)
        u.holder_pid = pid > 0 ? pid : 0;
    u.since = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec * 1e-9;
    *ret = u;
    return 1;
}
