/* controller/notify.h: telling people about outcomes ([notify] in the inventory, docs/config.md):
 * webhooks over libcurl and an exec hook.  A notification never delays or changes a verdict:
 * notify_history() hands delivery to a detached process and returns at once; delivery failures
 * are logged to state_dir/notify.log, never to the operator's terminal.  The webhook secret
 * (a bearer token from a file or the environment) and webhook URLs (Slack's carry their secret
 * in the path) are never printed: messages show scheme://host only.
 */
#ifndef DROVER_NOTIFY_H
#define DROVER_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "controller/deploy/state.h"
#include "controller/inventory.h"

#define NOTIFY_VERSION 1
#define NOTIFY_SECRET_MAX 4096

/* The event name for a history record: "promote", "revert", "agent-revert" (reverted with reason
 * code agent-revert: the agent went back by itself), "revert-failed", "rollback"; NULL for results nobody is told about (failed and
 * aborted deploys: nothing was switched). */
const char *notify_event_of(const struct history_entry *h);

/* The payload for one event (docs/protocol.md, "Notification"): {"v":1,"event":E,"verdict":...,
 * "record":{history record}}, or with slack {"text":"..."}.  malloc'd text in *ret_text. -ENOMEM. */
int notify_payload(const char *event, const struct history_entry *h, bool slack, char **ret_text);

/* scheme://host[:port] of url into out (what messages may show of a webhook URL). */
void notify_redact_url(const char *url, char *out, size_t out_sz);

/* Read the secret ([notify] secret_file, else secret_env) into out (trailing newline cut).
 * 0 with "" when none is configured; -errno (-ENOENT unset variable, file errors). */
int notify_secret(const struct inv_notify *n, char *out, size_t out_sz);

/* POST payload to url: up to 1 + retries attempts of timeout_s each, with backoff 0.25s, 0.5s,
 * 1s, ... between them; a 4xx answer is not retried.  0 on a 2xx answer; -EACCES for 401/403,
 * -EPROTO other HTTP errors, -ETIMEDOUT, -ECONNREFUSED, -EIO; err says what (no secret, URL
 * redacted).  secret: bearer token or "" for none.  Blocks: for the detached deliverer and tests. */
int notify_post(const char *url, const char *payload, const char *secret, double timeout_s,
                int retries, char *err, size_t err_sz);

/* Run the exec hook: argv {exec, event, job}, payload on stdin, killed after timeout_s.  0 when it
 * exits 0; -ETIMEDOUT, -EIO (non-zero exit), -errno. */
int notify_exec(const char *exec, const char *event, const char *job, const char *payload,
                double timeout_s, char *err, size_t err_sz);

/* Everything configured, synchronously; failures logged (warn).  Returns 0 or the first -errno. */
int notify_deliver(const struct inventory *inv, const char *event, const struct history_entry *h);

/* Fire and forget for one history record: when [notify] has anything and the record's event is
 * one to tell, fork a detached process (stderr to state_dir/notify.log) that runs
 * notify_deliver() and exits.  Returns after the fork; never fails the caller. */
void notify_history(const struct inventory *inv, const struct history_entry *h);

#endif
