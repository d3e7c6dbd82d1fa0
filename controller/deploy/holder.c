/* controller/deploy/holder.c: a drover's name as a deploy lease's holder, and whether the holder
 * of a refusal is a drover of this machine that is gone (see holder.h).  Reads /proc and the boot
 * id only; never talks to a host or an agent. */
#include "controller/deploy/holder.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/procstat.h"
#include "common/util.h"

void holder_boot_tag(const char *boot, unsigned long long pidns, char out[9])
{
    (void)str_copy(out, 9, boot);
    if (strlen(boot) != 8 || pidns == 0 || pidns == HOLDER_INIT_PIDNS)
        return;
    /* another PID namespace (a container): its pids are not the init namespace's, nor another
     * container's, so the tag differs from the plain boot id's (FNV-1a of both, 32 bits) */
    unsigned int h = 2166136261u;
    for (int i = 0; i < 8; i++)
        h = (h ^ (unsigned char)boot[i]) * 16777619u;
    for (int i = 0; i < 8; i++, pidns >>= 8)
        h = (h ^ (unsigned char)(pidns & 0xff)) * 16777619u;
    snprintf(out, 9, "%08x", h);
    if (!strcmp(out, boot)) /* never the init namespace's tag */
        out[7] = out[7] == '0' ? '1' : '0';
}

/* The first 8 hex digits of the kernel's boot id, made this PID namespace's (holder_boot_tag);
 * "" when unreadable. */
static void boot8(char out[9])
{
    char buf[64] = "";
    out[0] = '\0';
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 8)
        return;
    for (int i = 0; i < 8; i++)
        if (!strchr("0123456789abcdef", buf[i]) || !buf[i])
            return;
    char boot[9];
    memcpy(boot, buf, 8);
    boot[8] = '\0';
    struct stat ns;
    holder_boot_tag(boot, stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long long)ns.st_ino : 0, out);
}

void holder_self(char *buf, size_t sz)
{
    char host[HOLDER_MAX] = "?", boot[9], tail[96];
    const char *user = getenv("USER");
    if (!user || !*user)
        user = "root";
    if (gethostname(host, sizeof host - 1) < 0 || !host[0])
        (void)str_copy(host, sizeof host, "?");
    host[strcspn(host, "/@ ")] = '\0'; /* never seen in a host name; would break parsing */
    boot8(boot);
    struct proc_stat ps;
    int n = snprintf(tail, sizeof tail, "/pid-%ld", (long)getpid());
    if (boot[0] && proc_stat_read(getpid(), &ps) == 0)
        snprintf(tail + n, sizeof tail - n, "/boot-%s/start-%llu", boot, ps.start);
    int cap = (int)(sz < HOLDER_MAX ? sz : HOLDER_MAX); /* the whole name, NUL included */
    int room = cap - 1 - (int)strlen(tail) - 1;         /* for user and host, '@' apart */
    if (room < 2) { /* a tiny buffer: the older form, which still names the process */
        tail[n] = '\0';
        room = cap - 1 - n - 1;
    }
    int ulen = (int)strcspn(user, "@/ ");
    ulen = ulen > 32 ? 32 : ulen;
    ulen = ulen > room / 2 ? room / 2 : ulen;
    int hlen = (int)strlen(host);
    hlen = hlen > room - ulen ? room - ulen : hlen;
    if (ulen < 1 || hlen < 1) {
        snprintf(buf, sz, "?");
        return;
    }
    snprintf(buf, (size_t)cap, "%.*s@%.*s%s", ulen, user, hlen, host, tail);
}

int holder_parse(const char *s, struct holder *ret)
{
    struct holder h;
    memset(&h, 0, sizeof h);
    const char *at = strchr(s, '@');
    const char *slash = at ? strchr(at, '/') : NULL;
    if (!at || !slash || slash == at + 1 || at == s || (size_t)(slash - at - 1) >= sizeof h.host)
        return -EINVAL;
    memcpy(h.host, at + 1, (size_t)(slash - at - 1));
    h.host[slash - at - 1] = '\0';
    const char *p = slash;
    if (strncmp(p, "/pid-", 5) != 0)
        return -EINVAL;
    char *e;
    errno = 0;
    long pid = strtol(p + 5, &e, 10);
    if (e == p + 5 || errno || pid <= 0 || p[5] == '+' || p[5] == '-')
        return -EINVAL;
    h.pid = pid;
    p = e;
    if (*p) { /* this drover's form: /boot-B/start-S */
        if (strncmp(p, "/boot-", 6) != 0 || strspn(p + 6, "0123456789abcdef") != 8 ||
            strncmp(p + 14, "/start-", 7) != 0)
            return -EINVAL;
        memcpy(h.boot, p + 6, 8);
        h.boot[8] = '\0';
        p += 21;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        errno = 0;
        h.start = strtoull(p, &e, 10);
        if (errno || *e)
            return -EINVAL;
        h.has_start = true;
    }
    *ret = h;
    return 0;
}

enum holder_fate holder_judge(const struct holder *h, const struct holder *me, int probe,
                              unsigned long long start, bool has_start)
{
    if (strcmp(h->host, me->host) != 0)
        return HOLDER_UNKNOWN; /* another machine: only it could tell */
    /* this drover's form names its boot: another boot (this host rebooted since, or another
     * machine of the same name) is not ours to judge; the lease's TTL frees it */
    if (h->boot[0] && (!me->boot[0] || strcmp(h->boot, me->boot) != 0))
        return HOLDER_UNKNOWN;
    if (probe == -ESRCH)
        return HOLDER_GONE;
    if (probe != 0)
        return HOLDER_UNKNOWN;
    if (h->has_start && has_start && start != h->start)
        return HOLDER_GONE; /* the pid was reused: the holder itself is gone */
    return HOLDER_RUNS;     /* it runs (or an older holder's pid is taken, to be safe) */
}

enum holder_fate holder_fate_here(const char *other, const char *self)
{
    struct holder h, me;
    if (holder_parse(other, &h) < 0 || holder_parse(self, &me) < 0)
        return HOLDER_UNKNOWN;
    if (strcmp(h.host, me.host) != 0)
        return HOLDER_UNKNOWN; /* not even probed */
    struct proc_stat ps = {0};
    bool has_start = false;
    int probe = proc_stat_read(h.pid, &ps);
    if (probe == 0) {
        has_start = true;
        if (ps.state == 'Z' || ps.state == 'X')
            probe = -ESRCH; /* killed, not yet reaped: it holds nothing any more */
    } else if (probe != -ESRCH) {
        /* no /proc to read (another mount of it?): the signal probe, which cannot tell a reused pid */
        probe = kill((pid_t)h.pid, 0) == 0 || errno == EPERM ? 0 : errno == ESRCH ? -ESRCH : -errno;
    }
    return holder_judge(&h, &me, probe, ps.start, has_start);
}
