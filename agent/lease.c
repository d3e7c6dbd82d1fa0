/* agent/lease.c: the deploy lease of a job (see lease.h).  Only this file knows leases/<job>.json. */
#include "agent/lease.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/agentcli.h"
#include "common/fs.h"
#include "common/jsonfield.h"
#include "common/log.h"
#include "common/util.h"

#define LEASE_VERSION 1
#define LEASE_MAX_BYTES 4096

enum lease_verdict lease_decide(const struct lease *cur, const char *holder, double now, const char *boot,
                                const char *dead)
{
    if (!cur || !cur->holder[0])
        return LEASE_TAKE;
    if (!strcmp(cur->holder, holder))
        return LEASE_RENEW;
    bool expired = strcmp(cur->boot_id, boot) != 0 || now > cur->renewed + cur->ttl_s;
    if (expired)
        return LEASE_TAKEOVER;
    /* only the very holder the taker judged: one that took the lease since is refused */
    return dead && !strcmp(cur->holder, dead) ? LEASE_TAKEOVER_DEAD : LEASE_REFUSE;
}

int lease_format(const struct lease *l, char **ret_text)
{
    json_t *o = json_pack("{s:i,s:s,s:f,s:f,s:f,s:s}", "v", LEASE_VERSION, "holder", l->holder, "taken_mono",
                          l->taken, "renewed_mono", l->renewed, "ttl_s", l->ttl_s, "boot_id", l->boot_id);
    if (!o)
        return -EINVAL; /* a holder that is not UTF-8 */
    char *t = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!t)
        return -ENOMEM;
    *ret_text = t;
    return 0;
}

int lease_parse(const char *text, size_t len, struct lease *ret)
{
    json_t *o;
    int r = jf_load(text, len, LEASE_MAX_BYTES, LEASE_VERSION, &o);
    if (r < 0)
        return r;
    struct lease l;
    memset(&l, 0, sizeof l);
    r = -EINVAL;
    if (jf_str(o, "holder", l.holder, sizeof l.holder, false) < 0 || !l.holder[0] ||
        jf_num_in(o, "taken_mono", 0, 1e12, &l.taken) < 0 ||
        jf_num_in(o, "renewed_mono", 0, 1e12, &l.renewed) < 0 ||
        jf_num_in(o, "ttl_s", 0, LEASE_TTL_MAX, &l.ttl_s) < 0 ||
        jf_str(o, "boot_id", l.boot_id, sizeof l.boot_id, false) < 0)
        goto out;
    *ret = l;
    r = 0;
out:
    json_decref(o);
    return r;
}

static void boot_id(char *buf, size_t sz)
{
    buf[0] = '\0';
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sz - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

/* What a lease file that cannot be written (r) says after the errno's words. */
static const char *lease_disk_hint(int r)
{
    return r == -ENOSPC || r == -EDQUOT ? " (the container's disk is full)" : "";
}

/* Lock ROOT/leases/<job>.lock (AGENT_LOCK_TIMEOUT_S, then -ETIMEDOUT naming the holder);
 * returns the fd (close to unlock).  Every failure is logged. */
static int lease_lock(const char *root, const char *job, char *path, size_t pathsz)
{
    char dir[4096], lk[4200], err[600];
    snprintf(dir, sizeof dir, "%s/leases", root);
    int r = fs_mkdir_p(dir, 0700);
    if (r < 0) {
        log_error("lease of job '%s': cannot create '%s': %s%s", job, dir, strerror(-r), lease_disk_hint(r));
        return r;
    }
    snprintf(lk, sizeof lk, "%s/%s.lock", dir, job);
    if (snprintf(path, pathsz, "%s/%s.json", dir, job) >= (int)pathsz) {
        log_error("lease of job '%s': path under '%s' too long", job, dir);
        return -ENAMETOOLONG;
    }
    int fd = fs_lock_file(lk, AGENT_LOCK_TIMEOUT_S, err, sizeof err);
    if (fd < 0)
        log_error("lease of job '%s': %s%s", job, err, lease_disk_hint(fd));
    return fd;
}

static int lease_read(const char *path, struct lease *ret, bool *ret_have)
{
    char *text = NULL;
    size_t len = 0;
    int r = fs_read_file(path, LEASE_MAX_BYTES, &text, &len);
    *ret_have = false;
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = lease_parse(text, len, ret);
    free(text);
    if (r == 0)
        *ret_have = true;
    return 0; /* an unreadable lease counts as none */
}

void lease_peek(const char *root, const char *job, double now, char *ret_holder, size_t sz, double *ret_left)
{
    char path[4200], boot[40];
    struct lease l;
    bool have = false;
    ret_holder[0] = '\0';
    *ret_left = -1;
    if (snprintf(path, sizeof path, "%s/leases/%s.json", root, job) >= (int)sizeof path ||
        lease_read(path, &l, &have) < 0 || !have)
        return;
    boot_id(boot, sizeof boot);
    if (strcmp(l.boot_id, boot) != 0 || now > l.renewed + l.ttl_s)
        return; /* expired: nobody holds it */
    (void)str_copy(ret_holder, sz, l.holder);
    *ret_left = l.renewed + l.ttl_s - now;
}

int lease_take(const char *root, const char *job, const char *holder, double ttl_s, const char *dead,
               char *ret_takeover, size_t takeover_sz)
{
    char path[4300], boot[40];
    int lk = lease_lock(root, job, path, sizeof path);
    if (lk < 0)
        return lk;
    boot_id(boot, sizeof boot);
    double now = time_mono();
    struct lease cur;
    bool have;
    int r = lease_read(path, &cur, &have);
    if (r < 0) {
        log_error("lease of job '%s': cannot read '%s': %s", job, path, strerror(-r));
        goto out;
    }
    enum lease_verdict v = lease_decide(have ? &cur : NULL, holder, now, boot, dead);
    if (v == LEASE_REFUSE) {
        fprintf(stderr, "job '%s' " AGENT_LEASE_HELD_BY "%s" AGENT_LEASE_HELD_END "%.0f s ago, renewed %.0f s ago, "
                        "expires in %.0f s)\n",
                job, cur.holder, now - cur.taken, now - cur.renewed, cur.renewed + cur.ttl_s - now);
        r = -EBUSY;
        goto out;
    }
    struct lease l;
    memset(&l, 0, sizeof l);
    (void)str_copy(l.holder, sizeof l.holder, holder);
    l.taken = v == LEASE_RENEW ? cur.taken : now;
    l.renewed = now;
    l.ttl_s = ttl_s;
    (void)str_copy(l.boot_id, sizeof l.boot_id, boot);
    char *text = NULL;
    if ((r = lease_format(&l, &text)) < 0) {
        log_error("lease of job '%s': holder '%s' cannot be written as JSON: %s", job, holder, strerror(-r));
        goto out;
    }
    if ((r = fs_write_atomic(path, text, strlen(text), 0600)) < 0) {
        /* not taken: a deploy or start must not go on as if it held the job here */
        log_error("lease of job '%s': cannot write '%s': %s%s", job, path, strerror(-r), lease_disk_hint(r));
        free(text);
        goto out;
    }
    free(text);
    if (v == LEASE_TAKEOVER || v == LEASE_TAKEOVER_DEAD) {
        bool other_boot = strcmp(cur.boot_id, boot) != 0;
        char line[400];
        if (v == LEASE_TAKEOVER_DEAD)
            snprintf(line, sizeof line, "deploy lease taken over by %s from %s (no longer running on "
                     "its host, said %s; idle %.0f s of its %.0f s TTL)", holder, cur.holder, holder,
                     now - cur.renewed, cur.ttl_s);
        else if (other_boot)
            snprintf(line, sizeof line, "deploy lease taken over by %s from %s (taken before the "
                     "container's last boot)", holder, cur.holder);
        else
            snprintf(line, sizeof line, "deploy lease taken over by %s from %s (idle %.0f s, past its "
                     "%.0f s TTL)", holder, cur.holder, now - cur.renewed, cur.ttl_s);
        printf("lease of job '%s': %s\n", job, line);
        if (ret_takeover)
            (void)str_copy(ret_takeover, takeover_sz, line);
        r = 1;
    } else {
        printf("lease of job '%s' %s by %s for %.0f s\n", job, v == LEASE_RENEW ? "renewed" : "taken",
               holder, ttl_s);
        r = 0;
    }
out:
    close(lk);
    return r;
}

int lease_release(const char *root, const char *job, const char *holder)
{
    char path[4300];
    int lk = lease_lock(root, job, path, sizeof path);
    if (lk < 0)
        return lk;
    struct lease cur;
    bool have;
    int r = lease_read(path, &cur, &have);
    if (r < 0)
        log_error("lease of job '%s': cannot read '%s': %s", job, path, strerror(-r));
    if (r == 0 && have && strcmp(cur.holder, holder) != 0) {
        fprintf(stderr, "the lease of job '%s' is held by %s, not %s: left alone\n", job, cur.holder, holder);
        r = -EBUSY;
    } else if (r == 0 && have && unlink(path) < 0) {
        r = -errno;
        log_error("lease of job '%s': cannot remove '%s': %s", job, path, strerror(-r));
    }
    close(lk);
    return r;
}

bool lease_any_held(const char *root)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/leases", root) >= (int)sizeof dir)
        return true; /* cannot tell: held */
    DIR *d = opendir(dir);
    if (!d)
        return errno != ENOENT;
    char boot[40];
    boot_id(boot, sizeof boot);
    double now = time_mono();
    bool held = false;
    struct dirent *de;
    while (!held && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".json"))
            continue;
        char path[4400];
        struct lease cur;
        bool have;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lease_read(path, &cur, &have) < 0)
            held = true; /* cannot tell: held */
        else if (have)
            held = lease_decide(&cur, "", now, boot, NULL) == LEASE_REFUSE; /* "": nobody's holder */
    }
    closedir(d);
    return held;
}
