/* Fuzz target: bundle_unpack on arbitrary bytes written to a temp file.  Whatever happens, the
 * destination is either a complete release or gone, and nothing is written outside it. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bundle.h"
#include "common/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char dir[] = "/tmp/drover-fuzz-bundle.XXXXXX";
    if (!mkdtemp(dir))
        return 0;
    char blob[64], dest[64];
    snprintf(blob, sizeof blob, "%s/blob", dir);
    snprintf(dest, sizeof dest, "%s/out", dir);
    if (fs_write_atomic(blob, data, size, 0600) == 0) {
        char id[RELEASE_ID_LEN + 1], err[256];
        int r = bundle_unpack(blob, dest, NULL, id, err, sizeof err);
        struct stat st;
        if (r < 0)
            assert(lstat(dest, &st) < 0);
        else
            assert(lstat(dest, &st) == 0 && S_ISDIR(st.st_mode));
    }
    (void)fs_rm_rf(dir);
    return 0;
}
