/* common/fs.c: file locks with deadlines (see fs.h).  Only this file takes flock(LOCK_EX) on a
 * lock file; it never blocks in the kernel, it polls. */
#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

int fs_lock_holder(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) < 0)
        return 0;
    char *text;
    size_t len;
    if (fs_read_file("/proc/locks", 1u << 20, &text, &len) < 0)
        return 0;
    /* "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters carry "->".  The device is the
     * superblock's, which is not st_dev on every file system (btrfs subvolumes, overlayfs), so a
     * match on the inode alone is the fallback. */
    char dev[64];
    snprintf(dev, sizeof dev, "%02x:%02x:%llu", major(sb.st_dev), minor(sb.st_dev),
             (unsigned long long)sb.st_ino);
    int pid = 0, pid_ino = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && !pid; l = strtok_r(NULL, "\n", &save)) {
        char kind[16], where[64];
        int p;
        if (strstr(l, "->") || sscanf(l, "%*s %15s %*s %*s %d %63s", kind, &p, where) != 3 || strcmp(kind, "FLOCK"))
            continue;
        if (!strcmp(where, dev))
            pid = p;
        const char *ino = strrchr(where, ':');
        if (!pid_ino && ino && strtoull(ino + 1, NULL, 10) == (unsigned long long)sb.st_ino)
            pid_ino = p;
    }
    free(text);
    return pid > 0 ? pid : pid_ino > 0 ? pid_ino : 0;
}

static void holder_text(const char *path, char *buf, size_t sz)
{
    buf[0] = '\0';
    int pid = fs_lock_holder(path);
    if (pid <= 0)
        return;
    char p[64], *comm = NULL;
    size_t n = 0;
    snprintf(p, sizeof p, "/proc/%d/comm", pid);
    if (fs_read_file(p, 256, &comm, &n) == 0)
        comm[strcspn(comm, "\n")] = '\0';
    snprintf(buf, sz, " by pid %d%s%s%s", pid, comm && comm[0] ? " (" : "", comm && comm[0] ? comm : "",
             comm && comm[0] ? ")" : "");
    free(comm);
}

int fs_lock_file(const char *path, double timeout_s, char *err, size_t errsz)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int r = -errno;
        if (err)
            snprintf(err, errsz, "cannot open lock '%s': %s", path, strerror(-r));
        return r;
    }
    double deadline = time_mono() + (timeout_s > 0 ? timeout_s : 0);
    long wait_ns = 1000000; /* 1 ms, doubling to 100 ms: short holds cost little, long ones few wakeups */
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        int e = errno;
        if (e != EWOULDBLOCK && e != EINTR) {
            close(fd);
            if (err)
                snprintf(err, errsz, "cannot lock '%s': %s", path, strerror(e));
            return -e;
        }
        double left = deadline - time_mono();
        if (left <= 0)
            break;
        if (wait_ns / 1e9 > left)
            wait_ns = (long)(left * 1e9) + 1;
        struct timespec ts = {wait_ns / 1000000000L, wait_ns % 1000000000L};
        (void)nanosleep(&ts, NULL);
        wait_ns = wait_ns * 2 > 100000000L ? 100000000L : wait_ns * 2;
    }
    if (err) {
        char who[320];
        holder_text(path, who, sizeof who);
        snprintf(err, errsz, "lock '%s' still held after %g s%s", path, timeout_s, who);
    }
    close(fd);
    return -ETIMEDOUT;
}
