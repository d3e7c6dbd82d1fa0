/* bench/objects/scale.c DIR NFILES BIG_GIB: the release path at real size, without a lab.
 * Makes DIR/src with NFILES small distinct files (200 per directory, one relative symlink per
 * directory) and, when BIG_GIB > 0, one sparse file of BIG_GIB GiB (past 4 GiB: 64-bit sizes);
 * then times each step the controller and the agent run on it: the walk and hash into a v2
 * manifest, dump and parse of its text, the agent's `release missing` against an empty store,
 * a pack of every object streamed through a pipe into `release install -` (verify each object,
 * store it, assemble the tree, check it), the re-verify before a reactivation with the
 * verification record (stat only), and a full re-hash without it.  One line per step, and the
 * peak RSS at the end (getrusage).  Exit 1 when a step fails or a check does not hold. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/objstore.h"
#include "agent/store.h"
#include "common/manifest2.h"
#include "common/pack.h"
#include "common/util.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static double t_step;
static void step(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void step(const char *what, const char *fmt, ...)
{
    double t = now();
    printf("%-48s %8.2f s  ", what, t - t_step);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    t_step = now();
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "scale: %s:%d: %s failed\n", __FILE__, __LINE__, #x);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int fd_writer(void *ctx, const void *buf, size_t len)
{
    return fd_write_all(*(int *)ctx, buf, len);
}

static long rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: scale DIR NFILES BIG_GIB\n");
        return 2;
    }
    const char *dir = argv[1];
    long nfiles = atol(argv[2]), big_gib = atol(argv[3]);
    char src[1024], root[1024], p[2048];
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(root, sizeof root, "%s/agent", dir);
    (void)fs_rm_rf(src);
    (void)fs_rm_rf(root);
    t_step = now();

    /* the tree: a venv-like fan-out of directories, distinct small files, one symlink each */
    long ndirs = (nfiles + 199) / 200;
    for (long d = 0; d < ndirs; d++) {
        snprintf(p, sizeof p, "%s/lib/pkg%04ld/sub", src, d);
        CHECK(fs_mkdir_p(p, 0755) == 0);
        for (long k = 0; k < 200 && d * 200 + k < nfiles; k++) {
            char body[64];
            int n = snprintf(body, sizeof body, "# module %ld\nx = %ld\n", d * 200 + k, k);
            snprintf(p, sizeof p, "%s/lib/pkg%04ld/%s/m%03ld.py", src, d, k < 100 ? "." : "sub", k);
            int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            CHECK(fd >= 0 && fd_write_all(fd, body, (size_t)n) == 0);
            close(fd);
        }
        snprintf(p, sizeof p, "%s/lib/pkg%04ld/link.py", src, d);
        CHECK(symlink("m000.py", p) == 0);
    }
    uint64_t big = (uint64_t)big_gib << 30;
    if (big) {
        snprintf(p, sizeof p, "%s/weights.bin", src);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0 && ftruncate(fd, (off_t)big) == 0);
        CHECK(pwrite(fd, "tail", 4, (off_t)big - 4) == 4); /* a non-zero byte past 4 GiB */
        close(fd);
    }
    step("make tree", "%ld files, %ld dirs, %ld symlinks, big file %llu bytes", nfiles, ndirs, ndirs,
         (unsigned long long)big);

    struct manifest2 *m;
    CHECK(manifest2_from_dir(src, "scale", &m) == 0);
    step("controller: walk + hash (manifest)", "%zu entries, %zu files, %.1f MiB", m->n, m->nfiles,
         (double)m->file_bytes / 1048576.0);
    CHECK(m->nfiles == (size_t)nfiles + (big ? 1 : 0));
    char *text;
    size_t len;
    char id[RELEASE_ID_LEN + 1];
    CHECK(manifest2_dump(m, &text, &len, id) == 0);
    struct manifest2 *m2;
    CHECK(manifest2_parse(text, len, &m2) == 0);
    CHECK(m2->n == m->n);
    if (big) {
        const struct m2_entry *e = manifest2_find(m2, "weights.bin");
        CHECK(e && e->size == big); /* 64-bit through the text */
    }
    manifest2_free(m2);
    step("manifest dump + parse", "%.1f MiB of text, id %.12s", (double)len / 1048576.0, id);

    struct store s;
    CHECK(store_open(&s, root) == 0);
    struct m2_ranges rg;
    bool present;
    CHECK(objstore_missing(&s, m, id, NULL, &rg, &present) == 0 && !present);
    m2_ranges_done(&rg);
    step("agent: release missing (empty store)", "all %zu objects", m->nfiles);

    /* the pack streams through a pipe into `release install -`, as from a host */
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(pfd[0]);
        struct pack_writer *w;
        int r = pack_writer_new(fd_writer, &pfd[1], &w);
        for (size_t i = 0; r == 0 && i < m->n; i++)
            if (m->e[i].type == M2_FILE) {
                snprintf(p, sizeof p, "%s/%s", src, m->e[i].path);
                r = pack_writer_add(w, m->e[i].sha256, p, m->e[i].size);
            }
        if (r == 0)
            r = pack_writer_finish(w);
        _exit(r == 0 ? 0 : 1);
    }
    close(pfd[1]);
    CHECK(dup2(pfd[0], STDIN_FILENO) == STDIN_FILENO);
    close(pfd[0]);
    char err[1024] = "";
    int r = objstore_add(&s, text, len, id, "-", NULL, err, sizeof err);
    if (r != 0)
        fprintf(stderr, "scale: install: %s\n", err);
    CHECK(r == 0);
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    step("pack -> agent: install (verify+store+assemble)", "release %.12s installed", id);

    struct objstore_vstats vs = { 0 };
    CHECK(objstore_verify_stats(&s, id, &vs, err, sizeof err) == 0);
    CHECK(vs.hashed == 0);
    step("agent: re-verify, recorded", "%zu files stat-ed, %zu hashed", vs.stat_only, vs.hashed);

    snprintf(p, sizeof p, "%s/objects/.verified", root);
    CHECK(unlink(p) == 0);
    memset(&vs, 0, sizeof vs);
    CHECK(objstore_verify_stats(&s, id, &vs, err, sizeof err) == 0);
    step("agent: re-verify, no record (full)", "%zu files hashed, %.1f MiB", vs.hashed,
         (double)vs.bytes_hashed / 1048576.0);

    memset(&vs, 0, sizeof vs);
    CHECK(objstore_verify_stats(&s, id, &vs, err, sizeof err) == 0 && vs.hashed == 0);
    step("agent: re-verify again", "%zu stat-ed, %zu hashed", vs.stat_only, vs.hashed);

    if (big) { /* the big file's object: its size past 4 GiB, its last bytes intact */
        const struct m2_entry *e = manifest2_find(m, "weights.bin");
        snprintf(p, sizeof p, "%s/releases/%s/weights.bin", root, id);
        struct stat bst;
        CHECK(e && stat(p, &bst) == 0 && (uint64_t)bst.st_size == big);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        char tail[4];
        CHECK(fd >= 0 && pread(fd, tail, 4, (off_t)big - 4) == 4 && !memcmp(tail, "tail", 4));
        close(fd);
    }
    printf("peak RSS %ld MiB\n", rss_mib());
    manifest2_free(m);
    free(text);
    if (!getenv("SCALE_KEEP")) {
        (void)fs_rm_rf(src);
        (void)fs_rm_rf(root);
    }
    return 0;
}
