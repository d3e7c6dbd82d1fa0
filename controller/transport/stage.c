/* controller/transport/stage.c: uploads into the host's content-addressed store, once per host, verified
 * by sha256sum on the host afterwards (a full disk can leave a short file behind a copy that
 * "succeeded").  Never writes anywhere on the host but staging_dir.
 */
#include "controller/transport/stage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

static bool remote_has(struct conn *c, const char *remote, const char *sha)
{
    struct exec_result res;
    const char *sum[] = { "sha256sum", remote, NULL };
    if (conn_run(c, sum, c->inv->exec_timeout_s, &res) < 0)
        return false;
    bool ok = res.status == 0 && res.out_len >= 64 && strncmp(res.out, sha, 64) == 0;
    exec_result_done(&res);
    return ok;
}

int stage_to_host(struct fleet *f, int host, const char *local_path, const char *sha, uint64_t size,
                  const char *ext, char *ret_remote, size_t remote_sz, char *err, size_t err_sz)
{
    const struct inventory *inv = f->inv;
    const char *hname = inv->hosts[host].name;
    char remote[1024];
    snprintf(remote, sizeof remote, "%s/%s.%s", inv->staging_dir, sha, ext);
    struct conn *c;
    int r = fleet_conn(f, host, &c);
    if (r < 0) {
        snprintf(err, err_sz, "host '%s' unreachable", hname);
        return r;
    }
    struct exec_result res;
    const char *mk[] = { "mkdir", "-p", inv->staging_dir, NULL };
    r = conn_run(c, mk, inv->exec_timeout_s, &res);
    if (r < 0) {
        snprintf(err, err_sz, "host '%s': cannot create staging dir '%s': %s", hname,
                 inv->staging_dir, c->err);
        return r;
    }
    if (res.status != 0) {
        char reason[512];
        snprintf(err, err_sz, "host '%s': cannot create staging dir '%s': %s", hname,
                 inv->staging_dir, exec_result_reason(&res, reason, sizeof reason));
        exec_result_done(&res);
        return -EIO;
    }
    exec_result_done(&res);
    uint64_t have_size = 0;
    struct stat st;
    bool size_ok = c->ssh ? ssh_remote_size(c->ssh, remote, &have_size) == 0 && have_size == size
                          : stat(remote, &st) == 0 && (uint64_t)st.st_size == size;
    if (size_ok && remote_has(c, remote, sha)) {
        fprintf(stderr, "stage %s: already on the host (%s)\n", hname, remote);
        (void)str_copy(ret_remote, remote_sz, remote);
        return 0;
    }
    char label[128];
    snprintf(label, sizeof label, "upload %s", hname);
    double t0 = time_mono();
    r = conn_upload(c, local_path, remote, label);
    if (r < 0) {
        snprintf(err, err_sz, "host '%s': upload failed: %s", hname, c->err);
        return r;
    }
    if (!remote_has(c, remote, sha)) {
        snprintf(err, err_sz, "host '%s': uploaded file '%s' does not match sha256 %.12s "
                 "(disk full on the host?)", hname, remote, sha);
        return -EBADMSG;
    }
    fprintf(stderr, "stage %s: uploaded %.2f MiB in %.1fs\n", hname, (double)size / 1048576.0,
            time_mono() - t0);
    (void)str_copy(ret_remote, remote_sz, remote);
    return 0;
}
