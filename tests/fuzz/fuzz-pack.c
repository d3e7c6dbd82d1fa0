/* Fuzz target: pack_reader over arbitrary bytes (a pack pushed into a container is read by the
 * agent): every member it accepts is named by 64 hex digits, and reading never returns more than
 * the member's declared size. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("pack", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct pack_reader *r;
    if (pack_reader_open(path, &r) == 0) {
        char sha[SHA256_HEX_LEN + 1], buf[4096];
        uint64_t sz;
        for (int k = 0; k < 1000 && pack_reader_next(r, sha, &sz) == 1; k++) {
            assert(sha256_is_hex(sha));
            uint64_t got = 0;
            ssize_t n;
            while ((n = pack_reader_read(r, buf, sizeof buf)) > 0)
                got += (uint64_t)n;
            assert(got <= sz);
        }
        pack_reader_free(r);
    }
    close(fd);
    return 0;
}
