/* Unit tests for common/bundle.c: pack is reproducible and round-trips; unpack refuses every
 * kind of hostile or damaged bundle (corrupted file, "../x", absolute path, symlink, hardlink,
 * extra file, size mismatch, missing file, wrong expected id, garbage) and leaves nothing behind. */
#include <archive.h>
#include <archive_entry.h>
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
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/bundle.h"
#include "common/util.h"

static char tmpd[256];

static int setup(void **state)
{
    (void)state;
    strcpy(tmpd, "/tmp/drover-bundle-test.XXXXXX");
    if (!mkdtemp(tmpd))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return fs_rm_rf(tmpd);
}

static void put(const char *rel, const char *content, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpd, rel);
    char d[512];
    strcpy(d, p);
    *strrchr(d, '/') = '\0';
    assert_int_equal(fs_mkdir_p(d, 0755), 0);
    assert_int_equal(fs_write_atomic(p, content, strlen(content), mode), 0);
    assert_int_equal(chmod(p, mode), 0);
}

static void make_release(void)
{
    put("rel/bin/run.sh", "#!/bin/sh\necho hi\n", 0755);
    put("rel/etc/config.ini", "[model]\nlayers=2\n", 0644);
    put("rel/README", "release\n", 0644);
}

static char *path(const char *rel)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", tmpd, rel);
    return p[i];
}

struct ent {
    const char *name;
    const char *data;  /* NULL for a directory or link */
    int type;          /* AE_IFREG, AE_IFDIR, AE_IFLNK; 0 = hardlink to data */
    int64_t size;      /* -1: strlen(data) */
};

/* A tar.zst with MANIFEST.json (the manifest text given) followed by ents. */
static void write_tar(const char *out, const char *manifest, const struct ent *ents, size_t n)
{
    struct archive *a = archive_write_new();
    assert_non_null(a);
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, out), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    if (manifest) {
        archive_entry_set_pathname(e, "MANIFEST.json");
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)strlen(manifest));
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        archive_write_data(a, manifest, strlen(manifest));
    }
    for (size_t i = 0; i < n; i++) {
        archive_entry_clear(e);
        archive_entry_set_pathname(e, ents[i].name);
        archive_entry_set_perm(e, 0644);
        if (ents[i].type == AE_IFLNK) {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, ents[i].data);
        } else if (ents[i].type == 0) {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_hardlink(e, ents[i].data);
        } else if (ents[i].type == AE_IFDIR) {
            archive_entry_set_filetype(e, AE_IFDIR);
            archive_entry_set_perm(e, 0755);
        } else {
            archive_entry_set_filetype(e, AE_IFREG);
            size_t len = strlen(ents[i].data);
            archive_entry_set_size(e, ents[i].size >= 0 ? ents[i].size : (la_int64_t)len);
            assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
            archive_write_data(a, ents[i].data, len);
            continue;
        }
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    }
    archive_entry_free(e);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

/* Canonical manifest text and id of the sample release. */
static char *release_manifest(char id[RELEASE_ID_LEN + 1])
{
    struct manifest *m;
    assert_int_equal(manifest_from_dir(path("rel"), "t", &m), 0);
    char *text;
    assert_int_equal(manifest_dump(m, &text, id), 0);
    manifest_free(m);
    return text;
}

static const struct ent good_ents[] = {
    {"README", "release\n", AE_IFREG, -1},
    {"bin/", NULL, AE_IFDIR, 0},
    {"bin/run.sh", "#!/bin/sh\necho hi\n", AE_IFREG, -1},
    {"etc/config.ini", "[model]\nlayers=2\n", AE_IFREG, -1},
};

static int unpack_variant(const struct ent *ents, size_t n, char *err, size_t errsz)
{
    char id[RELEASE_ID_LEN + 1], got[RELEASE_ID_LEN + 1];
    char *m = release_manifest(id);
    write_tar(path("evil.tar.zst"), m, ents, n);
    free(m);
    memset(got, 'Z', sizeof got);
    int r = bundle_unpack(path("evil.tar.zst"), path("out"), id, got, err, errsz);
    if (r < 0) {
        struct stat st;
        assert_int_equal(lstat(path("out"), &st), -1); /* removed on failure */
        assert_int_equal(got[0], 'Z');                  /* ret_ untouched */
    }
    return r;
}

static void test_pack_roundtrip_reproducible(void **state)
{
    (void)state;
    make_release();
    char id1[RELEASE_ID_LEN + 1], id2[RELEASE_ID_LEN + 1], id3[RELEASE_ID_LEN + 1];
    struct manifest *m = NULL;
    assert_int_equal(bundle_pack(path("rel"), "t", path("a.tar.zst"), id1, &m), 0);
    assert_non_null(m);
    assert_int_equal(m->nfiles, 3);
    manifest_free(m);
    sleep(1); /* a different mtime must not change the bytes */
    assert_int_equal(utimes(path("rel/README"), NULL), 0);
    assert_int_equal(bundle_pack(path("rel"), "t", path("b.tar.zst"), id2, NULL), 0);
    assert_string_equal(id1, id2);
    char *a, *b;
    size_t la, lb;
    assert_int_equal(fs_read_file(path("a.tar.zst"), 1 << 20, &a, &la), 0);
    assert_int_equal(fs_read_file(path("b.tar.zst"), 1 << 20, &b, &lb), 0);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);

    char err[256];
    assert_int_equal(bundle_unpack(path("a.tar.zst"), path("out"), id1, id3, err, sizeof err), 0);
    assert_string_equal(id1, id3);
    struct stat st;
    assert_int_equal(stat(path("out/bin/run.sh"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    assert_int_equal(stat(path("out/etc/config.ini"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    char *mt;
    assert_int_equal(fs_read_file(path("out/MANIFEST.json"), 1 << 20, &mt, NULL), 0);
    struct manifest *back;
    assert_int_equal(manifest_parse(mt, strlen(mt), &back), 0);
    assert_int_equal(back->nfiles, 3);
    manifest_free(back);
    free(mt);
    /* dest must not exist */
    assert_int_equal(bundle_unpack(path("a.tar.zst"), path("out"), NULL, id3, err, sizeof err), -EEXIST);
    assert_int_equal(stat(path("out/bin/run.sh"), &st), 0); /* and the existing tree is kept */
}

static void test_pack_refuses_symlink(void **state)
{
    (void)state;
    make_release();
    assert_int_equal(symlink("/etc/passwd", path("rel/link")), 0);
    char id[RELEASE_ID_LEN + 1];
    assert_int_equal(bundle_pack(path("rel"), "t", path("a.tar.zst"), id, NULL), -EINVAL);
    struct stat st;
    assert_int_equal(stat(path("a.tar.zst"), &st), -1);
}

static void test_unpack_good_handmade(void **state)
{
    (void)state;
    make_release();
    char err[256];
    assert_int_equal(unpack_variant(good_ents, 4, err, sizeof err), 0);
}

static void test_unpack_corrupted_file(void **state)
{
    (void)state;
    make_release();
    struct ent e[] = {good_ents[0], good_ents[1], {"bin/run.sh", "#!/bin/sh\necho HI\n", AE_IFREG, -1},
                      good_ents[3]};
    char err[256];
    assert_int_equal(unpack_variant(e, 4, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "bin/run.sh"));
    assert_non_null(strstr(err, "sha256 mismatch"));
}

static void test_unpack_dotdot(void **state)
{
    (void)state;
    make_release();
    struct ent e[] = {good_ents[0], {"../x", "evil\n", AE_IFREG, -1}};
    char err[256];
    assert_int_equal(unpack_variant(e, 2, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "../x"));
    struct stat st;
    assert_int_equal(stat(path("x"), &st), -1);
    struct ent e2[] = {{"bin/../../y", "evil\n", AE_IFREG, -1}};
    assert_int_equal(unpack_variant(e2, 1, err, sizeof err), -EINVAL);
}

static void test_unpack_absolute(void **state)
{
    (void)state;
    make_release();
    char target[300];
    snprintf(target, sizeof target, "%s/abs", tmpd);
    struct ent e[] = {{target, "evil\n", AE_IFREG, -1}};
    char err[256];
    assert_int_equal(unpack_variant(e, 1, err, sizeof err), -EINVAL);
    struct stat st;
    assert_int_equal(stat(target, &st), -1);
}

static void test_unpack_symlink_and_hardlink(void **state)
{
    (void)state;
    make_release();
    struct ent e[] = {{"README", "/etc/passwd", AE_IFLNK, 0}};
    char err[256];
    assert_int_equal(unpack_variant(e, 1, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "README"));
    struct ent h[] = {{"README", "/etc/passwd", 0, 0}};
    assert_int_equal(unpack_variant(h, 1, err, sizeof err), -EINVAL);
}

static void test_unpack_extra_file(void **state)
{
    (void)state;
    make_release();
    struct ent e[] = {good_ents[0], good_ents[2], good_ents[3], {"bin/extra", "x\n", AE_IFREG, -1}};
    char err[256];
    assert_int_equal(unpack_variant(e, 4, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "bin/extra"));
    struct ent d[] = {{"lib/", NULL, AE_IFDIR, 0}};
    assert_int_equal(unpack_variant(d, 1, err, sizeof err), -EINVAL);
    struct ent dup[] = {good_ents[0], good_ents[0]};
    assert_int_equal(unpack_variant(dup, 2, err, sizeof err), -EINVAL);
}

static void test_unpack_size_mismatch_and_missing(void **state)
{
    (void)state;
    make_release();
    struct ent e[] = {good_ents[0], good_ents[2], {"etc/config.ini", "[model]\nlayers=22\n", AE_IFREG, -1}};
    char err[256];
    assert_int_equal(unpack_variant(e, 3, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "size mismatch"));
    struct ent miss[] = {good_ents[0], good_ents[2]};
    assert_int_equal(unpack_variant(miss, 2, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "etc/config.ini"));
}

static void test_unpack_wrong_id_and_garbage(void **state)
{
    (void)state;
    make_release();
    char id[RELEASE_ID_LEN + 1], got[RELEASE_ID_LEN + 1], err[256];
    assert_int_equal(bundle_pack(path("rel"), "t", path("a.tar.zst"), id, NULL), 0);
    char wrong[RELEASE_ID_LEN + 1];
    memset(wrong, 'a', RELEASE_ID_LEN);
    wrong[RELEASE_ID_LEN] = '\0';
    assert_int_equal(bundle_unpack(path("a.tar.zst"), path("out"), wrong, got, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "release id mismatch"));
    struct stat st;
    assert_int_equal(stat(path("out"), &st), -1);

    assert_int_equal(fs_write_atomic(path("g.tar.zst"), "hello world, not a tar", 22, 0644), 0);
    assert_int_equal(bundle_unpack(path("g.tar.zst"), path("out"), NULL, got, err, sizeof err), -EBADMSG);
    assert_int_equal(stat(path("out"), &st), -1);
    /* a tar without MANIFEST.json first */
    write_tar(path("n.tar.zst"), NULL, good_ents, 1);
    assert_int_equal(bundle_unpack(path("n.tar.zst"), path("out"), NULL, got, err, sizeof err), -EBADMSG);
    assert_non_null(strstr(err, "MANIFEST.json"));
    /* truncated blob */
    char *a;
    size_t la;
    assert_int_equal(fs_read_file(path("a.tar.zst"), 1 << 20, &a, &la), 0);
    assert_int_equal(fs_write_atomic(path("t.tar.zst"), a, la / 2, 0644), 0);
    free(a);
    assert_true(bundle_unpack(path("t.tar.zst"), path("out"), NULL, got, err, sizeof err) < 0);
    assert_int_equal(stat(path("out"), &st), -1);
    assert_int_equal(bundle_unpack(path("missing"), path("out"), NULL, got, NULL, 0), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pack_roundtrip_reproducible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_refuses_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_good_handmade, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_corrupted_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_dotdot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_absolute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_symlink_and_hardlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_extra_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_size_mismatch_and_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpack_wrong_id_and_garbage, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
