/* common/procstat.c: /proc/<pid>/stat (see procstat.h). */
#include "common/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int proc_stat_parse(const char *text, struct proc_stat *ret)
{
    const char *p = strrchr(text, ')');
    if (!p)
        return -EINVAL;
    p++;
    struct proc_stat ps = {0};
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '\n')
            return -EINVAL;
        const char *end = p + strcspn(p, " \n");
        if (field == 3) {
            if (end - p != 1)
                return -EINVAL;
            ps.state = *p;
        } else if (field == 4 || field == 5 || field == 22) {
            char *e;
            errno = 0;
            if (field == 4) {
                ps.ppid = strtol(p, &e, 10);
            } else if (field == 5) {
                ps.pgrp = strtol(p, &e, 10);
            } else {
                if (*p == '-')
                    return -EINVAL;
                ps.start = strtoull(p, &e, 10);
            }
            if (e != end || errno)
                return -EINVAL;
        }
        p = end;
    }
    *ret = ps;
    return 0;
}

int proc_stat_read(long pid, struct proc_stat *ret)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return -ESRCH;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return e == ESRCH ? -ESRCH : -e; /* reaped between open and read */
    buf[n] = '\0';
    return proc_stat_parse(buf, ret);
}
