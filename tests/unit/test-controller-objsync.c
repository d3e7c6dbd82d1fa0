/* Unit tests for controller/deploy/objsync.c's fan-out answer (one host shell runs an agent
 * command in each container of the host at once and prints, per container, a header and its
 * output): answers in any order, empty outputs, and every malformed form refused -- a missing
 * or repeated container, lengths past the end, a stray line, a status out of range.  And a host
 * store's GC (run here on a `local = true` host): the kept releases' objects, and those of the
 * environment they name, stay; an unreferenced object goes unless it is younger than 10 minutes
 * (an upload in flight); manifests of releases not kept go.  And the host store's answer to a
 * small release's ask (which objects it lacks) applied to what the containers need. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/objsync.h"
#include "controller/inventory.h"
#include "controller/transport/fleet.h"
#include "controller/transport/send.h"
#include "tests/unit/capture.h"

static int parse(const char *text, int n, struct fan_res *fr)
{
    return objsync_fan_parse(text, strlen(text), n, fr);
}

/* What a failed container command said: `release install` killed -9 in its container (exit 137
 * through pct exec, nothing on stderr) was reported as "failed (exit 137): " and nothing */
static void test_fan_reason(void **state)
{
    (void)state;
    struct fan_res fr[3];
    char why[512];
    assert_int_equal(parse("@@fan 0 137 0 0\n@@fan 1 1 9 15\nout line\nfirst\nlast one\n"
                           "@@fan 2 1 0 0\n", 3, fr), 0);
    objsync_fan_reason(&fr[0], why, sizeof why);
    assert_string_equal(why, "killed by signal 9 (KILL), nothing said");
    objsync_fan_reason(&fr[1], why, sizeof why);
    assert_string_equal(why, "last one"); /* stderr's last line */
    objsync_fan_reason(&fr[2], why, sizeof why);
    assert_string_equal(why, "it said nothing");
}

static void test_fan_parse_ok(void **state)
{
    (void)state;
    struct fan_res fr[3];
    const char *t = "@@fan 1 3 0 4\nerr\n@@fan 0 0 8 0\npresent\n@@fan 2 0 4 2\n0 2\nx\n";
    assert_int_equal(parse(t, 3, fr), 0);
    assert_int_equal(fr[0].status, 0);
    assert_int_equal(fr[0].out_len, 8);
    assert_memory_equal(fr[0].out, "present\n", 8);
    assert_int_equal(fr[0].err_len, 0);
    assert_int_equal(fr[1].status, 3);
    assert_int_equal(fr[1].out_len, 0);
    assert_memory_equal(fr[1].err, "err\n", 4);
    assert_memory_equal(fr[2].out, "0 2\n", 4);
    assert_memory_equal(fr[2].err, "x\n", 2);
    /* progress lines where a header may stand (while packs stream) are skipped */
    t = "@@progress 0\n@@progress 12\n@@fan 0 0 3 0\nok\n@@progress 13\n@@fan 1 0 0 0\n";
    assert_int_equal(parse(t, 2, fr), 0);
    assert_memory_equal(fr[0].out, "ok\n", 3);
    assert_int_equal(fr[1].out_len, 0);
    /* an output holding something that looks like a header is data, not a header */
    t = "@@fan 0 0 14 0\n@@fan 1 0 0 0\n@@fan 1 0 0 0\n";
    assert_int_equal(parse(t, 2, fr), 0);
    assert_int_equal(fr[0].out_len, 14);
    assert_int_equal(fr[1].status, 0);
}

static void test_fan_parse_refused(void **state)
{
    (void)state;
    struct fan_res fr[2];
    assert_int_equal(parse("", 1, fr), -EBADMSG);                                  /* no answer */
    assert_int_equal(parse("@@fan 0 0 0 0\n", 2, fr), -EBADMSG);                    /* one missing */
    assert_int_equal(parse("@@fan 0 0 0 0\n@@fan 0 0 0 0\n", 2, fr), -EBADMSG);     /* repeated */
    assert_int_equal(parse("@@fan 2 0 0 0\n", 2, fr), -EBADMSG);                    /* out of range */
    assert_int_equal(parse("@@fan -1 0 0 0\n", 2, fr), -EBADMSG);
    assert_int_equal(parse("@@fan 0 0 9 0\nshort\n", 1, fr), -EBADMSG);             /* past the end */
    assert_int_equal(parse("@@fan 0 0 0 99999999999999999999\n", 1, fr), -EBADMSG);
    assert_int_equal(parse("@@fan 0 300 0 0\n", 1, fr), -EBADMSG);                  /* status */
    assert_int_equal(parse("@@fan 0 0 0 0\nstray\n", 1, fr), -EBADMSG);             /* stray line */
    assert_int_equal(parse("@@fan 0 0 0 0 extra\n", 1, fr), -EBADMSG);
    assert_int_equal(parse("@@fan 0 0 0 0", 1, fr), -EBADMSG);                      /* no newline */
    assert_int_equal(parse("@@progress \n@@fan 0 0 0 0\n", 1, fr), -EBADMSG);      /* no count */
    assert_int_equal(parse("@@progress 1x\n@@fan 0 0 0 0\n", 1, fr), -EBADMSG);
}

static char tmpd[256];

static void put(const char *rel, const char *text, bool old)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpd, rel);
    assert_int_equal(fs_write_atomic(p, text, strlen(text), 0644), 0);
    if (old) { /* untouched for 20 minutes */
        struct timeval tv[2];
        gettimeofday(&tv[0], NULL);
        tv[0].tv_sec -= 1200;
        tv[1] = tv[0];
        assert_int_equal(utimes(p, tv), 0);
    }
}

static bool exists(const char *rel)
{
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", tmpd, rel);
    return stat(p, &st) == 0;
}

static void id(char c, char out[65])
{
    memset(out, c, 64);
    out[64] = '\0';
}

static void test_host_gc_keeps_ways_back(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-objsync-test.XXXXXX");
    assert_non_null(mkdtemp(tmpd));
    char text[1024], path[256];
    snprintf(text, sizeof text, "[drover]\nstaging_dir = %s/st\nstate_dir = %s/state\n[host me]\nlocal = true\n",
             tmpd, tmpd);
    struct inventory *inv = NULL;
    char err[1024] = "";
    assert_int_equal(inventory_parse(text, strlen(text), "inv.ini", &inv, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/st/objects", tmpd);
    assert_int_equal(fs_mkdir_p(path, 0755), 0);
    snprintf(path, sizeof path, "%s/st/manifests", tmpd);
    assert_int_equal(fs_mkdir_p(path, 0755), 0);
    /* objects: a (current), e (its environment), p (previous), x (nobody's), n (nobody's, young) */
    char a[65], e[65], p[65], x[65], n[65], cur[65], env[65], prev[65], old[65];
    id('a', a), id('e', e), id('b', p), id('c', x), id('d', n);
    id('1', cur), id('2', env), id('3', prev), id('4', old);
    const char *objs[] = { a, e, p, x };
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "st/objects/%s", objs[i]);
        put(path, "bytes", true);
    }
    snprintf(path, sizeof path, "st/objects/%s", n);
    put(path, "arriving", false);
    snprintf(text, sizeof text, "drover-manifest 2\nname cur\nenv %s\nf 0644 5 %s a.py\n", env, a);
    snprintf(path, sizeof path, "st/manifests/%s", cur);
    put(path, text, true);
    snprintf(text, sizeof text, "drover-manifest 2\nname env\nf 0644 5 %s lib/x.py\n", e);
    snprintf(path, sizeof path, "st/manifests/%s", env);
    put(path, text, true);
    snprintf(text, sizeof text, "drover-manifest 2\nname prev\nf 0644 5 %s a.py\n", p);
    snprintf(path, sizeof path, "st/manifests/%s", prev);
    put(path, text, true);
    snprintf(text, sizeof text, "drover-manifest 2\nname old\nf 0644 5 %s a.py\n", x);
    snprintf(path, sizeof path, "st/manifests/%s", old);
    put(path, text, true);

    struct fleet f;
    fleet_init(&f, inv, NULL);
    const char *keep[] = { cur, NULL, prev, "" };
    int removed = objsync_gc_host(&f, 0, keep, 4, 0, err, sizeof err);
    if (removed < 0)
        fprintf(stderr, "gc: %s\n", err);
    assert_int_equal(removed, 1);
    char q[256];
#define HAS(dir, h) (snprintf(q, sizeof q, "st/%s/%s", dir, h), exists(q))
    assert_true(HAS("objects", a));  /* current */
    assert_true(HAS("objects", e));  /* the environment current names */
    assert_true(HAS("objects", p));  /* previous */
    assert_false(HAS("objects", x)); /* nobody's */
    assert_true(HAS("objects", n));  /* nobody's yet, but may be an upload in flight */
    assert_true(HAS("manifests", cur));
    assert_true(HAS("manifests", env));
    assert_true(HAS("manifests", prev));
    assert_false(HAS("manifests", old));
    /* keep 0 and nothing protected: everything old goes, the young object stays */
    const char *none[] = { NULL };
    assert_int_equal(objsync_gc_host(&f, 0, none, 1, 0, err, sizeof err), 3);
    assert_false(HAS("objects", a));
    assert_true(HAS("objects", n));
#undef HAS
    fleet_done(&f);
    inventory_free(inv);
    assert_int_equal(fs_rm_rf(tmpd), 0);
}

static char cdir[64];

static void cache_put(const char *id, const char *env, int age_s)
{
    char p[1200], text[256];
    snprintf(p, sizeof p, "%s/%s", cdir, id);
    int n = snprintf(text, sizeof text, "drover-manifest 2\nname r\n%s%s%sf 0444 1 %064d a\n", env ? "env " : "",
                     env ? env : "", env ? "\n" : "", 0);
    assert_int_equal(fs_write_atomic(p, text, (size_t)n, 0600), 0);
    struct timeval tv[2] = { { time(NULL) - age_s, 0 }, { time(NULL) - age_s, 0 } };
    assert_int_equal(utimes(p, tv), 0);
}

static bool cached(const char *id)
{
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", cdir, id);
    return stat(p, &st) == 0;
}

/* The controller's manifest cache, keep = N: the current, previous and good release of every job
 * (and rollback targets) stay however old, with the environments they name; the N newest stay
 * with the environments they name (an old environment a new release runs with is not "old");
 * everything else goes, and files that are not manifests are left alone. */
static void test_cache_gc_keeps_ways_back(void **state)
{
    (void)state;
    strcpy(cdir, "/tmp/drover-cachegc.XXXXXX");
    assert_non_null(mkdtemp(cdir));
    char id[12][RELEASE_ID_LEN + 1];
    for (int i = 0; i < 12; i++)
        snprintf(id[i], sizeof id[i], "%064x", 0xa0 + i);
    enum { E0, E1, E2, E3, A, B, C, D, E, F, G, H };
    cache_put(id[E0], NULL, 9000); /* env of A (job 1's current) */
    cache_put(id[E1], NULL, 8000); /* env of C (job 2's good) */
    cache_put(id[E2], NULL, 7000); /* env of F, the newest release */
    cache_put(id[E3], NULL, 6000); /* env of nothing kept */
    cache_put(id[A], id[E0], 5000); /* job 1 current: the oldest release */
    cache_put(id[B], NULL, 4000);   /* job 1 previous */
    cache_put(id[C], id[E1], 3500); /* job 2 good */
    cache_put(id[G], id[E3], 3400); /* nobody's */
    cache_put(id[D], NULL, 3000);
    cache_put(id[E], NULL, 2000);
    cache_put(id[H], NULL, 1500); /* job 2 rollback target (an earlier good) */
    cache_put(id[F], id[E2], 700);  /* newest (written over OBJSYNC_CACHE_GRACE_S ago) */
    char other[1200];
    snprintf(other, sizeof other, "%s/%s.tmp.123", cdir, id[D]);
    assert_int_equal(fs_write_atomic(other, "x", 1, 0600), 0);

    char ids[16][RELEASE_ID_LEN + 1];
    size_t n = 0;
    memcpy(ids[n++], id[A], RELEASE_ID_LEN + 1);
    memcpy(ids[n++], id[B], RELEASE_ID_LEN + 1);
    memcpy(ids[n++], id[C], RELEASE_ID_LEN + 1);
    memcpy(ids[n++], id[H], RELEASE_ID_LEN + 1);
    objsync_cache_add_envs(cdir, ids, &n, 16);
    assert_int_equal(n, 6); /* E0 and E1 added, once each */
    const char *keep[17];
    for (size_t i = 0; i < n; i++)
        keep[i] = ids[i];
    keep[n] = NULL; /* a NULL entry (no previous release) is skipped */

    assert_int_equal(objsync_gc_cache(cdir, keep, n + 1, 1), 4); /* D, E, G, E3 */
    int kept[] = { E0, E1, E2, A, B, C, H, F }, gone[] = { D, E, G, E3 };
    for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
        assert_true(cached(id[kept[i]]));
    for (size_t i = 0; i < ARRAY_SIZE(gone); i++)
        assert_false(cached(id[gone[i]]));
    struct stat st;
    assert_int_equal(stat(other, &st), 0);
    /* keep = 0: the newest goes with its environment; the ways back stay */
    assert_int_equal(objsync_gc_cache(cdir, keep, n, 0), 2);
    assert_false(cached(id[F]));
    assert_false(cached(id[E2]));
    for (int i = 0; i < 6; i++)
        assert_true(cached(ids[i]));
    /* no cache yet: nothing to do */
    char none[300];
    snprintf(none, sizeof none, "%s/none", cdir);
    assert_int_equal(objsync_gc_cache(none, keep, n, 5), 0);
    assert_int_equal(fs_rm_rf(cdir), 0);
}

/* `drover gc` during a deploy removed the cache's manifests of the release being deployed
 * (nobody's current yet), and a later plan lost its "environment dropped" warning.  Now a
 * manifest written in the last OBJSYNC_CACHE_GRACE_S stays, with the environment it names, as
 * the host store keeps its own: of two that no job names, only the old one goes. */
static void test_cache_gc_keeps_fresh(void **state)
{
    (void)state;
    strcpy(cdir, "/tmp/drover-cachegc.XXXXXX");
    assert_non_null(mkdtemp(cdir));
    char old[RELEASE_ID_LEN + 1], fresh[RELEASE_ID_LEN + 1], env[RELEASE_ID_LEN + 1];
    snprintf(old, sizeof old, "%064x", 0xb1);
    snprintf(fresh, sizeof fresh, "%064x", 0xb2);
    snprintf(env, sizeof env, "%064x", 0xb3);
    cache_put(env, NULL, OBJSYNC_CACHE_GRACE_S + 3600); /* an old environment the fresh one runs with */
    cache_put(old, NULL, OBJSYNC_CACHE_GRACE_S + 60);
    cache_put(fresh, env, 30); /* the deploy in flight wrote it */
    const char *keep[] = { NULL };
    assert_int_equal(objsync_gc_cache(cdir, keep, 1, 0), 1);
    assert_false(cached(old));
    assert_true(cached(fresh));
    assert_true(cached(env));
    assert_int_equal(fs_rm_rf(cdir), 0);
}

static void old_file(const char *dir, const char *name, const char *text)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(fs_write_atomic(p, text, strlen(text), 0644), 0);
    struct timeval tv[2] = { { time(NULL) - 60, 0 }, { time(NULL) - 60, 0 } };
    assert_int_equal(utimes(p, tv), 0);
}

/* The controller's hash cache: a release directory walked again reads no file that is still
 * the inode it hashed (a multi-GB environment at every code deploy); a file rewritten in place
 * with the same size and its old mtime put back is read again (its ctime moved) and gets its
 * new hash; a file changed within two seconds of the walk is not cached (it could change again
 * within the timestamp granularity, unseen); DROVER_HASH_CACHE=off reads everything. */
static void test_relsrc_hash_cache(void **state)
{
    (void)state;
    char d[64] = "/tmp/drover-hashcache.XXXXXX", src[128], cache[128];
    assert_non_null(mkdtemp(d));
    snprintf(src, sizeof src, "%s/rel", d);
    snprintf(cache, sizeof cache, "%s/cache", d);
    assert_int_equal(fs_mkdir_p(src, 0755), 0);
    old_file(src, "a.py", "a = 1\n");
    old_file(src, "b.py", "b = 2\n");
    char fresh[1200];
    snprintf(fresh, sizeof fresh, "%s/new.py", src);
    assert_int_equal(fs_write_atomic(fresh, "n = 3\n", 6, 0644), 0); /* mtime: now */
    setenv("DROVER_HASH_CACHE", cache, 1);
    objsync_hashcache_racy_ns = 500000000; /* the files' ctimes are from just now (utimes) */
    struct timespec wait = { 0, 600000000 };
    nanosleep(&wait, NULL);
    assert_int_equal(fs_write_atomic(fresh, "n = 4\n", 6, 0644), 0); /* changed right now */
    struct relsrc r1, r2, r3;
    assert_int_equal(relsrc_load(src, NULL, &r1), 0);
    assert_int_equal(r1.hashes_reused, 0);
    assert_int_equal(relsrc_load(src, NULL, &r2), 0);
    assert_int_equal(r2.hashes_reused, 2); /* a.py, b.py; new.py is too fresh to trust */
    assert_string_equal(r1.id, r2.id);
    /* same size, other bytes, old mtime restored: ctime moved, so read again */
    old_file(src, "a.py", "a = 9\n");
    char p[1200];
    snprintf(p, sizeof p, "%s/a.py", src);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a = 7\n", 6), 6);
    close(fd);
    struct timeval tv[2] = { { time(NULL) - 60, 0 }, { time(NULL) - 60, 0 } };
    assert_int_equal(utimes(p, tv), 0);
    nanosleep(&wait, NULL);
    assert_int_equal(relsrc_load(src, NULL, &r3), 0);
    assert_int_equal(r3.hashes_reused, 1); /* b.py only */
    const struct m2_entry *e = manifest2_find(r3.m, "a.py");
    char want[SHA256_HEX_LEN + 1];
    assert_int_equal(sha256_buf_hex("a = 7\n", 6, want), 0);
    assert_string_equal(e->sha256, want);
    relsrc_done(&r3);
    setenv("DROVER_HASH_CACHE", "off", 1);
    assert_int_equal(relsrc_load(src, NULL, &r3), 0);
    assert_int_equal(r3.hashes_reused, 0);
    unsetenv("DROVER_HASH_CACHE");
    objsync_hashcache_racy_ns = 2000000000LL;
    relsrc_done(&r1);
    relsrc_done(&r2);
    relsrc_done(&r3);
    assert_int_equal(fs_rm_rf(d), 0);
}

/* A small release's ask also says which of the manifest's objects the host store lacks (sha256
 * lines): applied to the entries the containers need, in their order; a malformed line refuses
 * the whole answer (the controller then asks the host the long way). */
static void test_lacks_filter(void **state)
{
    (void)state;
    char a[65], b[65], c[65];
    memset(a, 'a', 64);
    memset(b, 'b', 64);
    memset(c, 'c', 64);
    a[64] = b[64] = c[64] = '\0';
    char text[1024];
    snprintf(text, sizeof text, "drover-manifest 2\nname t\nf 0644 1 %s a.py\nd 0755 bin\nf 0755 2 %s bin/run\n"
             "f 0644 3 %s c.txt\nf 0644 1 %s d.py\n", a, b, c, a);
    struct manifest2 *m;
    assert_int_equal(manifest2_parse(text, strlen(text), &m), 0);
    size_t list[] = { 2, 3, 4 }, *v = NULL, nv = 99; /* bin/run, c.txt, d.py */
    char ans[256];
    snprintf(ans, sizeof ans, "%s\n%s\n", c, a); /* the host's order is not ours */
    assert_int_equal(objsync_lacks_filter(ans, strlen(ans), m, list, 3, &v, &nv), 0);
    assert_int_equal(nv, 2);
    assert_int_equal(v[0], 3);
    assert_int_equal(v[1], 4);
    free(v);
    /* the host lacks nothing of it: nothing to stage */
    assert_int_equal(objsync_lacks_filter("", 0, m, list, 3, &v, &nv), 0);
    assert_int_equal(nv, 0);
    free(v);
    /* an object no container needs is not sent */
    snprintf(ans, sizeof ans, "%s\n", b);
    size_t one[] = { 3 };
    assert_int_equal(objsync_lacks_filter(ans, strlen(ans), m, one, 1, &v, &nv), 0);
    assert_int_equal(nv, 0);
    free(v);
    /* refused: no newline, a short line, not hex, a stray line; ret_ untouched */
    const char *bad[] = { "aaaa\n", "x\n", "\n" };
    v = NULL;
    nv = 99;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(objsync_lacks_filter(bad[i], strlen(bad[i]), m, list, 3, &v, &nv), -EBADMSG);
    assert_int_equal(objsync_lacks_filter(a, 64, m, list, 3, &v, &nv), -EBADMSG);
    snprintf(ans, sizeof ans, "%s\n%.63sg\n", a, b);
    assert_int_equal(objsync_lacks_filter(ans, strlen(ans), m, list, 3, &v, &nv), -EBADMSG);
    snprintf(ans, sizeof ans, "%s\nlease\n", a);
    assert_int_equal(objsync_lacks_filter(ans, strlen(ans), m, list, 3, &v, &nv), -EBADMSG);
    assert_null(v);
    assert_int_equal(nv, 99);
    manifest2_free(m);
}

/* A host exec into an agent that stopped answering (kill -STOP) says the step and the container,
 * never the shell script drover ran there (the lab's deploy quoted `sh -c 'mkdir -p "$1" ...'`). */
static void test_stall_msg(void **state)
{
    (void)state;
    char buf[1024];
    const char *one[] = { "h1:101" };
    objsync_stall_msg("release missing", one, 1, 15, "train", buf, sizeof buf);
    assert_non_null(strstr(buf, "the agent in h1:101 did not answer within 15s while drover asked it which "
                                "objects it lacks"));
    assert_non_null(strstr(buf, "drover-agent stopped or hung there"));
    assert_non_null(strstr(buf, "`drover status --job train`"));
    assert_null(strstr(buf, "sh -c"));
    assert_null(strstr(buf, "mkdir"));
    const char *two[] = { "h1:101", "h1:102" };
    objsync_stall_msg("lease", two, 2, 10, "train", buf, sizeof buf);
    assert_non_null(strstr(buf, "the agents in h1:101, h1:102 did not all answer within 10s while drover asked "
                                "them for the job's deploy lease"));
    /* a step without words of its own is named by the agent command, still no script */
    objsync_stall_msg("log tail", one, 1, 15, "train", buf, sizeof buf);
    assert_non_null(strstr(buf, "while drover ran `drover-agent log tail` there"));
    /* truncated, never overrun */
    char small[40];
    objsync_stall_msg("release missing", two, 2, 15, "train", small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* What staging says (the newcomer pass): a 4.4 GiB upload said nothing for a minute; a staging of
 * empty files said "sent 0.00 MiB in 0.0s (0.0 MiB/s)"; an interrupted one "(0.0 MiB stored on
 * hosts)" after 2 GiB had gone. */
static void test_stage_lines(void **state)
{
    (void)state;
    char buf[600];
    const uint64_t GiB = 1ull << 30, MiB = 1ull << 20;
    assert_string_equal(objsync_progress_line("h1", 1288 * MiB, 4500 * MiB, 10.7, buf, sizeof buf),
                        "stage h1: 1.3 of 4.4 GiB sent (120 MiB/s)");
    assert_string_equal(objsync_progress_line("h1", 120 * MiB, 500 * MiB, 4, buf, sizeof buf),
                        "stage h1: 120.0 of 500.0 MiB sent (30 MiB/s)");
    assert_string_equal(objsync_install_wait_line("h1", 4500 * MiB, 36.8, 2, 4500 * MiB, 10.2, buf, sizeof buf),
                        "stage h1: all 4.4 GiB sent in 37s; waiting for 2 containers to store and verify "
                        "4.4 GiB (release install, 10s so far)");
    /* the host store held some of it: what was sent, and what the containers verify */
    assert_string_equal(objsync_install_wait_line("h1", 900 * MiB, 3.4, 2, 917 * MiB, 7, buf, sizeof buf),
                        "stage h1: all 900.0 MiB sent in 3s; waiting for 2 containers to store and verify "
                        "917.0 MiB (release install, 7s so far)");
    assert_string_equal(objsync_install_wait_line("h2", 0, 0, 1, 2 * GiB, 20, buf, sizeof buf),
                        "install h2: waiting for 1 container to store and verify 2.0 GiB (release install, "
                        "20s so far)");
    assert_string_equal(objsync_sent_line("h1", 2, 0, 0.01, buf, sizeof buf),
                        "stage h1: stored 2 objects of empty files (no data to send)");
    assert_string_equal(objsync_sent_line("h1", 1, 12 * MiB / 100, 0.01, buf, sizeof buf),
                        "stage h1: sent 0.1 MiB in 0.0s");
    assert_string_equal(objsync_sent_line("h1", 1, 4500 * MiB, 36.8, buf, sizeof buf),
                        "stage h1: sent 4.4 GiB in 36.8s (122.3 MiB/s)");
    struct sync_stats st = { .bytes_sent = 2 * GiB, .hosts_cut_sending = 1 };
    assert_string_equal(objsync_interrupted_msg(&st, buf, sizeof buf),
                        "interrupted by the operator while staging: 2.0 GiB sent to the hosts, 0.0 MiB of it "
                        "stored there (an object is stored only once the whole of it arrived: the part of one "
                        "sent is not kept, and the next deploy sends those 2.0 GiB again)");
    /* every host had handed over its last byte: the containers were storing it, and the "not
     * kept" of the line above would be false (the Ctrl-C came during store and verify) */
    st = (struct sync_stats){ .bytes_sent = 2 * GiB, .bytes_to_hosts = GiB };
    assert_string_equal(objsync_interrupted_msg(&st, buf, sizeof buf),
                        "interrupted by the operator while the containers stored and verified the release: all "
                        "2.0 GiB had been sent to the hosts (the next deploy asks each host store what it lacks "
                        "and sends only that)");
    st = (struct sync_stats){ .bytes_sent = 64 * MiB, .bytes_to_hosts = 64 * MiB, .hosts_cut_sending = 1 };
    assert_string_equal(objsync_interrupted_msg(&st, buf, sizeof buf),
                        "interrupted by the operator while staging (64.0 MiB stored on the hosts: the next "
                        "deploy does not send it again)");
    st = (struct sync_stats){ .hosts_cut_sending = 2 };
    assert_string_equal(objsync_interrupted_msg(&st, buf, sizeof buf),
                        "interrupted by the operator while staging (nothing sent to the hosts yet)");
}

/* What gc says (the newcomer pass): "removed 0 objects (kept 1 release's and the 5 newest)",
 * "removed 1 manifests". */
static void test_gc_lines(void **state)
{
    (void)state;
    char buf[600];
    assert_string_equal(gc_host_line("h1", 0, 1, 5, buf, sizeof buf),
                        "gc h1: removed 0 objects (kept the objects of 1 release in use and of the 5 newest)");
    assert_string_equal(gc_host_line("h1", 1, 3, 0, buf, sizeof buf),
                        "gc h1: removed 1 object (kept the objects of 3 releases in use)");
    assert_string_equal(gc_host_line("h1", 2, 0, 1, buf, sizeof buf),
                        "gc h1: removed 2 objects (kept the objects of the 1 newest release)");
    assert_string_equal(gc_cache_line("/s/manifests", 1, buf, sizeof buf),
                        "gc: removed 1 cached manifest from '/s/manifests'");
    assert_string_equal(gc_cache_line("/s/manifests", 3, buf, sizeof buf),
                        "gc: removed 3 cached manifests from '/s/manifests'");
    /* each container's `release clean`: what Ctrl-C during store-and-verify left there */
    assert_string_equal(gc_ct_line("h1:101", 2, 734003200, false, buf, sizeof buf),
                        "gc h1:101: removed 2 temp files left by interrupted deploys (700.0 MiB freed)");
    assert_string_equal(gc_ct_line("h1:101", 1, 0, false, buf, sizeof buf),
                        "gc h1:101: removed 1 temp file left by interrupted deploys (0.0 MiB freed)");
    assert_string_equal(gc_ct_line("h2:201", 0, 0, true, buf, sizeof buf),
                        "gc h2:201: no temp files left by interrupted deploys; a deploy holds a lease there, "
                        "so its staged manifests and packs stay (gc again once it is done)");
}

/* A host store that is full: tar's short write was retried 4 times, resending the whole pack,
 * and "disk full" was never said (the adversary pass, a 100 MB tmpfs under staging_dir). */
static void test_said_disk_full(void **state)
{
    (void)state;
    assert_true(objsync_said_disk_full("stage h2: receiving failed (exit 2): tar: 1c38ab: Wrote only "
                                       "2560 of 10240 bytes | tar: Exiting with failure status"));
    assert_true(objsync_said_disk_full("mv: cannot create regular file 'x': No space left on device"));
    assert_true(objsync_said_disk_full("write: Disk quota exceeded"));
    assert_false(objsync_said_disk_full("connection lost"));
    assert_false(objsync_said_disk_full("Wrote only the header")); /* not tar's words */
    assert_false(objsync_said_disk_full(NULL));
}

/* An agent whose install found an object of its store changed in place (a worker wrote through
 * a release file: the release's hardlink is the object) removes it and says "resend <sha>": the
 * host's copy is good, so the push sends it again at once and the install is asked once more.
 * (The old controller knew only "corrupt": the deploy failed, and every later one too.) */
static void test_resend_after_changed_object(void **state)
{
    (void)state;
    char d[] = "/tmp/drover-unit-resend-XXXXXX", p[600], text[2400], why[512], err[1024];
    assert_non_null(mkdtemp(d));
    snprintf(p, sizeof p, "%s/rel", d);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/rel/config.json", d);
    capture_put(p, "{}\n", 0644);
    setenv("DROVER_HASH_CACHE", "off", 1);
    struct relsrc rs;
    snprintf(p, sizeof p, "%s/rel", d);
    assert_int_equal(relsrc_load(p, NULL, &rs), 0);
    const char *sha = rs.m->e[0].sha256;
    /* the first install: the object was changed in place, removed, to be sent again */
    snprintf(text, sizeof text,
             "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*'release missing'*) cat >/dev/null; echo '0 1';;\n"
             "*'release install'*) cat >/dev/null\n"
             "  if [ -e '%s/once' ]; then echo \"$5 added\"; exit 0; fi\n"
             "  : >'%s/once'; echo 'resend %s'\n"
             "  echo 'release install: assembled release does not match its manifest: 1 object no longer matched "
             "its sha256 and was removed from the store, to be sent again' >&2; exit 1;;\n"
             "*) echo ok;;\nesac\n", d, d, d, sha);
    snprintf(p, sizeof p, "%s/agent", d);
    capture_put(p, text, 0755);
    snprintf(text, sizeof text, "[drover]\nstaging_dir = %s/st\n[host h1]\nlocal = true\nagent_path = %s/agent\n"
             "[job mini]\ncontainers = h1:local:%s/a\ncommand = bin/x\n", d, d, d);
    struct inventory *inv = NULL;
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, why, sizeof why), 0);
    struct fleet f;
    fleet_init(&f, inv, NULL);
    struct sync_stats st = { 0 };
    char out[600];
    snprintf(out, sizeof out, "%s/stderr", d);
    fflush(stderr);
    int save = dup(STDERR_FILENO), fe = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    dup2(fe, STDERR_FILENO);
    close(fe);
    int r = objsync_job(&f, &inv->jobs[0], &rs, NULL, &st, err, sizeof err);
    fflush(stderr);
    dup2(save, STDERR_FILENO);
    close(save);
    char *e = capture_slurp(out);
    snprintf(p, sizeof p, "%s/calls", d);
    char *calls = capture_slurp(p);
    if (r != 0 || !strstr(e, "1 object in the container had changed since it was stored"))
        fail_msg("objsync %d (%s)\nstderr: %s\ncalls: %s", r, err, e, calls);
    int ninstall = 0;
    for (const char *c = calls; (c = strstr(c, "release install")); c++)
        ninstall++;
    assert_int_equal(ninstall, 2);
    free(e);
    free(calls);
    fleet_done(&f);
    inventory_free(inv);
    relsrc_done(&rs);
    unsetenv("DROVER_HASH_CACHE");
    assert_int_equal(fs_rm_rf(d), 0);
}


/* One staging of rs by objsync_job into a `local = true` host h1 whose one container is a fake
 * agent (the script agent_text, as d/agent), exec_timeout as given; what it said on stderr into
 * *ret_said (free it). */
static int stage_local(const char *d, const char *agent_text, const char *exec_timeout, const struct relsrc *rs,
                       char *err, size_t err_sz, char **ret_said)
{
    char p[600], text[1200], why[512];
    snprintf(p, sizeof p, "%s/agent", d);
    capture_put(p, agent_text, 0755);
    snprintf(text, sizeof text, "[drover]\nstaging_dir = %s/st\nexec_timeout = %s\n[host h1]\nlocal = true\n"
             "agent_path = %s/agent\n[job mini]\ncontainers = h1:local:%s/a\ncommand = bin/x\n", d, exec_timeout, d, d);
    struct inventory *inv = NULL;
    assert_int_equal(inventory_parse(text, strlen(text), "t.ini", &inv, why, sizeof why), 0);
    struct fleet f;
    fleet_init(&f, inv, NULL);
    struct sync_stats st = { 0 };
    snprintf(p, sizeof p, "%s/stderr", d);
    fflush(stderr);
    int save = dup(STDERR_FILENO), fe = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    dup2(fe, STDERR_FILENO);
    close(fe);
    int r = objsync_job(&f, &inv->jobs[0], rs, NULL, &st, err, err_sz);
    fflush(stderr);
    dup2(save, STDERR_FILENO);
    close(save);
    *ret_said = capture_slurp(p);
    fleet_done(&f);
    inventory_free(inv);
    return r;
}

/* A file of the release deleted while the deploy sent it (a venv rebuilt under it): the error
 * was empty over SSH ("" and "(0.0 MiB of 1.0 MiB stored on the host)"), the pack was resent
 * four times ("retry 1 of 4" ... 15 s of backoff) for a local file problem no resend mends.  Now
 * it names the file and what to do, at once, and nothing reaches the container. */
static void test_file_vanished_while_sent(void **state)
{
    (void)state;
    char d[] = "/tmp/drover-unit-vanish-XXXXXX", p[600], text[1200], err[1024];
    assert_non_null(mkdtemp(d));
    snprintf(p, sizeof p, "%s/venv/lib/site", d);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/venv/lib/site/torch.py", d);
    capture_put(p, "import os\n", 0644);
    snprintf(p, sizeof p, "%s/venv/pyvenv.cfg", d);
    capture_put(p, "home = /usr\n", 0644);
    setenv("DROVER_HASH_CACHE", "off", 1);
    struct relsrc rs;
    snprintf(p, sizeof p, "%s/venv", d);
    assert_int_equal(relsrc_load(p, NULL, &rs), 0);
    rs.kind = "environment";
    snprintf(p, sizeof p, "%s/venv/lib", d); /* the rebuild: deleted after the walk */
    assert_int_equal(fs_rm_rf(p), 0);
    snprintf(text, sizeof text,
             "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*'release missing'*) cat >/dev/null; echo '0 %zu';;\n"
             "*'release install'*) cat >/dev/null; exit 0;;\n"
             "*) echo ok;;\nesac\n", d, rs.m->n);
    char *said;
    double t0 = time_mono();
    int r = stage_local(d, text, "30", &rs, err, sizeof err, &said);
    double took = time_mono() - t0;
    snprintf(p, sizeof p, "%s/calls", d);
    char *calls = capture_slurp(p);
    char want[700];
    snprintf(want, sizeof want, "environment directory '%s/venv': file 'lib/site/torch.py' disappeared while it "
             "was being sent", d);
    if (r >= 0 || !strstr(err, want) || !strstr(err, "is something rebuilding it? deploy again when it is stable") ||
        strstr(said, "retry") || took > 5)
        fail_msg("objsync %d in %.1fs: %s\nstderr: %s\ncalls: %s", r, took, err, said, calls);
    assert_null(strstr(calls, "release install")); /* nothing half-sent reached the container */
    snprintf(p, sizeof p, "%s/st/objects", d);
    char *ls = NULL;
    {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "ls -A '%s'", p);
        FILE *pf = popen(cmd, "r");
        assert_non_null(pf);
        char line[256] = "";
        size_t n = fread(line, 1, sizeof line - 1, pf);
        line[n] = '\0';
        pclose(pf);
        ls = strdup(line);
    }
    assert_string_equal(ls, ""); /* no object, no objects/.in.* left on the host */
    free(ls);
    free(said);
    free(calls);
    relsrc_done(&rs);
    unsetenv("DROVER_HASH_CACHE");
    assert_int_equal(fs_rm_rf(d), 0);
}


/* A release of one file in d/rel, loaded (the hash cache off). */
static void one_file_release(const char *d, struct relsrc *rs)
{
    char p[600];
    snprintf(p, sizeof p, "%s/rel", d);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/rel/config.json", d);
    capture_put(p, "{\"lr\": 3e-4}\n", 0644);
    setenv("DROVER_HASH_CACHE", "off", 1);
    snprintf(p, sizeof p, "%s/rel", d);
    assert_int_equal(relsrc_load(p, NULL, rs), 0);
}

/* The exec that stores the last pack and runs the install failed after the pack was stored (here
 * the host shell is killed during the install, as a lost connection ends it; a stalled install's
 * deadline is the same case): it is not retried (the install may have run; not run twice), and
 * yet "stage h1: ...; retry 1 of 4 in 1s" was said first, the deploy then failing without any
 * retry.  Now the host store is asked first, and a retry is said only when one follows. */
static void test_install_failure_not_said_retried(void **state)
{
    (void)state;
    char d[] = "/tmp/drover-unit-noretry-XXXXXX", text[1600], err[1024], p[600];
    assert_non_null(mkdtemp(d));
    struct relsrc rs;
    one_file_release(d, &rs);
    /* the fan shells of this test's host store only (their command line names it) */
    snprintf(text, sizeof text,
             "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*'release missing'*) cat >/dev/null; echo '0 %zu';;\n"
             "*'release install'*) cat >/dev/null\n"
             "  for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' <$p/cmdline 2>/dev/null)\" in\n"
             "    *packs/.fan.*' %s/st '*) kill -KILL ${p#/proc/} 2>/dev/null;; esac; done; exit 1;;\n"
             "*) echo ok;;\nesac\n", d, rs.m->n, d);
    char *said;
    int r = stage_local(d, text, "30", &rs, err, sizeof err, &said);
    snprintf(p, sizeof p, "%s/calls", d);
    char *calls = capture_slurp(p);
    int ninstall = 0;
    for (const char *c = calls; (c = strstr(c, "release install")); c++)
        ninstall++;
    if (r >= 0 || strstr(said, "retry") || !strstr(err, "after the last pack reached the host store") ||
        ninstall != 1)
        fail_msg("objsync %d: %s\nstderr: %s\ncalls: %s", r, err, said, calls);
    free(said);
    free(calls);
    relsrc_done(&rs);
    unsetenv("DROVER_HASH_CACHE");
    assert_int_equal(fs_rm_rf(d), 0);
}

/* A `release install` that stops making progress (SIGSTOP) in its container: its deadline fired,
 * the deploy failed, and the stopped install stayed there for good (closing the channel reaches
 * no stopped process in a container).  Now the deadline ends it (SIGKILL) and says so.  The host
 * store holds the object already, so the install has an exec of its own (exec_timeout: 2 s). */
static void test_stalled_install_ended(void **state)
{
    (void)state;
    char d[] = "/tmp/drover-unit-stall-XXXXXX", text[1600], err[1024], p[600];
    assert_non_null(mkdtemp(d));
    struct relsrc rs;
    one_file_release(d, &rs);
    snprintf(p, sizeof p, "%s/st/objects", d);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/st/objects/%s", d, rs.m->e[rs.m->n - 1].sha256);
    capture_put(p, "{\"lr\": 3e-4}\n", 0444);
    snprintf(text, sizeof text,
             "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*'release missing'*) cat >/dev/null; echo '0 %zu';;\n"
             "*'release install'*) echo $$ >'%s/pid'; kill -STOP $$; cat >/dev/null; exit 0;;\n"
             "*) echo ok;;\nesac\n", d, rs.m->n, d);
    char *said;
    int r = stage_local(d, text, "2", &rs, err, sizeof err, &said);
    snprintf(p, sizeof p, "%s/pid", d);
    char *pidtext = capture_slurp(p);
    long pid = pidtext ? strtol(pidtext, NULL, 10) : 0;
    /* gone, or a zombie its parent is about to reap: no longer stopped */
    char state_c = '?';
    for (int i = 0; i < 50 && pid > 0; i++) {
        char sp[64], *st;
        snprintf(sp, sizeof sp, "/proc/%ld/stat", pid);
        if (access(sp, F_OK) != 0) { /* reaped already (capture_slurp asserts the file is there) */
            state_c = 'X';
            break;
        }
        state_c = (st = capture_slurp(sp)) && strrchr(st, ')') ? strrchr(st, ')')[2] : 'X';
        free(st);
        if (state_c == 'X' || state_c == 'Z')
            break;
        usleep(100 * 1000);
    }
    if (pid > 0 && state_c != 'X' && state_c != 'Z')
        (void)kill((pid_t)pid, SIGKILL); /* not left behind by a failing test */
    /* said once: the local host's words for the host exec's process group ("drover ended it and
     * what it started") are of the same install */
    const char *e1 = strstr(err, "drover ended");
    if (r != -ETIMEDOUT || pid <= 0 || (state_c != 'X' && state_c != 'Z') ||
        !strstr(err, "drover ended the stalled release install in h1:local") || strstr(said, "retry") ||
        strstr(e1 + 1, "drover ended"))
        fail_msg("objsync %d, install pid %ld state %c: %s\nstderr: %s", r, pid, state_c, err, said);
    free(pidtext);
    free(said);
    relsrc_done(&rs);
    unsetenv("DROVER_HASH_CACHE");
    assert_int_equal(fs_rm_rf(d), 0);
}

/* The pid a fake agent wrote into path; 0 when it wrote none.  (The slurped text was leaked, and
 * make asan's LeakSanitizer failed the test binary.) */
static long pid_in(const char *path)
{
    if (access(path, F_OK) != 0)
        return 0;
    char *t = capture_slurp(path);
    long pid = t ? strtol(t, NULL, 10) : 0;
    free(t);
    return pid;
}

/* The state of process pid once it is gone, or a zombie, or after 5 s ('X' gone); one still
 * there then is killed, so that a failing test leaves nothing behind. */
static char state_within(long pid)
{
    char state_c = '?';
    for (int i = 0; i < 50 && pid > 0; i++) {
        char sp[64], *st;
        snprintf(sp, sizeof sp, "/proc/%ld/stat", pid);
        if (access(sp, F_OK) != 0)
            return 'X';
        state_c = (st = capture_slurp(sp)) && strrchr(st, ')') ? strrchr(st, ')')[2] : 'X';
        free(st);
        if (state_c == 'X' || state_c == 'Z')
            return state_c;
        usleep(100 * 1000);
    }
    if (pid > 0)
        (void)kill((pid_t)pid, SIGKILL);
    return state_c;
}

/* A `release missing` that stalls (the agent stopped) past its deadline is ended in its
 * container, and the error says so.  Before, only a stalled install was: the fan-out's host
 * shell was killed and the stopped agent stayed there for good. */
static void test_stalled_ask_ended(void **state)
{
    (void)state;
    char d[] = "/tmp/drover-unit-askst-XXXXXX", text[1600], err[1024], p[600];
    assert_non_null(mkdtemp(d));
    struct relsrc rs;
    one_file_release(d, &rs);
    snprintf(text, sizeof text,
             "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*'release missing'*) echo $$ >'%s/pid'; kill -STOP $$; cat >/dev/null; echo '0 %zu';;\n"
             "*'release install'*) cat >/dev/null; exit 0;;\n"
             "*) echo ok;;\nesac\n", d, d, rs.m->n);
    char *said;
    int r = stage_local(d, text, "2", &rs, err, sizeof err, &said);
    snprintf(p, sizeof p, "%s/pid", d);
    long pid = pid_in(p);
    char state_c = state_within(pid);
    if (r != -ETIMEDOUT || pid <= 0 || (state_c != 'X' && state_c != 'Z') ||
        !strstr(err, "drover ended the stalled step 'release missing' in h1:local"))
        fail_msg("objsync %d, agent pid %ld state %c: %s\nstderr: %s", r, pid, state_c, err, said);
    free(said);
    relsrc_done(&rs);
    unsetenv("DROVER_HASH_CACHE");
    assert_int_equal(fs_rm_rf(d), 0);
}

static char intr_pidfile[600];
/* Ctrl-C, as deploy's handler gives it, once the install has stopped itself (its pid written). */
static void *interrupt_when_held(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200 && access(intr_pidfile, F_OK) != 0; i++)
        usleep(50 * 1000);
    usleep(200 * 1000);
    send_interrupted = 1;
    exec_interrupted = 1;
    return NULL;
}

/* Ctrl-C while the containers store (t-33's case): the install in flight is ended in its
 * container, and stderr says so.  Before, the stopped install stayed there (only the host
 * shell got SIGTERM), to be resumed by hand. */
static void test_interrupted_install_ended(void **state)
{
    (void)state;
    char d[] = "/tmp/drover-unit-intr-XXXXXX", text[1600], err[1024], p[600];
    assert_non_null(mkdtemp(d));
    struct relsrc rs;
    one_file_release(d, &rs);
    snprintf(p, sizeof p, "%s/st/objects", d);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
    snprintf(p, sizeof p, "%s/st/objects/%s", d, rs.m->e[rs.m->n - 1].sha256);
    capture_put(p, "{\"lr\": 3e-4}\n", 0444);
    snprintf(text, sizeof text,
             "#!/bin/sh\necho \"$*\" >>'%s/calls'\ncase \"$*\" in\n"
             "*'release missing'*) cat >/dev/null; echo '0 %zu';;\n"
             "*'release install'*) echo $$ >'%s/pid'; kill -STOP $$; cat >/dev/null; exit 0;;\n"
             "*) echo ok;;\nesac\n", d, rs.m->n, d);
    snprintf(intr_pidfile, sizeof intr_pidfile, "%s/pid", d);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, interrupt_when_held, NULL), 0);
    char *said;
    int r = stage_local(d, text, "30", &rs, err, sizeof err, &said);
    pthread_join(th, NULL);
    send_interrupted = 0;
    exec_interrupted = 0;
    long pid = pid_in(intr_pidfile);
    char state_c = state_within(pid);
    if (r >= 0 || pid <= 0 || (state_c != 'X' && state_c != 'Z') ||
        !strstr(said, "drover ended the interrupted release install in h1:local"))
        fail_msg("objsync %d, install pid %ld state %c: %s\nstderr: %s", r, pid, state_c, err, said);
    free(said);
    relsrc_done(&rs);
    unsetenv("DROVER_HASH_CACHE");
    assert_int_equal(fs_rm_rf(d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_said_disk_full),
        cmocka_unit_test(test_fan_reason),
        cmocka_unit_test(test_fan_parse_ok),
        cmocka_unit_test(test_fan_parse_refused),
        cmocka_unit_test(test_host_gc_keeps_ways_back),
        cmocka_unit_test(test_cache_gc_keeps_ways_back),
        cmocka_unit_test(test_cache_gc_keeps_fresh),
        cmocka_unit_test(test_relsrc_hash_cache),
        cmocka_unit_test(test_lacks_filter),
        cmocka_unit_test(test_stall_msg),
        cmocka_unit_test(test_stage_lines),
        cmocka_unit_test(test_gc_lines),
        cmocka_unit_test(test_resend_after_changed_object),
        cmocka_unit_test(test_file_vanished_while_sent),
        cmocka_unit_test(test_install_failure_not_said_retried),
        cmocka_unit_test(test_stalled_install_ended),
        cmocka_unit_test(test_stalled_ask_ended),
        cmocka_unit_test(test_interrupted_install_ended),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
