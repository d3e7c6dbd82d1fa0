/* agent/notify.c: sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET ("READY=1",
 * "WATCHDOG=1", "STOPPING=1", "STATUS=…").  A no-op when not started by systemd. */
#include "agent/notify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/util.h"

int notify_send(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@'))
        return -EINVAL;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    int r = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0 ? -errno : 1;
    close(fd);
    return r;
}

double notify_watchdog_interval(void)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    if (!usec || !str_is_digits(usec, 20))
        return 0;
    if (pid && str_is_digits(pid, 10) && atol(pid) != (long)getpid())
        return 0;
    return (double)strtoull(usec, NULL, 10) / 1e6 / 2; /* ping at half the timeout */
}
