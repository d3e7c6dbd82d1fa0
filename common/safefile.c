/* common/safefile.c: see safefile.h.  No logging; -errno only. */
#include "common/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

const char *safefile_type_name(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "regular file";
    case S_IFDIR: return "directory";
    case S_IFIFO: return "FIFO";
    case S_IFSOCK: return "socket";
    case S_IFCHR: return "character device";
    case S_IFBLK: return "block device";
    case S_IFLNK: return "symlink";
    default: return "special file";
    }
}

int safefile_open_regular(const char *path, bool nofollow, int *ret_fd, const char **ret_type)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP && ret_type)
            *ret_type = "symlink";
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        if (ret_type)
            *ret_type = safefile_type_name(st.st_mode);
        return -EINVAL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *ret_fd = fd;
    return 0;
}

int safefile_create_excl(const char *path, mode_t mode, int *ret_fd)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0) {
            *ret_fd = fd;
            return 0;
        }
        if (errno != EEXIST || attempt == 1)
            return -errno;
        if (unlink(path) < 0 && errno != ENOENT)
            return -errno;
    }
    return -EEXIST;
}
