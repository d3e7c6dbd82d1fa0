/* Unit tests for agent/objstore.c: a venv-shaped release (files, empty dir, relative symlinks)
 * is installed from a pack as hardlinks to read-only objects with the manifest's exec bits; a
 * present release is reported present by its record (MANIFEST hashes to its id, nothing walked)
 * and re-checked by add and verify (a damaged one is rebuilt); a one-file
 * change lacks exactly that object; a pack built by plain GNU tar (what hosts make) is read; a
 * corrupt object is refused, reported, never stored; GC keeps the protected release, its
 * environment and their objects, and removes the rest; stale temp files of dead processes go,
 * those of live ones stay. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/lease.h"
#include "agent/objstore.h"
#include "agent/store.h"
#include "agent/vrecord.h"
#include "common/pack.h"
#include "common/util.h"

static char tmpd[256];

static int setup(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-objstore-test.XXXXXX");
    return mkdtemp(tmpd) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(tmpd);
}

static char *path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *path(const char *fmt, ...)
{
    static char p[4][1024];
    static int i;
    i = (i + 1) % 4;
    int n = snprintf(p[i], sizeof p[i], "%s/", tmpd);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p[i] + n, sizeof p[i] - (size_t)n, fmt, ap);
    va_end(ap);
    return p[i];
}

static void put(const char *rel, const char *text, mode_t mode)
{
    assert_int_equal(fs_write_atomic(path("%s", rel), text, strlen(text), mode), 0);
    assert_int_equal(chmod(path("%s", rel), mode), 0);
}

static void src_tree(const char *mod_text)
{
    assert_int_equal(fs_mkdir_p(path("src/bin"), 0755), 0);
    assert_int_equal(fs_mkdir_p(path("src/lib/pkg"), 0755), 0);
    assert_int_equal(fs_mkdir_p(path("src/empty"), 0755), 0);
    put("src/bin/python3", "#!/bin/sh\necho py\n", 0755);
    put("src/lib/pkg/__init__.py", "", 0644);
    put("src/lib/pkg/same.py", "", 0644); /* same content as __init__.py: one object */
    put("src/lib/pkg/mod.py", mod_text, 0644);
    (void)unlink(path("src/bin/python"));
    assert_int_equal(symlink("python3", path("src/bin/python")), 0);
}

static int fd_writer(void *ctx, const void *buf, size_t len)
{
    return fd_write_all(*(int *)ctx, buf, len);
}

/* Pack every file object of m whose index is in want (NULL: all) from src/. */
static void make_pack(const struct manifest2 *m, const char *pk, const char *only_path)
{
    int fd = open(path("%s", pk), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    struct pack_writer *w;
    assert_int_equal(pack_writer_new(fd_writer, &fd, &w), 0);
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].type == M2_FILE && (!only_path || !strcmp(only_path, m->e[i].path)))
            assert_int_equal(pack_writer_add(w, m->e[i].sha256, path("src/%s", m->e[i].path), m->e[i].size), 0);
    assert_int_equal(pack_writer_finish(w), 0);
    close(fd);
}

struct rel {
    struct manifest2 *m;
    char *text;
    size_t len;
    char id[RELEASE_ID_LEN + 1];
};

static void load(struct rel *r, const char *env)
{
    assert_int_equal(manifest2_from_dir(path("src"), "v", &r->m), 0);
    if (env)
        memcpy(r->m->env, env, RELEASE_ID_LEN + 1);
    assert_int_equal(manifest2_dump(r->m, &r->text, &r->len, r->id), 0);
}

static void unload(struct rel *r)
{
    manifest2_free(r->m);
    free(r->text);
}

static int count(size_t start, size_t n, void *ctx)
{
    size_t *v = ctx;
    v[0] += n;
    v[1] = start;
    return 0;
}

static void test_install_and_change(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    src_tree("x = 1\n");
    struct rel a;
    load(&a, NULL);
    /* everything is missing at first */
    struct m2_ranges rg;
    bool present;
    assert_int_equal(objstore_missing(&s, a.m, a.id, NULL, &rg, &present), 0);
    assert_false(present);
    size_t v[2] = { 0, 0 };
    assert_int_equal(m2_ranges_parse(rg.text, rg.len, a.m->n, count, v), 0);
    assert_int_equal(v[0], 4);
    m2_ranges_done(&rg);
    make_pack(a.m, "a.pack", NULL);
    char err[256];
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, path("a.pack"), NULL, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(lstat(path("root/releases/%s/bin/python3", a.id), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0555);
    assert_int_equal(lstat(path("root/releases/%s/lib/pkg/mod.py", a.id), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0444);
    assert_int_equal(st.st_nlink, 2); /* the object and this release */
    assert_int_equal(lstat(path("root/releases/%s/lib/pkg/same.py", a.id), &st), 0);
    assert_int_equal(st.st_nlink, 3); /* object, __init__.py, same.py */
    assert_int_equal(lstat(path("root/releases/%s/bin/python", a.id), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(path("root/releases/%s/empty", a.id), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(lstat(path("root/releases/%s/MANIFEST", a.id), &st), 0);
    /* release verify rehashes every file of a v2 release */
    assert_int_equal(store_verify_release(&s, a.id, err, sizeof err), 0);
    /* present now, and adding again says so */
    assert_int_equal(objstore_missing(&s, a.m, a.id, NULL, &rg, &present), 0);
    assert_true(present);
    m2_ranges_done(&rg);
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, NULL, NULL, err, sizeof err), 1);
    /* a damaged release is rebuilt, not accepted */
    assert_int_equal(unlink(path("root/releases/%s/lib/pkg/same.py", a.id)), 0);
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(lstat(path("root/releases/%s/lib/pkg/same.py", a.id), &st), 0);

    /* an object changed behind the store's back (same size): verify names the file */
    {
        char obj[1024];
        const struct m2_entry *me = manifest2_find(a.m, "lib/pkg/mod.py");
        snprintf(obj, sizeof obj, "root/objects/%s.0444", me->sha256);
        assert_int_equal(chmod(path("%s", obj), 0644), 0);
        FILE *fp = fopen(path("%s", obj), "r+");
        assert_non_null(fp);
        fputc('y', fp);
        fclose(fp);
        assert_int_equal(store_verify_release(&s, a.id, err, sizeof err), -EBADMSG);
        assert_non_null(strstr(err, "lib/pkg/mod.py"));
        /* marked damaged, the corrupt object (the same inode) gone: installed again from a pack */
        assert_false(objstore_have(&s, a.id));
        assert_int_equal(objstore_add(&s, a.text, a.len, a.id, path("a.pack"), NULL, err, sizeof err), 0);
        assert_true(objstore_have(&s, a.id));
        assert_int_equal(store_verify_release(&s, a.id, err, sizeof err), 0);
    }
    /* one file changes: only its object is missing */
    src_tree("x = 2\n");
    struct rel b;
    load(&b, NULL);
    assert_string_not_equal(a.id, b.id);
    assert_int_equal(objstore_missing(&s, b.m, b.id, NULL, &rg, &present), 0);
    v[0] = v[1] = 0;
    assert_int_equal(m2_ranges_parse(rg.text, rg.len, b.m->n, count, v), 0);
    assert_int_equal(v[0], 1);
    assert_string_equal(b.m->e[v[1]].path, "lib/pkg/mod.py");
    m2_ranges_done(&rg);
    /* without the pack it cannot be assembled, and says which file */
    assert_int_equal(objstore_add(&s, b.text, b.len, b.id, NULL, NULL, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "lib/pkg/mod.py"));
    assert_false(store_has_release(&s, b.id));
    make_pack(b.m, "b.pack", "lib/pkg/mod.py");
    assert_int_equal(objstore_add(&s, b.text, b.len, b.id, path("b.pack"), NULL, err, sizeof err), 0);
    assert_int_equal(lstat(path("root/releases/%s/bin/python3", b.id), &st), 0);
    assert_int_equal(st.st_nlink, 3); /* shared by both releases */

    /* GC: keep the newest (b) only; a's own object goes, shared ones stay */
    char **ids;
    size_t n;
    assert_int_equal(store_list(&s, &ids, &n), 0);
    assert_int_equal(n, 2);
    store_ids_free(ids, n);
    const char *protect[] = { b.id };
    objstore_gc_grace_s = 600; /* a fresh unreferenced object is kept: an install may need it */
    assert_int_equal(store_gc(&s, 0, protect, 1, NULL, 0), 1);
    const struct m2_entry *old0 = manifest2_find(a.m, "lib/pkg/mod.py");
    assert_int_equal(lstat(path("root/objects/%s.0444", old0->sha256), &st), 0);
    objstore_gc_grace_s = 0;
    assert_int_equal(store_gc(&s, 0, protect, 1, NULL, 0), 0);
    assert_false(store_has_release(&s, a.id));
    assert_true(store_has_release(&s, b.id));
    assert_int_equal(lstat(path("root/releases/%s/bin/python3", b.id), &st), 0);
    assert_int_equal(st.st_nlink, 2);
    const struct m2_entry *old = manifest2_find(a.m, "lib/pkg/mod.py");
    assert_int_not_equal(lstat(path("root/objects/%s.0444", old->sha256), &st), 0);
    unload(&a);
    unload(&b);
}

static void test_env_and_gc(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    src_tree("env\n");
    struct rel env;
    load(&env, NULL);
    make_pack(env.m, "e.pack", NULL);
    char err[256];
    assert_int_equal(objstore_add(&s, env.text, env.len, env.id, path("e.pack"), NULL, err, sizeof err), 0);
    src_tree("code\n");
    assert_int_equal(fs_rm_rf(path("src/empty")), 0);
    struct rel code;
    load(&code, env.id);
    make_pack(code.m, "c.pack", NULL);
    assert_int_equal(objstore_add(&s, code.text, code.len, code.id, path("c.pack"), NULL, err, sizeof err), 0);
    char link[256];
    ssize_t k = readlink(path("root/releases/%s/.drover-env", code.id), link, sizeof link - 1);
    assert_true(k > 0);
    link[k] = '\0';
    assert_int_equal(strncmp(link, "../", 3), 0);
    assert_string_equal(link + 3, env.id);
    /* code needing an environment the store lacks is refused */
    char fake[RELEASE_ID_LEN + 1];
    memset(fake, 'e', RELEASE_ID_LEN);
    fake[RELEASE_ID_LEN] = '\0';
    struct rel orphan;
    load(&orphan, fake);
    assert_int_equal(objstore_add(&s, orphan.text, orphan.len, orphan.id, NULL, NULL, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "environment"));
    /* GC keeping only the code release (keep 0, protected) keeps its environment too */
    const char *protect[] = { code.id };
    assert_int_equal(store_gc(&s, 0, protect, 1, NULL, 0), 0);
    assert_true(store_has_release(&s, env.id));
    unload(&env);
    unload(&code);
    unload(&orphan);
}

static void test_corrupt_object_and_tar_pack(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    src_tree("x = 1\n");
    struct rel a;
    load(&a, NULL);
    /* a pack as a host makes it with GNU tar, one object with the wrong bytes */
    assert_int_equal(fs_mkdir_p(path("objs"), 0755), 0);
    const struct m2_entry *mod = manifest2_find(a.m, "lib/pkg/mod.py");
    for (size_t i = 0; i < a.m->n; i++) {
        const struct m2_entry *e = &a.m->e[i];
        if (e->type != M2_FILE)
            continue;
        char *from = NULL;
        size_t len = 0;
        assert_int_equal(fs_read_file(path("src/%s", e->path), 1 << 20, &from, &len), 0);
        if (e == mod)
            from[0] = 'y'; /* same size, other content */
        assert_int_equal(fs_write_atomic(path("objs/%s", e->sha256), from, len, 0644), 0);
        free(from);
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s/objs && tar -c --format=posix -f ../t.pack *", tmpd);
    assert_int_equal(system(cmd), 0);
    char err[256], *out = NULL;
    size_t outlen = 0;
    FILE *corrupt = open_memstream(&out, &outlen);
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, path("t.pack"), corrupt, err, sizeof err), -EBADMSG);
    fclose(corrupt);
    char want[100];
    snprintf(want, sizeof want, "corrupt %s\n", mod->sha256);
    assert_string_equal(out, want);
    free(out);
    assert_non_null(strstr(err, "lib/pkg/mod.py"));
    assert_false(store_has_release(&s, a.id));
    struct stat st;
    assert_int_not_equal(lstat(path("root/objects/%s.0444", mod->sha256), &st), 0); /* never stored */
    /* the good objects were kept: only the corrupt one is missing now */
    struct m2_ranges rg;
    bool present;
    assert_int_equal(objstore_missing(&s, a.m, a.id, NULL, &rg, &present), 0);
    size_t v[2] = { 0, 0 };
    assert_int_equal(m2_ranges_parse(rg.text, rg.len, a.m->n, count, v), 0);
    assert_int_equal(v[0], 1);
    m2_ranges_done(&rg);
    unload(&a);
}

/* `release have` / `missing` trust the record of a verified install: releases/<id> whose
 * MANIFEST hashes to id is present without walking its entries (a 20,000-file environment is
 * not re-checked on every code deploy); a MANIFEST that is not the release's is not present;
 * `release verify` finds a damaged tree, and a rebuild needs no pack when its objects are intact.  A pack on stdin ("-") installs like a file. */
static void test_have_record_and_stdin_pack(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    src_tree("y = 2\n");
    struct rel a;
    load(&a, NULL);
    assert_false(objstore_have(&s, a.id));
    assert_false(objstore_have(&s, "not-an-id"));
    make_pack(a.m, "s.pack", NULL);
    /* the pack arrives on stdin, as `tar -c ... | pct exec ... release install M -` sends it */
    int saved = dup(STDIN_FILENO), pfd = open(path("s.pack"), O_RDONLY);
    assert_true(saved >= 0 && pfd >= 0);
    assert_int_equal(dup2(pfd, STDIN_FILENO), STDIN_FILENO);
    close(pfd);
    char err[256] = "";
    int r = objstore_add(&s, a.text, a.len, a.id, "-", NULL, err, sizeof err);
    assert_int_equal(dup2(saved, STDIN_FILENO), STDIN_FILENO);
    close(saved);
    assert_int_equal(r, 0);
    assert_true(objstore_have(&s, a.id));
    /* a file removed from the tree: still present by the record (nothing walked) ... */
    assert_int_equal(unlink(path("root/releases/%s/lib/pkg/same.py", a.id)), 0);
    assert_true(objstore_have(&s, a.id));
    /* ... but verify, when asked, names it */
    assert_int_equal(objstore_verify(&s, a.id, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "'lib/pkg/same.py' is missing"));
    struct m2_ranges rg;
    bool present = true;
    assert_int_equal(objstore_missing(&s, a.m, a.id, NULL, &rg, &present), 0);
    assert_false(present);
    m2_ranges_done(&rg);
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, NULL, NULL, err, sizeof err), 0);
    assert_true(objstore_have(&s, a.id));
    /* a MANIFEST that is not the release's: not present */
    char mp[1024];
    snprintf(mp, sizeof mp, "%s", path("root/releases/%s/MANIFEST", a.id));
    assert_int_equal(chmod(mp, 0644), 0);
    assert_int_equal(fs_write_atomic(mp, "v2\n", 3, 0444), 0);
    assert_false(objstore_have(&s, a.id));
    assert_int_equal(objstore_missing(&s, a.m, a.id, NULL, &rg, &present), 0);
    assert_false(present);
    m2_ranges_done(&rg);
    unload(&a);
}

/* A pid that was a process and has exited (reaped): a temp entry's owner that is gone. */
static pid_t gone_pid(void)
{
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    assert_true(child > 0);
    waitpid(child, NULL, 0);
    return child;
}

static void test_stale_temp_only_dead_owner(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    pid_t child = gone_pid();
    char live[128], dead[128];
    snprintf(live, sizeof live, "root/releases/%064d.tmp.%d", 0, (int)getpid());
    snprintf(dead, sizeof dead, "root/releases/%064d.tmp.%d", 1, (int)child);
    assert_int_equal(fs_mkdir_p(path("%s", live), 0700), 0);
    assert_int_equal(fs_mkdir_p(path("%s", dead), 0700), 0);
    put("root/objects/.tmp.abc.999999999", "x", 0600);
    objstore_clean_stale(&s, NULL);
    struct stat st;
    assert_int_equal(stat(path("%s", live), &st), 0);
    assert_int_not_equal(stat(path("%s", dead), &st), 0);
    assert_int_equal(store_open(&s, path("root")), 0); /* store_open follows the same rule */
    assert_int_equal(stat(path("%s", live), &st), 0);
}

/* Ctrl-C during the containers' store-and-verify left objects/.tmp.<sha>.<pid> of 400-700 MB in
 * every container, and incoming/<id>.manifest after one during staging; `drover gc` removed
 * neither (only the next deploy's store contact did the temp objects).  `release clean`
 * (objstore_clean_gc) removes them and says what it freed: a temp entry only when its owner
 * pid is gone, an incoming manifest or pack only when no deploy lease is held here. */
static void test_clean_gc_frees_interrupted_installs(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    pid_t child = gone_pid();
    static char big[256 << 10];
    memset(big, 'x', sizeof big - 1);
    char dead[128], live[128], man[128], pack[128];
    snprintf(dead, sizeof dead, "root/objects/.tmp.%064d.%d", 7, (int)child);
    snprintf(live, sizeof live, "root/objects/.tmp.%064d.%d", 8, (int)getpid());
    snprintf(man, sizeof man, "root/incoming/%064d.manifest", 9);
    snprintf(pack, sizeof pack, "root/incoming/%064d.pack", 9);
    put(dead, big, 0600);
    put(live, "being written", 0600);
    put(man, "v2 manifest", 0600);
    put(pack, big, 0600);
    struct stat st;

    /* the automatic cleanup at a store contact: the dead owner's temp object only (fresh
     * incoming files may be a running deploy's) */
    struct objstore_cleaned cl = { 0 };
    objstore_clean_stale(&s, &cl);
    assert_int_equal(cl.entries, 1);
    assert_true(cl.bytes >= sizeof big - 1);
    assert_int_not_equal(stat(path("%s", dead), &st), 0);
    assert_int_equal(stat(path("%s", live), &st), 0);
    assert_int_equal(stat(path("%s", man), &st), 0);

    /* gc while a deploy holds a lease here: the incoming files stay, and it says so */
    put(dead, big, 0600);
    assert_true(lease_take(path("root"), "train", "me@host:1", 600, NULL, NULL, 0) >= 0);
    assert_true(lease_any_held(path("root")));
    memset(&cl, 0, sizeof cl);
    bool kept = false;
    objstore_clean_gc(&s, &cl, &kept);
    assert_true(kept);
    assert_int_equal(cl.entries, 1);
    assert_int_not_equal(stat(path("%s", dead), &st), 0);
    assert_int_equal(stat(path("%s", man), &st), 0);
    assert_int_equal(stat(path("%s", pack), &st), 0);

    /* no lease held: an interrupted staging's manifest and pack go, whatever their age; a live
     * owner's temp object never */
    assert_int_equal(lease_release(path("root"), "train", "me@host:1"), 0);
    assert_false(lease_any_held(path("root")));
    memset(&cl, 0, sizeof cl);
    objstore_clean_gc(&s, &cl, &kept);
    assert_false(kept);
    assert_int_equal(cl.entries, 2);
    assert_true(cl.bytes >= sizeof big - 1);
    assert_int_not_equal(stat(path("%s", man), &st), 0);
    assert_int_not_equal(stat(path("%s", pack), &st), 0);
    assert_int_equal(stat(path("%s", live), &st), 0);
}

/* Change a file's bytes in place as a user with root would (chmod, write, same size). */
static void scribble(const char *rel)
{
    assert_int_equal(chmod(rel, 0644), 0);
    FILE *fp = fopen(rel, "r+");
    assert_non_null(fp);
    fputc('Z', fp);
    fclose(fp);
    assert_int_equal(chmod(rel, 0444), 0);
}

static size_t nmissing(const struct store *s, const struct rel *r, bool *ret_present)
{
    struct m2_ranges rg;
    size_t v[2] = { 0, 0 };
    assert_int_equal(objstore_missing(s, r->m, r->id, NULL, &rg, ret_present), 0);
    assert_int_equal(m2_ranges_parse(rg.text, rg.len, r->m->n, count, v), 0);
    m2_ranges_done(&rg);
    return v[0];
}

/* An installed release is re-verified before it is reactivated, cheaply: objects hashed when
 * they arrived are recorded (objects/.verified), so the verify of a code release and its
 * environment stats every entry and reads none; links the store makes itself (another release
 * sharing objects) do not force a re-hash.  A file corrupted in the environment is named, the
 * environment (and so the code release) is no longer `have`, its object is asked for again
 * and, once sent, the verify passes.  A file replaced by another inode in a release tree is
 * named too, and rebuilt from the intact object without a pack. */
static void test_reverify_recorded_and_corrupt(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    src_tree("env only\n");
    struct rel env;
    load(&env, NULL);
    make_pack(env.m, "e.pack", NULL);
    char err[512];
    assert_int_equal(objstore_add(&s, env.text, env.len, env.id, path("e.pack"), NULL, err, sizeof err), 0);
    src_tree("code\n");
    struct rel code;
    load(&code, env.id);
    make_pack(code.m, "c.pack", "lib/pkg/mod.py");
    assert_int_equal(objstore_add(&s, code.text, code.len, code.id, path("c.pack"), NULL, err, sizeof err), 0);

    /* every object was hashed on arrival: nothing is read, code and environment alike */
    struct objstore_vstats vs = { 0 };
    assert_int_equal(objstore_verify_stats(&s, code.id, &vs, err, sizeof err), 0);
    assert_int_equal(vs.hashed, 0);
    assert_int_equal(vs.stat_only, code.m->nfiles + env.m->nfiles);
    /* without the record (a store from before it): hashed once, then recorded; an object
     * the code shares with its environment is read once (the environment's mod.py is its own) */
    assert_int_equal(unlink(path("root/objects/.verified")), 0);
    memset(&vs, 0, sizeof vs);
    assert_int_equal(objstore_verify_stats(&s, code.id, &vs, err, sizeof err), 0);
    assert_int_equal(vs.hashed, code.m->nfiles + 1);
    memset(&vs, 0, sizeof vs);
    assert_int_equal(objstore_verify_stats(&s, code.id, &vs, err, sizeof err), 0);
    assert_int_equal(vs.hashed, 0);

    /* another release sharing the objects links them (ctime and link count move): no re-hash */
    src_tree("code 2\n");
    struct rel c2;
    load(&c2, env.id);
    make_pack(c2.m, "c2.pack", "lib/pkg/mod.py");
    assert_int_equal(objstore_add(&s, c2.text, c2.len, c2.id, path("c2.pack"), NULL, err, sizeof err), 0);
    memset(&vs, 0, sizeof vs);
    assert_int_equal(objstore_verify_stats(&s, code.id, &vs, err, sizeof err), 0);
    assert_int_equal(vs.hashed, 0);

    /* GC removes it (-1 link on each shared object), an install adds it back (+1): the link
     * count is what was recorded, the ctime is not, and still nothing is re-hashed because the
     * store's own unlinks and links keep the record current */
    const char *protect[] = { code.id, env.id };
    assert_int_equal(store_gc(&s, 0, protect, 2, NULL, 0), 1);
    assert_int_equal(objstore_add(&s, c2.text, c2.len, c2.id, path("c2.pack"), NULL, err, sizeof err), 0);
    memset(&vs, 0, sizeof vs);
    assert_int_equal(objstore_verify_stats(&s, code.id, &vs, err, sizeof err), 0);
    assert_int_equal(vs.hashed, 0);

    /* a file of the environment corrupted in place (same size): the reactivation of code is
     * refused, naming the environment, the path and what to do; only that file was read */
    scribble(path("root/releases/%s/lib/pkg/mod.py", env.id));
    memset(&vs, 0, sizeof vs);
    assert_int_equal(objstore_verify_stats(&s, code.id, &vs, err, sizeof err), -EBADMSG);
    assert_int_equal(vs.hashed, 1);
    assert_non_null(strstr(err, "environment"));
    assert_non_null(strstr(err, "'lib/pkg/mod.py' does not match its manifest"));
    assert_non_null(strstr(err, "deploy it again"));
    assert_int_equal(store_verify_release(&s, code.id, err, sizeof err), -EBADMSG); /* what the daemon calls */
    /* not present any more: the controller's `release have` sends both again, and the host
     * sends exactly the corrupt object (it was that inode, so it left the store) */
    assert_false(objstore_have(&s, env.id));
    assert_false(objstore_have(&s, code.id));
    bool present = true;
    assert_int_equal(nmissing(&s, &env, &present), 1);
    assert_false(present);
    src_tree("env only\n");
    make_pack(env.m, "e1.pack", "lib/pkg/mod.py");
    assert_int_equal(objstore_add(&s, env.text, env.len, env.id, path("e1.pack"), NULL, err, sizeof err), 0);
    assert_int_equal(objstore_add(&s, code.text, code.len, code.id, NULL, NULL, err, sizeof err), 1);
    assert_true(objstore_have(&s, code.id));
    memset(&vs, 0, sizeof vs);
    assert_int_equal(objstore_verify_stats(&s, code.id, &vs, err, sizeof err), 0);
    assert_int_equal(vs.hashed, 0);
    char *txt = NULL;
    size_t tl = 0;
    assert_int_equal(fs_read_file(path("root/releases/%s/lib/pkg/mod.py", env.id), 4096, &txt, &tl), 0);
    assert_int_equal(tl, strlen("env only\n"));
    assert_memory_equal(txt, "env only\n", tl);
    free(txt);

    /* a file of the code release replaced by another file of the same size (sed -i, cp): a
     * new inode; the object is intact, so the rebuild needs no pack */
    const char *rp = path("root/releases/%s/bin/python3", code.id);
    struct stat st;
    assert_int_equal(lstat(rp, &st), 0);
    char *same = calloc(1, (size_t)st.st_size + 1);
    memset(same, 'q', (size_t)st.st_size);
    assert_int_equal(unlink(rp), 0);
    assert_int_equal(fs_write_atomic(rp, same, (size_t)st.st_size, 0555), 0);
    free(same);
    assert_int_equal(objstore_verify(&s, code.id, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "'bin/python3'"));
    assert_false(objstore_have(&s, code.id));
    assert_int_equal(nmissing(&s, &code, &present), 0);
    assert_false(present);
    assert_int_equal(objstore_add(&s, code.text, code.len, code.id, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(objstore_verify(&s, code.id, err, sizeof err), 0);

    /* a missing file names its path */
    assert_int_equal(unlink(path("root/releases/%s/lib/pkg/same.py", code.id)), 0);
    assert_int_equal(objstore_verify(&s, code.id, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "'lib/pkg/same.py' is missing"));
    assert_false(objstore_have(&s, code.id));
    unload(&c2);
    unload(&code);
    unload(&env);
}

/* A worker (root) appends to a file of its release directory: the file is a hardlink to its
 * object, so the object and every release sharing it changed.  The release is found damaged;
 * the changed object must leave the store, so that `release missing` asks for it and the
 * rebuild links a good copy.  (The old code kept it: the rebuild relinked the same damage and
 * failed with "assembled release ... does not match its manifest", forever.)  An install of
 * another release sharing it fails once, names the object to send again ("resend"), and then
 * works. */
static void append(const char *p, const char *text)
{
    assert_int_equal(chmod(p, 0644), 0);
    FILE *fp = fopen(p, "a");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(chmod(p, 0444), 0);
}

static void test_written_object_is_sent_again(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    src_tree("v1\n");
    struct rel a;
    load(&a, NULL);
    make_pack(a.m, "a.pack", NULL);
    char err[512];
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, path("a.pack"), NULL, err, sizeof err), 0);
    src_tree("v2\n");
    struct rel b;
    load(&b, NULL);
    make_pack(b.m, "b.pack", "lib/pkg/mod.py");
    assert_int_equal(objstore_add(&s, b.text, b.len, b.id, path("b.pack"), NULL, err, sizeof err), 0);

    /* the worker of b writes into bin/python3, shared with a */
    append(path("root/releases/%s/bin/python3", b.id), "# edited\n");
    assert_int_equal(objstore_verify(&s, a.id, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "'bin/python3'"));
    const struct m2_entry *py = manifest2_find(a.m, "bin/python3");
    struct stat st;
    assert_int_not_equal(lstat(path("root/objects/%s.0555", py->sha256), &st), 0);
    bool present = true;
    assert_int_equal(nmissing(&s, &a, &present), 1);
    assert_false(present);
    src_tree("v1\n");
    make_pack(a.m, "a1.pack", "bin/python3");
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, path("a1.pack"), NULL, err, sizeof err), 0);
    assert_int_equal(objstore_verify(&s, a.id, err, sizeof err), 0);
    /* b still links the changed inode: damaged, and rebuilt from the good object, no pack */
    assert_int_equal(objstore_verify(&s, b.id, err, sizeof err), -EBADMSG);
    assert_int_equal(objstore_add(&s, b.text, b.len, b.id, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(objstore_verify(&s, b.id, err, sizeof err), 0);

    /* the same write, found by no verify: marked damaged by nobody, so `release missing` of a
     * new release sharing it says the object is there; its install fails once and says which
     * object to send, and the next ask asks for it */
    append(path("root/releases/%s/bin/python3", b.id), "# again\n");
    src_tree("v3\n");
    struct rel c;
    load(&c, NULL);
    assert_int_equal(nmissing(&s, &c, &present), 1); /* mod.py only */
    make_pack(c.m, "c.pack", "lib/pkg/mod.py");
    char *out = NULL;
    size_t olen = 0;
    FILE *fp = open_memstream(&out, &olen);
    assert_int_equal(objstore_add(&s, c.text, c.len, c.id, path("c.pack"), fp, err, sizeof err), -ESTALE);
    fclose(fp);
    char want[128];
    snprintf(want, sizeof want, "resend %s\n", py->sha256);
    assert_non_null(strstr(out, want));
    assert_null(strstr(out, "corrupt "));
    free(out);
    assert_non_null(strstr(err, "sent again"));
    assert_false(store_has_release(&s, c.id));
    assert_int_equal(nmissing(&s, &c, &present), 1); /* python3 now; mod.py arrived */
    make_pack(c.m, "c1.pack", "bin/python3");
    assert_int_equal(objstore_add(&s, c.text, c.len, c.id, path("c1.pack"), NULL, err, sizeof err), 0);
    assert_int_equal(objstore_verify(&s, c.id, err, sizeof err), 0);
    unload(&a);
    unload(&b);
    unload(&c);
}

/* `release missing` of a release recorded as installed re-verifies its tree cheaply first: an
 * untouched one is present with every file only stat-ed; one whose file was written in place (a
 * hardlink: the write went into its object) is not present: it is marked damaged, the changed
 * object leaves the store and is asked for, the others stay, and the install that follows
 * rebuilds it in the same deploy.  (The old code said "present": nothing was sent, and the
 * deploy failed at activation.)  `release have` (asked first for a large release) finds the
 * same. */
/* A store at root/ with release a (src/ with mod.py holding mod_text) installed from one pack. */
static void store_with_release(struct store *s, struct rel *a, const char *mod_text)
{
    char err[512];
    assert_int_equal(store_open(s, path("root")), 0);
    src_tree(mod_text);
    load(a, NULL);
    make_pack(a->m, "a.pack", NULL);
    assert_int_equal(objstore_add(s, a->text, a->len, a->id, path("a.pack"), NULL, err, sizeof err), 0);
}

static void test_missing_reverifies_present(void **state)
{
    (void)state;
    struct store s;
    struct rel a;
    char err[512];
    store_with_release(&s, &a, "x = 1\n");

    /* untouched: present, and nothing was read (each file's inode is the one recorded) */
    struct m2_ranges rg;
    bool present = false;
    struct objstore_vstats vs = { 0 };
    assert_int_equal(objstore_missing(&s, a.m, a.id, &vs, &rg, &present), 0);
    assert_true(present);
    assert_int_equal(rg.len, 0);
    m2_ranges_done(&rg);
    assert_int_equal(vs.hashed, 0);
    assert_int_equal(vs.stat_only, a.m->nfiles);
    assert_true(objstore_have_intact(&s, a.id));

    /* a file changed in place (same size): not present; only it was read; its object is asked
     * for */
    scribble(path("root/releases/%s/lib/pkg/mod.py", a.id));
    memset(&vs, 0, sizeof vs);
    present = true;
    assert_int_equal(objstore_missing(&s, a.m, a.id, &vs, &rg, &present), 0);
    assert_false(present);
    size_t v[2] = { 0, 0 };
    assert_int_equal(m2_ranges_parse(rg.text, rg.len, a.m->n, count, v), 0);
    m2_ranges_done(&rg);
    assert_int_equal(v[0], 1);
    assert_string_equal(a.m->e[v[1]].path, "lib/pkg/mod.py");
    assert_int_equal(vs.hashed, 1);
    /* marked damaged as the activation-time verify marks it; the changed object gone, the
     * unchanged ones kept */
    assert_false(objstore_have(&s, a.id));
    struct stat st;
    const struct m2_entry *mod = manifest2_find(a.m, "lib/pkg/mod.py");
    const struct m2_entry *py = manifest2_find(a.m, "bin/python3");
    const struct m2_entry *init = manifest2_find(a.m, "lib/pkg/__init__.py");
    assert_int_not_equal(lstat(path("root/objects/%s.0444", mod->sha256), &st), 0);
    assert_int_equal(lstat(path("root/objects/%s.0555", py->sha256), &st), 0);
    assert_int_equal(lstat(path("root/objects/%s.0444", init->sha256), &st), 0);
    /* asked again (a retry of the ask): the same answer */
    assert_int_equal(nmissing(&s, &a, &present), 1);
    assert_false(present);
    /* the object sent, the release rebuilt: present and intact again */
    make_pack(a.m, "a1.pack", "lib/pkg/mod.py");
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, path("a1.pack"), NULL, err, sizeof err), 0);
    assert_int_equal(objstore_verify(&s, a.id, err, sizeof err), 0);
    assert_int_equal(nmissing(&s, &a, &present), 0);
    assert_true(present);

    /* `release have`: the same check (here a write that changed the size) */
    append(path("root/releases/%s/bin/python3", a.id), "# edited\n");
    assert_true(objstore_have(&s, a.id)); /* the record alone cannot tell */
    assert_false(objstore_have_intact(&s, a.id));
    assert_false(objstore_have(&s, a.id));
    assert_int_not_equal(lstat(path("root/objects/%s.0555", py->sha256), &st), 0);
    assert_int_equal(nmissing(&s, &a, &present), 1);
    assert_false(present);
    unload(&a);
}

/* The verification record's lock has a deadline (house rule: nothing waits forever): a holder
 * that keeps objects/.verified.lock gets the save -ETIMEDOUT after the timeout, with the
 * updates still queued, and the next save once the lock is free writes them.  (The old code
 * took a blocking flock here and waited for as long as the holder lived.) */
/* A damaged release stays where it is (marked, not present) until its rebuilt tree replaces it:
 * a job's `current` link to it never dangles, whether the rebuild fails (an object missing and
 * no pack) or succeeds.  (The old code renamed the damaged tree away and removed it before
 * assembling: a failed rebuild, or an agent killed during it, left releases/<id> missing.) */
static void test_damaged_release_kept_until_replaced(void **state)
{
    (void)state;
    struct store s;
    struct rel a;
    char err[512];
    struct stat st;
    store_with_release(&s, &a, "x = 1\n");
    assert_int_equal(symlink(path("root/releases/%s", a.id), path("current")), 0);
    /* damaged: a file of the release removed; and the object it needs gone from the store */
    const struct m2_entry *me = manifest2_find(a.m, "lib/pkg/mod.py");
    assert_non_null(me);
    assert_int_equal(unlink(path("root/releases/%s/lib/pkg/mod.py", a.id)), 0);
    static const char *const modes[] = { "0444", "0555", "0644", "0755" };
    for (size_t i = 0; i < ARRAY_SIZE(modes); i++)
        (void)unlink(path("root/objects/%s.%s", me->sha256, modes[i]));
    /* the rebuild fails (no pack): the damaged tree is still there, marked, not present */
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, NULL, NULL, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "lib/pkg/mod.py"));
    assert_int_equal(stat(path("current/MANIFEST"), &st), 0);
    assert_false(objstore_have(&s, a.id));
    /* with the pack it is rebuilt in place: the link resolves to the new, intact tree */
    assert_int_equal(objstore_add(&s, a.text, a.len, a.id, path("a.pack"), NULL, err, sizeof err), 0);
    assert_true(objstore_have(&s, a.id));
    assert_int_equal(stat(path("current/lib/pkg/mod.py"), &st), 0);
    assert_int_equal(store_verify_release(&s, a.id, err, sizeof err), 0);
    /* nothing of the damaged tree or the temp one is left beside it */
    DIR *d = opendir(path("root/releases"));
    assert_non_null(d);
    struct dirent *de;
    size_t n = 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            assert_string_equal(de->d_name, a.id);
            n++;
        }
    closedir(d);
    assert_int_equal(n, 1);
    unload(&a);
}

static void test_vrecord_lock_has_deadline(void **state)
{
    (void)state;
    struct store s;
    assert_int_equal(store_open(&s, path("root")), 0);
    struct vrecord r = { 0 };
    assert_int_equal(vrecord_load(&s, &r), 0);
    struct stat st;
    assert_int_equal(stat(path("root"), &st), 0);
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert_int_equal(vrecord_put(&r, sha, 0644, &st), 0);

    int holder = open(path("root/objects/.verified.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    assert_true(holder >= 0);
    assert_int_equal(flock(holder, LOCK_EX), 0); /* another open file: conflicts with ours */
    assert_int_equal(vrecord_save(&s, &r, 0.3), -ETIMEDOUT);
    assert_int_equal(r.nup, 1);
    close(holder);
    assert_int_equal(vrecord_save(&s, &r, 0.3), 0);
    assert_int_equal(r.nup, 0);
    vrecord_done(&r);

    struct vrecord back = { 0 };
    assert_int_equal(vrecord_load(&s, &back), 0);
    assert_int_equal(vrecord_matches(&back, sha, 0644, &st), VREC_SAME);
    vrecord_done(&back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_install_and_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_and_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_object_and_tar_pack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_temp_only_dead_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clean_gc_frees_interrupted_installs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_have_record_and_stdin_pack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reverify_recorded_and_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_written_object_is_sent_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_reverifies_present, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_release_kept_until_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vrecord_lock_has_deadline, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
