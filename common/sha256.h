/* common/sha256.h: SHA-256 (FIPS 180-4) through OpenSSL's EVP interface, as lowercase hex.
 * Streaming context for large files; errors are -EIO (OpenSSL failure) or -errno (I/O). */
#ifndef DROVER_SHA256_H
#define DROVER_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_HEX_LEN 64 /* plus NUL: char hex[SHA256_HEX_LEN + 1] */

struct sha256_ctx; /* opaque; sha256_new / sha256_free (accepts NULL) */

struct sha256_ctx *sha256_new(void);
int sha256_update(struct sha256_ctx *c, const void *data, size_t len);
/* Writes 64 hex digits + NUL into ret_hex; the context is spent afterwards. */
int sha256_final_hex(struct sha256_ctx *c, char ret_hex[SHA256_HEX_LEN + 1]);
void sha256_free(struct sha256_ctx *c);

int sha256_buf_hex(const void *data, size_t len, char ret_hex[SHA256_HEX_LEN + 1]);
/* Hash a file; *ret_size (may be NULL) gets its length in bytes. */
/* Hash what is left to read of fd (not closed); *ret_size (may be NULL) gets the bytes read. */
int sha256_fd_hex(int fd, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size);
int sha256_file_hex(const char *path, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size);
/* true when s is exactly 64 lowercase hex digits. */
int sha256_is_hex(const char *s);

#endif
