/* agent/proctree.c: ending a process tree whole (see proctree.h).  Library-like: logs at debug
 * only; the callers say what a missing cgroup means for them. */
#include "agent/proctree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/log.h"
#include "common/procstat.h"
#include "common/text.h"
#include "common/util.h"

/* ---- cgroups: v2, else v1's freezer hierarchy ---- */

static enum gang_cgroup_mode cg_mode = GANG_CGROUP_AUTO;

void gang_set_cgroup_mode(enum gang_cgroup_mode m) { cg_mode = m; }

int gang_cgroup_mode_parse(const char *s, enum gang_cgroup_mode *m)
{
    static const char *const names[] = {[GANG_CGROUP_AUTO] = "auto", [GANG_CGROUP_V2] = "v2",
                                        [GANG_CGROUP_V1] = "v1", [GANG_CGROUP_NONE] = "none"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (!strcmp(s, names[i])) {
            *m = (enum gang_cgroup_mode)i;
            return 0;
        }
    return -EINVAL;
}

/* The agent's own cgroup in the hierarchy whose /proc/self/cgroup line starts with `key`
 * ("0::" for v2, "freezer" for v1's freezer controller): its path, "" when not listed. */
static void cg_self(const char *key, char *self, size_t sz)
{
    self[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return;
    char line[PATH_MAX];
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strcmp(key, "0::")) {
            if (!strncmp(line, "0::", 3))
                (void)str_copy(self, sz, line + 3);
            continue;
        }
        /* "N:ctrl1,ctrl2:/path": key among the controllers */
        char *c = strchr(line, ':'), *e = c ? strchr(c + 1, ':') : NULL;
        if (!c || !e)
            continue;
        *e = '\0';
        char *save = NULL;
        for (char *t = strtok_r(c + 1, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (strlen(t) == kl && !strncmp(t, key, kl))
                (void)str_copy(self, sz, e + 1);
    }
    fclose(f);
}

/* Where the cgroups go: v2 at /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified
 * (hybrid), else v1's freezer hierarchy at /sys/fs/cgroup/freezer, whose freezer.state lets a
 * SIGKILL reach every process without racing forks.  NULL: none (mode none, or not mounted). */
static const char *cg_root(char *self, size_t sz)
{
    static const char *const v2[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    struct statfs sf;
    if (cg_mode == GANG_CGROUP_NONE)
        return NULL;
    if (cg_mode != GANG_CGROUP_V1)
        for (size_t i = 0; i < ARRAY_SIZE(v2); i++)
            if (statfs(v2[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
                cg_self("0::", self, sz);
                if (self[0])
                    return v2[i];
            }
    if (cg_mode == GANG_CGROUP_V2)
        return NULL;
    static const char v1[] = "/sys/fs/cgroup/freezer";
    if (statfs(v1, &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC) {
        cg_self("freezer", self, sz);
        if (self[0])
            return v1;
    }
    return NULL;
}

int proctree_cgroup_create(const char *name, char *ret_path, size_t size)
{
    char self[PATH_MAX], p[PATH_MAX];
    const char *root = cg_root(self, sizeof self);
    if (!root)
        return -ENOENT;
    int n = snprintf(p, sizeof p, "%s%s/%s", root, strcmp(self, "/") ? self : "", name);
    if (n < 0 || (size_t)n >= sizeof p - 32 || (size_t)n >= size)
        return -ENAMETOOLONG;
    if (mkdir(p, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        log_debug("%s: %s", p, strerror(e));
        return -e;
    }
    memcpy(ret_path, p, (size_t)n + 1);
    return 0;
}

int proctree_cgroup_join(const char *procs)
{
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = write(fd, "0\n", 2) == 2 ? 0 : -errno;
    close(fd);
    return r;
}

/* Write v to the cgroup control file dir/file: true when all of it was taken. */
static bool cg_write(const char *dir, const char *file, const char *v)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t n = strlen(v);
    bool ok = write(fd, v, n) == (ssize_t)n;
    if (!ok)
        log_debug("%s: %s", p, strerror(errno));
    close(fd);
    return ok;
}

void proctree_cgroup_signal(const char *cg, int sig)
{
    if (!cg[0])
        return;
    char p[PATH_MAX + 16];
    if (sig == SIGKILL && cg_write(cg, "cgroup.kill", "1"))
        return;
    bool frozen = sig == SIGKILL && cg_write(cg, "freezer.state", "FROZEN"); /* v1 */
    snprintf(p, sizeof p, "%s/cgroup.procs", cg);
    FILE *f = fopen(p, "re");
    if (f) {
        long pid;
        while (fscanf(f, "%ld", &pid) == 1)
            if (pid > 0)
                (void)kill((pid_t)pid, sig);
        fclose(f);
    }
    if (frozen)
        (void)cg_write(cg, "freezer.state", "THAWED");
}

static bool proc_is_live(const struct proc_stat *ps)
{
    return ps->state != 'Z' && ps->state != 'X';
}

int proctree_cgroup_live(const char *cg)
{
    if (!cg[0])
        return 0;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/cgroup.procs", cg);
    FILE *f = fopen(p, "re");
    if (!f)
        return 0;
    long pid;
    int live = 0;
    struct proc_stat ps;
    while (fscanf(f, "%ld", &pid) == 1)
        live += pid > 0 && proc_stat_read(pid, &ps) == 0 && proc_is_live(&ps);
    fclose(f);
    return live;
}

/* ---- a subreaper's descendants ---- */

struct proc_link {
    long pid, ppid;
    bool live, mine;
};

int proctree_descendants_signal(int sig)
{
    DIR *dir = opendir("/proc");
    if (!dir)
        return -errno;
    struct proc_link *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        struct proc_stat ps;
        if (*end || pid <= 0 || proc_stat_read(pid, &ps) < 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct proc_link *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                free(v);
                closedir(dir);
                return -ENOMEM;
            }
            v = nv;
            cap = nc;
        }
        v[n++] = (struct proc_link){pid, ps.ppid, proc_is_live(&ps), false};
    }
    closedir(dir);
    /* mark children of ours, then their children, until a pass marks nothing */
    long self = (long)getpid();
    for (bool more = true; more;) {
        more = false;
        for (size_t i = 0; i < n; i++) {
            if (v[i].mine)
                continue;
            bool mine = v[i].ppid == self;
            for (size_t k = 0; !mine && k < n; k++)
                mine = v[k].mine && v[k].pid == v[i].ppid;
            if (mine)
                v[i].mine = more = true;
        }
    }
    int count = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].mine && v[i].live) {
            count++;
            if (sig)
                (void)kill((pid_t)v[i].pid, sig);
        }
    free(v);
    return count;
}
