/* common/sha256.c: see sha256.h.  OpenSSL errors are translated to -EIO here, once. */
#include "common/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sha256_ctx {
    EVP_MD_CTX *md;
};

struct sha256_ctx *sha256_new(void)
{
    struct sha256_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->md = EVP_MD_CTX_new();
    if (!c->md || EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1) {
        sha256_free(c);
        return NULL;
    }
    return c;
}

int sha256_update(struct sha256_ctx *c, const void *data, size_t len)
{
    return EVP_DigestUpdate(c->md, data, len) == 1 ? 0 : -EIO;
}

int sha256_final_hex(struct sha256_ctx *c, char ret_hex[SHA256_HEX_LEN + 1])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(c->md, d, &n) != 1 || n != 32)
        return -EIO;
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < 32; i++) {
        ret_hex[2 * i] = hx[d[i] >> 4];
        ret_hex[2 * i + 1] = hx[d[i] & 15];
    }
    ret_hex[64] = '\0';
    return 0;
}

void sha256_free(struct sha256_ctx *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->md);
    free(c);
}

int sha256_buf_hex(const void *data, size_t len, char ret_hex[SHA256_HEX_LEN + 1])
{
    struct sha256_ctx *c = sha256_new();
    if (!c)
        return -ENOMEM;
    int r = sha256_update(c, data, len);
    if (r == 0)
        r = sha256_final_hex(c, ret_hex);
    sha256_free(c);
    return r;
}

int sha256_fd_hex(int fd, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size)
{
    struct sha256_ctx *c = sha256_new();
    if (!c)
        return -ENOMEM;
    static __thread char buf[1 << 18];
    uint64_t total = 0;
    int r = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if ((r = sha256_update(c, buf, (size_t)n)) < 0)
            break;
    }
    char hex[SHA256_HEX_LEN + 1];
    if (r == 0)
        r = sha256_final_hex(c, hex);
    sha256_free(c);
    if (r < 0)
        return r;
    memcpy(ret_hex, hex, sizeof hex);
    if (ret_size)
        *ret_size = total;
    return 0;
}

int sha256_file_hex(const char *path, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = sha256_fd_hex(fd, ret_hex, ret_size);
    close(fd);
    return r;
}

int sha256_is_hex(const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return i == SHA256_HEX_LEN;
}
