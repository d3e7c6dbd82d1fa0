/* controller/transport/knownhosts.h: the one edit drover makes to a known_hosts file by itself: removing
 * a host's plain-text lines before `drover trust HOST --replace` writes the new key.  Checking
 * keys is libssh's job (ssh.c); this only filters lines.
 */
#ifndef DROVER_KNOWNHOSTS_H
#define DROVER_KNOWNHOSTS_H

#include <stddef.h>

#define KNOWNHOSTS_MAX_BYTES (4u << 20)

/* The host pattern OpenSSH and libssh write for address:port: "address" for port 22, else
 * "[address]:port".  -ENAMETOOLONG if it does not fit. */
int knownhosts_pattern(const char *address, int port, char *out, size_t out_sz);

/* Copy text (len bytes) without the lines whose host field (comma-separated patterns) names
 * pattern exactly.  Marker lines (@revoked, @cert-authority), comments, blank lines and hashed
 * entries (|1|...) are kept.  Returns 0, a malloc'd NUL-terminated copy in *ret_text and the
 * number of lines removed in *ret_removed; -E2BIG over KNOWNHOSTS_MAX_BYTES; -ENOMEM. */
int knownhosts_remove(const char *text, size_t len, const char *pattern, char **ret_text,
                      int *ret_removed);

#endif
