/* common/log.h: the one logger of drover.
 *
 * Every program logs through these macros; library-like code (common/, parsers) logs at debug
 * at most and returns -errno instead.  Program code logs each failure once, where it is handled,
 * with user values in quotes.  Output goes to stderr.  In journald style (the agent under systemd)
 * each line starts with "<N>" (sd-daemon(3) priority prefix); otherwise with a level word, and
 * colour only on a TTY and never when NO_COLOR is set.  Thread-safe: one write(2) per line.
 */
#ifndef DROVER_LOG_H
#define DROVER_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum log_level { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_NOTICE = 5, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

/* Program name shown in non-journald lines ("drover: error: ..."). Not copied: pass a literal. */
void log_init(const char *progname);
void log_set_level(enum log_level max_level);
/* Force journald "<N>" prefixes (true) or plain lines (false).  Default: journald when the
 * JOURNAL_STREAM environment variable is set (systemd sets it for the service's stderr). */
void log_set_journald(bool on);
enum log_level log_get_level(void);
/* Flush stdout before each line (on: the controller, cli_main()).  stdout is buffered in a pipe
 * and stderr is not: `drover status 2>&1 | cat` showed the warnings said under the table above
 * it.  Off by default: a program that forks and logs before exec (the agent, the trainer) would
 * have its child flush the parent's buffered output a second time. */
void log_set_flush_stdout(bool on);
/* The last message logged at error level in this process (unescaped, no "drover: error: "
 * prefix, cut to 1023 bytes; "" when none since start or the last clear): what a -o json
 * result document names as its "error" (controller/cmd_result.c). */
void log_last_error(char *out, size_t out_sz);
void log_clear_last_error(void);

void log_emit(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void log_emitv(enum log_level level, const char *file, int line, const char *fmt, va_list ap);

#define log_error(...)  log_emit(LOG_LVL_ERR, __FILE__, __LINE__, __VA_ARGS__)
#define log_warn(...)   log_emit(LOG_LVL_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define log_notice(...) log_emit(LOG_LVL_NOTICE, __FILE__, __LINE__, __VA_ARGS__)
#define log_info(...)   log_emit(LOG_LVL_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...)  log_emit(LOG_LVL_DEBUG, __FILE__, __LINE__, __VA_ARGS__)

#endif
