/* controller/objsync.c: see objsync.h.  Owns the host's object store layout under staging_dir
 * (objects/, manifests/, packs/) and the shell snippets that run there.  Each snippet is a fixed
 * string run as `sh -c SNIPPET sh ARGS...`: values only ever travel as positional arguments,
 * quoted once by quote.c, never pasted into the script.  Temp names on the host carry the pid of
 * the host shell that made them, so the next contact removes only those whose shell is gone.
 */
#include "controller/deploy/objsync.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/agentcli.h"
#include "common/log.h"
#include "common/pack.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/transport/pct.h"
#include "controller/transport/send.h"

#define PACK_TARGET_BYTES (64ull << 20) /* one exec channel per pack: the unit of retry */
#define SEND_ATTEMPTS 5
/* A release this large (entries or manifest bytes) is first asked `release have` (host_round). */
#define OBJSYNC_HAVE_MIN_ENTRIES 1000
#define OBJSYNC_HAVE_MIN_BYTES (64u << 10)

/* The store's directories, and temp names whose shell is gone removed (cwd: the store). */
#define SH_PREP_BODY                                                                 \
    "for d in objects/.in.* packs/.tmp.* packs/.fan.* manifests/*.tmp.*; do\n"        \
    "  [ -e \"$d\" ] || continue; p=${d##*.}\n"                                        \
    "  case $p in ''|*[!0-9]*) continue;; esac\n"                                     \
    "  kill -0 \"$p\" 2>/dev/null || rm -rf -- \"$d\"\n"                              \
    "done\n"                                                                         \
    "find packs -name '*.pack' -mmin +120 -exec rm -f {} + 2>/dev/null\n"

static const char SH_PREP[] =
    "mkdir -p \"$1/objects\" \"$1/manifests\" \"$1/packs\" && cd \"$1\" || exit 1\n" SH_PREP_BODY "exit 0\n";

/* stdin: one sha per line; stdout: ranges (START COUNT) of the lines whose object is absent. */
static const char SH_LACKS[] =
    "cd \"$1/objects\" || exit 1\n"
    "i=0; s=-1\n"
    "while read -r h; do\n"
    "  if [ -f \"$h\" ]; then\n"
    "    if [ $s -ge 0 ]; then echo \"$s $((i-s))\"; s=-1; fi\n"
    "  elif [ $s -lt 0 ]; then s=$i; fi\n"
    "  i=$((i+1))\n"
    "done\n"
    "if [ $s -ge 0 ]; then echo \"$s $((i-s))\"; fi\n";

/* stdin: a pack; objects appear in the store only once the whole pack arrived. */
static const char SH_RECV_PACK[] =
    "set -e; cd \"$1/objects\"; d=\".in.$$\"; mkdir \"$d\"; trap 'rm -rf \"$d\"' EXIT\n"
    "tar -x -m -f - -C \"$d\" --no-same-owner\n"
    "find \"$d\" -maxdepth 1 -type f -exec mv -f -t . {} +\n";

/* Fan-out: one host shell runs a command in every container of the host at once.  $2 is the
 * stdin of each: "none", "file" ($3, relative to the store), or "pack" (a tar of the objects
 * whose sha256s this script reads on its own stdin, made afresh for each container).  "stage"
 * is "pack" with the host's staging in the same exec: this script's stdin is that list ($3: its
 * length in bytes) followed by a pack (common/pack.h) of the objects the host store lacks, stored
 * as SH_RECV_PACK does (objects/.in.$$, moved into objects/ only once the whole pack arrived;
 * exit 1 before any container is asked when it did not).  "ask"
 * and "ask-lacks" are a deploy's first question in one host exec: the store prepared (SH_PREP),
 * the manifest read from this script's stdin into manifests/$3 ($3: the release id), then
 * "file" with it; "ask-lacks" adds one more answer after the containers': the sha256s of the
 * manifest's files the host store lacks, one a line (status 0).  Then
 * groups "N ARG1..ARGN", one per container; each group runs as "${K}" ... references expanded
 * by eval in the background shell, so values are never pasted into the script.  While packs
 * stream, "@@progress N" (tar checkpoints so far, one per ~10 MB) each time N grows: output the
 * controller's idle deadline counts as progress, so a long transfer needs no size-scaled total
 * and a stalled one is caught.  Then per container K, in order: "@@fan K STATUS OUTBYTES
 * ERRBYTES\n", stdout, stderr. */
static const char SH_FAN[] =
    "mkdir -p \"$1\" && cd \"$1\" || exit 1; mode=$2; src=$3; shift 3; lacks=\n"
    "case $mode in ask|ask-lacks)\n"
    "  mkdir -p objects manifests packs || exit 1\n"
    SH_PREP_BODY
    "  [ $mode = ask-lacks ] && lacks=1\n"
    "  src=manifests/$src; m=\"$src.tmp.$$\"; cat >\"$m\" && mv -f \"$m\" \"$src\" || { rm -f \"$m\"; exit 1; }\n"
    "  mode=file;;\n"
    "esac\n"
    "mkdir -p packs && t=packs/.fan.$$ && mkdir \"$t\" || exit 1; d=objects/.in.$$; trap 'rm -rf \"$t\" \"$d\"' EXIT\n"
    "if [ \"$mode\" = stage ]; then\n"
    "  mkdir -p objects && mkdir \"$d\" && head -c \"$src\" >\"$t/list\" || exit 1\n"
    "  [ \"$(wc -c <\"$t/list\")\" -eq \"$src\" ] || { echo \"the list of objects ended early\" >&2; exit 1; }\n"
    "  tar -x -m -f - -C \"$d\" --no-same-owner && find \"$d\" -maxdepth 1 -type f -exec mv -f -t objects {} + || exit 1\n"
    "  rmdir \"$d\"; mode=pack\n"
    "elif [ \"$mode\" = pack ]; then cat >\"$t/list\"; else exec </dev/null; fi\n"
    "k=0\n"
    "while [ $# -gt 0 ]; do\n"
    "  n=$1; shift; c=; i=1\n"
    "  while [ $i -le $n ]; do c=\"$c \\\"\\${$i}\\\"\"; i=$((i+1)); done\n"
    "  case $mode in\n"
    "  pack) { (cd objects && exec tar -c --format=posix --checkpoint=1000 -f - -T \"../$t/list\") 2>\"$t/$k.t\" |\n"
    "          eval \"$c\" >\"$t/$k.o\" 2>\"$t/$k.e\"; echo $? >\"$t/$k.s\"; } & ;;\n"
    "  file) { eval \"$c\" <\"$src\" >\"$t/$k.o\" 2>\"$t/$k.e\"; echo $? >\"$t/$k.s\"; } & ;;\n"
    "  *) { eval \"$c\" >\"$t/$k.o\" 2>\"$t/$k.e\"; echo $? >\"$t/$k.s\"; } & ;;\n"
    "  esac\n"
    "  shift \"$n\"; k=$((k+1))\n"
    "done\n"
    "last=\n"
    "while [ \"$mode\" = pack ]; do\n"
    "  j=0; left=0\n"
    "  while [ $j -lt $k ]; do [ -s \"$t/$j.s\" ] || left=1; j=$((j+1)); done\n"
    "  [ $left = 1 ] || break\n"
    "  p=$(cat \"$t\"/*.t 2>/dev/null | wc -l)\n"
    "  [ \"$p\" = \"$last\" ] || { echo \"@@progress $p\"; last=$p; }\n"
    "  sleep 0.2\n"
    "done\n"
    "if [ -n \"$lacks\" ]; then\n"
    "  : >\"$t/$k.o\"; : >\"$t/$k.e\"; echo 1 >\"$t/$k.s\"\n"
    "  awk '$1==\"f\"{print $4}' \"$src\" >\"$t/$k.l\" && sort -u \"$t/$k.l\" |\n"
    "    while read -r h; do [ -f \"objects/$h\" ] || echo \"$h\"; done >\"$t/$k.o\" && echo 0 >\"$t/$k.s\"\n"
    "  k=$((k+1))\n"
    "fi\n"
    "wait\n"
    "j=0\n"
    "while [ $j -lt $k ]; do\n"
    "  s=$(cat \"$t/$j.s\" 2>/dev/null); s=${s:-255}\n"
    "  [ -s \"$t/$j.t\" ] && grep -v 'Write checkpoint' \"$t/$j.t\" >>\"$t/$j.e\"\n"
    "  o=$(wc -c <\"$t/$j.o\"); e=$(wc -c <\"$t/$j.e\")\n"
    "  printf '@@fan %d %d %d %d\\n' \"$j\" \"$s\" $o $e\n"
    "  cat \"$t/$j.o\" \"$t/$j.e\"\n"
    "  j=$((j+1))\n"
    "done\n";

/* stdin: release ids to keep; $2: how many newest manifests to keep besides.  Keeps the objects
 * of those releases, of every release whose manifest a deploy wrote in the last 10 minutes (one
 * in flight: each deploy writes it when it asks, and may need objects stored long ago), and of
 * the environments they name; removes every other object stored more than 10 minutes ago (the
 * packs' tar -x -m stamps them when stored: they carried the pack's mtime 0, so every object
 * looked old and a gc during a deploy removed what it had just staged) and every other
 * manifest.  Prints "N" removed. */
static const char SH_GC[] =
    "cd \"$1\" 2>/dev/null && [ -d objects ] && [ -d manifests ] || { echo 0; exit 0; }\n"
    "t=.gc.$$; trap 'rm -f \"$t\".*' EXIT\n"
    "{ cat; ls -t manifests | grep -E '^[0-9a-f]{64}$' | head -n \"$2\";\n"
    "  find manifests -maxdepth 1 -type f -mmin -10 -name '[0-9a-f]*' -printf '%f\\n' | grep -E '^[0-9a-f]{64}$'; } |\n"
    "  sort -u >\"$t.ids\"\n"
    "while read -r i; do [ -f \"manifests/$i\" ] && awk '$1==\"env\"{print $2}' \"manifests/$i\"; done <\"$t.ids\" >>\"$t.ids\"\n"
    "sort -u -o \"$t.ids\" \"$t.ids\"\n"
    "while read -r i; do [ -f \"manifests/$i\" ] && awk '$1==\"f\"{print $4}' \"manifests/$i\"; done <\"$t.ids\" | sort -u >\"$t.keep\"\n"
    "(cd objects && find . -maxdepth 1 -type f -mmin +10 -name '[0-9a-f]*' -printf '%f\\n') | sort >\"$t.all\"\n"
    "comm -23 \"$t.all\" \"$t.keep\" >\"$t.del\"\n"
    "(cd objects && xargs -r rm -f -- <\"../$t.del\")\n"
    "ls manifests | grep -E '^[0-9a-f]{64}$' | sort | comm -23 - \"$t.ids\" | (cd manifests && xargs -r rm -f --)\n"
    "wc -l <\"$t.del\"\n";

/* ---- the controller's hash cache: a release directory's file hashes between deploys ---- */

#define HASHCACHE_MAX_BYTES (512u << 20)
/* coarser than any timestamp granularity we meet; tests shorten it */
int64_t objsync_hashcache_racy_ns = 2000000000LL;

/* $DROVER_HASH_CACHE ("off": none), else $XDG_CACHE_HOME/drover/hashes, else
 * ~/.cache/drover/hashes; the file for dir is named by the SHA-256 of its real path. */
static int hashcache_path(const char *dir, char *buf, size_t sz)
{
    const char *over = getenv("DROVER_HASH_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[900], real[PATH_MAX], key[SHA256_HEX_LEN + 1];
    if (over && !strcmp(over, "off"))
        return -ENOENT;
    if (over && over[0])
        snprintf(base, sizeof base, "%s", over);
    else if (xdg && xdg[0] == '/')
        snprintf(base, sizeof base, "%s/drover/hashes", xdg);
    else if (home && home[0] == '/')
        snprintf(base, sizeof base, "%s/.cache/drover/hashes", home);
    else
        return -ENOENT;
    if (!realpath(dir, real) || sha256_buf_hex(real, strlen(real), key) < 0)
        return -ENOENT;
    if (snprintf(buf, sz, "%s/%s", base, key) >= (int)sz)
        return -ENAMETOOLONG;
    return 0;
}

static int known_by_path(const void *a, const void *b)
{
    return strcmp(((const struct m2_known *)a)->path, ((const struct m2_known *)b)->path);
}

/* Lines "SHA256 SIZE DEV INO MTIME_NS CTIME_NS PATH"; anything unreadable is skipped (the cache
 * only ever saves a hash: a bad line costs a read of that file). */
static void hashcache_load(const char *file, char **ret_text, struct m2_known **ret_v, size_t *ret_n)
{
    char *text = NULL;
    size_t len = 0, n = 0, cap = 0;
    struct m2_known *v = NULL;
    *ret_text = NULL;
    *ret_v = NULL;
    *ret_n = 0;
    if (fs_read_file(file, HASHCACHE_MAX_BYTES, &text, &len) < 0)
        return;
    for (char *line = text, *nl; line < text + len && (nl = memchr(line, '\n', (size_t)(text + len - line)));
         line = nl + 1) {
        *nl = '\0';
        struct m2_known k = { 0 };
        unsigned long long size, dev, ino;
        long long mt, ct;
        int used = 0;
        if (sscanf(line, "%64s %llu %llu %llu %lld %lld %n", k.sha256, &size, &dev, &ino, &mt, &ct, &used) != 6 ||
            !used || !line[used] || !sha256_is_hex(k.sha256))
            continue;
        k.size = size;
        k.dev = dev;
        k.ino = ino;
        k.mtime_ns = mt;
        k.ctime_ns = ct;
        k.path = line + used;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            struct m2_known *nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = k;
    }
    if (n > 1)
        qsort(v, n, sizeof *v, known_by_path);
    *ret_text = text;
    *ret_v = v;
    *ret_n = n;
}

/* Every file of m hashed (or confirmed) by this walk, except those whose mtime or ctime is too
 * close to the walk's start to tell a later change apart (git's "racily clean" rule). */
static void hashcache_save(const char *file, const struct manifest2 *m, int64_t walk_start_ns)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t i = 0; buf && i < m->n; i++) {
        const struct m2_entry *e = &m->e[i];
        if (e->type != M2_FILE || !e->src_ino || walk_start_ns - e->src_mtime_ns < objsync_hashcache_racy_ns ||
            walk_start_ns - e->src_ctime_ns < objsync_hashcache_racy_ns)
            continue;
        size_t need = strlen(e->path) + 200;
        if (len + need > cap) {
            while (len + need > cap)
                cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return;
            }
            buf = nb;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s %llu %llu %llu %lld %lld %s\n", e->sha256,
                                (unsigned long long)e->size, (unsigned long long)e->src_dev,
                                (unsigned long long)e->src_ino, (long long)e->src_mtime_ns,
                                (long long)e->src_ctime_ns, e->path);
    }
    char d[PATH_MAX];
    if (buf && str_copy(d, sizeof d, file) == 0 && strrchr(d, '/')) {
        *strrchr(d, '/') = '\0';
        if (fs_mkdir_p(d, 0700) == 0)
            (void)fs_write_atomic(file, buf, len, 0600);
    }
    free(buf);
}

int relsrc_load(const char *dir, const char *env_id, struct relsrc *ret)
{
    struct relsrc r = { 0 };
    if (str_copy(r.dir, sizeof r.dir, dir) < 0)
        return -ENAMETOOLONG;
    /* A multi-GB environment is walked at every deploy of the code that runs with it: files
     * still the inode hashed last time are not read again (the pack writer re-checks the
     * identity before it sends a byte, and every agent hashes what it stores). */
    char cache[PATH_MAX], *ctext = NULL;
    struct m2_known *known = NULL;
    size_t nknown = 0;
    bool cached = hashcache_path(dir, cache, sizeof cache) == 0;
    if (cached)
        hashcache_load(cache, &ctext, &known, &nknown);
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    int e = manifest2_from_dir_known(dir, NULL, known, nknown, &r.hashes_reused, &r.m);
    free(known);
    free(ctext);
    if (e < 0)
        return e;
    if (cached)
        hashcache_save(cache, r.m, (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec);
    if (env_id && env_id[0])
        (void)str_copy(r.m->env, sizeof r.m->env, env_id);
    if ((e = manifest2_dump(r.m, &r.text, &r.len, r.id)) < 0) {
        manifest2_free(r.m);
        return e;
    }
    *ret = r;
    return 0;
}

void release_read_error(const char *kind, const char *dir, int r, bool untouched)
{
    /* -EINVAL: the walk named the file on the line before; "Invalid argument" said nothing */
    log_error("cannot read %s directory '%s': %s%s", kind, dir,
              r == -EINVAL ? "a release holds directories, regular files and relative symlinks that "
                             "stay inside it: replace or remove the file named above" : strerror(-r),
              untouched ? "; nothing was contacted, nothing changed" : "");
}

bool release_read_is_bad_input(int r)
{
    return r < 0 && r != -ENOMEM && r != -EIO;
}

void release_exec_error(const char *kind, const char *dir, const char *path, const char *why,
                        const char *role, const char *job, bool untouched)
{
    const char *p = path, *tail = untouched ? "; nothing was contacted, nothing changed" : "";
    while (p[0] == '.' && p[1] == '/')
        p += 2;
    if (!strcmp(why, "is not executable"))
        log_error("%s directory '%s': '%s' (the %s of [job %s]) is not executable: chmod +x '%s/%s'%s",
                  kind, dir, path, role, job, dir, p, tail);
    else if (!strcmp(why, RELEASE_DOS_SHEBANG))
        log_error("%s directory '%s': '%s' (the %s of [job %s]) %s: no container can run it; convert "
                  "the file to Unix line endings (sed -i 's/\\r$//' '%s/%s', or dos2unix)%s",
                  kind, dir, path, role, job, why, dir, p, tail);
    else
        log_error("%s directory '%s': '%s' (the %s of [job %s] in the inventory) %s: add it to the "
                  "%s, or fix the inventory%s", kind, dir, path, role, job, why, kind, tail);
}

bool objsync_said_disk_full(const char *said)
{
    return said && (strstr(said, "No space left on device") || strstr(said, "Disk quota exceeded") ||
                    (strstr(said, "tar: ") && strstr(said, ": Wrote only ")));
}

bool objsync_said_store_unwritable(const char *said)
{
    return said && (strstr(said, "Read-only file system") || strstr(said, "Permission denied"));
}

void objsync_store_unwritable_message(char *buf, size_t sz, const char *staging_dir, const char *host,
                                      const char *said)
{
    snprintf(buf, sz, "the host store under staging_dir (%s) on %s is not writable: %s; fix its mount or "
             "permissions, or set staging_dir in the inventory", staging_dir, host, said);
}

bool release_dos_shebang(const char *path)
{
    char line[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    ssize_t n;
    while ((n = read(fd, line, sizeof line - 1)) < 0 && errno == EINTR)
        ;
    close(fd);
    if (n < 3 || line[0] != '#' || line[1] != '!')
        return false;
    line[n] = '\0';
    char *nl = strchr(line, '\n');
    return nl && nl > line && nl[-1] == '\r';
}

int release_job_problems(const struct manifest2 *m, const char *dir, const struct manifest2 *em,
                         const char *env_dir, const struct inv_job *job, bool untouched)
{
    const char *need[2] = { job->command, job->preflight };
    const char *what[2] = { "command", "preflight" };
    int n = 0;
    for (int i = 0; i < 2; i++) {
        bool in_env = !strncmp(need[i], ".drover-env/", 12);
        if (!need[i][0] || !strchr(need[i], '/') || need[i][0] == '/')
            continue; /* none, or found in the container (PATH, absolute) */
        if (in_env && !em) {
            /* a release sees only the environment deployed with it: without one, no .drover-env/ */
            log_error("the %s of [job %s], '%s', is in the environment, and no --env ENVDIR was "
                      "given: release '%s' alone has no .drover-env/; give --env ENVDIR again (an "
                      "environment already on the hosts is hashed here, not sent again)%s",
                      what[i], job->name, need[i], dir,
                      untouched ? "; nothing was contacted, nothing changed" : "");
            n++;
            continue;
        }
        const char *why = in_env ? manifest2_exec_problem(em, need[i] + 12) : manifest2_exec_problem(m, need[i]);
        if (!why && dir && (!in_env || env_dir)) {
            char local[PATH_MAX];
            if (snprintf(local, sizeof local, "%s/%s", in_env ? env_dir : dir,
                         in_env ? need[i] + 12 : need[i]) < (int)sizeof local &&
                release_dos_shebang(local))
                why = RELEASE_DOS_SHEBANG;
        }
        if (why) {
            release_exec_error(in_env ? "environment" : "release", in_env ? env_dir : dir,
                               in_env ? need[i] + 12 : need[i], why, what[i], job->name, untouched);
            n++;
        }
    }
    return n;
}

void relsrc_done(struct relsrc *r)
{
    manifest2_free(r->m);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* ---- what staging says while it runs ---- */

double objsync_progress_every_s = 10;

/* bytes in the unit of scale: GiB from 1 GiB of scale on, else MiB */
static const char *size_in(uint64_t bytes, uint64_t scale, char *buf, size_t sz)
{
    if (scale >= (1ull << 30))
        snprintf(buf, sz, "%.1f", (double)bytes / (double)(1ull << 30));
    else
        snprintf(buf, sz, "%.1f", (double)bytes / 1048576.0);
    return buf;
}

static const char *size_unit(uint64_t scale)
{
    return scale >= (1ull << 30) ? "GiB" : "MiB";
}

static const char *size_str(uint64_t bytes, char *buf, size_t sz)
{
    char n[32];
    snprintf(buf, sz, "%s %s", size_in(bytes, bytes, n, sizeof n), size_unit(bytes));
    return buf;
}

/* "1.3 of 4.4 GiB": done in the unit of total (every size a transfer says goes through these
 * three, so its lines agree: "4500.00 MiB" and "4.4 GiB" were the same file) */
static const char *size_of(uint64_t done, uint64_t total, char *buf, size_t sz)
{
    char a[32], b[32];
    snprintf(buf, sz, "%s of %s %s", size_in(done, total, a, sizeof a), size_in(total, total, b, sizeof b),
             size_unit(total));
    return buf;
}

const char *objsync_progress_line(const char *host, uint64_t sent, uint64_t total, double elapsed_s, char *buf,
                                  size_t sz)
{
    char a[96];
    double rate = elapsed_s > 0 ? (double)sent / elapsed_s / 1048576.0 : 0;
    snprintf(buf, sz, "stage %s: %s sent (%.0f MiB/s)", host, size_of(sent, total, a, sizeof a), rate);
    return buf;
}

const char *objsync_install_wait_line(const char *host, uint64_t staged, double sent_in_s, int ncts, uint64_t bytes,
                                      double waited_s, char *buf, size_t sz)
{
    char sz0[48], sz1[48], sent[96] = "";
    size_str(bytes, sz1, sizeof sz1);
    if (staged)
        snprintf(sent, sizeof sent, "all %s sent in %.0fs; ", size_str(staged, sz0, sizeof sz0), sent_in_s);
    snprintf(buf, sz, "%s %s: %swaiting for %d %s to store and verify %s (release install, %.0fs so far)",
             staged ? "stage" : "install", host, sent, ncts, text_plural(ncts, "container", "containers"), sz1,
             waited_s);
    return buf;
}

const char *objsync_sent_line(const char *host, size_t nobj, uint64_t bytes, double elapsed_s, char *buf, size_t sz)
{
    char a[48];
    size_str(bytes, a, sizeof a);
    if (!bytes) /* empty files: their objects are names, no data ("sent 0.00 MiB in 0.0s (0.0 MiB/s)") */
        snprintf(buf, sz, "stage %s: stored %zu %s of empty files (no data to send)", host, nobj,
                 text_plural((long long)nobj, "object", "objects"));
    else if (elapsed_s < 0.1) /* a rate over a few ms says nothing */
        snprintf(buf, sz, "stage %s: sent %s in %.1fs", host, a, elapsed_s);
    else
        snprintf(buf, sz, "stage %s: sent %s in %.1fs (%.1f MiB/s)", host, a, elapsed_s,
                 (double)bytes / 1048576.0 / elapsed_s);
    return buf;
}

const char *objsync_interrupted_msg(const struct sync_stats *st, char *buf, size_t sz)
{
    char a[48], b[48], c[48];
    uint64_t sent = st->bytes_sent, stored = st->bytes_to_hosts;
    if (sent > stored && !st->hosts_cut_sending)
        /* every host had its last byte: the containers were storing it (the part said "not kept"
         * was whole on the host, or nearly) */
        snprintf(buf, sz, "interrupted by the operator while the containers stored and verified the release: "
                 "all %s had been sent to the hosts (the next deploy asks each host store what it lacks and "
                 "sends only that)", size_str(sent, a, sizeof a));
    else if (sent > stored)
        snprintf(buf, sz, "interrupted by the operator while staging: %s sent to the hosts, %s of it stored "
                 "there (an object is stored only once the whole of it arrived: the part of one sent is not "
                 "kept, and the next deploy sends those %s again)", size_str(sent, a, sizeof a),
                 size_str(stored, b, sizeof b), size_str(sent - stored, c, sizeof c));
    else if (stored)
        snprintf(buf, sz, "interrupted by the operator while staging (%s stored on the hosts: the next deploy "
                 "does not send it again)", size_str(stored, a, sizeof a));
    else
        snprintf(buf, sz, "interrupted by the operator while staging (nothing sent to the hosts yet)");
    return buf;
}

/* One host's staging (or install) said every objsync_progress_every_s from its start, by a
 * thread of its own: the bytes while they flow (counted as the packs are written), then, in the
 * exec of the last pack, the wait for the containers' install.  Nothing for what ends sooner. */
struct ticker {
    pthread_t th;
    bool started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const char *host;
    uint64_t total;   /* bytes to stage (0: an install only) */
    uint64_t stored;  /* bytes of the packs stored so far */
    uint64_t cur;     /* bytes of the pack being sent */
    uint64_t wire;    /* every byte handed to a channel, failed packs too */
    double t0, sent_at, last;
    int ncts;         /* containers installing once the bytes are sent (0: none) */
    uint64_t install_bytes;
};

static void ticker_say(struct ticker *t, double now)
{
    char line[400];
    if (t->total && !t->sent_at)
        objsync_progress_line(t->host, t->stored + t->cur, t->total, now - t->t0, line, sizeof line);
    else if (t->ncts)
        objsync_install_wait_line(t->host, t->total, t->sent_at - t->t0, t->ncts, t->install_bytes,
                                  now - (t->sent_at ? t->sent_at : t->t0), line, sizeof line);
    else
        return;
    fprintf(stderr, "%s%s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", line); /* over a TTY's live line */
}

static void *ticker_main(void *arg)
{
    struct ticker *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        double now = time_mono();
        if (!t->stop && now - t->last >= objsync_progress_every_s) {
            ticker_say(t, now);
            t->last = now;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static void ticker_start(struct ticker *t, const char *host, uint64_t total, int ncts, uint64_t install_bytes)
{
    memset(t, 0, sizeof *t);
    t->host = host;
    t->total = total;
    t->ncts = ncts;
    t->install_bytes = install_bytes;
    t->t0 = t->last = time_mono();
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    t->started = pthread_create(&t->th, NULL, ticker_main, t) == 0; /* none: no progress lines */
}

static void ticker_stop(struct ticker *t)
{
    if (t->started) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->th, NULL);
    }
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

/* A pack begins: stored bytes before it (what the progress counts from). */
static void ticker_pack(struct ticker *t, uint64_t stored)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stored = stored;
    t->cur = 0;
    t->sent_at = 0; /* a retry of the last pack: its bytes flow again */
    pthread_mutex_unlock(&t->mu);
}

static void ticker_add(struct ticker *t, uint64_t n)
{
    pthread_mutex_lock(&t->mu);
    t->cur += n;
    t->wire += n;
    pthread_mutex_unlock(&t->mu);
}

static void ticker_all_sent(struct ticker *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->sent_at = time_mono();
    pthread_mutex_unlock(&t->mu);
}

/* ---- producers ---- */

struct list_src {
    const struct manifest2 *m;
    const size_t *idx;
    size_t n;
};

static int produce_list(void *ctx, send_write_fn w, void *wctx)
{
    const struct list_src *l = ctx;
    char line[SHA256_HEX_LEN + 2];
    for (size_t i = 0; i < l->n; i++) {
        memcpy(line, l->m->e[l->idx[i]].sha256, SHA256_HEX_LEN);
        line[SHA256_HEX_LEN] = '\n';
        int r = w(wctx, line, SHA256_HEX_LEN + 1);
        if (r < 0)
            return r;
    }
    return 0;
}

struct text_src {
    const char *text;
    size_t len;
};

static int produce_text(void *ctx, send_write_fn w, void *wctx)
{
    const struct text_src *t = ctx;
    return w(wctx, t->text, t->len);
}

struct pack_src {
    const struct relsrc *rs;
    const size_t *idx;
    size_t n;
    /* a file of the release that changed (-ESTALE) or could not be read: what to say of it
     * (objsync_unreadable_msg; NULL: nothing said) */
    char *stale;
    size_t stale_sz;
    int src_err;       /* that file's -errno (0: none): a local problem, which no resend mends */
    struct ticker *tk; /* counts the bytes written (NULL: none) */
};

struct counted {
    send_write_fn w;
    void *wctx;
    struct ticker *tk;
};

static int counted_write(void *ctx, const void *buf, size_t len)
{
    struct counted *c = ctx;
    int r = c->w(c->wctx, buf, len);
    if (r == 0)
        ticker_add(c->tk, len);
    return r;
}

void objsync_unreadable_msg(const char *kind, const char *dir, const char *path, int r, char *buf, size_t sz)
{
    kind = kind ? kind : "release";
    if (r == -ESTALE || r == -ELOOP) /* ELOOP: replaced by a symlink (opened with O_NOFOLLOW) */
        snprintf(buf, sz, "'%s/%s' changed while it was being deployed: deploy again", dir, path);
    else if (r == -ENOENT || r == -ENOTDIR)
        snprintf(buf, sz, "%s directory '%s': file '%s' disappeared while it was being sent (deleted, or a "
                 "directory above it was): is something rebuilding it? deploy again when it is stable",
                 kind, dir, path);
    else
        snprintf(buf, sz, "%s directory '%s': file '%s' could not be read while it was being sent (%s): is "
                 "something rebuilding it or changing its permissions? deploy again when it is readable and stable",
                 kind, dir, path, strerror(-r));
}

static int produce_pack(void *ctx, send_write_fn w, void *wctx)
{
    struct pack_src *p = ctx;
    struct pack_writer *pw;
    struct counted cw = { w, wctx, p->tk };
    int r = p->tk ? pack_writer_new(counted_write, &cw, &pw) : pack_writer_new(w, wctx, &pw);
    if (r < 0)
        return r;
    for (size_t i = 0; i < p->n && r == 0; i++) {
        if (send_interrupted)
            r = -EINTR;
        const struct m2_entry *e = &p->rs->m->e[p->idx[i]];
        char path[2048];
        if (r == 0 && snprintf(path, sizeof path, "%s/%s", p->rs->dir, e->path) >= (int)sizeof path)
            r = -ENAMETOOLONG;
        struct pack_seen seen = { e->src_dev, e->src_ino, e->src_mtime_ns, e->src_ctime_ns };
        if (r == 0 && (r = pack_writer_add_seen(pw, e->sha256, path, e->size, &seen)) < 0 &&
            pack_writer_failed_reading(pw)) {
            /* deleted by a rebuild, made unreadable: this machine's, no resend mends it (it was
             * sent four more times, and over SSH said nothing: the channel had no error) */
            p->src_err = r;
            if (p->stale)
                objsync_unreadable_msg(p->rs->kind, p->rs->dir, e->path, r, p->stale, p->stale_sz);
        }
    }
    if (r == 0)
        return pack_writer_finish(pw);
    pack_writer_free(pw);
    return r;
}

/* FAN_STAGE's stdin: the list of objects the containers lack, then a pack of those the host
 * store lacks.  sent_at: when the pack's last byte was handed to the channel (the staging rate). */
struct stage_src {
    struct list_src list;
    struct pack_src pack;
    double sent_at;
};

static int produce_stage(void *ctx, send_write_fn w, void *wctx)
{
    struct stage_src *s = ctx;
    int r = produce_list(&s->list, w, wctx);
    if (r == 0 && (r = produce_pack(&s->pack, w, wctx)) == 0) {
        s->sent_at = time_mono();
        ticker_all_sent(s->pack.tk); /* the install in the same exec begins: said as such */
    }
    return r;
}

/* ---- per host ---- */

struct host_job {
    struct fleet *f;
    const struct inv_job *job;
    int host;
    const struct relsrc *rs;
    struct objsync_lease *lease;
    struct sync_stats stats;
    int ret;
    int ended;      /* the last host exec's conn->ended (a local host's process group ended) */
    bool silent;    /* the last host exec failed on a session known dead or not answering */
    char err[1024];
};

static void host_drop(struct fleet *f, int h)
{
    /* A stalled session may never answer again: free it; the next fleet_conn reconnects. */
    conn_free(f->conns[h]);
    f->conns[h] = NULL;
    f->conn_err[h] = 0;
}

static int host_argv(struct host_job *hj, const char *const *argv, send_produce_fn produce, void *ctx,
                     uint64_t total, const char *label, double finish_s, struct exec_result *ret,
                     uint64_t *ret_sent)
{
    struct conn *c;
    int r = fleet_conn(hj->f, hj->host, &c);
    if (r < 0) {
        snprintf(hj->err, sizeof hj->err, "host '%s' unreachable", hj->f->inv->hosts[hj->host].name);
        return r;
    }
    struct send_opts o = { .idle_s = hj->f->inv->exec_timeout_s < 30 ? hj->f->inv->exec_timeout_s : 30,
                           .finish_s = finish_s, .label = label, .total = total };
    const char *idle = getenv("DROVER_IDLE_TIMEOUT"); /* tests: a short idle deadline */
    if (idle && atof(idle) > 0)
        o.idle_s = atof(idle);
    uint64_t sent = 0;
    struct exec_result res;
    c->ended = c->ssh ? -ENOSYS : 0;
    if (produce)
        r = conn_send(c, argv, &o, produce, ctx, &res, &sent);
    else
        r = conn_run(c, argv, finish_s, &res);
    hj->ended = c->ssh ? -ENOSYS : c->ended;
    hj->silent = r < 0 && c->ssh && (c->silent || !ssh_conn_is_alive(c->ssh));
    if (ret_sent)
        *ret_sent = sent;
    if (r < 0) {
        if (c->err[0])
            snprintf(hj->err, sizeof hj->err, "%s", c->err);
        else /* an error with no words was reported as "" (and " (0.0 MiB ... stored on the host)") */
            snprintf(hj->err, sizeof hj->err, "host '%s': %s failed: %s", c->h->name, label ? label : "command",
                     strerror(-r));
        if (r == -ETIMEDOUT || r == -EIO || r == -EINTR)
            host_drop(hj->f, hj->host);
        return r;
    }
    if (res.status != 0) {
        char reason[512];
        int status = res.status;
        (void)exec_result_reason(&res, reason, sizeof reason);
        exec_result_done(&res);
        /* The host shell's own stderr (each container's is kept apart, SH_FAN): a store under
         * staging_dir that cannot be written is the host's, not an agent's (the survey took it
         * for a missing agent), and no retry mends it (-EROFS: said, not retried) */
        if (objsync_said_store_unwritable(reason)) {
            objsync_store_unwritable_message(hj->err, sizeof hj->err, hj->f->inv->staging_dir, c->h->name,
                                             reason);
            return -EROFS;
        }
        snprintf(hj->err, sizeof hj->err, "host '%s': %s failed (exit %d): %s", c->h->name,
                 label ? label : "command", status, reason);
        return -EIO;
    }
    if (ret)
        *ret = res;
    else
        exec_result_done(&res);
    return 0;
}

static int host_sh(struct host_job *hj, const char *script, const char *a1, const char *a2,
                   send_produce_fn produce, void *ctx, uint64_t total, const char *label, double finish_s,
                   struct exec_result *ret, uint64_t *ret_sent)
{
    const char *argv[] = { "sh", "-c", script, "sh", a1, a2, NULL };
    return host_argv(hj, argv, produce, ctx, total, label, finish_s, ret, ret_sent);
}

struct idxv {
    size_t *v;
    size_t n;
};

static int collect_range(size_t start, size_t count, void *ctx)
{
    bool *need = ctx;
    for (size_t i = start; i < start + count; i++)
        need[i] = true;
    return 0;
}

static int collect_sub(size_t start, size_t count, void *ctx)
{
    struct idxv *x = ctx;
    for (size_t i = start; i < start + count; i++)
        x->v[x->n++] = i; /* positions in the list sent */
    return 0;
}

static int idx_by_sha(const void *a, const void *b, void *mp)
{
    const struct manifest2 *m = mp;
    return strcmp(m->e[*(const size_t *)a].sha256, m->e[*(const size_t *)b].sha256);
}

/* Objects of `list` the host store lacks: their entry indexes into ret (allocated). */
static int host_lacks(struct host_job *hj, const size_t *list, size_t n, struct idxv *ret)
{
    char *sd = (char *)hj->f->inv->staging_dir;
    struct list_src ls = { hj->rs->m, list, n };
    struct exec_result res;
    int r = host_sh(hj, SH_LACKS, sd, NULL, produce_list, &ls, 0, NULL, 60 + (double)n / 2000, &res, NULL);
    if (r < 0)
        return r;
    struct idxv pos = { calloc(n ? n : 1, sizeof(size_t)), 0 };
    if (!pos.v) {
        exec_result_done(&res);
        return -ENOMEM;
    }
    r = m2_ranges_parse(res.out, res.out_len, n, collect_sub, &pos);
    exec_result_done(&res);
    if (r < 0) {
        free(pos.v);
        snprintf(hj->err, sizeof hj->err, "host '%s': unreadable answer listing its objects",
                 hj->f->inv->hosts[hj->host].name);
        return r;
    }
    for (size_t i = 0; i < pos.n; i++)
        pos.v[i] = list[pos.v[i]];
    *ret = pos;
    return 0;
}

/* Stream the objects host lacks into its store, in packs, retrying a failed pack with backoff
 * after reconnecting and asking again what arrived. */
/* The entries of list[0..n) whose object host_lacks names (sha256 lines, as SH_FAN's ask-lacks
 * prints them), in list's order, into ret (allocated).  -EBADMSG for a line that is not a sha256. */
int objsync_lacks_filter(const char *text, size_t len, const struct manifest2 *m, const size_t *list, size_t n,
                         size_t **ret, size_t *ret_n)
{
    size_t cnt = 0;
    for (size_t pos = 0; pos < len; pos += SHA256_HEX_LEN + 1) {
        char sha[SHA256_HEX_LEN + 1];
        if (len - pos < SHA256_HEX_LEN + 1 || text[pos + SHA256_HEX_LEN] != '\n')
            return -EBADMSG;
        memcpy(sha, text + pos, SHA256_HEX_LEN);
        sha[SHA256_HEX_LEN] = '\0';
        if (!sha256_is_hex(sha))
            return -EBADMSG;
        cnt++;
    }
    size_t *v = calloc(n ? n : 1, sizeof *v), k = 0;
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n && cnt; i++) {
        const char *want = m->e[list[i]].sha256;
        for (size_t pos = 0; pos < len; pos += SHA256_HEX_LEN + 1) /* a few lines: a code change */
            if (!memcmp(text + pos, want, SHA256_HEX_LEN)) {
                v[k++] = list[i];
                break;
            }
    }
    *ret = v;
    *ret_n = k;
    return 0;
}

/* After the deadline of the exec that ran the agent calls marked token in cts[0..n) fired, or
 * the operator interrupted it (why: -ETIMEDOUT, -EINTR): end what is left of them in the
 * containers (pct_end_calls, in a new session: the stalled one was dropped) and add to hj->err
 * what was done.  Left, a stopped `release install` stayed in its container for good, and a
 * merely slow `release missing` went on after drover had reported it failed.  what: the step
 * ("release install").  After an interrupt, installs ended and calls that could not be are also
 * said on stderr: the caller then says the interrupt, not hj->err. */
static void host_end_calls(struct host_job *hj, const int *cts, int n, const char *token, const char *what,
                           int why)
{
    const struct inventory *inv = hj->f->inv;
    const struct inv_ct *cs[INV_MAX_CTS];
    int cnt[INV_MAX_CTS], conn_ended = hj->ended;
    if (n <= 0 || n > INV_MAX_CTS)
        return;
    for (int k = 0; k < n; k++)
        cs[k] = &hj->job->cts[cts[k]];
    const char *toks[INV_MAX_CTS];
    for (int k = 0; k < n; k++)
        toks[k] = token; /* one call in all of them */
    struct conn *c = NULL;
    /* a host whose session had dropped, or that let a follow-up wait for nothing: not tried
     * again (a reconnect and a follow-up, up to 10 s each, for every stalled call) */
    int r = hj->silent ? -ENOTCONN : fleet_conn(hj->f, hj->host, &c);
    if (r == 0)
        r = pct_end_calls(c, cs, n, toks, PCT_END_TIMEOUT_S, cnt);
    if (r == -ETIMEDOUT || r == -ENOTCONN || r == -EIO)
        host_drop(hj->f, hj->host);
    char ended[400] = "", left[600] = "";
    size_t eo = 0, lo = 0;
    for (int k = 0; k < n; k++) {
        /* a local root: its process group was ended with the host exec (conn.c), the scan
         * after it found what had left the group */
        bool gone = r == 0 && (cnt[k] > 0 || (cnt[k] == 0 && cs[k]->vmid < 0 && conn_ended > 0));
        if (r == 0 && cnt[k] >= 0)
            log_debug("%s: %d %s of the call %s ended", cs[k]->label, cnt[k], text_plural(cnt[k], "process",
                      "processes"), token);
        if (gone) {
            int w = snprintf(ended + eo, sizeof ended - eo, "%s%s", eo ? ", " : "", cs[k]->label);
            eo += w > 0 && (size_t)w < sizeof ended - eo ? (size_t)w : 0;
        } else if (r < 0 || cnt[k] < 0) {
            int w = snprintf(left + lo, sizeof left - lo, "%s%s (%.200s)", lo ? ", " : "", cs[k]->label,
                             pct_end_why(r, r == 0 ? cnt[k] : 0, c ? c->err : NULL));
            lo += w > 0 && (size_t)w < sizeof left - lo ? (size_t)w : 0;
        }
    }
    bool install = strstr(what, "release install") != NULL;
    char step[160];
    if (install)
        snprintf(step, sizeof step, "release install");
    else
        snprintf(step, sizeof step, "step '%s'", what);
    char more[1100] = "";
    size_t mo = 0;
    /* a local host's words for the host exec's process group (conn.c) are of the same calls:
     * said once, below */
    if (eo)
        conn_unsay_ended(hj->err, conn_ended);
    if (eo) {
        int w = snprintf(more, sizeof more, "; drover ended the %s %s in %s (SIGTERM, then SIGKILL%s)",
                         why == -EINTR ? "interrupted" : "stalled", step, ended,
                         install ? "; nothing of it was made current" : "");
        mo = w > 0 && (size_t)w < sizeof more ? (size_t)w : 0;
    }
    if (lo)
        snprintf(more + mo, sizeof more - mo, "; drover could not end the %s in %s: it may still be running "
                 "there (`drover status --job %s`)", step, left, hj->job->name);
    /* after a Ctrl-C the caller says the interrupt instead of hj->err: an install ended (which
     * the operator may wonder about), or anything that could not be, is said here */
    if (more[0] && why == -EINTR && (install || lo))
        fprintf(stderr, "host %s: %s\n", inv->hosts[hj->host].name, more + 2);
    size_t el = strlen(hj->err);
    if (more[0] && el < sizeof hj->err - 1)
        snprintf(hj->err + el, sizeof hj->err - el, "%s", more);
}

/* The install that follows the staging (host_round's step 4), for host_fill to run in the exec of
 * its last pack: the host stores the pack, then tars what the containers lack into each agent. */
struct fan_install {
    const int *cts;             /* job containers of the host to install into */
    int n;
    struct agent_argv *av;      /* their `release install` argvs */
    const struct list_src *list; /* every object the containers lack */
    double timeout_s;           /* the install's own deadline after the last byte */
    struct exec_result *res;    /* as host_fan's: the answer, ret[k] pointing into it */
    struct fan_res *ret;
    bool done;                  /* the install ran in that exec: *res and ret are its answer */
};

enum fan_in { FAN_NONE, FAN_FILE, FAN_PACK, FAN_ASK, FAN_ASK_LACKS, FAN_STAGE };
static int host_fan(struct host_job *hj, const int *cts, int n, struct agent_argv *av, enum fan_in in,
                    const char *src, void *in_ctx, const char *label, uint64_t total, double timeout,
                    const char *what, struct exec_result *res, struct fan_res *ret);

/* known: what the host store lacks of list, when its ask already said (NULL: ask it here).
 * inst (NULL: staging only): the install, run in the same host exec as the last pack (one round
 * trip fewer per host); inst->done says whether it ran there.  It does not when the host store
 * lacked nothing (the caller installs on its own), nor after a failure of that exec once the
 * pack had reached the store: the install may have begun, so it is not run again (reported as
 * an install that failed, as when it had an exec of its own). */
static int host_fill(struct host_job *hj, const size_t *list, size_t n, const struct idxv *known,
                     struct fan_install *inst)
{
    const char *hname = hj->f->inv->hosts[hj->host].name;
    struct idxv lack = { 0 };
    int r = known ? 0 : host_lacks(hj, list, n, &lack);
    if (known)
        lack = *known;
    int attempt = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < lack.n; i++)
        total += hj->rs->m->e[lack.v[i]].size;
    char sz1[96], sz2[96];
    if (lack.n)
        fprintf(stderr, "stage %s: %zu of %zu %s missing on the host, %s to send\n", hname, lack.n, n,
                text_plural(n, "object", "objects"), size_str(total, sz1, sizeof sz1));
    /* a line every objsync_progress_every_s while it runs: 4.4 GiB went by in a minute without
     * a word between "missing on the host" and "sent" */
    uint64_t inst_bytes = 0;
    for (size_t i = 0; inst && i < inst->list->n; i++)
        inst_bytes += hj->rs->m->e[inst->list->idx[i]].size;
    struct ticker tk;
    ticker_start(&tk, hname, total, inst ? inst->n : 0, inst_bytes);
    size_t pos = 0;
    double t0 = time_mono(), t_sent = 0;
    uint64_t sent_ok = 0;
    bool handed_all = false; /* the interrupted exec of the last pack had its last byte */
    bool src_failed = false;  /* a file of the release could not be read into the pack */
    char e2[1024], stale[1024] = "";
    while (r == 0 && pos < lack.n) {
        size_t end = pos;
        uint64_t bytes = 0;
        while (end < lack.n && (end == pos || bytes + hj->rs->m->e[lack.v[end]].size <= PACK_TARGET_BYTES))
            bytes += hj->rs->m->e[lack.v[end++]].size;
        struct pack_src ps = { hj->rs, lack.v + pos, end - pos, stale, sizeof stale, 0, &tk };
        ticker_pack(&tk, sent_ok);
        char label[160];
        snprintf(label, sizeof label, "stage %s (%s stored, this pack)", hname,
                 size_of(sent_ok, total, sz1, sizeof sz1));
        uint64_t sent = 0;
        bool merged = inst && end == lack.n;
        double finish = 60 + (double)(end - pos) / 500; /* after the last byte: tar -x, mv */
        struct stage_src ss = { .pack = ps };
        if (merged) {
            /* the last pack, then the install: both deadlines (idle while the pack streams, the
             * install's progress lines after it) as when each had its own exec */
            char len[32];
            ss.list = *inst->list;
            snprintf(len, sizeof len, "%zu", inst->list->n * (size_t)(SHA256_HEX_LEN + 1));
            r = host_fan(hj, inst->cts, inst->n, inst->av, FAN_STAGE, len, &ss, label, bytes,
                         finish + inst->timeout_s, "stage and release install", inst->res, inst->ret);
        } else {
            r = host_sh(hj, SH_RECV_PACK, hj->f->inv->staging_dir, NULL, produce_pack, &ps, bytes, label, finish,
                        NULL, &sent);
        }
        if (r == 0) {
            hj->stats.bytes_to_hosts += bytes;
            hj->stats.objects_to_hosts += end - pos;
            sent_ok += bytes;
            pos = end;
            attempt = 0;
            if (merged) {
                inst->done = true;
                if (ss.sent_at > t0)
                    t_sent = ss.sent_at;
            }
            continue;
        }
        /* interrupted in this exec (not in a retry's backoff below) after its last byte */
        handed_all = send_interrupted && merged && ss.sent_at > 0;
        /* a file here that could not be read (the pack was cut there: the host stored none of
         * it): said as such, once, not resent four times with the connection's words, which
         * over SSH were none -- the channel itself had not failed */
        if ((merged ? ss.pack.src_err : ps.src_err) < 0) {
            src_failed = true;
            break;
        }
        if (objsync_said_disk_full(hj->err)) {
            /* not transient: it was retried 4 times, the whole pack resent each time, and the
             * words "disk full" never came (tar: "Wrote only 2560 of 10240 bytes").  With the
             * install in the same exec the container's own words may be the ones: kept as said */
            if (merged)
                break;
            char said[sizeof hj->err];
            (void)str_copy(said, sizeof said, hj->err);
            int w = snprintf(hj->err, sizeof hj->err, "disk full on the host under staging_dir "
                             "'%.200s' (%.600s): free space there (`drover gc` removes objects no "
                             "release needs), then deploy again", hj->f->inv->staging_dir, said);
            (void)w;
            break;
        }
        /* an answer that came but cannot be read: the install ran; a store that cannot be
         * written (host_argv: -EROFS) stays so, each retry resending the whole pack */
        if (send_interrupted || r == -EROFS || r == -ESTALE || (merged && r == -EBADMSG) || ++attempt >= SEND_ATTEMPTS)
            break;
        /* Ask again: what is still missing from here on.  With the install in this exec, first:
         * whether the pack reached the store decides whether it is retried at all, and a
         * "retry 1 of 4" came before the failure of an install that was never retried. */
        struct idxv again;
        int failed = r;
        bool asked = merged;
        if (asked && (r = host_lacks(hj, lack.v + pos, lack.n - pos, &again)) < 0)
            break;
        if (asked && !again.n) {
            /* the pack reached the store, so the exec went on to the install: not run twice (it
             * may have installed, or be installing still: the next deploy asks) */
            free(again.v);
            sent_ok += bytes;
            r = failed;
            /* (a deadline's install was ended by host_fan: hj->err says so) */
            snprintf(e2, sizeof e2, "%.900s (after the last pack reached the host store, during the install "
                     "into its containers)", hj->err);
            (void)str_copy(hj->err, sizeof hj->err, e2);
            break;
        }
        int wait = 1 << (attempt - 1);
        fprintf(stderr, "stage %s: %s (%s stored before this pack); retry %d of %d in %ds\n", hname, hj->err,
                size_str(sent_ok, sz1, sizeof sz1), attempt, SEND_ATTEMPTS - 1, wait);
        sleep((unsigned)wait);
        if (!asked && (r = host_lacks(hj, lack.v + pos, lack.n - pos, &again)) < 0)
            break;
        memcpy(lack.v + pos, again.v, again.n * sizeof *again.v);
        lack.n = pos + again.n;
        free(again.v);
    }
    ticker_stop(&tk); /* before the lines below: none of its own between their parts */
    hj->stats.bytes_sent += tk.wire;
    if (r == 0 && lack.n) {
        /* the rate up to the last byte sent: the install's time in the same exec is not staging */
        double now = time_mono(), el = (t_sent > 0 ? t_sent : now) - t0;
        char line[300], more[120] = "";
        if (inst && inst->done)
            snprintf(more, sizeof more, ", installed in %d %s in the same exec %.1fs later", inst->n,
                     text_plural(inst->n, "container", "containers"), now - t_sent);
        /* one line in one write: other hosts' threads say theirs at the same time */
        fprintf(stderr, "%s%s\n", objsync_sent_line(hname, lack.n, sent_ok, el, line, sizeof line), more);
    } else if (r < 0 && r != -EINTR) {
        /* the pack's own failure, which the connection's error (empty) does not say: the
         * reason was a bare "(0.0 MiB of 286.1 MiB stored on the host)" */
        if ((r == -ESTALE || src_failed) && stale[0])
            (void)str_copy(hj->err, sizeof hj->err, stale);
        snprintf(e2, sizeof e2, "%.900s (%s stored on the host)", hj->err, size_of(sent_ok, total, sz2, sizeof sz2));
        (void)str_copy(hj->err, sizeof hj->err, e2);
    }
    if (send_interrupted) {
        if (pos < lack.n && !handed_all)
            hj->stats.hosts_cut_sending++;
        snprintf(hj->err, sizeof hj->err, "interrupted by the operator while staging to host '%s'", hname);
        r = -EINTR;
    }
    free(lack.v);
    return r;
}

int objsync_fan_parse(const char *out, size_t len, int n, struct fan_res *ret)
{
    for (int k = 0; k < n; k++)
        ret[k] = (struct fan_res){ .status = -1 };
    size_t pos = 0;
    int seen = 0;
    while (pos < len) {
        const char *nl = memchr(out + pos, '\n', len - pos);
        if (!nl || (size_t)(nl - (out + pos)) > 100)
            return -EBADMSG;
        char line[128];
        size_t ll = (size_t)(nl - (out + pos));
        memcpy(line, out + pos, ll);
        line[ll] = '\0';
        int k, st, used = 0;
        unsigned long long ob, eb;
        if (!strncmp(line, "@@progress ", 11) && line[11] && str_is_digits(line + 11, 20)) {
            pos += ll + 1; /* liveness while packs stream: nothing to keep */
            continue;
        }
        if (sscanf(line, "@@fan %d %d %llu %llu%n", &k, &st, &ob, &eb, &used) != 4 || used != (int)ll || k < 0 ||
            k >= n || ret[k].status != -1 || st < 0 || st > 255)
            return -EBADMSG;
        pos += ll + 1;
        if (ob > len - pos || eb > len - pos - ob)
            return -EBADMSG;
        ret[k].status = st;
        ret[k].out = out + pos;
        ret[k].out_len = (size_t)ob;
        ret[k].err = out + pos + ob;
        ret[k].err_len = (size_t)eb;
        pos += ob + eb;
        seen++;
    }
    return seen == n ? 0 : -EBADMSG;
}

struct stall_step {
    const char *what, *one, *many; /* the agent command; the step said of one agent, of several */
};

static const struct stall_step stall_steps[] = {
    { "release have", "asked it whether it already holds the release",
      "asked them whether they already hold the release" },
    { "release missing", "asked it which objects it lacks", "asked them which objects they lack" },
    { "release install", "sent it the release's objects", "sent them the release's objects" },
    { "stage and release install", "sent it the release's objects", "sent them the release's objects" },
    { "release verify", "asked it to verify the release", "asked them to verify the release" },
    { "lease", "asked it for the job's deploy lease", "asked them for the job's deploy lease" },
    { "status", "asked it for the job's status", "asked them for the job's status" },
    { "lease status", "asked it for the job's status with its deploy lease",
      "asked them for the job's status with its deploy lease" },
};

void objsync_stall_msg(const char *what, const char *const *labels, int n, double timeout_s, const char *job,
                       char *buf, size_t sz)
{
    char where[512] = "", step[160];
    size_t off = 0;
    for (int k = 0; k < n && off < sizeof where; k++) {
        int w = snprintf(where + off, sizeof where - off, "%s%s", k ? ", " : "", labels[k]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    const struct stall_step *s = NULL;
    for (size_t i = 0; what && i < sizeof stall_steps / sizeof stall_steps[0]; i++)
        if (!strcmp(what, stall_steps[i].what))
            s = &stall_steps[i];
    if (s)
        snprintf(step, sizeof step, "%s", n > 1 ? s->many : s->one);
    else
        snprintf(step, sizeof step, "ran `drover-agent %s` there", what && what[0] ? what : "...");
    bool many = n > 1;
    snprintf(buf, sz,
             "the %s in %s did not %sanswer within %.0fs while drover %s: is drover-agent stopped or hung %s, "
             "or the host no longer answering? `drover status --job %s` shows %s",
             many ? "agents" : "agent", where, many ? "all " : "", timeout_s, step,
             many ? "in one of them" : "there", job && job[0] ? job : "JOB", many ? "which" : "it");
}

/* Run agent command av[k] in container cts[k] (all on hj's host) at once, through one host
 * exec (SH_FAN).  ret[k] points into *res (caller frees it with exec_result_done).  FAN_ASK,
 * FAN_ASK_LACKS: src is the release id and hj->rs's manifest goes to the host on stdin (SH_FAN
 * says what the host does with it); FAN_ASK_LACKS's ret[n] is the host store's answer.
 * FAN_PACK: in_ctx is the list_src of the objects to tar into each agent; FAN_STAGE: a
 * stage_src (that list, then the pack the host stores first), src the list's length in bytes.
 * label, total: the progress line of the bytes sent (NULL, 0: none). */
static int host_fan(struct host_job *hj, const int *cts, int n, struct agent_argv *av, enum fan_in in,
                    const char *src, void *in_ctx, const char *label, uint64_t total, double timeout,
                    const char *what, struct exec_result *res, struct fan_res *ret)
{
    static const char *const modes[] = { [FAN_NONE] = "none", [FAN_FILE] = "file", [FAN_PACK] = "pack",
                                         [FAN_ASK] = "ask", [FAN_ASK_LACKS] = "ask-lacks", [FAN_STAGE] = "stage" };
    struct text_src ts = { hj->rs ? hj->rs->text : NULL, hj->rs ? hj->rs->len : 0 };
    send_produce_fn produce = in == FAN_PACK    ? produce_list
                              : in == FAN_STAGE ? produce_stage
                              : in == FAN_ASK || in == FAN_ASK_LACKS ? produce_text
                                                                     : NULL;
    void *pctx = in == FAN_PACK || in == FAN_STAGE ? in_ctx : (void *)&ts;
    const struct inventory *inv = hj->f->inv;
    char token[PCT_CALL_MAX], mark[PCT_MARK_MAX]; /* one call: every container's part of this exec */
    pct_call_new(token);
    pct_call_mark(token, mark);
    size_t cap = 8 + (size_t)n * (PCT_ARGV_MAX + 1);
    const char **argv = calloc(cap, sizeof *argv);
    char(*nums)[8] = calloc((size_t)n + 1, sizeof *nums);
    char(*vmids)[16] = calloc((size_t)n + 1, sizeof *vmids);
    int r = argv && nums && vmids ? 0 : -ENOMEM;
    size_t a = 0;
    if (r == 0) {
        argv[a++] = "sh";
        argv[a++] = "-c";
        argv[a++] = SH_FAN;
        argv[a++] = "sh";
        argv[a++] = inv->staging_dir;
        argv[a++] = modes[in];
        argv[a++] = src ? src : "-";
    }
    for (int k = 0; r == 0 && k < n; k++) {
        const char *full[PCT_ARGV_MAX];
        if ((r = agent_argv_end(&av[k])) < 0 ||
            (r = pct_agent_call_argv(inv, &hj->job->cts[cts[k]], av[k].argv, mark, full, vmids[k])) < 0) {
            snprintf(hj->err, sizeof hj->err, "%s: too many arguments", hj->job->cts[cts[k]].label);
            break;
        }
        size_t m = 0;
        while (full[m])
            m++;
        snprintf(nums[k], sizeof nums[k], "%zu", m);
        argv[a++] = nums[k];
        memcpy(argv + a, full, m * sizeof *argv);
        a += m;
    }
    if (r == 0) {
        double t0 = time_mono();
        r = host_argv(hj, argv, produce, pctx, total, label, timeout, res, NULL);
        if (r == -ETIMEDOUT && !(in == FAN_STAGE || in == FAN_PACK)) {
            /* host_argv said the transport's words, which quote SH_FAN: say the step instead.  A
             * transfer's stall keeps its own message (how far it got, which deadline). */
            const char *labels[INV_MAX_CTS];
            for (int k = 0; k < n && k < INV_MAX_CTS; k++)
                labels[k] = hj->job->cts[cts[k]].label;
            objsync_stall_msg(what, labels, n < INV_MAX_CTS ? n : INV_MAX_CTS, timeout, hj->job->name, hj->err,
                              sizeof hj->err);
        }
        /* what the deadline or the Ctrl-C gave up on is ended in the containers, not left there
         * (closing the channel reaches only the host's shell).  A last pack whose bytes were
         * not all sent stopped the exec before its install: the host shell was still storing
         * the pack, and no container had been called (nothing to end, nothing to say) */
        bool called = in != FAN_STAGE || ((const struct stage_src *)in_ctx)->sent_at > 0;
        if ((r == -ETIMEDOUT || r == -EINTR) && called)
            host_end_calls(hj, cts, n, token, what, r);
        log_debug("objsync %s: %s in %d %s: %.2fs", inv->hosts[hj->host].name, what, n,
                  text_plural(n, "container", "containers"), time_mono() - t0);
    }
    if (r == 0 && (res->out_truncated ||
                   (r = objsync_fan_parse(res->out, res->out_len, n + (in == FAN_ASK_LACKS), ret)) < 0)) {
        snprintf(hj->err, sizeof hj->err, "host '%s': unreadable answer from %s in its containers",
                 inv->hosts[hj->host].name, what);
        exec_result_done(res);
        r = -EBADMSG;
    }
    free(argv);
    free(nums);
    free(vmids);
    return r;
}

void objsync_fan_reason(const struct fan_res *f, char *buf, size_t sz)
{
    const char *t = f->err_len ? f->err : f->out;
    size_t l = f->err_len ? f->err_len : f->out_len;
    while (l && (t[l - 1] == '\n' || t[l - 1] == ' '))
        l--;
    const char *nl = memrchr(t, '\n', l);
    if (nl) { /* the last line says why */
        l -= (size_t)(nl + 1 - t);
        t = nl + 1;
    }
    if (l) {
        snprintf(buf, sz, "%.*s", (int)(l < 400 ? l : 400), t);
        return;
    }
    /* nothing said: a command killed by a signal (128 + N through pct exec) says nothing itself;
     * `exit 137: ` was all an install killed -9 in its container gave */
    if (f->status > 128 && f->status < 128 + NSIG)
        snprintf(buf, sz, "killed by signal %d (%s), nothing said", f->status - 128,
                 sigabbrev_np(f->status - 128) ? sigabbrev_np(f->status - 128) : "?");
    else
        snprintf(buf, sz, "it said nothing");
}

int objsync_fan_agents(struct fleet *f, const struct inv_job *job, int host, const int *cts, int n,
                       struct agent_argv *av, double timeout_s, const char *what, struct exec_result *ret_res,
                       struct fan_res *ret, char *err, size_t err_sz)
{
    struct host_job hj = { .f = f, .job = job, .host = host };
    struct exec_result res = { 0 };
    struct fan_res *fr = calloc((size_t)(n ? n : 1), sizeof *fr);
    if (!fr)
        return -ENOMEM;
    int r = host_fan(&hj, cts, n, av, FAN_NONE, NULL, NULL, NULL, 0, timeout_s, what, &res, fr);
    if (r < 0) {
        (void)str_copy(err, err_sz, hj.err);
        free(fr);
        return r;
    }
    memcpy(ret, fr, (size_t)n * sizeof *fr);
    free(fr);
    *ret_res = res;
    return 0;
}

/* One host's containers, all at once, in a few host execs: `release have` (an installed
 * release -- typically the environment -- stops here), then one exec that prepares the store,
 * keeps the manifest there and asks `release missing -` (manifest on stdin) in every container
 * -- and, for a small release, which of its objects the host store lacks -- then the staging
 * and, in the exec of the last pack, `release install M -` with a pack tarred from the host store
 * straight into each agent (no pack file, no `pct push`).  A one-file change of a code release:
 * two host execs (ask; stage and install). */
static int host_round(struct host_job *hj, bool *ret_again)
{
    const struct inventory *inv = hj->f->inv;
    const struct relsrc *rs = hj->rs;
    const struct manifest2 *m = rs->m;
    const char *hname = inv->hosts[hj->host].name;
    int cts[INV_MAX_CTS], n = 0, want[INV_MAX_CTS], nw = 0;
    for (int i = 0; i < hj->job->ncts; i++)
        if (hj->job->cts[i].host == hj->host)
            cts[n++] = i;
    *ret_again = false;
    if (!n)
        return 0;
    struct agent_argv *av = calloc((size_t)n, sizeof *av);
    struct fan_res fr[INV_MAX_CTS + 1];
    char *hlacks = NULL; /* ask-lacks: the host store's answer (sha256 lines) */
    size_t hlacks_len = 0;
    struct idxv known = { 0 };
    bool *need = calloc(m->n ? m->n : 1, sizeof *need);
    size_t *list = calloc(m->nfiles ? m->nfiles : 1, sizeof *list);
    struct exec_result res = { 0 };
    char(*cman)[800] = NULL; /* install: each container's manifest path */
    int r = av && need && list ? 0 : -ENOMEM;
    double tq = time_mono();
    /* 1. which containers have it already (the agent's record of a verified install, and its
     * tree stat-ed by the record-based verify: one changed on disk is absent).  Asked only of a
     * large release (an environment): for a small one, `release missing` below answers
     * "present" as cheaply from its short manifest, and a changed code release -- the common
     * case, absent everywhere -- is spared a round trip into every container.  Both walk the
     * release's entries now: both get the time that takes. */
    double ask_t = inv->exec_timeout_s + (double)m->n / 5000 + (double)rs->len / 1e6;
    bool ask_have = m->n >= OBJSYNC_HAVE_MIN_ENTRIES || rs->len >= OBJSYNC_HAVE_MIN_BYTES;
    if (r == 0 && ask_have) { /* stale temp files go at every contact, also one that ends here */
        if ((r = host_sh(hj, SH_PREP, inv->staging_dir, NULL, NULL, NULL, 0, "prepare the store",
                         inv->exec_timeout_s, &res, NULL)) == 0)
            exec_result_done(&res);
    }
    for (int k = 0; k < n && !ask_have; k++)
        want[nw++] = cts[k];
    for (int k = 0; k < n && ask_have; k++) {
        agent_argv_init(&av[k]);
        agent_argv_release_have(&av[k], rs->id);
    }
    if (r == 0 && ask_have &&
        (r = host_fan(hj, cts, n, av, FAN_NONE, NULL, NULL, NULL, 0, ask_t, "release have", &res,
                      fr)) == 0) {
        char line[RELEASE_ID_LEN + 16];
        snprintf(line, sizeof line, "%s present\n", rs->id);
        for (int k = 0; k < n; k++) {
            /* an agent without `have` (exit 2) is simply asked the long way */
            if (fr[k].status == 0 && fr[k].out_len == strlen(line) && !memcmp(fr[k].out, line, fr[k].out_len))
                fprintf(stderr, "push %s: %.12s already in the container\n", hj->job->cts[cts[k]].label, rs->id);
            else
                want[nw++] = cts[k];
        }
        exec_result_done(&res);
    }
    if (r < 0 || !nw)
        goto out;
    /* 2. the store prepared and the manifest kept there (GC reads it there), what each container
     * lacks, and for a small release what the host store lacks: one host exec */
    enum fan_in ask = ask_have ? FAN_ASK : FAN_ASK_LACKS;
    for (int k = 0; k < nw; k++) {
        agent_argv_init(&av[k]);
        agent_argv_release_missing(&av[k], "-");
    }
    if ((r = host_fan(hj, want, nw, av, ask, rs->id, NULL, NULL, 0, ask_t, "release missing", &res, fr)) < 0)
        goto out;
    if (ask == FAN_ASK_LACKS && fr[nw].status == 0 && (hlacks = malloc(fr[nw].out_len + 1))) {
        memcpy(hlacks, fr[nw].out, fr[nw].out_len);
        hlacks_len = fr[nw].out_len;
    }
    int ninst = 0;
    for (int k = 0; k < nw && r == 0; k++) {
        const struct inv_ct *ct = &hj->job->cts[want[k]];
        if (fr[k].status != 0) {
            char why[512];
            objsync_fan_reason(&fr[k], why, sizeof why);
            snprintf(hj->err, sizeof hj->err, "%s: drover-agent release missing failed (exit %d): %s", ct->label,
                     fr[k].status, why);
            r = -EIO;
        } else if (fr[k].out_len == 8 && !memcmp(fr[k].out, "present\n", 8)) {
            fprintf(stderr, "push %s: %.12s already in the container\n", ct->label, rs->id);
        } else if ((r = m2_ranges_parse(fr[k].out, fr[k].out_len, m->n, collect_range, need)) < 0) {
            snprintf(hj->err, sizeof hj->err, "%s: unreadable answer from release missing", ct->label);
        } else {
            want[ninst++] = want[k];
        }
    }
    exec_result_done(&res);
    log_debug("objsync %s %.12s: asked in %.2fs, %d of %d %s to install", hname, rs->id,
              time_mono() - tq, ninst, n, text_plural(n, "container", "containers"));
    if (r < 0 || !ninst)
        goto out;
    /* One entry per distinct object. */
    size_t nlist = 0;
    uint64_t pack_bytes = 0;
    for (size_t i = 0; i < m->n; i++)
        if (need[i] && m->e[i].type == M2_FILE) /* an agent's range may span directories and
                                                 * links (no object): list holds nfiles */
            list[nlist++] = i;
    qsort_r(list, nlist, sizeof *list, idx_by_sha, (void *)m);
    size_t u = 0;
    for (size_t i = 0; i < nlist; i++)
        if (!u || strcmp(m->e[list[u - 1]].sha256, m->e[list[i]].sha256))
            list[u++] = list[i];
    nlist = u;
    for (size_t i = 0; i < nlist; i++)
        pack_bytes += m->e[list[i]].size;
    /* 3. what the host store lacks of it (as the ask said, or asked now), into the store, and
     * 4. install: the pack streams from the host store into every agent at once, in the exec of
     * the last pack when there is one (host_fill), else in an exec of its own */
    double ti = time_mono();
    /* one path per container (each agent's root), alive as long as av: the argvs point into it */
    if (!(cman = calloc((size_t)ninst, sizeof *cman))) {
        r = -ENOMEM;
        goto out;
    }
    for (int k = 0; k < ninst; k++) {
        snprintf(cman[k], sizeof cman[k], "%s/incoming/%s.manifest", pct_agent_root(&hj->job->cts[want[k]]), rs->id);
        agent_argv_init(&av[k]);
        agent_argv_release_install(&av[k], cman[k], nlist ? "-" : NULL, rs->id);
        if (hj->lease && hj->lease->may[want[k]])
            agent_argv_install_lease_release(&av[k], hj->lease->job, hj->lease->holder);
    }
    struct list_src ls = { m, list, nlist };
    /* The bytes are watched (tar's progress lines keep the idle deadline of conn_send from
     * firing while they flow); after them the agent links and checks every entry: a total
     * scaled by the number of entries, not bytes. */
    double t = inv->exec_timeout_s + (double)m->n / 2000;
    struct fan_install inst = { .cts = want, .n = ninst, .av = av, .list = &ls, .timeout_s = t, .res = &res, .ret = fr };
    bool said = hlacks && objsync_lacks_filter(hlacks, hlacks_len, m, list, nlist, &known.v, &known.n) == 0;
    if (nlist) {
        r = host_fill(hj, list, nlist, said ? &known : NULL, &inst);
        known.v = NULL; /* host_fill's now */
        if (r < 0) {
            if (inst.done) /* interrupted right after it */
                exec_result_done(&res);
            goto out;
        }
    }
    if (!inst.done) {
        /* the objects go from the host store into the containers: said while it takes long */
        struct ticker tk;
        if (nlist)
            ticker_start(&tk, hname, 0, ninst, pack_bytes);
        r = host_fan(hj, want, ninst, av, nlist ? FAN_PACK : FAN_NONE, NULL, &ls, NULL, 0, t, "release install",
                     &res, fr);
        if (nlist)
            ticker_stop(&tk);
        if (r < 0) /* a deadline's or an interrupt's installs were ended by host_fan */
            goto out;
    }
    for (int k = 0; k < ninst; k++) {
        const struct inv_ct *ct = &hj->job->cts[want[k]];
        if (fr[k].status == 0) {
            fprintf(stderr, "push %s: verified %.12s\n", ct->label, rs->id);
            if (hj->lease && hj->lease->may[want[k]] && memmem(fr[k].out, fr[k].out_len, "' given back\n", 13))
                hj->lease->given[want[k]] = true;
            continue;
        }
        /* Corrupt objects: removed from the host store, sent again on the next round. */
        int ncorrupt = 0;
        char *o = strndup(fr[k].out, fr[k].out_len);
        for (char *p = o; p && (p = strstr(p, "corrupt ")); p += 8) {
            char sha[SHA256_HEX_LEN + 1], path[1200];
            if (strnlen(p + 8, SHA256_HEX_LEN) < SHA256_HEX_LEN)
                break;
            memcpy(sha, p + 8, SHA256_HEX_LEN);
            sha[SHA256_HEX_LEN] = '\0';
            if (!sha256_is_hex(sha))
                continue;
            ncorrupt++; /* several containers may name it: rm -f again is harmless */
            snprintf(path, sizeof path, "%s/objects/%s", inv->staging_dir, sha);
            const char *rm[] = { "rm", "-f", path, NULL };
            struct conn *c;
            struct exec_result rr;
            if (fleet_conn(hj->f, hj->host, &c) == 0 && conn_run(c, rm, inv->exec_timeout_s, &rr) == 0)
                exec_result_done(&rr);
        }
        /* Objects the agent found changed in its own store (written through a release file)
         * and removed: the host store's copy is good, the next round sends it. */
        int nresend = 0;
        for (char *p = o; p && (p = strstr(p, "resend ")); p += 7)
            nresend += strnlen(p + 7, SHA256_HEX_LEN) == SHA256_HEX_LEN;
        free(o);
        char why[512];
        objsync_fan_reason(&fr[k], why, sizeof why);
        if (r == 0)
            snprintf(hj->err, sizeof hj->err, "%s: drover-agent release install failed (exit %d): %s", ct->label,
                     fr[k].status, why);
        if (ncorrupt) {
            fprintf(stderr, "push %s: %d corrupt %s in the store of host '%s': removed, sending again\n",
                    ct->label, ncorrupt, text_plural(ncorrupt, "object", "objects"), hname);
            *ret_again = true;
        }
        if (nresend) {
            fprintf(stderr, "push %s: %d %s in the container had changed since %s stored (written "
                    "through a release file): removed there, sending again\n", ct->label, nresend,
                    text_plural(nresend, "object", "objects"), nresend == 1 ? "it was" : "they were");
            *ret_again = true;
        }
        r = -EBADMSG;
    }
    exec_result_done(&res);
    log_debug("objsync %s %.12s: %s %.1f MiB in %d %s in %.2fs", hname, rs->id,
              inst.done ? "staged and installed" : "installed", (double)pack_bytes / 1048576.0, ninst,
              text_plural(ninst, "container", "containers"), time_mono() - ti);
out:
    free(av);
    free(cman);
    free(need);
    free(list);
    free(hlacks);
    free(known.v);
    return r;
}

static void *host_main(void *arg)
{
    struct host_job *hj = arg;
    int r = 0;
    for (int round = 0; r == 0 && round < 2; round++) {
        bool again = false;
        r = host_round(hj, &again);
        if (r < 0 && again && round == 0)
            r = 0;
        else
            break;
    }
    hj->ret = r;
    return NULL;
}

int objsync_job(struct fleet *f, const struct inv_job *job, const struct relsrc *rs, struct objsync_lease *lease,
                struct sync_stats *stats, char *err, size_t err_sz)
{
    struct host_job hjs[INV_MAX_HOSTS];
    pthread_t th[INV_MAX_HOSTS];
    bool started[INV_MAX_HOSTS] = { false };
    int nh = 0, hosts[INV_MAX_HOSTS];
    bool seen[INV_MAX_HOSTS] = { false };
    for (int i = 0; i < job->ncts; i++)
        if (!seen[job->cts[i].host]) {
            seen[job->cts[i].host] = true;
            hosts[nh++] = job->cts[i].host;
        }
    const char *every = getenv("DROVER_PROGRESS_EVERY"); /* tests: progress lines sooner than 10 s */
    if (every && atof(every) > 0)
        objsync_progress_every_s = atof(every);
    /* Connect first, in this thread: host key refusals and their hints stay in order. */
    for (int k = 0; k < nh; k++) {
        struct conn *c;
        if (fleet_conn(f, hosts[k], &c) < 0) {
            snprintf(err, err_sz, "host '%s' unreachable", f->inv->hosts[hosts[k]].name);
            return -EHOSTUNREACH;
        }
    }
    for (int k = 0; k < nh; k++) {
        hjs[k] = (struct host_job){ .f = f, .job = job, .host = hosts[k], .rs = rs, .lease = lease };
        started[k] = nh > 1 && pthread_create(&th[k], NULL, host_main, &hjs[k]) == 0;
        if (!started[k])
            host_main(&hjs[k]);
    }
    int r = 0;
    for (int k = 0; k < nh; k++) {
        if (started[k])
            pthread_join(th[k], NULL);
        if (stats) {
            stats->bytes_sent += hjs[k].stats.bytes_sent;
            stats->bytes_to_hosts += hjs[k].stats.bytes_to_hosts;
            stats->objects_to_hosts += hjs[k].stats.objects_to_hosts;
            stats->hosts_cut_sending += hjs[k].stats.hosts_cut_sending;
        }
        if (hjs[k].ret < 0 && r == 0) {
            r = hjs[k].ret;
            snprintf(err, err_sz, "%s", hjs[k].err);
        }
    }
    return r;
}

struct ids_src {
    const char *const *ids;
    size_t n;
};

static int produce_ids(void *ctx, send_write_fn w, void *wctx)
{
    const struct ids_src *x = ctx;
    for (size_t i = 0; i < x->n; i++) {
        if (!x->ids[i] || !sha256_is_hex(x->ids[i]))
            continue;
        char line[SHA256_HEX_LEN + 2];
        memcpy(line, x->ids[i], SHA256_HEX_LEN);
        line[SHA256_HEX_LEN] = '\n';
        int r = w(wctx, line, SHA256_HEX_LEN + 1);
        if (r < 0)
            return r;
    }
    return 0;
}

int objsync_gc_host(struct fleet *f, int host, const char *const *keep_ids, size_t n, int keep_n,
                    char *err, size_t err_sz)
{
    struct host_job hj = { .f = f, .host = host };
    struct ids_src src = { keep_ids, n };
    char kn[16];
    snprintf(kn, sizeof kn, "%d", keep_n < 0 ? 0 : keep_n);
    struct exec_result res;
    int r = host_sh(&hj, SH_GC, f->inv->staging_dir, kn, produce_ids, &src, 0, NULL, f->inv->exec_timeout_s,
                    &res, NULL);
    if (r < 0) {
        snprintf(err, err_sz, "%s", hj.err);
        return r;
    }
    int removed = atoi(res.out);
    exec_result_done(&res);
    return removed;
}

/* ---- the controller's manifest cache (state_dir/manifests) ---- */

/* The environment cached manifest mdir/<id> names, from its header ("env <id>" is the third
 * line when there is one): 0 and ret_env ("" none), or -errno. */
static int cache_env_of(const char *mdir, const char *id, char ret_env[RELEASE_ID_LEN + 1])
{
    char p[1200], head[512];
    snprintf(p, sizeof p, "%s/%s", mdir, id);
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, head, sizeof head - 1);
    close(fd);
    if (n < 0)
        return -EIO;
    head[n] = '\0';
    ret_env[0] = '\0';
    const char *e = strstr(head, "\nenv ");
    if (e && strlen(e + 5) > RELEASE_ID_LEN && e[5 + RELEASE_ID_LEN] == '\n') {
        memcpy(ret_env, e + 5, RELEASE_ID_LEN);
        ret_env[RELEASE_ID_LEN] = '\0';
        if (!sha256_is_hex(ret_env))
            ret_env[0] = '\0';
    }
    return 0;
}

static bool id_in(char (*ids)[RELEASE_ID_LEN + 1], size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ids[i], id))
            return true;
    return false;
}

void objsync_cache_add_envs(const char *mdir, char (*ids)[RELEASE_ID_LEN + 1], size_t *n, size_t cap)
{
    size_t n0 = *n;
    for (size_t i = 0; i < n0; i++) {
        char env[RELEASE_ID_LEN + 1];
        if (cache_env_of(mdir, ids[i], env) == 0 && env[0] && !id_in(ids, *n, env) && *n < cap)
            memcpy(ids[(*n)++], env, RELEASE_ID_LEN + 1);
    }
}

struct ment {
    char id[RELEASE_ID_LEN + 1];
    double mtime;
};

static int ment_newest_first(const void *a, const void *b)
{
    const struct ment *x = a, *y = b;
    if (x->mtime != y->mtime)
        return x->mtime < y->mtime ? 1 : -1;
    return strcmp(x->id, y->id);
}

int objsync_gc_cache(const char *mdir, const char *const *keep_ids, size_t nkeep, int keep_n)
{
    DIR *d = opendir(mdir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    struct ment *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (!sha256_is_hex(de->d_name) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            struct ment *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                r = -ENOMEM; /* remove nothing rather than guess */
                break;
            }
            v = nv;
        }
        memcpy(v[n].id, de->d_name, RELEASE_ID_LEN + 1);
        v[n++].mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
    }
    closedir(d);
    /* kept: the ids given (every job's current, previous, good and rollback targets, with their
     * environments, added by the caller), the keep_n newest, and the environments those name */
    size_t kcap = nkeep + n * 2 + 1;
    char(*kept)[RELEASE_ID_LEN + 1] = r == 0 ? calloc(kcap, sizeof *kept) : NULL;
    if (!kept) {
        free(v);
        return r < 0 ? r : -ENOMEM;
    }
    size_t nk = 0;
    for (size_t i = 0; i < nkeep; i++)
        if (keep_ids[i] && sha256_is_hex(keep_ids[i]) && !id_in(kept, nk, keep_ids[i]))
            memcpy(kept[nk++], keep_ids[i], RELEASE_ID_LEN + 1);
    if (n > 1)
        qsort(v, n, sizeof *v, ment_newest_first);
    size_t newest0 = nk;
    for (size_t i = 0; i < n && i < (size_t)(keep_n > 0 ? keep_n : 0); i++)
        if (!id_in(kept, nk, v[i].id))
            memcpy(kept[nk++], v[i].id, RELEASE_ID_LEN + 1);
    /* written in the last OBJSYNC_CACHE_GRACE_S, as the host store keeps its own: a deploy in
     * flight (its release is nobody's current yet) keeps its manifests, and a later plan its
     * "environment dropped" warning */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (size_t i = 0; i < n; i++)
        if ((double)now.tv_sec - v[i].mtime < OBJSYNC_CACHE_GRACE_S && !id_in(kept, nk, v[i].id))
            memcpy(kept[nk++], v[i].id, RELEASE_ID_LEN + 1);
    for (size_t i = newest0; i < nk && nk < kcap; i++) {
        char env[RELEASE_ID_LEN + 1];
        if (cache_env_of(mdir, kept[i], env) == 0 && env[0] && !id_in(kept, nk, env))
            memcpy(kept[nk++], env, RELEASE_ID_LEN + 1);
    }
    int removed = 0;
    for (size_t i = 0; i < n; i++) {
        char p[1200];
        if (id_in(kept, nk, v[i].id))
            continue;
        snprintf(p, sizeof p, "%s/%s", mdir, v[i].id);
        if (unlink(p) == 0)
            removed++;
    }
    free(kept);
    free(v);
    return removed;
}
