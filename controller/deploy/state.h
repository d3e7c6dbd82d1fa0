/* controller/deploy/state.h: what the controller remembers between runs, under [drover] state_dir:
 *   history.jsonl    one JSON object per deploy/rollback outcome, appended (fsync per line)
 *   baselines.json   Ktok/s of the last promoted release per job + container set (atomic)
 *   bundles/         bundles built from release directories (<id>.bundle)
 *   manifests/<id>   the manifest of every release deployed from here (objsync.h's cache)
 *   lock-<job>       flock held while a deploy or rollback of that job runs
 * Formats are private to the controller (docs/controller.md documents them for people).
 */
#ifndef DROVER_STATE_H
#define DROVER_STATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/histrec.h"
#include "common/manifest.h"
#include "common/manifest2.h"

#define STATE_HISTORY_MAX 10000 /* entries read back (newest kept) */

int state_init(const char *state_dir);

/* Append one entry. -errno. */
int state_history_append(const char *state_dir, const struct history_entry *e);
/* Add to (*entries, *n) the entries of more that it lacks (same time, job, release and result),
 * then sort oldest first, keeping the newest STATE_HISTORY_MAX.  *entries is realloc'd (may be
 * NULL).  from: the container label more was read from (NULL: not a container's).  An agent's
 * own record (by HISTORY_BY_AGENT) names no container: it gets from; and the agents of a gang
 * that went back on their own each record it, so one that tells the same outcome (job,
 * release, result, previous) within STATE_HISTORY_FOLD_S of an agent's record already there
 * adds its container to that record instead of a row of its own.  A drover that watched that
 * probation records its own verdict of it: where a drover's record of the release other than
 * "held" lies within STATE_HISTORY_FOLD_S, the agents' records of it are dropped, the drover's
 * tells it with its figures (a held release the agents reverted at its deadline keeps theirs; an
 * agent's record of a stop of the promoted release, agent-stopped, is never dropped so: the
 * drover's `promoted` before it does not tell it).  Returns how many rows *n grew by (a fold or a drop
 * counts as none), or -ENOMEM (nothing changed). */
#define STATE_HISTORY_FOLD_S 900.0
int state_history_merge(struct history_entry **entries, size_t *n, const struct history_entry *more,
                        size_t nmore, const char *from);

/* The records of job in text (NUL-terminated; NULL reads as empty), one JSON line each as
 * `drover-agent history list` prints them, in their order; another job's lines and empty lines
 * are passed over, lines that do not parse are skipped and counted in *ret_skipped (may be NULL)
 * for the caller to say so once.  *ret_entries malloc'd (free()), NULL with *ret_n == 0 when
 * there is none.  -ENOMEM (nothing written).  Does not log. */
int state_history_parse_lines(const char *text, const char *job, struct history_entry **ret_entries,
                              size_t *ret_n, size_t *ret_skipped);

/* Whether name, a record's "name", is the verb of the drover command that wrote it ("rollback",
 * "promote", "revert", "stop", "start", "rebaseline") rather than a release's manifest name:
 * those commands name their records so (pastfail.h decides on it), not the release. */
bool history_name_is_verb(const char *name);

/* The first bytes (at most sz) of release id's manifest in the controller's manifest cache
 * (manifests/<id>) into head, *ret_len of them: enough for what its head says (magic, name, env:
 * manifest2_name_of, manifest2_env_of) with STATE_MANIFEST_HEAD.  0; -EINVAL when id is not a
 * release id (never a path), -ENOENT when the cache has no manifest of it, another -errno when it
 * cannot be read.  One read: the cache's files are written whole (atomic rename). */
#define STATE_MANIFEST_HEAD MANIFEST2_HEAD_MAX
int state_manifest_head(const char *state_dir, const char *id, char *head, size_t sz, size_t *ret_len);

/* The manifest name of release id from the controller's manifest cache (manifests/<id>, its
 * first lines only).  0 with ret_name set; -EINVAL when id is not a release id (never a path),
 * -ENOENT when the cache has no manifest of it, another -errno when it cannot be read. */
int state_release_name(const char *state_dir, const char *id, char ret_name[MANIFEST_NAME_MAX]);

/* The release name `drover history` shows for h[i]: its own name when that is a release's (not
 * history_name_is_verb, not empty), else the manifest cache's (state_release_name), else the
 * name of the newest other record among h[0..n) of the same release id that has one, else "-".
 * Writes ret_name; reads state_dir only for the cache. */
void state_history_release_name(const char *state_dir, const struct history_entry *h, size_t n, size_t i,
                                char ret_name[MANIFEST_NAME_MAX]);

/* Read entries (oldest first), only job's if job != NULL.  Lines that do not parse (a torn
 * append, a hand edit) are skipped, counted in *ret_skipped (may be NULL; all jobs' lines) and
 * warned about once per file in this process, with their count and the first one's line number,
 * whichever job was asked for.  *ret_entries malloc'd (free()), possibly NULL with *ret_n == 0
 * when there is no history. */
int state_history_read(const char *state_dir, const char *job, struct history_entry **ret_entries,
                       size_t *ret_n, size_t *ret_skipped);

/* Baseline for key (inventory_job_key).  -ENOENT if none. */
int state_baseline_get(const char *state_dir, const char *key, double *ret_ktok_s,
                       char ret_release[RELEASE_ID_LEN + 1]);
int state_baseline_set(const char *state_dir, const char *key, const char *release, double ktok_s);

/* Baseline samples per key (inventory_job_key), as the common/samples.h format in
 * samples/<sha256(key)>.json; held = the samples of a release held on an inconclusive verdict
 * (<…>.held.json), used when the operator promotes it by hand.  The set's containers member must
 * equal key.  get: -ENOENT when none; set: creates samples/, replaces atomically. */
struct sample_set;
int state_samples_get(const char *state_dir, const char *key, bool held, struct sample_set *ret_s);
int state_samples_set(const char *state_dir, const char *key, bool held, const struct sample_set *s);
int state_samples_drop(const char *state_dir, const char *key, bool held);
/* The baseline samples release id had as the job's baseline (key's), kept as its own
 * (samples/<sha256(key)>.r-<id>.json) by every state_samples_set of a baseline (held false): a
 * rollback to an earlier good release makes them the baseline again, where the job's baseline
 * was still the release rolled back from.  -ENOENT when none is kept (promoted before this
 * drover kept them, or on another machine), -EINVAL for a malformed id; *ret_s untouched on
 * failure. */
int state_samples_get_release(const char *state_dir, const char *key, const char *id, struct sample_set *ret_s);

/* Take the per-job lock (non-blocking), creating state_dir when it is not there yet.  Returns an
 * fd >= 0 to close when done; -EBUSY when another drover holds it, another -errno when the state
 * directory or the lock file cannot be made. */
int state_lock_job(const char *state_dir, const char *job);

/* The pid a drover wrote into the job's lock file when it took the lock (state_lock_job), to
 * name the holder in a refusal.  0 with *ret_pid set; -ENOENT without a lock file, -ENODATA when
 * the file is empty (an older drover), -EINVAL when it holds no pid.  Does not lock. */
int state_lock_holder(const char *state_dir, const char *job, long *ret_pid);

/* Who holds the per-job lock (state_lock_job), found without taking it: a deploy starting at
 * the same moment is never refused because someone looked. */
struct state_lock_use {
    long holder_pid; /* the pid in the lock file (state_lock_holder), else /proc/locks' pid; 0 unknown */
    double since;    /* epoch seconds the lock file was last written (the holder wrote its pid
                        when it took it); 0 unknown */
    char lock[1100]; /* the lock file's path */
};

/* Whether a process holds job's lock under state_dir: reads /proc/locks for an flock on the lock
 * file's inode (device and inode compared as numbers; waiters, "->", skipped).  1 held, with
 * *ret filled when ret is not NULL; 0 not held (no lock file included; *ret untouched);
 * -errno when /proc/locks cannot be read. */
int state_lock_in_use(const char *state_dir, const char *job, struct state_lock_use *ret);

#endif
