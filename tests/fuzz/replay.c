/* tests/fuzz/replay.c: a main() for libFuzzer targets built without libFuzzer, so `make test`
 * replays every saved input in tests/fuzz/corpus/<parser>/ with gcc (and under ASan in
 * `make asan`).  A finding that was fixed stays fixed: its input lives in the corpus. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int main(int argc, char **argv);

int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "fuzz-replay: no corpus directory '%s'\n", argv[i]);
            return 1;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
            char *buf;
            size_t len;
            if (fs_read_file(path, 1 << 24, &buf, &len) < 0)
                continue;
            LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
            free(buf);
            n++;
        }
        closedir(d);
    }
    printf("fuzz-replay %s: %d inputs replayed\n", argc > 1 ? argv[1] : "", n);
    return 0;
}
