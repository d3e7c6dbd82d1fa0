/* controller/transport/stage.h: the host-side content-addressed store ([drover] staging_dir): a file is
 * kept as <staging_dir>/<sha256>.<ext>, uploaded once per host however many containers use it.
 */
#ifndef DROVER_STAGE_H
#define DROVER_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "controller/transport/fleet.h"

/* Make sure host `host` holds local_path (with sha256 `sha`, `size` bytes) as
 * <staging_dir>/<sha>.<ext>: skipped when a file of that size and sha256 (sha256sum on the host)
 * is there; otherwise uploaded (temp name, rename; progress on a TTY) and verified with
 * sha256sum.  ret_remote gets the path on the host.  -errno with a message in err. */
int stage_to_host(struct fleet *f, int host, const char *local_path, const char *sha, uint64_t size,
                  const char *ext, char *ret_remote, size_t remote_sz, char *err, size_t err_sz);

#endif
