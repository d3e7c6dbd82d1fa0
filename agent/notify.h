/* agent/notify.h: the systemd notification protocol, spoken directly (no libsystemd). */
#ifndef DROVER_AGENT_NOTIFY_H
#define DROVER_AGENT_NOTIFY_H

#include <stddef.h>

/* Send msg to $NOTIFY_SOCKET.  1 sent, 0 not under systemd (no socket), -errno on failure. */
int notify_send(const char *msg);
/* Seconds between WATCHDOG=1 pings (half of $WATCHDOG_USEC); 0 when no watchdog is asked for. */
double notify_watchdog_interval(void);

#endif
