/* common/nvdriver.h: the NVIDIA kernel module's version as /proc/driver/nvidia/version states it.
 * The controller reads that file on the host (not in the container, which may show another) and
 * passes the version to `drover-agent gpu-check --host-driver`; this is the one reader of it. */
#ifndef DROVER_NVDRIVER_H
#define DROVER_NVDRIVER_H

#include <stdbool.h>
#include <stddef.h>

#define NVDRIVER_VERSION_MAX 32

/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Thu ..." -> "570.124.06" (the open
 * module's "... Open Kernel Module for x86_64  575.51.03 ..." too).  Reads at most len bytes of
 * text (no NUL needed).  0, or -EINVAL when no version follows "Kernel Module" on its line. */
int nvdriver_parse_version(const char *text, size_t len, char ret[NVDRIVER_VERSION_MAX]);

/* true when s is a dotted version: digits and single dots, starting and ending with a digit, at
 * least one dot, shorter than NVDRIVER_VERSION_MAX. */
bool nvdriver_is_version(const char *s);

#endif
