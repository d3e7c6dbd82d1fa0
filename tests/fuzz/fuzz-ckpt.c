/* tests/fuzz/fuzz-ckpt.c: checkpoint reading (trainer/ckpt.c) on arbitrary file contents, for a
 * tiny model whose checkpoint is small enough to be produced by the fuzzer.  The input goes
 * through a memfd so the real file path code runs. */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "trainer/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gpt_config c = {.layers = 1, .heads = 1, .dim = 1, .vocab = 2, .seq = 1};
    if (gpt_config_check(&c) < 0)
        return 0;
    size_t n = gpt_num_params(&c);
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    int fd = memfd_create("ckpt", MFD_CLOEXEC);
    if (p && m && v && fd >= 0 && fd_write_all(fd, data, size) >= 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        struct ckpt_meta meta;
        (void)ckpt_read(path, &c, &meta, p, m, v);
    }
    if (fd >= 0)
        close(fd);
    free(p);
    free(m);
    free(v);
    return 0;
}
