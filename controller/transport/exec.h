/* controller/transport/exec.h: the result of running one command on a host, the same whether
 * it ran over SSH (ssh.c) or on this machine (conn.c's local path): bounded stdout and stderr
 * collected as they come, then finished once by exec_result_finish().
 */
#ifndef DROVER_EXEC_H
#define DROVER_EXEC_H

#include <stdbool.h>
#include <stddef.h>

struct exec_result {
    int status;   /* exit code; 128+N when killed by signal N; -1 unknown */
    char *out;    /* stdout, NUL-terminated, at most EXEC_OUT_MAX bytes kept; caller frees */
    size_t out_len;
    char *err;    /* stderr, NUL-terminated, at most EXEC_ERR_MAX bytes kept, trailing newline cut */
    size_t err_len;
    bool out_truncated;
};
#define EXEC_OUT_MAX (1u << 20)
#define EXEC_ERR_MAX (16u << 10)
/* Free out and err; r is then zeroed.  Accepts NULL. */
void exec_result_done(struct exec_result *r);
/* Append n bytes of stdout (stderr) as they come; bytes past EXEC_OUT_MAX (EXEC_ERR_MAX) are
 * dropped (out_truncated set for stdout).  -ENOMEM. */
int exec_result_add_out(struct exec_result *r, const char *data, size_t n);
int exec_result_add_err(struct exec_result *r, const char *data, size_t n);
/* The command ended with status: empty out/err become "", stderr's trailing newlines are cut.
 * -ENOMEM (r is then still to be freed with exec_result_done). */
int exec_result_finish(struct exec_result *r, int status);
/* The last (up to 3) lines of stderr (or stdout if stderr is empty), trimmed and joined with
 * " | ", for one-line reasons; blank lines and Python's "^^^^" marker lines skipped, and a
 * Python traceback's 'File "...", line N' in front when it is the line just above.  Writes
 * into buf and returns it. */
const char *exec_result_reason(const struct exec_result *r, char *buf, size_t buf_sz);

#endif
