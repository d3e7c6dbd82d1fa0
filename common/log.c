/* common/log.c: see log.h.  Owns the process-wide log settings; never allocates. */
#include "common/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"

static const char *log_prog = "drover";
static enum log_level log_max = LOG_LVL_INFO;
static int log_journald = -1; /* -1: decide from the environment */
static int log_colour = -1;
static bool log_flush_stdout;
static pthread_mutex_t log_last_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_last_err[1024]; /* the last error message, unescaped, without prefix */

void log_last_error(char *out, size_t out_sz)
{
    if (!out_sz)
        return;
    pthread_mutex_lock(&log_last_mu);
    snprintf(out, out_sz, "%s", log_last_err);
    pthread_mutex_unlock(&log_last_mu);
}

void log_clear_last_error(void)
{
    pthread_mutex_lock(&log_last_mu);
    log_last_err[0] = '\0';
    pthread_mutex_unlock(&log_last_mu);
}

void log_init(const char *progname)
{
    if (progname)
        log_prog = progname;
    const char *lvl = getenv("DROVER_LOG_LEVEL");
    if (lvl) {
        if (!strcmp(lvl, "debug"))
            log_max = LOG_LVL_DEBUG;
        else if (!strcmp(lvl, "info"))
            log_max = LOG_LVL_INFO;
        else if (!strcmp(lvl, "warn"))
            log_max = LOG_LVL_WARN;
        else if (!strcmp(lvl, "error"))
            log_max = LOG_LVL_ERR;
    }
}

void log_set_level(enum log_level max_level) { log_max = max_level; }
enum log_level log_get_level(void) { return log_max; }
void log_set_journald(bool on) { log_journald = on; }
void log_set_flush_stdout(bool on) { log_flush_stdout = on; }

static const char *level_word(enum log_level l)
{
    switch (l) {
    case LOG_LVL_ERR: return "error";
    case LOG_LVL_WARN: return "warning";
    case LOG_LVL_NOTICE: return "notice";
    case LOG_LVL_INFO: return "info";
    default: return "debug";
    }
}

void log_emitv(enum log_level level, const char *file, int line, const char *fmt, va_list ap)
{
    if (level > log_max)
        return;
    if (log_journald < 0)
        log_journald = getenv("JOURNAL_STREAM") != NULL;
    if (log_colour < 0)
        log_colour = isatty(STDERR_FILENO) && !getenv("NO_COLOR");

    char buf[2048];
    int n;
    if (log_journald)
        n = snprintf(buf, sizeof buf, "<%d>", (int)level);
    else {
        const char *c0 = "", *c1 = "";
        if (log_colour && level <= LOG_LVL_WARN) {
            c0 = level == LOG_LVL_ERR ? "\033[1;31m" : "\033[1;33m";
            c1 = "\033[0m";
        }
        n = snprintf(buf, sizeof buf, "%s: %s%s%s: ", log_prog, c0, level_word(level), c1);
    }
    if (n < 0)
        return;
    /* The message carries values from workers and remote hosts: escaped, so that one log call
     * is one line on a terminal and one journald record ("\n<0>" cannot forge another). */
    char msg[2048];
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    if (m < 0)
        m = 0;
    if ((size_t)m >= sizeof msg)
        m = (int)sizeof msg - 1;
    if (level == LOG_LVL_ERR) {
        pthread_mutex_lock(&log_last_mu);
        snprintf(log_last_err, sizeof log_last_err, "%.*s", m, msg);
        pthread_mutex_unlock(&log_last_mu);
    }
    if ((size_t)n < sizeof buf - 64)
        n += (int)strlen(text_escape(msg, (size_t)m, buf + n, sizeof buf - 64 - (size_t)n));
    if ((size_t)n >= sizeof buf - 64)
        n = (int)sizeof buf - 64;
    if (log_max >= LOG_LVL_DEBUG && file)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " (%s:%d)", file, line);
    if ((size_t)n >= sizeof buf - 1)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    if (log_flush_stdout) /* what stdout said before this line comes before it (log.h) */
        fflush(stdout);
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

void log_emit(enum log_level level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_emitv(level, file, line, fmt, ap);
    va_end(ap);
}
