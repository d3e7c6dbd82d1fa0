/* Fuzz target: common/linebuf.c on arbitrary bytes.  The first byte picks the read size; every
 * line handed out must be at most max bytes, NUL-terminated and free of newlines (it may hold
 * NUL bytes of its own: callers judge those), and the buffer must never be asked to hold more
 * than its storage. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/linebuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)(data[0] % 37) + 1;
    data++;
    size--;
    char storage[33];
    struct linebuf lb;
    if (linebuf_init(&lb, storage, sizeof storage, 32) < 0)
        abort();
    size_t off = 0;
    char *line;
    size_t len;
    while (off < size) {
        size_t room;
        char *at = linebuf_room(&lb, &room);
        if (room == 0 || at < storage || at + room > storage + sizeof storage)
            abort();
        size_t n = size - off < chunk ? size - off : chunk;
        if (n > room)
            n = room;
        memcpy(at, data + off, n);
        off += n;
        linebuf_added(&lb, n);
        int r;
        while ((r = linebuf_next(&lb, &line, &len)) != 0)
            if (r > 0 && (len > 32 || line[len] != '\0' || memchr(line, '\n', len)))
                abort();
    }
    if (linebuf_rest(&lb, &line, &len) > 0 && (len > 32 || line[len] != '\0'))
        abort();
    return 0;
}
