/* Unit tests for common/manifest2.c and common/pack.c: a tree with files, empty directories and
 * relative symlinks round-trips to the same id; symlinks leaving the release (directly, by "..",
 * or through another symlink) and FIFOs are refused naming the path; parse refuses unsorted,
 * duplicate, parentless, badly formed and over-limit documents; a file or directory that cannot
 * be read is named; ranges round-trip; a pack
 * round-trips and refuses members that are not objects. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/manifest2.h"
#include "common/pack.h"
#include "common/util.h"

static char tmpd[256];

static int setup(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-m2-test.XXXXXX");
    return mkdtemp(tmpd) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(tmpd);
}

static void put(const char *rel, const char *text, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpd, rel);
    assert_int_equal(fs_write_atomic(p, text, strlen(text), mode), 0);
    assert_int_equal(chmod(p, mode), 0);
}

static void mk(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpd, rel);
    assert_int_equal(fs_mkdir_p(p, 0755), 0);
}

static void ln(const char *target, const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpd, rel);
    assert_int_equal(symlink(target, p), 0);
}

static void venv_tree(void)
{
    mk("bin");
    mk("lib/python3.11/site-packages/pkg");
    mk("empty/inner");
    put("bin/python3.11", "#!fake\n", 0755);
    ln("python3.11", "bin/python");
    ln("../lib/python3.11", "bin/libdir");
    put("lib/python3.11/site-packages/pkg/__init__.py", "", 0644);
    put("lib/python3.11/site-packages/pkg/mod.py", "x = 1\n", 0644);
    ln("pkg/./mod.py", "lib/python3.11/site-packages/alias.py");
}

static void test_roundtrip(void **state)
{
    (void)state;
    venv_tree();
    struct manifest2 *m;
    assert_int_equal(manifest2_from_dir(tmpd, "env", &m), 0);
    assert_int_equal(m->nfiles, 3);
    const struct m2_entry *e = manifest2_find(m, "bin/python");
    assert_non_null(e);
    assert_int_equal(e->type, M2_LINK);
    assert_string_equal(e->target, "python3.11");
    e = manifest2_find(m, "empty/inner");
    assert_non_null(e);
    assert_int_equal(e->type, M2_DIR);
    e = manifest2_find(m, "bin/python3.11");
    assert_int_equal(e->mode, 0755);
    /* `command = ./bin/python3.11` (as docs/pytorch.md writes ./launch.sh) names the same file */
    assert_ptr_equal(manifest2_find(m, "./bin/python3.11"), e);
    assert_ptr_equal(manifest2_find(m, ".//./bin/python3.11"), e);
    assert_null(manifest2_find(m, "../bin/python3.11"));
    char *text;
    size_t len;
    char id[RELEASE_ID_LEN + 1], id2[RELEASE_ID_LEN + 1];
    assert_int_equal(manifest2_dump(m, &text, &len, id), 0);
    struct manifest2 *p;
    assert_int_equal(manifest2_parse(text, len, &p), 0);
    char *text2;
    size_t len2;
    assert_int_equal(manifest2_dump(p, &text2, &len2, id2), 0);
    assert_string_equal(id, id2);
    assert_int_equal(len, len2);
    /* an env reference changes the identity */
    memset(p->env, 'a', RELEASE_ID_LEN);
    p->env[RELEASE_ID_LEN] = '\0';
    free(text2);
    assert_int_equal(manifest2_dump(p, &text2, &len2, id2), 0);
    assert_string_not_equal(id, id2);
    struct manifest2 *q;
    assert_int_equal(manifest2_parse(text2, len2, &q), 0);
    assert_string_equal(q->env, p->env);
    /* the head alone names the environment (plan's and deploy's "no --env" warning reads only
     * the first lines of a kept manifest), or says there is none */
    char env[RELEASE_ID_LEN + 1] = "";
    assert_int_equal(manifest2_env_of(text2, len2, env), 1);
    assert_string_equal(env, p->env);
    size_t head = (size_t)(strchr(strchr(text2, '\n') + 1, '\n') - text2) + 1; /* magic, name */
    assert_int_equal(manifest2_env_of(text2, head + RELEASE_ID_LEN + 5, env), 1); /* + env line */
    assert_int_equal(manifest2_env_of(text2, head + 10, env), -EINVAL);          /* cut in it */
    assert_int_equal(manifest2_env_of(text, len, env), 0);                       /* none */
    assert_int_equal(manifest2_env_of("drover-manifest 1\nname x\n", 25, env), -EINVAL);
    /* ... and its name (`drover history` names a rollback's release from the kept manifest) */
    char name[MANIFEST_NAME_MAX] = "untouched";
    assert_int_equal(manifest2_name_of(text2, head, name), 0);
    assert_string_equal(name, p->name);
    assert_int_equal(manifest2_name_of(text2, head - 1, name), -EINVAL); /* cut before its end */
    assert_int_equal(manifest2_name_of("drover-manifest 1\nname x\n", 25, name), -EINVAL);
    assert_string_equal(name, p->name); /* untouched on failure */
    char longname[200];
    int ln = snprintf(longname, sizeof longname, "drover-manifest 2\nname %080d\n", 0);
    assert_int_equal(manifest2_name_of(longname, (size_t)ln, name), -E2BIG);
    manifest2_free(q);
    free(text2);
    free(text);
    manifest2_free(p);
    manifest2_free(m);
}

static void test_outside_links_refused(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        { "/usr/bin/python3", "a" },  /* absolute */
        { "../../etc/passwd", "b" },  /* up and out */
        { "d/../../x", "c" },         /* lexically out */
    };
    mk("d");
    for (size_t i = 0; i < 3; i++) {
        ln(bad[i][0], bad[i][1]);
        struct manifest2 *m = NULL;
        assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), -EINVAL);
        assert_null(m);
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpd, bad[i][1]);
        unlink(p);
    }
    /* through another symlink: up -> ".." is inside (the root), up/.. is not */
    ln("..", "d/up");
    struct manifest2 *m = NULL;
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), 0);
    manifest2_free(m);
    ln("d/up/..", "escape");
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), -EINVAL);
    char p[512];
    snprintf(p, sizeof p, "%s/escape", tmpd);
    unlink(p);
    /* a loop is refused, not followed forever */
    ln("loop2", "loop1");
    ln("loop1", "loop2");
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), -EINVAL);
}

static void test_fifo_refused(void **state)
{
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/fifo", tmpd);
    assert_int_equal(mkfifo(p, 0600), 0);
    struct manifest2 *m = NULL;
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), -EINVAL); /* never opened: would block */
    assert_null(m);
}

/* A file or subdirectory drover cannot read is named: the error said only "cannot read release
 * directory 'R': Permission denied", leaving the user to hunt for the file.  Run in a child as
 * nobody (root reads a mode-000 file), with its stderr in a file. */
static void expect_unreadable_named(const char *rel, const char *want)
{
    char errf[512], buf[2048] = "";
    snprintf(errf, sizeof errf, "%s.err", tmpd);
    assert_int_equal(chmod(tmpd, 0755), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
            _exit(90);
        if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
            _exit(91);
        struct manifest2 *m = NULL;
        _exit(manifest2_from_dir(tmpd, NULL, &m) == -EACCES && !m ? 0 : 92);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    FILE *fp = fopen(errf, "r");
    assert_non_null(fp);
    buf[fread(buf, 1, sizeof buf - 1, fp)] = '\0';
    fclose(fp);
    unlink(errf);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !strstr(buf, want) || !strstr(buf, rel))
        fail_msg("exit %d, stderr: %s (want '%s' naming %s)", WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf, want, rel);
}

static void test_unreadable_named(void **state)
{
    (void)state;
    put("ok.py", "x = 1\n", 0644);
    put("secret.bin", "s\n", 0000);
    expect_unreadable_named("/secret.bin", "release file '");
    char p[512];
    snprintf(p, sizeof p, "%s/secret.bin", tmpd);
    assert_int_equal(unlink(p), 0);
    mk("private");
    put("private/a.py", "a\n", 0644);
    snprintf(p, sizeof p, "%s/private", tmpd);
    assert_int_equal(chmod(p, 0700), 0);
    if (geteuid() != 0)
        assert_int_equal(chmod(p, 0000), 0);
    expect_unreadable_named("/private", "release directory '");
    assert_int_equal(chmod(p, 0755), 0); /* teardown removes it */
}

/* Names drover owns at the top of a release in the container: MANIFEST (and MANIFEST.json of
 * v1) is the release's manifest, .drover-env the link to its environment.  A user's file of
 * that name was left out without a word (MANIFEST: deployed and promoted without it, the worker
 * reading drover's manifest instead) or refused by the agent after the push (.drover-env).
 * Refused here, before anything is sent; drover's own manifest (a release directory copied out
 * of a container) is still skipped. */
static void test_reserved_names(void **state)
{
    (void)state;
    struct manifest2 *m = NULL;
    put("run.sh", "#!/bin/sh\n", 0755);
    put("MANIFEST", "model shards: a b c\n", 0644);
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), -EINVAL);
    assert_null(m);
    put("MANIFEST", "drover-manifest 2\nname x\n", 0444); /* drover's own: skipped as before */
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), 0);
    assert_null(manifest2_find(m, "MANIFEST"));
    manifest2_free(m);
    m = NULL;
    put("MANIFEST.json", "{\"mine\": 1}\n", 0644);
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), -EINVAL);
    put("MANIFEST.json", "{\"v\":1,\"name\":\"x\",\"files\":[]}", 0644);
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), 0);
    manifest2_free(m);
    m = NULL;
    mk(".drover-env/bin");
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), -EINVAL);
    assert_null(m);
    /* deeper down these names are the user's */
    char p[512];
    snprintf(p, sizeof p, "%s/.drover-env", tmpd);
    assert_int_equal(fs_rm_rf(p), 0);
    mk("sub/.drover-env");
    put("sub/MANIFEST", "mine\n", 0644);
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), 0);
    assert_non_null(manifest2_find(m, "sub/MANIFEST"));
    manifest2_free(m);
}

static void test_parse_refuses(void **state)
{
    (void)state;
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char good[512];
    snprintf(good, sizeof good, "drover-manifest 2\nname x\nd 0755 a\nf 0644 3 %s a/b\nl c\ta/b\n", sha);
    struct manifest2 *m = NULL;
    assert_int_equal(manifest2_parse(good, strlen(good), &m), 0);
    assert_int_equal(m->n, 3);
    assert_int_equal(m->file_bytes, 3);
    manifest2_free(m);
    char buf[512];
    const char *bad[] = {
        "drover-manifest 2\nname x\nf 0644 3 %s b\nd 0755 a\n",        /* unsorted */
        "drover-manifest 2\nname x\nf 0644 3 %s a/b\n",                /* parent not listed */
        "drover-manifest 2\nname x\nf 0644 3 %s b\nf 0644 3 %s b\n",   /* duplicate */
        "drover-manifest 2\nname x\nf 644 3 %s b\n",                   /* mode form */
        "drover-manifest 2\nname x\nf 0644 03 %s b\n",                 /* size form */
        "drover-manifest 2\nname x\nf 0644 3 %s ../b\n",               /* unsafe path */
        "drover-manifest 2\nname x\nl b\t/etc\n",                      /* absolute target */
        "drover-manifest 2\nname x\nl b\t..\n",                        /* outside */
        "drover-manifest 2\nname x\nx 0644 b\n",                       /* unknown type */
        "drover-manifest 2\nname x\nf 0644 3 %s b",                    /* no final newline */
        "drover-manifest 2\n",                                         /* no name */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        snprintf(buf, sizeof buf, bad[i], sha, sha);
        m = NULL;
        assert_int_equal(manifest2_parse(buf, strlen(buf), &m), -EINVAL);
        assert_null(m);
    }
    assert_int_equal(manifest2_parse("drover-manifest 3\n", 18, &m), -EPROTONOSUPPORT);
    assert_int_equal(manifest2_parse(good, MANIFEST2_MAX_BYTES + 1ul, &m), -E2BIG);
}

static int count_cb(size_t start, size_t count, void *ctx)
{
    size_t *v = ctx;
    v[0] += count;
    v[1] = start;
    return 0;
}

/* A job's command that is a symlink: judged by what it points to in the release.  A dangling
 * one (launch.sh -> nothere.sh) passed validate and deploy's check and failed only in the
 * container.  A link into .drover-env (the environment, not in this manifest) is left to the
 * container, as is everything under it. */
static void test_exec_problem_follows_links(void **state)
{
    (void)state;
    mk("bin");
    mk("tools");
    put("real.sh", "#!/bin/sh\n", 0755);
    put("data.txt", "x\n", 0644);
    put("tools/run", "#!/bin/sh\n", 0755);
    ln("real.sh", "launch.sh");
    ln("nothere.sh", "dangling.sh");
    ln("data.txt", "notexec.sh");
    ln("bin", "bindir");
    ln("../tools", "bin/t");
    ln(".drover-env/bin/python", "python");
    struct manifest2 *m = NULL;
    assert_int_equal(manifest2_from_dir(tmpd, NULL, &m), 0);
    assert_null(manifest2_exec_problem(m, "launch.sh"));
    assert_null(manifest2_exec_problem(m, "./launch.sh"));
    assert_null(manifest2_exec_problem(m, "bin/t/run")); /* through a linked directory */
    assert_null(manifest2_exec_problem(m, "python"));    /* the environment's: not judged here */
    const char *why = manifest2_exec_problem(m, "dangling.sh");
    assert_non_null(why);
    assert_non_null(strstr(why, "symlink"));
    assert_non_null(strstr(why, "missing"));
    why = manifest2_exec_problem(m, "notexec.sh");
    assert_non_null(why);
    assert_non_null(strstr(why, "not executable"));
    why = manifest2_exec_problem(m, "bindir");
    assert_non_null(why);
    assert_non_null(strstr(why, "directory"));
    assert_non_null(manifest2_exec_problem(m, "nope.sh"));
    /* a missing "./x" is missing, not "a symlink whose target is missing" (it compared the
     * resolved "nope.sh" with "./nope.sh" and took the difference for a symlink) */
    assert_string_equal(manifest2_exec_problem(m, "nope.sh"), "is missing");
    assert_string_equal(manifest2_exec_problem(m, "./nope.sh"), "is missing");
    assert_string_equal(manifest2_exec_problem(m, ".//nope.sh"), "is missing");
    manifest2_free(m);
}

static void test_ranges(void **state)
{
    (void)state;
    struct m2_ranges r = { 0 };
    size_t idx[] = { 0, 1, 2, 7, 9, 10 };
    for (size_t i = 0; i < ARRAY_SIZE(idx); i++)
        assert_int_equal(m2_ranges_add(&r, idx[i]), 0);
    assert_int_equal(m2_ranges_finish(&r), 0);
    assert_string_equal(r.text, "0 3\n7 1\n9 2\n");
    size_t v[2] = { 0, 0 };
    assert_int_equal(m2_ranges_parse(r.text, r.len, 11, count_cb, v), 0);
    assert_int_equal(v[0], 6);
    assert_int_equal(v[1], 9);
    assert_int_equal(m2_ranges_parse(r.text, r.len, 10, count_cb, v), -EINVAL); /* past n */
    assert_int_equal(m2_ranges_parse("1 0\n", 4, 10, count_cb, v), -EINVAL);
    assert_int_equal(m2_ranges_parse("1 2", 3, 10, count_cb, v), -EINVAL);
    m2_ranges_done(&r);
}

static int fd_writer(void *ctx, const void *buf, size_t len)
{
    return fd_write_all(*(int *)ctx, buf, len);
}

static void test_pack_roundtrip(void **state)
{
    (void)state;
    put("a", "hello", 0644);
    char src[512], pk[512], sha[SHA256_HEX_LEN + 1];
    snprintf(src, sizeof src, "%s/a", tmpd);
    snprintf(pk, sizeof pk, "%s/p.pack", tmpd);
    uint64_t sz;
    assert_int_equal(sha256_file_hex(src, sha, &sz), 0);
    int fd = open(pk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    struct pack_writer *w;
    assert_int_equal(pack_writer_new(fd_writer, &fd, &w), 0);
    assert_int_equal(pack_writer_add(w, sha, src, sz), 0);
    /* a file that is not what the manifest says is caught while packing */
    char wrong[SHA256_HEX_LEN + 1];
    memset(wrong, 'f', SHA256_HEX_LEN);
    wrong[SHA256_HEX_LEN] = '\0';
    assert_int_equal(pack_writer_add(w, wrong, src, sz), -ESTALE);
    pack_writer_free(w);
    close(fd);
    fd = open(pk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_int_equal(pack_writer_new(fd_writer, &fd, &w), 0);
    assert_int_equal(pack_writer_add(w, sha, src, sz), 0);
    assert_int_equal(pack_writer_finish(w), 0);
    close(fd);
    struct pack_reader *r;
    assert_int_equal(pack_reader_open(pk, &r), 0);
    char got[SHA256_HEX_LEN + 1], buf[64];
    uint64_t gsz;
    assert_int_equal(pack_reader_next(r, got, &gsz), 1);
    assert_string_equal(got, sha);
    assert_int_equal(gsz, 5);
    assert_int_equal(pack_reader_read(r, buf, sizeof buf), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(pack_reader_next(r, got, &gsz), 0);
    pack_reader_free(r);
}

/* The pack writer does not hash a file again when its inode is the one the manifest walk
 * hashed (what the controller sends to every host); a file changed since, even to the same
 * size, is hashed and refused (-ESTALE), as is a file rewritten in place (fs_write_atomic
 * makes a new inode; an in-place write moves mtime). */
static void test_pack_seen_skips_rehash(void **state)
{
    (void)state;
    mk("r");
    put("r/a", "hello", 0644);
    char dir[512], src[512], pk[512];
    snprintf(dir, sizeof dir, "%s/r", tmpd);
    snprintf(src, sizeof src, "%s/r/a", tmpd);
    snprintf(pk, sizeof pk, "%s/s.pack", tmpd);
    struct manifest2 *m;
    assert_int_equal(manifest2_from_dir(dir, "r", &m), 0);
    const struct m2_entry *e = manifest2_find(m, "a");
    assert_non_null(e);
    assert_int_not_equal(e->src_ino, 0);
    struct pack_seen seen = { e->src_dev, e->src_ino, e->src_mtime_ns, e->src_ctime_ns };
    int fd = open(pk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    struct pack_writer *w;
    assert_int_equal(pack_writer_new(fd_writer, &fd, &w), 0);
    /* unchanged: trusted (a wrong name proves nothing was hashed; the agent would refuse it) */
    char wrong[SHA256_HEX_LEN + 1];
    memset(wrong, 'f', SHA256_HEX_LEN);
    wrong[SHA256_HEX_LEN] = '\0';
    assert_int_equal(pack_writer_add_seen(w, wrong, src, e->size, &seen), 0);
    assert_int_equal(pack_writer_add_seen(w, e->sha256, src, e->size, &seen), 0);
    /* the same size, other bytes, written in place: mtime moved, so hashed, and refused */
    int f = open(src, O_WRONLY);
    assert_true(f >= 0);
    struct timespec ts = { 0, 2000000 };
    nanosleep(&ts, NULL);
    assert_int_equal(write(f, "jello", 5), 5);
    close(f);
    assert_int_equal(pack_writer_add_seen(w, e->sha256, src, e->size, &seen), -ESTALE);
    /* a parsed manifest has no identity: always hashed */
    struct pack_seen none = { 0 };
    assert_int_equal(pack_writer_add_seen(w, wrong, src, e->size, &none), -ESTALE);
    pack_writer_free(w);
    close(fd);
    manifest2_free(m);
}

/* The release name is the directory's, however the path is typed: a trailing slash (tab
 * completion adds one) used to make the whole argument the name, so the same tree got another
 * release id. */
static void test_name_of_dir(void **state)
{
    (void)state;
    mk("c_g8");
    put("c_g8/run.sh", "#!/bin/sh\n", 0755);
    char cwd[512], p[512], name[MANIFEST_NAME_MAX], id0[RELEASE_ID_LEN + 1] = "";
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpd), 0);
    const char *forms[] = { "c_g8", "c_g8/", "c_g8//", "./c_g8", "c_g8/.", "c_g8/sub/.." };
    mk("c_g8/sub");
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        manifest2_name_of_dir(forms[i], name);
        assert_string_equal(name, "c_g8");
    }
    assert_int_equal(chdir("c_g8"), 0);
    manifest2_name_of_dir(".", name);
    assert_string_equal(name, "c_g8");
    manifest2_name_of_dir("./", name);
    assert_string_equal(name, "c_g8");
    assert_int_equal(chdir("sub"), 0);
    manifest2_name_of_dir("..", name);
    assert_string_equal(name, "c_g8");
    assert_int_equal(chdir(".."), 0);
    /* the walk names its manifest so: one id for "c_g8/" and "." */
    struct manifest2 *m = NULL;
    const char *dirs[] = { ".", "../c_g8/" };
    for (size_t i = 0; i < 2; i++) {
        char *text = NULL;
        char id[RELEASE_ID_LEN + 1];
        size_t len;
        assert_int_equal(manifest2_from_dir(dirs[i], NULL, &m), 0);
        assert_string_equal(m->name, "c_g8");
        assert_int_equal(manifest2_dump(m, &text, &len, id), 0);
        if (i == 0)
            strcpy(id0, id);
        else
            assert_string_equal(id, id0);
        free(text);
        manifest2_free(m);
        m = NULL;
    }
    snprintf(p, sizeof p, "%s/c_g8/", tmpd);
    manifest2_name_of_dir(p, name);
    assert_string_equal(name, "c_g8");
    assert_int_equal(chdir(cwd), 0);
}

/* A relative symlink that stays inside the release but whose target is not in it passed `drover
 * validate` silently and failed at run time.  It is still allowed (the job may create the target,
 * `latest -> ckpt/step-100`), but found, for validate to say; links that resolve, to the root or
 * into .drover-env are not. */
static void test_dangling_link_found(void **state)
{
    (void)state;
    mk("bin");
    put("bin/run", "#!/bin/sh\n", 0755);
    ln("run", "bin/alias");
    ln("..", "bin/root");
    ln("../ckpt/step-100", "bin/latest");
    ln(".drover-env/bin/python", "python");
    struct manifest2 *m = NULL;
    assert_int_equal(manifest2_from_dir(tmpd, "rel", &m), 0);
    size_t pos = 0;
    const struct m2_entry *l = manifest2_dangling_link(m, &pos);
    assert_non_null(l);
    assert_string_equal(l->path, "bin/latest");
    assert_string_equal(l->target, "../ckpt/step-100");
    assert_null(manifest2_dangling_link(m, &pos));
    manifest2_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outside_links_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreadable_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserved_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_refuses, setup, teardown),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test_setup_teardown(test_exec_problem_follows_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_of_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_seen_skips_rehash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dangling_link_found, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
