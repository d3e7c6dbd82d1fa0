/* controller/objsync.h: moves a v2 release (common/manifest2.h) into every container of a job,
 * sending only the objects that are missing:
 *   1. the manifest goes to each host (<staging_dir>/manifests/<id>) and into each container;
 *      the agent says which of its objects the container lacks (`release missing`);
 *   2. the host says which of those its object store (<staging_dir>/objects/<sha256>) lacks;
 *   3. those are streamed as packs (common/pack.h) into the host store over one exec channel
 *      per pack, with an idle deadline, retried with backoff from what arrived;
 *   4. the host tars what the containers lack straight into each agent's stdin (`release
 *      install M -`), which verifies every object and assembles the release, in the exec of the
 *      last pack once it is stored (one round trip fewer), or in one of its own when the host
 *      store lacked nothing.  Objects the agent finds corrupt are removed from the host store
 *      and sent again, once.
 * Before all that, `release have ID` in each container: one already holding the release (an
 * environment a code change runs with) is done after that one call, its tree stat-ed by the
 * agent's record-based verify, nothing re-hashed that did not change.  A release changed on disk
 * is absent to both questions (the agent marks it damaged and drops the changed objects), so
 * the steps above send those objects and the install rebuilds it in this deploy.  The
 * containers of one host are asked at once, from one host shell (SH_FAN), so a host costs the
 * same few round trips whatever its number of containers.
 * Hosts run only sh, tar, find, mv and pct: no drover code.
 */
#ifndef DROVER_OBJSYNC_H
#define DROVER_OBJSYNC_H

#include "common/manifest2.h"
#include "controller/transport/fleet.h"

struct relsrc {
    struct manifest2 *m;
    char *text; /* canonical manifest */
    size_t len;
    char id[RELEASE_ID_LEN + 1];
    char dir[1024]; /* where the files are read from */
    const char *kind; /* how messages name dir: "release" (NULL) or "environment" (a static string) */
    size_t hashes_reused; /* files whose hash came from the hash cache, not a read */
};

/* Walk and hash dir; env_id (may be NULL or "") is recorded as the environment it runs with.
 * Hashes of files unchanged since the last walk (same inode, size, mtime, ctime) come from the
 * controller's hash cache: $DROVER_HASH_CACHE ("off": none), else $XDG_CACHE_HOME/drover/hashes,
 * else ~/.cache/drover/hashes, one file per release directory (its real path). */
int relsrc_load(const char *dir, const char *env_id, struct relsrc *ret);
/* A file whose mtime or ctime is this close to the walk is not cached (2 s; tests set less). */
extern int64_t objsync_hashcache_racy_ns;
void relsrc_done(struct relsrc *r);
/* The one message for a release or environment directory (kind) that cannot be read as one
 * (relsrc_load's or manifest2_from_dir's r); for -EINVAL, what a release may hold.
 * untouched: add "; nothing was contacted, nothing changed" (deploy and plan found it before
 * any host was contacted: exit 2, docs/errors.md). */
void release_read_error(const char *kind, const char *dir, int r, bool untouched);
/* The one message for a job's command or preflight (role) that a release or environment
 * directory (kind) cannot run, why from manifest2_exec_problem: says what to do; untouched as
 * above. */
/* The why of a command whose #! line ends in a carriage return (DOS line endings): the kernel
 * looks for the interpreter "/bin/sh\r", in every container; found here, before any host is
 * contacted, rather than at activate, after the old gang was stopped. */
#define RELEASE_DOS_SHEBANG "has DOS line endings: its #! line ends in a carriage return"
/* What a deploy says of a file of kind's dir (a release or environment directory, "release"
 * when NULL) that could not be read into a pack (r: pack_writer_add_seen's -errno): it
 * disappeared (-ENOENT: deleted, or its directory was, by a rebuild), changed (-ESTALE, -ELOOP),
 * or could not be read (anything else).  A local file problem: the pack is not resent for it. */
void objsync_unreadable_msg(const char *kind, const char *dir, const char *path, int r, char *buf, size_t sz);
/* Whether a host's failed staging said its disk is full (ENOSPC, EDQUOT, tar's short write):
 * not retried, and said as such. */
bool objsync_said_disk_full(const char *said);
/* Whether a host shell's failure in the store said it cannot write there (EROFS, EACCES: a
 * read-only mount, a directory it does not own): the host's store, not an agent, and not
 * retried.  Pure. */
bool objsync_said_store_unwritable(const char *said);
/* The one message for that (said: the host shell's words): where the store is, on which host,
 * and what to do.  Pure. */
void objsync_store_unwritable_message(char *buf, size_t sz, const char *staging_dir, const char *host,
                                      const char *said);
/* Whether the local file path starts with a #! line that ends in "\r\n". */
bool release_dos_shebang(const char *path);

void release_exec_error(const char *kind, const char *dir, const char *path, const char *why,
                        const char *role, const char *job, bool untouched);
/* Can job's command and preflight run from release m (read from dir) and, when given, the
 * environment em (env_dir: a path under `.drover-env/` is looked up there; without em it is a
 * problem, the release having no environment; a bare name, found in PATH, and an absolute path
 * are left to the container)?  Each
 * problem is said by release_exec_error (untouched as above); returns how many there were.
 * The one rule of validate, plan and deploy (a wave's every job before any host is contacted). */
int release_job_problems(const struct manifest2 *m, const char *dir, const struct manifest2 *em,
                         const char *env_dir, const struct inv_job *job, bool untouched);
/* Whether relsrc_load's (or manifest2_from_dir's) r is about the directory given, bad input
 * (exit 2 when found before any host was contacted), rather than this machine (memory, I/O). */
bool release_read_is_bad_input(int r);

struct sync_stats {
    uint64_t bytes_to_hosts; /* object bytes streamed into host stores (whole packs, stored) */
    size_t objects_to_hosts;
    uint64_t bytes_sent;     /* every byte handed to a host, also of a pack cut short (not kept) */
    int hosts_cut_sending;   /* interrupted: hosts stopped with bytes still to hand over */
};

/* What staging says on stderr (stdout is for results): while the bytes flow, every
 * objsync_progress_every_s per host (10 s; nothing for a staging that ends sooner)
 * "stage h1: 1.2 of 4.4 GiB sent (120 MiB/s)"; then, while the containers store and verify what
 * the exec of the last pack brought, "stage h1: all 4.4 GiB sent in 37s; waiting for 2
 * containers to store and verify 4.5 GiB (release install, 10s so far)" (staged: the bytes
 * staged, 0 for an install from the host store alone, "install h1: waiting ..."; bytes: what the
 * containers lack, objects the host store held already included).  Return buf. */
extern double objsync_progress_every_s; /* $DROVER_PROGRESS_EVERY (seconds) overrides it, for tests */
const char *objsync_progress_line(const char *host, uint64_t sent, uint64_t total, double elapsed_s, char *buf,
                                  size_t sz);
const char *objsync_install_wait_line(const char *host, uint64_t staged, double sent_in_s, int ncts, uint64_t bytes,
                                      double waited_s, char *buf, size_t sz);
/* The line once a host's objects are stored: "stage h1: sent 12.00 MiB in 0.4s (30.0 MiB/s)";
 * no rate under 0.1 s; objects of empty files only: "stored 2 objects of empty files (no data to
 * send)" (it said "sent 0.00 MiB in 0.0s (0.0 MiB/s)").  No newline.  Returns buf. */
const char *objsync_sent_line(const char *host, size_t nobj, uint64_t bytes, double elapsed_s, char *buf, size_t sz);
/* The reason of a staging the operator interrupted, from its sync_stats: what was sent, what of
 * it is stored, and that an object is stored only whole (a pack cut short is removed; the next
 * deploy sends it again); or, when every host had its last byte (hosts_cut_sending 0) and the
 * interrupt came while the containers stored and verified, that all of it had been sent.
 * Returns buf. */
const char *objsync_interrupted_msg(const struct sync_stats *st, char *buf, size_t sz);

/* deploy --stage-only: nothing follows a container's install, so the install gives the job's
 * deploy lease back in the same call (release install --job J --lease-release HOLDER).  may[i]:
 * the agent in job container i knows the flag (it took the lease with --status); given[i] set
 * where the agent said it gave the lease back (each host's thread writes its containers'). */
struct objsync_lease {
    const char *job, *holder;
    bool may[INV_MAX_CTS];
    bool given[INV_MAX_CTS];
};

/* Put release rs into every container of job.  0, or -errno with a one-line reason in err
 * (naming host or container, and bytes done for a stalled transfer).  lease: NULL, or the
 * lease to give back with each install (above). */
int objsync_job(struct fleet *f, const struct inv_job *job, const struct relsrc *rs,
                struct objsync_lease *lease, struct sync_stats *stats, char *err, size_t err_sz);

/* GC of host `host`'s store: keep the objects of keep_ids (release ids; NULL or "" entries
 * skipped), of the keep_n newest manifests there, and of the environments those name; remove
 * other objects untouched for 10 minutes and other manifests.  Returns objects removed. */
int objsync_gc_host(struct fleet *f, int host, const char *const *keep_ids, size_t n, int keep_n,
                    char *err, size_t err_sz);

/* The controller's manifest cache mdir (state_dir/manifests/<id>): append to ids[0..*n)
 * (capacity cap) the environment each of them names there. */
void objsync_cache_add_envs(const char *mdir, char (*ids)[RELEASE_ID_LEN + 1], size_t *n, size_t cap);

/* How long a manifest just written to the controller's cache is kept by its GC, whoever names
 * it: the host store's rule (agent/objstore.h OBJSTORE_GC_GRACE_S). */
#define OBJSYNC_CACHE_GRACE_S 600

/* GC of the cache mdir: keep the manifests of keep_ids (NULL or non-id entries skipped), of the
 * keep_n newest (by mtime), of those written in the last OBJSYNC_CACHE_GRACE_S (by mtime: a
 * deploy in flight) and of the environments those newest or fresh name; remove every other
 * manifest.  The caller passes every job's current, previous, good release and rollback
 * targets, with the environments they name (objsync_cache_add_envs).  Returns how many were
 * removed, or -errno (then nothing was removed). */
int objsync_gc_cache(const char *mdir, const char *const *keep_ids, size_t nkeep, int keep_n);

/* The host store's answer to a small release's ask (SH_FAN "ask-lacks": the sha256s of the
 * manifest's files it lacks, one a line) applied to list[0..n) (entry indexes into m): those
 * entries whose object it names, in list's order, into *ret (allocated, free()).  0, or
 * -EBADMSG for a line that is not 64 hex digits (nothing written), -ENOMEM. */
int objsync_lacks_filter(const char *text, size_t len, const struct manifest2 *m, const size_t *list, size_t n,
                         size_t **ret, size_t *ret_n);

/* The fan-out's answer (one host exec running a command in n containers), parsed: for each
 * container k, "@@fan K STATUS OUTBYTES ERRBYTES\n" then that many bytes of stdout and stderr;
 * "@@progress N\n" lines where a header may stand are skipped.
 * ret[k] points into out.  0, or -EBADMSG for anything else (a missing or repeated K, lengths
 * past the end, a stray line). */
struct fan_res {
    int status;
    const char *out, *err;
    size_t out_len, err_len;
};
int objsync_fan_parse(const char *out, size_t len, int n, struct fan_res *ret);
/* One line for what a container's command said when it failed: its stderr's last line, else its
 * stdout's; when it said nothing, the signal that killed it (status 128 + N) or "it said
 * nothing". */
void objsync_fan_reason(const struct fan_res *f, char *buf, size_t sz);


/* Run agent command av[k] (agent_argv_end is called here) in container cts[k] of job, all of
 * them on host `host`, at once through one host exec (SH_FAN, no stdin): the containers of a
 * host cost one round trip, not one each.  0 with ret[k] pointing into *ret_res (free it with
 * exec_result_done), whatever each agent's exit status; or -errno when the host exec itself
 * failed (connection, timeout_s passed, an unreadable answer: -EBADMSG, too many arguments:
 * -E2BIG) with the connection's reason in err, and *ret_res untouched.  A session that timed
 * out or failed is dropped (the next fleet_conn reconnects). */
/* The message for a host exec that ran agent command `what` ("release missing", "lease", ...)
 * in the containers labels[0..n) of one host and got no answer within timeout_s: the step, the
 * containers and what to look at -- never the shell script drover ran there (the operator never
 * wrote it; it says nothing of which step stalled).  job: for the `drover status` hint. */
void objsync_stall_msg(const char *what, const char *const *labels, int n, double timeout_s, const char *job,
                       char *buf, size_t sz);

struct agent_argv;
int objsync_fan_agents(struct fleet *f, const struct inv_job *job, int host, const int *cts, int n,
                       struct agent_argv *av, double timeout_s, const char *what, struct exec_result *ret_res,
                       struct fan_res *ret, char *err, size_t err_sz);

#endif
