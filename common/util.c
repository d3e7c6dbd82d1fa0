/* common/util.c: see util.h. */
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/safefile.h"

int str_copy(char *dst, size_t dstsz, const char *src)
{
    if (dstsz == 0)
        return -ENAMETOOLONG;
    size_t n = strlen(src);
    if (n >= dstsz) {
        memcpy(dst, src, dstsz - 1);
        dst[dstsz - 1] = '\0';
        return -ENAMETOOLONG;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

int str_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *str_nearest(const char *word, const char *const *cands, size_t n)
{
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < n; i++) {
        int d = cands[i] ? str_edit_distance(word, cands[i]) : 99;
        if (d < bd) {
            bd = d;
            best = cands[i];
        }
    }
    return best && bd <= (strlen(word) <= 4 ? 1 : 2) ? best : NULL;
}

bool str_is_digits(const char *s, size_t max_len)
{
    size_t n = 0;
    if (!s || !*s)
        return false;
    for (; s[n]; n++)
        if (s[n] < '0' || s[n] > '9' || n >= max_len)
            return false;
    return true;
}

double time_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double time_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int fd_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

bool fd_reader_gone(int fd)
{
    struct pollfd p = { .fd = fd, .events = 0 };
    int n;
    while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR)
        ;
    return n > 0 && (p.revents & (POLLERR | POLLHUP));
}

int fs_read_file(const char *path, size_t max, char **ret_data, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = 4096, len = 0;
    char *data = malloc(cap + 1);
    int r = 0;
    if (!data) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (len == cap) {
            if (cap > max) {
                r = -EFBIG;
                break;
            }
            size_t ncap = cap * 2;
            char *nd = realloc(data, ncap + 1);
            if (!nd) {
                r = -ENOMEM;
                break;
            }
            data = nd;
            cap = ncap;
        }
        ssize_t n = read(fd, data + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max) {
            r = -EFBIG;
            break;
        }
    }
    close(fd);
    if (r < 0) {
        free(data);
        return r;
    }
    data[len] = '\0';
    *ret_data = data;
    if (ret_len)
        *ret_len = len;
    return 0;
}

int fs_fsync_dir(const char *path)
{
    struct stat st;
    char buf[PATH_MAX];
    const char *dir = path;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        if (str_copy(buf, sizeof buf, path) < 0)
            return -ENAMETOOLONG;
        dir = dirname(buf);
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd;
    int r = safefile_create_excl(tmp, mode, &fd); /* a predictable name: never written through */
    if (r < 0)
        return r;
    r = fd_write_all(fd, data, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        (void)unlink(tmp);
        return r;
    }
    return fs_fsync_dir(path);
}

int fs_mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (str_copy(buf, sizeof buf, path) < 0)
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0) {
        if (errno != EEXIST)
            return -errno;
        struct stat st;
        if (stat(buf, &st) < 0)
            return -errno;
        if (!S_ISDIR(st.st_mode))
            return -ENOTDIR;
    }
    return 0;
}

int fs_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) < 0 ? -errno : 0;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char child[PATH_MAX];
        if (snprintf(child, sizeof child, "%s/%s", path, de->d_name) >= (int)sizeof child) {
            r = -ENAMETOOLONG;
            break;
        }
        r = fs_rm_rf(child);
        if (r < 0)
            break;
    }
    closedir(d);
    if (r < 0)
        return r;
    return rmdir(path) < 0 ? -errno : 0;
}
