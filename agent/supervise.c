/* agent/supervise.c: worker gangs (see supervise.h); the rules live in jobmachine.c.
 *
 * Invariants: every fd the agent opens is O_CLOEXEC, so a worker inherits exactly stdin
 * (/dev/null), stdout/stderr (its rank log) and its heartbeat pipe; a gang counts as gone only
 * when every rank was reaped and kill(-pgid, 0) finds nobody, so the next gang never overlaps
 * the old one on the GPUs.  Must never block on a worker: heartbeat pipes are non-blocking.
 */
#include "agent/supervise.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/manifest.h"
#include "common/procstat.h"
#include "common/text.h"
#include "common/trainexit.h"
#include "common/util.h"

static bool pid_is_dead(pid_t pid);

void gang_init(struct gang *g)
{
    memset(g, 0, sizeof *g);
    g->first_exit = -1;
    g->diverged = -1;
    g->hung = -1;
    for (int i = 0; i < STATUS_MAX_RANKS; i++) {
        g->ranks[i].hb_fd = -1;
        g->ranks[i].log_fd = -1;
    }
}

static int release_dir(const struct store *s, const char *id, char *buf, size_t sz)
{
    return store_path(s, buf, sz, "releases/%s", id);
}

/* Where execvpe would find a: relative to dir when it contains '/', else through the agent's
 * PATH (execvpe searches the caller's PATH, not the worker's).  0 with the path in exe and its
 * stat in st, -ENOENT when nothing is there. */
static int command_path(const char *dir, const char *a, char *exe, size_t exesz, struct stat *st)
{
    if (strchr(a, '/')) {
        if (snprintf(exe, exesz, "%s/%s", a[0] == '/' ? "" : dir, a) >= (int)exesz)
            return -ENAMETOOLONG;
        return stat(exe, st) == 0 ? 0 : -ENOENT;
    }
    const char *path = getenv("PATH");
    char buf[4096];
    (void)str_copy(buf, sizeof buf, path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(exe, exesz, "%s/%s", d, a);
        if (stat(exe, st) == 0 && S_ISREG(st->st_mode))
            return 0;
    }
    return -ENOENT;
}

int gang_check_exec(const struct store *s, const struct job_spec *spec, char *err, size_t errsz)
{
    char dir[PATH_MAX], exe[PATH_MAX];
    struct stat st;
    if (!store_has_release(s, spec->release)) {
        snprintf(err, errsz, "release %.12s is not in the store", spec->release);
        return -ENOENT;
    }
    if (spec->argc <= 0) {
        snprintf(err, errsz, "no command given");
        return -EINVAL;
    }
    int r = release_dir(s, spec->release, dir, sizeof dir);
    if (r < 0)
        return r;
    const char *a0 = spec->argv[0];
    r = command_path(dir, a0, exe, sizeof exe, &st);
    if (r == -ENAMETOOLONG)
        return r;
    if (r < 0) {
        snprintf(err, errsz, "command '%s' not found in release %.12s", a0, spec->release);
        return -ENOENT;
    }
    if (!S_ISREG(st.st_mode) || access(exe, X_OK) < 0) {
        snprintf(err, errsz, "command '%s' in release %.12s is not executable", a0, spec->release);
        return -EACCES;
    }
    return 0;
}

#if defined(__x86_64__)
#define NATIVE_EM EM_X86_64
#elif defined(__aarch64__)
#define NATIVE_EM EM_AARCH64
#else
#define NATIVE_EM EM_NONE
#endif

static const char *elf_machine_name(unsigned m, char *buf, size_t bufsz)
{
    switch (m) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "aarch64 (arm64)";
    case EM_386: return "i386 (32-bit x86)";
    case EM_ARM: return "32-bit arm";
    case EM_PPC64: return "ppc64";
    case EM_RISCV: return "riscv";
    case EM_S390: return "s390x";
    default: snprintf(buf, bufsz, "ELF machine %u", m); return buf;
    }
}

/* An ELF program whose exec failed: the two causes the kernel's errno hides.  ENOEXEC for a
 * program of another architecture (or a 32-bit one); ENOENT for one whose dynamic loader (its
 * PT_INTERP, e.g. Alpine's /lib/ld-musl-x86_64.so.1) is not in the container.  Says only what it
 * read; returns false (buf untouched) when it found neither. */
static bool elf_exec_reason(int fd, int e, char *buf, size_t bufsz)
{
    Elf64_Ehdr h = { 0 }; /* a 32-bit file's header is read into it field by field below */
    char m[32], native[32];
    ssize_t n = pread(fd, &h, sizeof h, 0);
    if (n < (ssize_t)EI_NIDENT + 4 || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
        return false;
    bool is64 = h.e_ident[EI_CLASS] == ELFCLASS64;
    unsigned machine = h.e_machine; /* the same offset and size in both classes */
    if (e == ENOEXEC && NATIVE_EM != EM_NONE && machine != NATIVE_EM) {
        const char *ours = elf_machine_name(NATIVE_EM, native, sizeof native);
        snprintf(buf, bufsz, "it is a program for %s; this container runs %s: ship its %s build",
                 elf_machine_name(machine, m, sizeof m), ours, ours);
        return true;
    }
    uint64_t phoff;
    unsigned phnum, phent;
    if (is64) {
        phoff = h.e_phoff, phnum = h.e_phnum, phent = h.e_phentsize;
    } else {
        Elf32_Ehdr h32;
        if (pread(fd, &h32, sizeof h32, 0) != (ssize_t)sizeof h32)
            return false;
        phoff = h32.e_phoff, phnum = h32.e_phnum, phent = h32.e_phentsize;
    }
    if (e != ENOENT || phnum > 256 || phent != (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
        return false;
    for (unsigned i = 0; i < phnum; i++) {
        uint64_t off, size;
        uint32_t type;
        if (is64) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(phoff + (uint64_t)i * phent)) != (ssize_t)sizeof ph)
                return false;
            type = ph.p_type, off = ph.p_offset, size = ph.p_filesz;
        } else {
            Elf32_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(phoff + (uint64_t)i * phent)) != (ssize_t)sizeof ph)
                return false;
            type = ph.p_type, off = ph.p_offset, size = ph.p_filesz;
        }
        if (type != PT_INTERP)
            continue;
        char interp[256], shown[128];
        if (size < 2 || size > sizeof interp || pread(fd, interp, size, (off_t)off) != (ssize_t)size)
            return false;
        interp[size - 1] = '\0';
        struct stat st;
        if (stat(interp, &st) == 0)
            return false; /* there: a loader that fails says so itself */
        (void)text_escape(interp, strlen(interp), shown, sizeof shown);
        snprintf(buf, bufsz, "its dynamic loader '%s' (the ELF interpreter it names) is not in the "
                 "container: it was built for another system (a musl/Alpine build on glibc, a "
                 "32-bit one, another distribution); build it where it runs, or link it statically",
                 shown);
        return true;
    }
    return false;
}

const char *gang_exec_error_reason(const char *dir, const char *cmd, int e, char *buf, size_t bufsz)
{
    /* The kernel answers ENOENT (or EACCES, ENOEXEC) for a script whose #! interpreter is
     * missing or unusable, and that errno names the script, which is there.  Read the #! line
     * and say what is wrong with the interpreter, but only what we checked ourselves. */
    snprintf(buf, bufsz, "%s", strerror(e));
    char exe[PATH_MAX], line[256];
    struct stat st;
    if ((e != ENOENT && e != EACCES && e != ENOEXEC && e != ELOOP) ||
        command_path(dir, cmd, exe, sizeof exe, &st) < 0 || !S_ISREG(st.st_mode))
        return buf;
    int fd = open(exe, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return buf;
    ssize_t n;
    while ((n = read(fd, line, sizeof line - 1)) < 0 && errno == EINTR)
        ;
    if (n >= SELFMAG && memcmp(line, ELFMAG, SELFMAG) == 0) {
        (void)elf_exec_reason(fd, e, buf, bufsz);
        close(fd);
        return buf;
    }
    close(fd);
    if (n < 2 || line[0] != '#' || line[1] != '!')
        return buf;
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    char *interp = line + 2 + strspn(line + 2, " \t");
    interp[strcspn(interp, " \t")] = '\0'; /* what follows is the interpreter's one argument */
    char ipath[PATH_MAX], shown[128];
    (void)text_escape(interp, strlen(interp), shown, sizeof shown); /* a "\r" stays visible */
    if (!*interp) {
        snprintf(buf, bufsz, "its #! line names no interpreter");
    } else if (snprintf(ipath, sizeof ipath, "%s%s%s", interp[0] == '/' ? "" : dir,
                        interp[0] == '/' ? "" : "/", interp) >= (int)sizeof ipath) {
        return buf;
    } else if (stat(ipath, &st) < 0) {
        bool cr = interp[strlen(interp) - 1] == '\r'; /* "#!/bin/sh\r\n" */
        snprintf(buf, bufsz, "its interpreter '%s' (from its #! line) is not in the container%s",
                 shown, cr ? ": the line ends in a carriage return (DOS line endings)" : "");
    } else if (!S_ISREG(st.st_mode) || access(ipath, X_OK) < 0) {
        snprintf(buf, bufsz, "its interpreter '%s' (from its #! line) is not executable", shown);
    } else {
        /* it is there: an ELF whose own loader is missing (ENOENT), a script (ELOOP) */
        snprintf(buf, bufsz, "its interpreter '%s' (from its #! line) cannot be executed: %s",
                 shown, strerror(e));
    }
    return buf;
}

static int env_add(struct gang_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int env_add(struct gang_env *e, const char *fmt, ...)
{
    if (e->n >= GANG_ENV_MAX)
        return -E2BIG;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->storage[e->n], sizeof e->storage[0], fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof e->storage[0])
        return -ENAMETOOLONG;
    e->envp[e->n] = e->storage[e->n];
    e->n++;
    e->envp[e->n] = NULL;
    return 0;
}

int gang_build_env(struct gang_env *e, const struct store *s, const char *job,
                   const struct job_spec *spec, const char *resume, int local_rank, int hb_fd)
{
    memset(e->envp, 0, sizeof e->envp);
    e->n = 0;
    char run[PATH_MAX];
    int r = store_path(s, run, sizeof run, "runs/%s", job);
    if (r < 0)
        return r;
    /* A clean environment: nothing inherited from pct exec / ssh (cases-field C05). */
    const char *path = getenv("PATH");
    if ((r = env_add(e, "PATH=%s", path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")) < 0 ||
        (r = env_add(e, "HOME=/root")) < 0 || (r = env_add(e, "LANG=C.UTF-8")) < 0 ||
        (r = env_add(e, "RANK=%d", spec->node_rank * spec->nproc + local_rank)) < 0 ||
        (r = env_add(e, "WORLD_SIZE=%d", spec->nnodes * spec->nproc)) < 0 ||
        (r = env_add(e, "LOCAL_RANK=%d", local_rank)) < 0 ||
        (r = env_add(e, "LOCAL_WORLD_SIZE=%d", spec->nproc)) < 0 ||
        (r = env_add(e, "GROUP_RANK=%d", spec->node_rank)) < 0 ||
        (r = env_add(e, "MASTER_ADDR=%s", spec->master_addr)) < 0 ||
        (r = env_add(e, "MASTER_PORT=%d", spec->master_port)) < 0 ||
        (r = env_add(e, "DROVER_HEARTBEAT_FD=%d", hb_fd)) < 0 ||
        (r = env_add(e, "DROVER_RELEASE=%s", spec->release)) < 0 ||
        /* the gang's rendezvous token: ranks of another release or another switch never join
         * it (trainer/dist.c; other workers may fold it into their own rendezvous, e.g.
         * torchrun's --rdzv-id).  rdzv is the controller's switch generation, the same in every
         * container, so a redeploy of the same release cannot pair with the old ranks */
        (r = env_add(e, "DROVER_RDZV=%s:%s%s%s", job, spec->release, spec->rdzv[0] ? ":" : "",
                     spec->rdzv)) < 0 ||
        (r = env_add(e, "DROVER_JOB=%s", job)) < 0 || (r = env_add(e, "DROVER_RUN_DIR=%s", run)) < 0)
        return r;
    if (resume && (r = env_add(e, "DROVER_RESUME_RELEASES=%s", resume)) < 0)
        return r;
    if (spec->gpus[0]) {
        char gpu[16];
        if ((r = spec_gpu_at(spec, local_rank, gpu, sizeof gpu)) < 0)
            return r;
        if ((r = env_add(e, "CUDA_VISIBLE_DEVICES=%s", gpu)) < 0)
            return r;
    }
    for (int i = 0; i < spec->nenv; i++)
        if ((r = env_add(e, "%s", spec->env[i])) < 0)
            return r;
    return 0;
}

static int open_rank_log(const struct store *s, const char *job, int rank, bool rotate)
{
    char p[PATH_MAX], old[PATH_MAX + 8];
    if (store_path(s, p, sizeof p, "runs/%s/logs/rank%d.log", job, rank) < 0)
        return -ENAMETOOLONG;
    struct stat st;
    if (rotate && stat(p, &st) == 0 && (uint64_t)st.st_size > RANK_LOG_MAX / 2) {
        snprintf(old, sizeof old, "%s.1", p);
        (void)rename(p, old);
    }
    /* the log directory is the worker's to write in: never follow a link planted there */
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640);
    return fd < 0 ? -errno : fd;
}

/* One line of the agent's own in a rank's log, between the worker's lines: where a gang
 * started (which release, which generation) and how each rank ended, so that `drover logs`
 * shows which release wrote what after a revert or a restart.  Best effort: the log is the
 * worker's, and a full disk or a full pipe never stops the gang. */
static void rank_log_mark(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rank_log_mark(int fd, const char *fmt, ...)
{
    if (fd < 0)
        return;
    char line[256], when[32] = "";
    struct tm tm;
    time_t t = time(NULL);
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    int n = snprintf(line, sizeof line, "--- drover-agent %s: ", when);
    va_list ap;
    va_start(ap, fmt);
    int k = n < 0 ? -1 : vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    n = (size_t)(n + k) > sizeof line - 6 ? (int)sizeof line - 6 : n + k;
    memcpy(line + n, " ---\n", 5);
    (void)fd_write_all(fd, line, (size_t)n + 5);
}

/* ---- the holder: between fork and _exit, raw system calls only ---- */

static size_t u_fmt(char *buf, long v)
{
    char tmp[24];
    size_t n = 0, len = 0;
    bool neg = v < 0;
    unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (neg)
        buf[len++] = '-';
    while (n)
        buf[len++] = tmp[--n];
    return len;
}

/* Write "a b\n" to path via path.tmp + rename: 0 when path holds it; -errno otherwise (ENOSPC:
 * the store's disk is full), with no partial file left behind. */
static int holder_write_file(const char *path, const char *tmp, long a, long b)
{
    char buf[64];
    size_t n = u_fmt(buf, a);
    buf[n++] = ' ';
    n += u_fmt(buf + n, b);
    buf[n++] = '\n';
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int e = 0;
    ssize_t w = write(fd, buf, n);
    if (w != (ssize_t)n)
        e = w < 0 ? errno : ENOSPC; /* a short write: no room for the rest */
    if (!e && fsync(fd) < 0)
        e = errno;
    if (close(fd) < 0 && !e)
        e = errno;
    if (!e && rename(tmp, path) < 0)
        e = errno;
    if (e)
        (void)unlink(tmp);
    return -e;
}

struct holder_args {
    const char *dir;            /* the release directory */
    const struct job_spec *spec;
    char **envp;
    pid_t pgid;
    int log_fd, err_w;
    char fifo[PATH_MAX], pidf[PATH_MAX], pidtmp[PATH_MAX], exitf[PATH_MAX], exittmp[PATH_MAX];
    char cgprocs[PATH_MAX + 16]; /* the gang cgroup's cgroup.procs; "" none */
    char ro[2][PATH_MAX];        /* the store's releases/ and objects/: read-only to the worker */
};

/* What a holder tells the agent on err_w, each message written whole (< PIPE_BUF). */
enum holder_msg_kind {
    HOLDER_EXEC,     /* the worker's exec failed with err */
    HOLDER_PID_FILE, /* the pid file could not be written: err */
    HOLDER_RO,       /* the store stays writable to the worker: step failed with err */
};
struct holder_msg {
    int kind, err, step;
};
static const char *const holder_ro_step[] = {"unshare(CLONE_NEWNS)", "mount --make-rslave /",
                                             "bind mount", "read-only remount"};

const char *gang_protect_store_step(int step)
{
    return step >= 0 && (size_t)step < ARRAY_SIZE(holder_ro_step) ? holder_ro_step[step] : "?";
}

/* The flags a read-only remount of path's bind must keep: in a user namespace (an unprivileged
 * container) clearing a locked one (nosuid, nodev, noexec) fails with EPERM.  No atime flag:
 * a remount that names none keeps the mount's (the kernel's rule), and LXC's AppArmor rules
 * (container-base: `mount options=(ro,remount,bind,nosuid,...)`) match the flags exactly, so a
 * `relatime` among them was refused. */
static unsigned long holder_mount_flags(const char *path)
{
    struct statfs sf;
    if (statfs(path, &sf) < 0)
        return 0;
    static const struct {
        unsigned long st, ms;
    } map[] = {{ST_NOSUID, MS_NOSUID}, {ST_NODEV, MS_NODEV}, {ST_NOEXEC, MS_NOEXEC}};
    unsigned long ms = 0;
    for (size_t i = 0; i < ARRAY_SIZE(map); i++)
        if ((unsigned long)sf.f_flags & map[i].st)
            ms |= map[i].ms;
    return ms;
}

/* Is the mount path lies on (the last mountinfo line whose mount point is path or a directory
 * above it, component-wise) a shared one (optional field "shared:N")?  1 shared, 0 not, -EINVAL
 * when no line covers path.  mountinfo: /proc/self/mountinfo's text (proc(5)); mount points
 * with a space or a backslash (octal escapes) are never taken for a match. */
int gang_mount_is_shared(const char *mountinfo, const char *path)
{
    int shared = -EINVAL;
    size_t best = 0;
    for (const char *l = mountinfo; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        /* fields: id parent maj:min root mountpoint options [optional...] - fstype ... */
        const char *f = l, *mp = NULL, *opt = NULL;
        size_t mplen = 0;
        for (int k = 0; k < 6 && f < l + len; k++) {
            const char *sp = memchr(f, ' ', (size_t)(l + len - f));
            if (k == 4) {
                mp = f;
                mplen = sp ? (size_t)(sp - f) : (size_t)(l + len - f);
            }
            if (!sp)
                break;
            f = sp + 1;
            if (k == 5)
                opt = f; /* the optional fields, up to " - " */
        }
        if (mp && opt && mplen > 0 && !memchr(mp, '\\', mplen)) {
            size_t plen = strlen(path);
            bool covers = (mplen == 1 && mp[0] == '/') ||
                          (plen >= mplen && !memcmp(path, mp, mplen) && (path[mplen] == '/' || path[mplen] == '\0'));
            size_t weight = mplen == 1 ? 1 : mplen + 1;
            if (covers && weight >= best) {
                best = weight;
                const char *sep = opt;
                while (sep < l + len && !(sep[0] == '-' && (sep == opt || sep[-1] == ' ') &&
                                          (sep + 1 == l + len || sep[1] == ' ')))
                    sep++;
                shared = 0;
                for (const char *o = opt; o + 7 <= sep; o++)
                    if ((o == opt || o[-1] == ' ') && !memcmp(o, "shared:", 7))
                        shared = 1;
            }
        }
        l = end ? end + 1 : NULL;
    }
    return shared;
}

/* mount --make-rslave / refused (LXC's AppArmor profiles, Proxmox's default among them, do not
 * allow it): the binds below still cannot leave this namespace when the mounts they are made
 * on do not propagate (not shared: LXC's rootfs is not).  Read into static memory (between fork
 * and exec).  true: go on without it. */
static bool holder_binds_stay_here(const char *const ro[2])
{
    static char mi[1 << 20];
    int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t have = 0;
    ssize_t n;
    while (have < sizeof mi - 1 && (n = read(fd, mi + have, sizeof mi - 1 - have)) > 0)
        have += (size_t)n;
    close(fd);
    if (have >= sizeof mi - 1)
        return false; /* not all of it: not known */
    mi[have] = '\0';
    return gang_mount_is_shared(mi, ro[0]) == 0 && gang_mount_is_shared(mi, ro[1]) == 0;
}

/* Give the holder (and so its worker) a mount namespace where the store's releases and objects
 * are read-only: root ignores the 0444 modes, and a worker writing into its release dir (its
 * cwd) wrote through the hardlinks into the objects shared with every release, the rollback
 * target included.  The namespace is a slave of the agent's (host mounts still arrive, none of
 * ours leave) and lives as long as the holder.  0, or -errno with the failed step in ret_step
 * (gang_protect_store_step names it): the worker then runs with the store writable, as before. */
int gang_protect_store(const char *releases, const char *objects, int *ret_step)
{
    const char *ro[2] = {releases, objects};
    if (unshare(CLONE_NEWNS) < 0) {
        *ret_step = 0;
        return -errno;
    }
    /* without this our mounts could propagate back into the agent's namespace: stop here,
     * unless the mounts the binds are made on do not propagate anyway */
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
        int e = errno;
        if ((e != EACCES && e != EPERM) || !holder_binds_stay_here(ro)) {
            *ret_step = 1;
            return -e;
        }
    }
    for (int i = 0; i < 2; i++) {
        unsigned long keep = holder_mount_flags(ro[i]);
        /* not MS_REC: LXC's AppArmor rules allow `bind`, not `rbind` */
        if (mount(ro[i], ro[i], NULL, MS_BIND, NULL) < 0) {
            *ret_step = 2;
            return -errno;
        }
        if (mount(NULL, ro[i], NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, NULL) < 0) {
            *ret_step = 3;
            return -errno;
        }
    }
    return 0;
}

/* Close every fd but keep[0..n) (sorted ascending). */
static void close_all_but(const int *keep, int n)
{
    unsigned lo = 3;
    for (int i = 0; i < n; i++) {
        if ((unsigned)keep[i] > lo)
            (void)close_range(lo, (unsigned)keep[i] - 1, 0);
        if ((unsigned)keep[i] + 1 > lo)
            lo = (unsigned)keep[i] + 1;
    }
    (void)close_range(lo, ~0u, 0);
}

static void sort_fds(int *a, int n)
{
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && a[k - 1] > a[k]; k--) {
            int t = a[k];
            a[k] = a[k - 1];
            a[k - 1] = t;
        }
}

static void __attribute__((noreturn)) holder_main(const struct holder_args *a)
{
    sigset_t none;
    sigemptyset(&none);
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int e = 0;
    if (setpgid(0, a->pgid) < 0)
        e = errno;
    if (a->cgprocs[0]) /* into the gang's cgroup: the worker and all it forks follow */
        (void)proctree_cgroup_join(a->cgprocs);
    int hb = open(a->fifo, O_RDWR | O_CLOEXEC); /* a reader as long as we live: no EPIPE */
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!e && (hb < 0 || devnull < 0))
        e = errno;
    int log_fd = a->log_fd, err_w = a->err_w;
    int keep[4] = {hb, devnull, log_fd, err_w};
    sort_fds(keep, 4);
    close_all_but(keep, 4); /* the agent's socket, pidfile lock, other gangs' FIFOs */
    int step = 0, ro = e ? 0 : gang_protect_store(a->ro[0], a->ro[1], &step);
    if (ro < 0) {
        struct holder_msg m = {HOLDER_RO, -ro, step};
        (void)!write(err_w, &m, sizeof m);
    }
    pid_t w = e ? -1 : fork();
    if (w == 0) {
        /* the worker: 0 /dev/null, 1+2 its log, 3 the heartbeat FIFO */
        if (dup2(devnull, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0 ||
            dup2(hb, GANG_HEARTBEAT_FD) < 0) /* dup2 clears close-on-exec on the copies */
            e = errno;
        if (!e && chdir(a->dir) < 0)
            e = errno;
        if (!e) {
            execvpe(a->spec->argv[0], a->spec->argv, a->envp);
            e = errno;
        }
        struct holder_msg m = {HOLDER_EXEC, e, 0};
        (void)!write(err_w, &m, sizeof m);
        _exit(127);
    }
    if (w < 0) {
        struct holder_msg m = {HOLDER_EXEC, e ? e : errno, 0};
        (void)!write(err_w, &m, sizeof m);
        _exit(127);
    }
    /* group signals (SIGTERM at stop) are for the worker; the holder stays to see it exit */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    /* The agent learns the worker's pid from this file; when it cannot be written (the disk is
     * full), the agent learns why on err_w instead */
    int pe = holder_write_file(a->pidf, a->pidtmp, (long)w, (long)getpid());
    if (pe < 0) {
        struct holder_msg m = {HOLDER_PID_FILE, -pe, 0};
        (void)!write(err_w, &m, sizeof m);
    }
    close(err_w); /* with the worker's exec, the agent's read sees EOF: started */
    close(log_fd);
    close(devnull);
    int ws = 0;
    while (waitpid(w, &ws, 0) < 0 && errno == EINTR)
        ;
    (void)holder_write_file(a->exitf, a->exittmp, WIFEXITED(ws) ? WEXITSTATUS(ws) : -1,
                            WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    /* stay until an agent has read the worker's last heartbeats (at most 10 minutes) */
    for (int i = 0; i < 12000; i++) {
        int n = 0;
        if (ioctl(hb, FIONREAD, &n) < 0 || n == 0)
            break;
        usleep(50000);
    }
    /* End the way the worker did: an agent that finds no exit file (it could not be written: the
     * store's disk full) takes this process's own status instead (rank_check_exit), and an
     * exit 0 there would read as "completed" and stop the job for good */
    if (WIFSIGNALED(ws)) {
        struct rlimit no_core = { 0, 0 };
        sigset_t one;
        (void)setrlimit(RLIMIT_CORE, &no_core);
        (void)signal(WTERMSIG(ws), SIG_DFL);
        (void)sigemptyset(&one);
        (void)sigaddset(&one, WTERMSIG(ws));
        (void)sigprocmask(SIG_UNBLOCK, &one, NULL);
        (void)raise(WTERMSIG(ws));
    }
    _exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 127);
}

static void gang_kill_now(struct gang *g)
{
    if (g->pgid > 0)
        (void)kill(-g->pgid, SIGKILL);
    proctree_cgroup_signal(g->cgroup, SIGKILL);
    for (int i = 0; i < g->nranks; i++) {
        struct rank_proc *rp = &g->ranks[i];
        if (rp->holder > 0 && rp->holder_child && !rp->holder_gone) {
            (void)kill(rp->holder, SIGKILL);
            (void)waitpid(rp->holder, NULL, 0);
            rp->holder_gone = true;
        }
        rp->alive = false;
    }
}

static int gang_file(const struct gang *g, char *buf, size_t sz, int lr, const char *what)
{
    int n = snprintf(buf, sz, "%s/rank%d.%s", g->dir, lr, what);
    return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
}

static int gang_dir(const struct store *s, const char *job, int gen, char *buf, size_t sz)
{
    return store_path(s, buf, sz, "runs/%s/gang/g%d", job, gen);
}

/* Read "a b\n" from a holder's file. */
static int read_pair(const char *path, long *ret_a, long *ret_b)
{
    char buf[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -EIO;
    buf[n] = '\0';
    long a, b;
    if (sscanf(buf, "%ld %ld", &a, &b) != 2)
        return -EINVAL;
    *ret_a = a;
    *ret_b = b;
    return 0;
}

static int open_fifo_reader(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    (void)fcntl(fd, F_SETPIPE_SZ, 1 << 20); /* heartbeats of a while without an agent */
    return fd;
}

/* exit 8 or 12 (common/trainexit.h): the rank ended because of a rank elsewhere */
static bool rank_exit_is_peer_effect(const struct rank_proc *rp)
{
    return rp->exit_signal == 0 && train_exit_is_peer_effect(rp->exit_code);
}

/* Create the gang's cgroup next to the agent's own (<agent cgroup>/drover-<job>-g<gen>-<pid>);
 * "" when there is no cgroup file system to use or no right to create one. */
static void cg_create(struct gang *g, const char *job, int gen)
{
    g->cgroup[0] = '\0';
    char name[NAME_MAX + 1];
    snprintf(name, sizeof name, "drover-%s-g%d-%d", job, gen, (int)getpid());
    int r = proctree_cgroup_create(name, g->cgroup, sizeof g->cgroup);
    if (r == -ENOENT)
        log_debug("job '%s': no cgroup v2 or v1 freezer hierarchy to use; a stop reaches the "
                  "gang's process group only", job);
    else if (r < 0)
        log_warn("job '%s': no cgroup for the gang (%s: %s); a stop reaches its process group only, "
                 "so a worker's setsid child may outlive it", job, name, strerror(-r));
}

/* Remember the cgroup in the gang directory, for the agent that re-adopts the gang. */
static void cg_note(const struct gang *g)
{
    char p[PATH_MAX + 16];
    if (!g->cgroup[0] || snprintf(p, sizeof p, "%s/cgroup", g->dir) >= (int)sizeof p)
        return;
    (void)fs_write_atomic(p, g->cgroup, strlen(g->cgroup), 0600);
}

int gang_start(struct gang *g, const struct store *s, const char *job, const struct job_spec *spec,
               const char *resume, int generation, char *err, size_t errsz)
{
    char dir[PATH_MAX], p[PATH_MAX];
    int r;
    gang_init(g);
    if ((r = release_dir(s, spec->release, dir, sizeof dir)) < 0)
        return r;
    static const char *const sub[] = {"checkpoints", "logs"};
    for (size_t i = 0; i < ARRAY_SIZE(sub); i++)
        if ((r = store_path(s, p, sizeof p, "runs/%s/%s", job, sub[i])) < 0 ||
            (r = fs_mkdir_p(p, 0750)) < 0) {
            snprintf(err, errsz, "cannot create '%s': %s", p, strerror(-r));
            return r;
        }
    if ((r = gang_dir(s, job, generation, g->dir, sizeof g->dir)) < 0)
        return r;
    (void)fs_rm_rf(g->dir); /* a stale one of an earlier gang with this number */
    if ((r = fs_mkdir_p(g->dir, 0700)) < 0) {
        snprintf(err, errsz, "cannot create '%s': %s", g->dir, strerror(-r));
        g->dir[0] = '\0';
        return r;
    }
    (void)str_copy(g->job, sizeof g->job, job);
    (void)str_copy(g->release, sizeof g->release, spec->release);
    g->generation = generation;
    g->grace_s = spec->grace_s;
    g->live = spec->live;
    g->started_mono = time_mono();
    cg_create(g, job, generation);
    cg_note(g);
    struct gang_env *env = malloc(sizeof *env);
    struct holder_args *ha = malloc(sizeof *ha);
    bool ro_warned = false;
    if (!env || !ha) {
        free(env);
        free(ha);
        gang_clear(g);
        return -ENOMEM;
    }
    for (int lr = 0; lr < spec->nproc; lr++) {
        struct rank_proc *rp = &g->ranks[lr];
        rp->local_rank = lr;
        rp->rank = spec->node_rank * spec->nproc + lr;
        rp->exit_code = -1;
        rp->hb_fd = rp->log_fd = -1;
        (void)linebuf_init(&rp->hb_lb, rp->hb_buf, sizeof rp->hb_buf, sizeof rp->hb_buf - 1);
        int ep[2] = {-1, -1};
        memset(ha, 0, sizeof *ha);
        if (gang_file(g, ha->fifo, sizeof ha->fifo, lr, "hb") < 0 ||
            gang_file(g, ha->pidf, sizeof ha->pidf, lr, "pid") < 0 ||
            gang_file(g, ha->pidtmp, sizeof ha->pidtmp, lr, "pid.tmp") < 0 ||
            gang_file(g, ha->exitf, sizeof ha->exitf, lr, "exit") < 0 ||
            gang_file(g, ha->exittmp, sizeof ha->exittmp, lr, "exit.tmp") < 0) {
            r = -ENAMETOOLONG;
            snprintf(err, errsz, "gang directory path too long");
            goto fail;
        }
        if (mkfifo(ha->fifo, 0600) < 0 || (rp->hb_fd = open_fifo_reader(ha->fifo)) < 0) {
            r = rp->hb_fd < 0 && rp->hb_fd != -1 ? rp->hb_fd : -errno;
            rp->hb_fd = -1;
            snprintf(err, errsz, "heartbeat FIFO '%s': %s", ha->fifo, strerror(-r));
            goto fail;
        }
        if (pipe2(ep, O_CLOEXEC) < 0) {
            r = -errno;
            snprintf(err, errsz, "pipe: %s", strerror(errno));
            goto fail;
        }
        if ((rp->log_fd = open_rank_log(s, job, rp->rank, true)) < 0) {
            r = rp->log_fd;
            rp->log_fd = -1;
            snprintf(err, errsz, "cannot open rank %d log: %s", rp->rank, strerror(-r));
            goto fail_ep;
        }
        char sid[RELEASE_SHORT_LEN + 1];
        rank_log_mark(rp->log_fd, "job '%s' gang %d: rank %d starts release %s", job, generation,
                      rp->rank, release_short(spec->release, "none", sid));
        if ((r = gang_build_env(env, s, job, spec, resume, lr, GANG_HEARTBEAT_FD)) < 0) {
            snprintf(err, errsz, "worker environment too large");
            goto fail_ep;
        }
        ha->dir = dir;
        ha->spec = spec;
        ha->envp = env->envp;
        ha->pgid = g->pgid;
        ha->log_fd = rp->log_fd;
        ha->err_w = ep[1];
        if (g->cgroup[0])
            snprintf(ha->cgprocs, sizeof ha->cgprocs, "%s/cgroup.procs", g->cgroup);
        if ((r = store_path(s, ha->ro[0], sizeof ha->ro[0], "releases")) < 0 ||
            (r = store_path(s, ha->ro[1], sizeof ha->ro[1], "objects")) < 0) {
            snprintf(err, errsz, "store path too long");
            goto fail_ep;
        }
        pid_t pid = fork();
        if (pid < 0) {
            r = -errno;
            snprintf(err, errsz, "fork: %s", strerror(errno));
            goto fail_ep;
        }
        if (pid == 0)
            holder_main(ha);
        if (g->pgid == 0)
            g->pgid = pid;
        (void)setpgid(pid, g->pgid); /* also in the child: whichever runs first wins */
        rp->holder = pid;
        rp->holder_child = true;
        rp->alive = true;
        g->nranks = lr + 1;
        close(ep[1]);
        ep[1] = -1;
        /* until EOF (the holder and the worker both closed err_w): at most the holder's
         * read-only failure, the worker's exec errno and the holder's pid-file errno */
        int e = 0, pid_err = 0;
        struct holder_msg got[3];
        size_t have = 0;
        ssize_t n;
        while (have < sizeof got &&
               ((n = read(ep[0], (char *)got + have, sizeof got - have)) > 0 || (n < 0 && errno == EINTR)))
            have += n > 0 ? (size_t)n : 0;
        close(ep[0]);
        ep[0] = -1;
        for (size_t k = 0; k < have / sizeof got[0]; k++) {
            const struct holder_msg *m = &got[k];
            if (m->kind == HOLDER_EXEC && !e)
                e = m->err;
            else if (m->kind == HOLDER_PID_FILE && !pid_err)
                pid_err = -m->err;
            else if (m->kind == HOLDER_RO && !ro_warned) { /* once per gang start */
                const char *step = gang_protect_store_step(m->step);
                log_warn("job '%s': gang %d runs with the store's releases writable (%s: %s): a "
                         "worker that writes into its release directory changes that release "
                         "and every release sharing the file",
                         job, generation, step, strerror(m->err));
                rank_log_mark(rp->log_fd, "the release directory is writable (%s: %s)", step,
                              strerror(m->err));
                ro_warned = true;
            }
        }
        if (e) { /* the worker never ran: that is the first thing to say */
            r = -e;
            char why[384];
            snprintf(err, errsz, "cannot execute '%s' (rank %d): %s", spec->argv[0], rp->rank,
                     gang_exec_error_reason(dir, spec->argv[0], e, why, sizeof why));
            goto fail;
        }
        if (pid_err) {
            r = pid_err;
            snprintf(err, errsz, "rank %d: could not write %s: %s%s", rp->rank, ha->pidf,
                     strerror(-r), r == -ENOSPC || r == -EDQUOT
                                       ? " (the container's disk is full: free space, then drover start)"
                                       : "");
            goto fail;
        }
        long wpid = 0, hpid = 0;
        if (read_pair(ha->pidf, &wpid, &hpid) < 0 || wpid <= 0) {
            r = -EIO;
            snprintf(err, errsz, "rank %d: the holder did not report its worker", rp->rank);
            goto fail;
        }
        rp->pid = (pid_t)wpid;
        continue;
    fail_ep:
        for (int k = 0; k < 2; k++)
            if (ep[k] >= 0)
                close(ep[k]);
        goto fail;
    }
    free(env);
    free(ha);
    log_info("job '%s': gang %d of release %.12s started (%d %s, pgid %d)", job, generation,
             spec->release, g->nranks, text_plural(g->nranks, "rank", "ranks"), (int)g->pgid);
    return 0;
fail:
    free(env);
    free(ha);
    gang_kill_now(g);
    gang_clear(g);
    return r;
}

int gang_adopt(struct gang *g, const struct store *s, const char *job, const struct job_spec *spec,
               int gen, pid_t pgid, const int64_t *holders, const int64_t *pids, int n)
{
    gang_init(g);
    if (n <= 0 || n > STATUS_MAX_RANKS || n != spec->nproc || pgid <= 0)
        return -EINVAL;
    int r = gang_dir(s, job, gen, g->dir, sizeof g->dir);
    if (r < 0)
        return r;
    (void)str_copy(g->job, sizeof g->job, job);
    (void)str_copy(g->release, sizeof g->release, spec->release);
    g->generation = gen;
    g->grace_s = spec->grace_s;
    g->started_mono = time_mono();
    g->pgid = pgid;
    g->adopted = true;
    g->live = spec->live;
    char cgf[PATH_MAX + 16], *cg = NULL;
    size_t cglen = 0;
    snprintf(cgf, sizeof cgf, "%s/cgroup", g->dir);
    if (fs_read_file(cgf, sizeof g->cgroup - 1, &cg, &cglen) == 0 && cglen > 0 && cg[0] == '/')
        (void)str_copy(g->cgroup, sizeof g->cgroup, cg);
    free(cg);
    for (int lr = 0; lr < n; lr++) {
        struct rank_proc *rp = &g->ranks[lr];
        char fifo[PATH_MAX];
        (void)linebuf_init(&rp->hb_lb, rp->hb_buf, sizeof rp->hb_buf, sizeof rp->hb_buf - 1);
        rp->local_rank = lr;
        rp->rank = spec->node_rank * spec->nproc + lr;
        rp->exit_code = -1;
        rp->pid = (pid_t)pids[lr];
        rp->holder = (pid_t)holders[lr];
        rp->alive = true;
        g->nranks = lr + 1;
        if ((r = gang_file(g, fifo, sizeof fifo, lr, "hb")) < 0 || (r = open_fifo_reader(fifo)) < 0)
            goto fail;
        rp->hb_fd = r;
        if ((r = open_rank_log(s, job, rp->rank, false)) < 0)
            goto fail;
        rp->log_fd = r;
    }
    return 0;
fail:
    g->dir[0] = '\0'; /* keep the files: the next try may succeed */
    gang_clear(g);
    return r;
}

void gang_stop(struct gang *g)
{
    if (g->pgid <= 0 || g->stopping)
        return;
    g->stopping = true;
    g->kill_at = time_mono() + g->grace_s;
    if (kill(-g->pgid, SIGTERM) < 0 && errno != ESRCH)
        log_warn("job '%s': SIGTERM to process group %d: %s", g->job, (int)g->pgid, strerror(errno));
    proctree_cgroup_signal(g->cgroup, SIGTERM); /* and whatever left the process group (setsid) */
    log_info("job '%s': stopping gang %d (SIGTERM, SIGKILL in %g s)", g->job, g->generation,
             g->grace_s);
}

static void rank_check_exit(struct gang *g, int i, double now);

void gang_tick(struct gang *g, double now)
{
    if (g->pgid <= 0)
        return;
    if (g->stopping && !g->killed && now >= g->kill_at) {
        g->killed = true;
        log_warn("job '%s': gang %d still running %g s after SIGTERM: SIGKILL", g->job,
                 g->generation, g->grace_s);
        (void)kill(-g->pgid, SIGKILL);
        proctree_cgroup_signal(g->cgroup, SIGKILL);
    }
    for (int i = 0; i < g->nranks; i++) {
        rank_check_exit(g, i, now);
        struct stat st;
        int fd = g->ranks[i].log_fd;
        if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size > RANK_LOG_MAX)
            (void)ftruncate(fd, 0); /* O_APPEND writers continue at the new end */
    }
}

/* Has rank i exited?  Its holder's exit file says how; a holder gone without one (killed with
 * the gang) means the worker went with it. */
static void rank_check_exit(struct gang *g, int i, double now)
{
    struct rank_proc *rp = &g->ranks[i];
    if (!rp->alive)
        return;
    char path[PATH_MAX];
    long code = -1, sig = 0;
    bool exited = gang_file(g, path, sizeof path, rp->local_rank, "exit") == 0 &&
                  read_pair(path, &code, &sig) == 0;
    if (!exited && !rp->holder_gone && !rp->holder_child && rp->holder > 0 && pid_is_dead(rp->holder)) {
        rp->holder_gone = true; /* an adopted holder is not our child: look again for its file */
        exited = read_pair(path, &code, &sig) == 0;
        if (!exited) {
            code = -1;
            sig = SIGKILL;
            exited = true;
        }
    }
    if (!exited && rp->holder_gone) {
        int ws = rp->holder_status;
        code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
        sig = WIFSIGNALED(ws) ? WTERMSIG(ws) : (rp->holder_child ? 0 : SIGKILL);
        exited = true;
    }
    if (!exited)
        return;
    /* everything the worker wrote before it exited is in the FIFO, which its holder keeps */
    if (rp->hb_fd >= 0)
        (void)gang_read_heartbeats(g, i, now);
    rp->alive = false;
    rp->exit_code = sig ? -1 : (int)code;
    rp->exit_signal = (int)sig;
    rp->exit_mono = now;
    if (sig)
        rank_log_mark(rp->log_fd, "job '%s' gang %d: rank %d killed by signal %ld", g->job,
                      g->generation, rp->rank, sig);
    else
        rank_log_mark(rp->log_fd, "job '%s' gang %d: rank %d exited with code %ld", g->job,
                      g->generation, rp->rank, code);
    /* the first exit is the gang's cause, except that a rank that only lost its peer (exit 8 or
     * 12) gives way to a failure found before the machine was told: reaped together, the order
     * is waitpid's, and the casualty may come before the rank that died.  Not to an exit 0: a
     * peer_stopped restart is not turned into "completed". */
    bool failure = rp->exit_signal != 0 || rp->exit_code != 0;
    if (!g->stopping && g->hung < 0 && (g->first_exit < 0 || (!g->first_told && rank_exit_is_peer_effect(&g->ranks[g->first_exit]) &&
                                               failure && !rank_exit_is_peer_effect(rp))))
        g->first_exit = i;
}

int gang_note_exit(struct gang *g, pid_t pid, int wstatus)
{
    for (int i = 0; i < g->nranks; i++) {
        struct rank_proc *rp = &g->ranks[i];
        if (rp->holder != pid || rp->holder_gone)
            continue;
        rp->holder_gone = true;
        rp->holder_status = wstatus;
        rank_check_exit(g, i, time_mono());
        return i;
    }
    return -1;
}

int gang_alive(const struct gang *g)
{
    int n = 0;
    for (int i = 0; i < g->nranks; i++)
        n += g->ranks[i].alive;
    return n;
}

/* /proc/<pid>/stat: state letter and process group; < 0 when gone. */
static int proc_stat(pid_t pid, char *ret_state, pid_t *ret_pgrp)
{
    struct proc_stat ps;
    int r = proc_stat_read(pid, &ps);
    if (r < 0)
        return r;
    *ret_state = ps.state;
    *ret_pgrp = (pid_t)ps.pgrp;
    return 0;
}

/* A process that is gone or a zombie (an adopted holder is not our child: whoever reaps it may
 * take a while, or never, if the container's init does not reap). */
static bool pid_is_dead(pid_t pid)
{
    char st;
    pid_t pg;
    return proc_stat(pid, &st, &pg) < 0 || st == 'Z' || st == 'X';
}

/* Does process group pgid have a member that is not a zombie? */
static bool group_has_live(pid_t pgid)
{
    if (kill(-pgid, 0) < 0 && errno == ESRCH)
        return false;
    DIR *dir = opendir("/proc");
    if (!dir)
        return true;
    bool live = false;
    struct dirent *de;
    while (!live && (de = readdir(dir))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        char st;
        pid_t pg;
        if (*end || pid <= 0)
            continue;
        live = proc_stat((pid_t)pid, &st, &pg) == 0 && pg == pgid && st != 'Z' && st != 'X';
    }
    closedir(dir);
    return live;
}

bool gang_is_gone(const struct gang *g)
{
    if (g->pgid <= 0)
        return true;
    if (gang_alive(g) > 0)
        return false;
    return !group_has_live(g->pgid) && proctree_cgroup_live(g->cgroup) == 0;
}

void gang_clear(struct gang *g)
{
    if (g->dir[0])
        (void)fs_rm_rf(g->dir);
    if (g->cgroup[0])
        (void)rmdir(g->cgroup); /* empty by now (gang_is_gone) */
    for (int i = 0; i < STATUS_MAX_RANKS; i++) {
        if (g->ranks[i].hb_fd >= 0)
            close(g->ranks[i].hb_fd);
        if (g->ranks[i].log_fd >= 0)
            close(g->ranks[i].log_fd);
    }
    gang_init(g);
}

static void hb_take_line(struct gang *g, struct rank_proc *rp, const char *line, size_t len, double now)
{
    struct heartbeat hb;
    int r = heartbeat_parse(line, len, &hb);
    if (r < 0) {
        rp->hb_bad++;
        char why[256];
        if (rp->hb_bad <= 3 || rp->hb_bad % 1000 == 0) /* why, not errno's "Invalid argument" */
            log_warn("job '%s' rank %d: bad heartbeat line (%s; docs/protocol.md, \"Heartbeat\"), %llu so far",
                     g->job, rp->rank, heartbeat_refusal(line, len, why, sizeof why),
                     (unsigned long long)rp->hb_bad);
        return;
    }
    /* A foreign worker may leave out "release" (the gang's is meant) and "nonfinite" (then the
     * agent counts consecutive steps whose loss was null/NaN itself: a non-finite loss is a
     * failure, never a line to drop). */
    if (!hb.release[0])
        (void)str_copy(hb.release, sizeof hb.release, g->release);
    if (hb.hello && rp->has_hb && !rp->hb.hello) { /* a second Heartbeat() past init: no step back */
        rp->hb_lines++;
        rp->hb_mono = now;
        return;
    }
    if (hb.phase == HB_PHASE_TRAIN && hb.has_loss && !hb.loss_finite) {
        int prev = rp->has_hb ? rp->hb.nonfinite : 0;
        bool advanced = !rp->has_hb || hb.step > rp->hb.step;
        int counted = advanced ? prev + 1 : (prev > 0 ? prev : 1);
        if (hb.nonfinite < counted)
            hb.nonfinite = counted;
    }
    if (!rp->has_hb || hb.step != rp->hb.step)
        rp->step_mono = now;
    if (!rp->has_hb || hb.phase != rp->hb.phase || hb.hello != rp->hb.hello)
        rp->phase_mono = now; /* hello -> init too: init's own time */
    rp->hb = hb;
    rp->has_hb = true;
    rp->hb_mono = now;
    rp->hb_lines++;
    if (hb.nonfinite >= HB_DIVERGED_STEPS && g->diverged < 0 && !g->stopping)
        g->diverged = (int)(rp - g->ranks);
}

int gang_read_heartbeats(struct gang *g, int idx, double now)
{
    struct rank_proc *rp = &g->ranks[idx];
    int accepted = 0;
    while (rp->hb_fd >= 0) {
        size_t room;
        char *at = linebuf_room(&rp->hb_lb, &room);
        ssize_t n = read(rp->hb_fd, at, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            n = 0;
        }
        if (n == 0) {
            close(rp->hb_fd);
            rp->hb_fd = -1;
            break;
        }
        linebuf_added(&rp->hb_lb, (size_t)n);
        uint64_t overlong = rp->hb_lb.overlong;
        char *line;
        size_t len;
        int r;
        while ((r = linebuf_next(&rp->hb_lb, &line, &len)) != 0) {
            if (r < 0)
                continue; /* the end of an over-long line, counted when it was found */
            uint64_t before = rp->hb_lines;
            hb_take_line(g, rp, line, len, now);
            accepted += rp->hb_lines > before;
        }
        uint64_t k = rp->hb_lb.overlong;
        if (k != overlong && (k <= 3 || k % 1000 == 0))
            log_warn("job '%s' rank %d: heartbeat line over %d bytes dropped (%llu so far)", g->job,
                     rp->rank, HEARTBEAT_LINE_MAX, (unsigned long long)k);
    }
    return accepted;
}

bool gang_all_training(const struct gang *g)
{
    if (g->nranks == 0)
        return false;
    for (int i = 0; i < g->nranks; i++) {
        const struct rank_proc *rp = &g->ranks[i];
        if (!rp->alive || !rp->has_hb ||
            (rp->hb.phase != HB_PHASE_TRAIN && rp->hb.phase != HB_PHASE_CHECKPOINT))
            return false;
    }
    return true;
}

static void liveness_fact(const struct rank_proc *rp, struct liveness_rank *lr)
{
    lr->rank = rp->rank;
    lr->alive = rp->alive;
    lr->has_hb = rp->has_hb;
    lr->hello = rp->has_hb && rp->hb.hello;
    lr->phase = rp->hb.phase;
    lr->step = rp->hb.step;
    lr->hb_mono = rp->hb_mono;
    lr->step_mono = rp->step_mono;
    lr->phase_mono = rp->phase_mono;
    lr->bad_lines = rp->hb_bad + rp->hb_lb.overlong;
    lr->proc_state = 0;
}

bool gang_judge_liveness(struct gang *g, double now)
{
    if (g->pgid <= 0 || g->stopping || g->first_exit >= 0 || g->diverged >= 0 || g->hung >= 0)
        return false;
    struct liveness_rank lr[STATUS_MAX_RANKS];
    for (int i = 0; i < g->nranks; i++)
        liveness_fact(&g->ranks[i], &lr[i]);
    struct liveness_verdict v;
    if (!liveness_judge(&g->live, lr, g->nranks, g->started_mono, now, &v))
        return false;
    for (int i = 0; i < g->nranks; i++)
        if (g->ranks[i].rank == v.rank)
            g->hung = i;
    g->hung_limit_s = v.limit_s;
    (void)liveness_describe(&v, g->job, g->hung_why, sizeof g->hung_why);
    return true;
}

bool gang_settle_first_exit(struct gang *g, double now)
{
    if (g->first_exit < 0 || g->first_told || g->stopping)
        return true;
    const struct rank_proc *fe = &g->ranks[g->first_exit];
    if (fe->exit_signal || fe->exit_code != TX_PEER_LOST)
        return true; /* no /proc reads for the usual exits */
    struct liveness_rank lr[STATUS_MAX_RANKS];
    for (int i = 0; i < g->nranks; i++) {
        liveness_fact(&g->ranks[i], &lr[i]);
        struct proc_stat ps;
        if (g->ranks[i].alive && g->ranks[i].pid > 0 && proc_stat_read(g->ranks[i].pid, &ps) == 0)
            lr[i].proc_state = ps.state;
    }
    struct liveness_verdict v;
    switch (liveness_blame_peer_lost(&g->live, lr, g->nranks, g->first_exit, fe->exit_code,
                                     fe->exit_signal, fe->exit_mono, now, &v)) {
    case LIVE_BLAME_WAIT:
        return false;
    case LIVE_BLAME_NONE:
        return true;
    case LIVE_BLAME_SILENT:
        break;
    }
    for (int i = 0; i < g->nranks; i++)
        if (g->ranks[i].rank == v.rank)
            g->hung = i;
    g->hung_limit_s = v.limit_s;
    (void)liveness_describe(&v, g->job, g->hung_why, sizeof g->hung_why);
    g->first_exit = -1;
    g->first_told = true;
    return true;
}

void gang_fill_status(const struct gang *g, struct job_status *js, double now)
{
    js->nranks = g->nranks;
    for (int i = 0; i < g->nranks; i++) {
        const struct rank_proc *rp = &g->ranks[i];
        struct rank_status *rs = &js->ranks[i];
        memset(rs, 0, sizeof *rs);
        rs->rank = rp->rank;
        rs->local_rank = rp->local_rank;
        rs->pid = rp->alive ? rp->pid : 0;
        struct liveness_rank lr;
        liveness_fact(rp, &lr);
        double state_age = 0;
        const char *st = rp->alive ? liveness_rank_word(&g->live, &lr, now, &state_age)
                                   : (rp->exit_signal ? "killed" : "exited");
        rs->state_age_s = state_age;
        rs->bad_lines = (int64_t)lr.bad_lines;
        (void)str_copy(rs->state, sizeof rs->state, st);
        rs->hb_age_s = rp->has_hb ? now - rp->hb_mono : -1;
        rs->exit_code = rp->alive ? -1 : rp->exit_code;
        rs->exit_signal = rp->alive ? 0 : rp->exit_signal;
        rs->has_hb = rp->has_hb;
        if (rp->has_hb)
            rs->hb = rp->hb;
        else
            heartbeat_init(&rs->hb);
    }
}
