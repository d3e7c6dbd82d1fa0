/* controller/transport/ssh.c: libssh sessions: connect, host key check against the inventory's
 * known_hosts, public-key authentication, exec channels without a pty, non-blocking stream
 * channels, SFTP uploads in bounded chunks.  libssh errors become -errno here and nowhere else.
 * Must never accept an unknown or changed host key on its own, and never log above debug:
 * callers report (they know the context).
 */
#include "controller/transport/ssh.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <libssh/libssh.h>
#include <limits.h>
#include <libssh/sftp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "controller/transport/knownhosts.h"

struct ssh_conn {
    ssh_session s;
    long timeout_s;  /* libssh's SSH_OPTIONS_TIMEOUT for blocking calls: connect_timeout */
    char label[160]; /* "host 'h1' (127.0.0.2:22)" */
};

struct ssh_stream {
    struct ssh_conn *c;
    ssh_channel ch;
};

static int translate_connect_error(const char *msg)
{
    if (strstr(msg, "refused"))
        return -ECONNREFUSED;
    if (strstr(msg, "imeout") || strstr(msg, "timed out"))
        return -ETIMEDOUT;
    return -EHOSTUNREACH;
}

int ssh_proxyjump_command(const char *proxy, const struct ssh_params *p, const char *log_path, char *out,
                          size_t out_sz)
{
    /* libssh's form (config.c, ssh_config_parse_proxy_jump): "ssh" then its -l/-p, then
     * " -W '[%h]:%p' " and the host */
    if (strncmp(proxy, "ssh ", 4) != 0 || !strstr(proxy, " -W '[%h]:%p' "))
        return 0;
    const char *paths[] = { p->ssh_config, p->known_hosts, p->identity, log_path };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (paths[i] && strpbrk(paths[i], "'%"))
            return -EINVAL;
    char idopt[PATH_MAX + 16] = "", logopt[PATH_MAX + 16] = "";
    if (p->identity && p->identity[0])
        snprintf(idopt, sizeof idopt, " -i '%s'", p->identity);
    if (log_path && log_path[0])
        snprintf(logopt, sizeof logopt, " -E '%s'", log_path);
    int n = snprintf(out, out_sz,
                     "ssh -F '%s'%s -o BatchMode=yes -o StrictHostKeyChecking=yes -o 'UserKnownHostsFile=%s' "
                     "-o GlobalKnownHostsFile=/dev/null -o ConnectTimeout=%d%s %s",
                     p->ssh_config && p->ssh_config[0] ? p->ssh_config : "/dev/null", idopt,
                     p->known_hosts ? p->known_hosts : "/dev/null",
                     (int)(p->connect_timeout_s > 0 ? p->connect_timeout_s : 10), logopt, proxy + 4);
    return n < 0 || (size_t)n >= out_sz ? -ENAMETOOLONG : 1;
}

/* The jump host's log file of session s (the `-E '...'` of its hardened ProxyJump command):
 * its last line into why (when not NULL; "" none), then the file removed.  The running ssh keeps
 * its descriptor; nothing else reads the file. */
static void jump_log_take(ssh_session s, char *why, size_t why_sz)
{
    if (why && why_sz)
        why[0] = '\0';
    char *pc = NULL;
    if (ssh_options_get(s, SSH_OPTIONS_PROXYCOMMAND, &pc) != SSH_OK)
        return;
    const char *e = strstr(pc, " -E '/tmp/drover-jump-");
    char path[64];
    if (e && sscanf(e + 5, "%63[^']", path) == 1) {
        char *text = NULL;
        size_t len = 0;
        if (why && fs_read_file(path, 64 * 1024, &text, &len) == 0) {
            while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                text[--len] = '\0';
            const char *last = strrchr(text, '\n');
            snprintf(why, why_sz, "%s", last ? last + 1 : text);
        }
        free(text);
        (void)unlink(path);
    }
    ssh_string_free_char(pc);
}

static int session_new(const struct ssh_params *p, ssh_session *ret, char *label, size_t label_sz)
{
    snprintf(label, label_sz, "host '%s' (%s:%d)", p->name, p->address, p->port);
    ssh_session s = ssh_new();
    if (!s)
        return -ENOMEM;
    long timeout = (long)(p->connect_timeout_s > 0 ? p->connect_timeout_s : 10);
    unsigned port = (unsigned)p->port;
    int off = 0;
    bool cfg = p->ssh_config && p->ssh_config[0];
    /* With an ssh_config, the inventory's address is the Host it matches (an alias); what the
     * inventory writes explicitly is set first, since libssh lets the config fill only what is
     * still unset.  The config is read from this one file (PROCESS_CONFIG off: never the
     * system-wide one behind the operator's back). */
    if (ssh_options_set(s, SSH_OPTIONS_HOST, p->address) < 0 ||
        ((!cfg || p->port_set) && ssh_options_set(s, SSH_OPTIONS_PORT, &port) < 0) ||
        ((!cfg || p->user_set) && ssh_options_set(s, SSH_OPTIONS_USER, p->user) < 0) ||
        ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &off) < 0 ||
        (cfg && ssh_options_parse_config(s, p->ssh_config) < 0) ||
        /* libssh's Port line overrides an earlier setting: the inventory's goes in again */
        (cfg && p->port_set && ssh_options_set(s, SSH_OPTIONS_PORT, &port) < 0) ||
        (cfg && p->user_set && ssh_options_set(s, SSH_OPTIONS_USER, p->user) < 0) ||
        ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout) < 0 ||
        /* After the config: only the inventory's known_hosts decides, and the system-wide
         * file must not vouch for a host. */
        ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, p->known_hosts) < 0 ||
        ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0) {
        ssh_free(s);
        return -EINVAL;
    }
    /* a ProxyJump: the first hop verified against the inventory's known_hosts too */
    char *pc = NULL;
    if (cfg && ssh_options_get(s, SSH_OPTIONS_PROXYCOMMAND, &pc) == SSH_OK) {
        char hardened[3 * PATH_MAX + 1024], log_path[] = "/tmp/drover-jump-XXXXXX";
        int fd = strncmp(pc, "ssh ", 4) == 0 ? mkostemp(log_path, O_CLOEXEC) : -1;
        if (fd >= 0)
            close(fd);
        int r = ssh_proxyjump_command(pc, p, fd >= 0 ? log_path : NULL, hardened, sizeof hardened);
        ssh_string_free_char(pc);
        if (r <= 0 && fd >= 0)
            (void)unlink(log_path);
        if (r < 0 || (r > 0 && ssh_options_set(s, SSH_OPTIONS_PROXYCOMMAND, hardened) < 0)) {
            if (r > 0)
                (void)unlink(log_path);
            ssh_free(s);
            return -EINVAL;
        }
    }
    char *u = NULL;
    if (cfg && ssh_options_get(s, SSH_OPTIONS_USER, &u) != SSH_OK &&
        ssh_options_set(s, SSH_OPTIONS_USER, p->user) < 0) { /* the config named none: root */
        ssh_free(s);
        return -EINVAL;
    }
    ssh_string_free_char(u);
    if (cfg) {
        char *h = NULL;
        unsigned pt = 0;
        if (ssh_options_get(s, SSH_OPTIONS_HOST, &h) == SSH_OK &&
            ssh_options_get_port(s, &pt) == SSH_OK)
            snprintf(label, label_sz, "host '%s' (%s:%u via %s)", p->name, h, pt, p->ssh_config);
        ssh_string_free_char(h);
    }
    *ret = s;
    return 0;
}

int ssh_resolve(const struct ssh_params *p, struct ssh_target *ret, char *err, size_t err_sz)
{
    ssh_session s;
    char label[160];
    int r = session_new(p, &s, label, sizeof label);
    if (r < 0) {
        snprintf(err, err_sz, "host '%s': cannot apply %s", p->name,
                 p->ssh_config && p->ssh_config[0] ? p->ssh_config : "its SSH options");
        return r;
    }
    struct ssh_target t = { .port = 22 };
    char *v = NULL;
    unsigned pt = 0;
    if (ssh_options_get(s, SSH_OPTIONS_HOST, &v) == SSH_OK)
        (void)str_copy(t.host, sizeof t.host, v);
    ssh_string_free_char(v);
    v = NULL;
    if (ssh_options_get(s, SSH_OPTIONS_USER, &v) == SSH_OK)
        (void)str_copy(t.user, sizeof t.user, v);
    ssh_string_free_char(v);
    v = NULL;
    if (ssh_options_get(s, SSH_OPTIONS_PROXYCOMMAND, &v) == SSH_OK)
        (void)str_copy(t.proxy, sizeof t.proxy, v);
    ssh_string_free_char(v);
    jump_log_take(s, NULL, 0); /* resolving connects nowhere: no log to keep */
    if (ssh_options_get_port(s, &pt) == SSH_OK)
        t.port = (int)pt;
    ssh_free(s);
    *ret = t;
    return 0;
}

static int key_fingerprint(const ssh_key key, char fp[SSH_FP_MAX])
{
    unsigned char *hash = NULL;
    size_t hlen = 0;
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) < 0)
        return -EIO;
    char *f = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
    ssh_clean_pubkey_hash(&hash);
    if (!f)
        return -ENOMEM;
    (void)str_copy(fp, SSH_FP_MAX, f);
    ssh_string_free_char(f);
    return 0;
}

static int server_fingerprint(ssh_session s, char fp[SSH_FP_MAX])
{
    ssh_key key = NULL;
    if (ssh_get_server_publickey(s, &key) < 0)
        return -EIO;
    int r = key_fingerprint(key, fp);
    ssh_key_free(key);
    return r;
}

/* The SHA256 fingerprints known_hosts holds for p's address:port (hashed entries included, as
 * libssh matches them), joined with " or " into out; "" when none can be read.  For the
 * changed-key message: libssh does not hand the old key out. */
static void known_fingerprints(const struct ssh_params *p, char *out, size_t out_sz)
{
    out[0] = '\0';
    char pattern[300], *text;
    size_t len, off = 0;
    if (knownhosts_pattern(p->address, p->port, pattern, sizeof pattern) < 0 ||
        fs_read_file(p->known_hosts, KNOWNHOSTS_MAX_BYTES, &text, &len) < 0)
        return;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        while (*line == ' ' || *line == '\t')
            line++;
        if (!*line || *line == '#' || *line == '@')
            continue;
        struct ssh_knownhosts_entry *e = NULL;
        char fp[SSH_FP_MAX];
        if (ssh_known_hosts_parse_line(pattern, line, &e) == SSH_OK && e && e->publickey &&
            key_fingerprint(e->publickey, fp) == 0 && !strstr(out, fp)) {
            int w = snprintf(out + off, out_sz - off, "%s%s", off ? " or " : "", fp);
            if (w > 0 && (size_t)w < out_sz - off)
                off += (size_t)w;
        }
        ssh_knownhosts_entry_free(e);
    }
    free(text);
}

/* A public key libssh reads, to ask it whether a known_hosts line's host field names a host
 * (known_hosts_bad_line); a throwaway key of no machine. */
#define KNOWNHOSTS_PROBE_KEY \
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEhiX4poiSGIPxloKAi7L2rKvdDPCdSUS8VDCdb9GcX9"

/* Why libssh cannot read known_hosts line `line`, for the operator. */
static void bad_line_why(const char *line, char *why, size_t why_sz)
{
    char copy[512], *save = NULL;
    (void)str_copy(copy, sizeof copy, line);
    (void)strtok_r(copy, " \t", &save); /* the host field */
    const char *type = strtok_r(NULL, " \t", &save);
    const char *key = type ? strtok_r(NULL, " \t", &save) : NULL;
    char shown[64];
    if (!type)
        snprintf(why, why_sz, "no key type and no key after the host");
    else if (ssh_key_type_from_name(type) == SSH_KEYTYPE_UNKNOWN)
        snprintf(why, why_sz, "key type '%s' is not one libssh knows",
                 text_escape(type, strlen(type), shown, sizeof shown));
    else if (!key)
        snprintf(why, why_sz, "no key after the key type");
    else
        snprintf(why, why_sz, "its %s key does not decode", type);
}

/* libssh 0.10 reads known_hosts for a host line by line and gives up on the whole file at the
 * first line that names the host but that it cannot read (a key that does not decode, a key
 * type it does not know, a missing field): the host is then "unknown", whatever key the file
 * holds for it before or after that line, and the key `drover trust` adds is not seen either.
 * The 1-based number of that line of s's host in file, and why into why; 0 when there is none
 * (or the file cannot be read). */
static int known_hosts_bad_line(ssh_session s, const char *file, char *why, size_t why_sz)
{
    char *host = NULL, pattern[300], *text;
    unsigned port = 22;
    size_t len;
    if (ssh_options_get(s, SSH_OPTIONS_HOST, &host) != SSH_OK)
        return 0;
    (void)ssh_options_get_port(s, &port);
    int r = knownhosts_pattern(host, (int)port, pattern, sizeof pattern);
    ssh_string_free_char(host);
    if (r < 0 || fs_read_file(file, KNOWNHOSTS_MAX_BYTES, &text, &len) < 0)
        return 0;
    int found = 0, lineno = 0;
    for (char *line = text, *next; line && !found; line = next) {
        lineno++;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p || *p == '#' || *p == '@') /* as libssh: skipped, never read as an entry */
            continue;
        /* Is it this host's line?  Asked of libssh with the line's host field and a key it
         * reads (on a line it cannot read, libssh 0.10 loses the entry it built: LeakSanitizer
         * caught it), then the line's own key is checked here as libssh checks it. */
        char fields[512], probe[700], *save = NULL;
        (void)str_copy(fields, sizeof fields, p);
        const char *hosts = strtok_r(fields, " \t", &save);
        const char *type = strtok_r(NULL, " \t", &save);
        const char *b64 = type ? strtok_r(NULL, " \t", &save) : NULL;
        snprintf(probe, sizeof probe, "%s %s", hosts, KNOWNHOSTS_PROBE_KEY);
        struct ssh_knownhosts_entry *e = NULL;
        int m = ssh_known_hosts_parse_line(pattern, probe, &e);
        ssh_knownhosts_entry_free(e);
        if (m != SSH_OK)
            continue; /* another host's line (libssh skips those) */
        enum ssh_keytypes_e t = type ? ssh_key_type_from_name(type) : SSH_KEYTYPE_UNKNOWN;
        ssh_key k = NULL;
        bool readable = b64 && t != SSH_KEYTYPE_UNKNOWN &&
                        ssh_pki_import_pubkey_base64(b64, t, &k) == SSH_OK;
        ssh_key_free(k);
        if (!readable) {
            found = lineno;
            bad_line_why(p, why, why_sz);
        }
    }
    free(text);
    return found;
}

/* "SHA256:" and 43 base64 characters (no padding), as ssh-keygen -l and drover print them. */
bool ssh_fingerprint_is_valid(const char *fp)
{
    if (strncmp(fp, "SHA256:", 7) != 0)
        return false;
    size_t n = 0;
    for (const char *q = fp + 7; *q; q++, n++)
        if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
              *q == '+' || *q == '/'))
            return false;
    return n == 43;
}

static int session_connect(ssh_session s, const char *label, char *err, size_t err_sz)
{
    int ok = ssh_connect(s) == SSH_OK;
    char why[512];
    jump_log_take(s, ok ? NULL : why, sizeof why);
    if (!ok) {
        const char *m = ssh_get_error(s);
        if (why[0]) /* the jump host's ssh said why (libssh only saw the proxy close) */
            snprintf(err, err_sz, "%s: cannot connect through the jump host: %s (%s)", label, why, m);
        else
            snprintf(err, err_sz, "%s: cannot connect: %s", label, m);
        return translate_connect_error(m);
    }
    return 0;
}

/* 0 known and matching; -ENOKEY unknown; -EKEYREJECTED changed; -EIO. fp always filled.
 * *bad: the known_hosts line of s's host that libssh cannot read (known_hosts_bad_line, why
 * into why), 0 none; such a file is not handed to libssh at all, which would call the host
 * unknown (-ENOKEY) and lose the entry it built for that line (LeakSanitizer, libssh 0.10). */
static int session_check_key(ssh_session s, const char *known_hosts, char fp[SSH_FP_MAX], int *bad,
                             char *why, size_t why_sz)
{
    fp[0] = '\0';
    *bad = 0;
    if (server_fingerprint(s, fp) < 0)
        return -EIO;
    if ((*bad = known_hosts_bad_line(s, known_hosts, why, why_sz)) > 0)
        return -ENOKEY;
    switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
        return 0;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
        return -EKEYREJECTED;
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
        return -ENOKEY;
    default:
        return -EIO;
    }
}

int ssh_conn_open(const struct ssh_params *p, struct ssh_conn **ret_conn, char *err, size_t err_sz)
{
    struct ssh_conn *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->timeout_s = (long)(p->connect_timeout_s > 0 ? p->connect_timeout_s : 10);
    int r = session_new(p, &c->s, c->label, sizeof c->label);
    if (r < 0) {
        snprintf(err, err_sz, "host '%s': cannot set up an SSH session", p->name);
        free(c);
        return r;
    }
    r = session_connect(c->s, c->label, err, err_sz);
    if (r < 0)
        goto fail;
    char fp[SSH_FP_MAX], why[160];
    int bad;
    r = session_check_key(c->s, p->known_hosts, fp, &bad, why, sizeof why);
    if (bad > 0) { /* trust would add a key that is not seen either: the line is named */
        snprintf(err, err_sz, "%s: cannot check the host key %s: known_hosts %s:%d is not a valid "
                 "entry (%s), and libssh reads no further for this host: remove or fix that line",
                 c->label, fp, p->known_hosts, bad, why);
        goto fail;
    }
    if (r == -ENOKEY) {
        struct stat st;
        const char *trust = p->trust_cmd ? p->trust_cmd : "drover trust HOST";
        if (stat(p->known_hosts, &st) < 0 && errno == ENOENT) /* libssh: "not found", as for a new host */
            snprintf(err, err_sz, "%s: unknown host key %s: the known_hosts file '%s' does not exist "
                     "(no host is trusted yet, or [drover] known_hosts names another file); if this "
                     "is the right host, run: %s (it creates the file)", c->label, fp, p->known_hosts,
                     trust);
        else
            snprintf(err, err_sz, "%s: unknown host key %s; if this is the right host, run: %s",
                     c->label, fp, trust);
        goto fail;
    }
    if (r == -EKEYREJECTED) {
        char old[3 * SSH_FP_MAX];
        known_fingerprints(p, old, sizeof old);
        snprintf(err, err_sz, "%s: host key CHANGED: %s has %s, the host now shows %s; this may "
                 "be an attack; if you know why it changed, check the new fingerprint out of "
                 "band and run: %s --fingerprint %s --replace", c->label, p->known_hosts,
                 old[0] ? old : "another key", fp, p->trust_cmd ? p->trust_cmd : "drover trust HOST",
                 fp);
        goto fail;
    }
    if (r < 0) {
        snprintf(err, err_sz, "%s: cannot check the host key against %s: %s", c->label,
                 p->known_hosts, ssh_get_error(c->s));
        goto fail;
    }
    int auth;
    if (p->identity && p->identity[0]) {
        ssh_key key = NULL;
        if (ssh_pki_import_privkey_file(p->identity, NULL, NULL, NULL, &key) != SSH_OK) {
            snprintf(err, err_sz, "%s: cannot read identity '%s' (missing, unreadable, or "
                     "passphrase-protected)", c->label, p->identity);
            r = -EACCES;
            goto fail;
        }
        auth = ssh_userauth_publickey(c->s, NULL, key);
        ssh_key_free(key);
    } else {
        auth = ssh_userauth_publickey_auto(c->s, NULL, NULL);
    }
    if (auth != SSH_AUTH_SUCCESS) {
        /* which key was offered, and where its public half must be: "refused" alone left the
         * operator guessing between the agent, ~/.ssh and the inventory's identity */
        char keys[1200];
        if (p->identity && p->identity[0])
            snprintf(keys, sizeof keys, "with the identity '%s' (its .pub must be in that user's "
                     "~/.ssh/authorized_keys on the host)", p->identity);
        else
            snprintf(keys, sizeof keys, "with the ssh agent's keys and ~/.ssh/id_* (no identity in "
                     "the inventory: set [drover] identity = PATH to name the key, and put its .pub in "
                     "that user's ~/.ssh/authorized_keys on the host)");
        snprintf(err, err_sz, "%s: public-key authentication as '%s' refused %s%s%s", c->label, p->user,
                 keys, auth == SSH_AUTH_ERROR ? ": " : "", auth == SSH_AUTH_ERROR ? ssh_get_error(c->s) : "");
        r = -EACCES;
        goto fail;
    }
    log_debug("%s: connected", c->label);
    *ret_conn = c;
    return 0;
fail:
    ssh_conn_free(c);
    return r;
}

void ssh_conn_free(struct ssh_conn *c)
{
    if (!c)
        return;
    if (c->s) {
        ssh_disconnect(c->s);
        ssh_free(c->s);
    }
    free(c);
}

bool ssh_conn_is_alive(struct ssh_conn *c)
{
    return ssh_is_connected(c->s) != 0;
}

int ssh_conn_fd(struct ssh_conn *c)
{
    return ssh_get_fd(c->s);
}

/* Bytes the kernel holds unread on fd; 0 when it cannot tell. */
static int fd_unread(int fd)
{
    int n = 0;
    return fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? n : 0;
}

int ssh_conn_drain(struct ssh_conn *c)
{
    int fd = ssh_get_fd(c->s);
    if (fd < 0)
        return 0;
    int before = fd_unread(fd);
    /* libssh reads a session's socket only from inside a channel call on that session; the
     * event API is its public way to read and dispatch packets with no channel at hand */
    ssh_event ev = ssh_event_new();
    if (!ev)
        return -ENOMEM;
    if (ssh_event_add_session(ev, c->s) == SSH_OK)
        (void)ssh_event_dopoll(ev, 0);
    (void)ssh_event_remove_session(ev, c->s);
    ssh_event_free(ev);
    int after = ssh_get_fd(c->s);
    if (after != fd) /* the peer closed: libssh closed the socket, the session is dead */
        return 1;
    return fd_unread(fd) < before ? 1 : 0;
}

static int rewrite_known_hosts(const struct ssh_params *p, char *err, size_t err_sz)
{
    char *text, *out;
    size_t len;
    int removed;
    char pattern[300];
    int r = fs_read_file(p->known_hosts, KNOWNHOSTS_MAX_BYTES, &text, &len);
    if (r < 0) {
        snprintf(err, err_sz, "cannot read '%s': %s", p->known_hosts, strerror(-r));
        return r;
    }
    r = knownhosts_pattern(p->address, p->port, pattern, sizeof pattern);
    if (r >= 0)
        r = knownhosts_remove(text, len, pattern, &out, &removed);
    free(text);
    if (r < 0) {
        snprintf(err, err_sz, "cannot edit '%s': %s", p->known_hosts, strerror(-r));
        return r;
    }
    r = fs_write_atomic(p->known_hosts, out, strlen(out), 0600);
    free(out);
    if (r < 0)
        snprintf(err, err_sz, "cannot write '%s': %s", p->known_hosts, strerror(-r));
    return r;
}

int ssh_trust_host(const struct ssh_params *p, bool replace, const char *expect_fp,
                   char ret_fp[SSH_FP_MAX], int *ret_state, char *err, size_t err_sz)
{
    ssh_session s;
    char label[160], fp[SSH_FP_MAX];
    if (expect_fp && !ssh_fingerprint_is_valid(expect_fp)) {
        snprintf(err, err_sz, "host '%s': '%s' is not a SHA256 fingerprint (SHA256: and 43 base64 "
                 "characters, as ssh-keygen -lf shows it)", p->name, expect_fp);
        return -EINVAL;
    }
    int r = session_new(p, &s, label, sizeof label);
    if (r < 0) {
        snprintf(err, err_sz, "host '%s': cannot set up an SSH session", p->name);
        return r;
    }
    r = session_connect(s, label, err, err_sz);
    if (r < 0)
        goto out;
    char why[160];
    int bad;
    r = session_check_key(s, p->known_hosts, fp, &bad, why, sizeof why);
    if (r < 0 && r != -ENOKEY && r != -EKEYREJECTED) {
        snprintf(err, err_sz, "%s: cannot read the host key: %s", label, ssh_get_error(s));
        goto out;
    }
    if (bad > 0) { /* an added key would not be seen: "added", and the host unknown forever */
        snprintf(err, err_sz, "%s: known_hosts %s:%d is not a valid entry (%s), and libssh reads "
                 "no further for this host: remove or fix that line, then trust again; nothing "
                 "was written", label, p->known_hosts, bad, why);
        r = -EBADMSG;
        goto out;
    }
    /* A pinned fingerprint is checked before anything else: only that key is ever written. */
    if (expect_fp && strcmp(fp, expect_fp) != 0) {
        snprintf(err, err_sz, "%s: the host shows %s, not the expected %s; nothing was written "
                 "to %s", label, fp, expect_fp, p->known_hosts);
        r = -EKEYREJECTED;
        goto out;
    }
    int state = 0;
    if (r == 0) {
        state = 1;
    } else if (r == -EKEYREJECTED && !replace) {
        char old[3 * SSH_FP_MAX];
        known_fingerprints(p, old, sizeof old);
        snprintf(err, err_sz, "%s: host key CHANGED: %s has %s, the host now shows %s; if you know "
                 "why it changed, check the new fingerprint out of band and run again with "
                 "--fingerprint %s --replace", label, p->known_hosts, old[0] ? old : "another key",
                 fp, fp);
        goto out;
    } else {
        char dir[512];
        (void)str_copy(dir, sizeof dir, p->known_hosts);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
            (void)fs_mkdir_p(dir, 0700);
        }
        if (r == -EKEYREJECTED) {
            r = rewrite_known_hosts(p, err, err_sz);
            if (r < 0)
                goto out;
            state = 2;
        }
        if (ssh_session_update_known_hosts(s) != SSH_OK) {
            snprintf(err, err_sz, "%s: cannot write '%s': %s", label, p->known_hosts,
                     ssh_get_error(s));
            r = -EIO;
            goto out;
        }
    }
    (void)str_copy(ret_fp, SSH_FP_MAX, fp);
    *ret_state = state;
    r = 0;
out:
    ssh_disconnect(s);
    ssh_free(s);
    return r;
}

volatile sig_atomic_t exec_interrupted;

/* libssh's error for session c, or what an empty one means: a blocking call (a channel's open or
 * exec) that gave up after the session's timeout (connect_timeout) sets none, which read
 * "cannot run a command: " with nothing after it when a host's sshd froze. */
static const char *conn_why(const struct ssh_conn *c)
{
    const char *m = ssh_get_error(c->s);
    return m && *m ? m
                   : "no answer from the host within connect_timeout (its sshd stopped answering, "
                     "or the network to it is gone)";
}

static void wait_fd(ssh_session s, int ms)
{
    struct pollfd pfd = { .fd = ssh_get_fd(s), .events = POLLIN };
    if (pfd.fd >= 0)
        (void)poll(&pfd, 1, ms);
    else
        usleep((useconds_t)ms * 1000);
}

/* cleanup: the follow-up after a deadline or a Ctrl-C (ssh_exec_cleanup): exec_interrupted does
 * not stop it, and opening its channel waits no longer than its own deadline. */
static int exec_channel(struct ssh_conn *c, const char *cmdline, double timeout_s, bool cleanup,
                        struct exec_result *ret, char *err, size_t err_sz)
{
    struct exec_result res = { .status = -1 };
    if (cleanup && !ssh_conn_is_alive(c)) {
        snprintf(err, err_sz, "%s: the session has dropped", c->label);
        return -ENOTCONN;
    }
    if (cleanup)
        ssh_conn_block_limit(c, timeout_s);
    ssh_channel ch = ssh_channel_new(c->s);
    int r = -EIO;
    if (!ch) {
        snprintf(err, err_sz, "%s: cannot open a channel: %s", c->label, conn_why(c));
        if (cleanup)
            ssh_conn_block_limit(c, 0);
        return -EIO;
    }
    if (ssh_channel_open_session(ch) != SSH_OK || ssh_channel_request_exec(ch, cmdline) != SSH_OK) {
        snprintf(err, err_sz, "%s: cannot run a command: %s", c->label, conn_why(c));
        goto out;
    }
    log_debug("%s: exec %s", c->label, cmdline);
    /* Nothing is ever fed to a command's stdin: EOF at once, so a command that reads stdin ends
     * instead of waiting for the deadline. */
    if (ssh_channel_send_eof(ch) != SSH_OK) {
        snprintf(err, err_sz, "%s: cannot close the command's stdin: %s", c->label,
                 conn_why(c));
        goto out;
    }
    double deadline = time_mono() + timeout_s;
    char buf[16384];
    for (;;) {
        /* Checked on every turn, data or not: a command that keeps printing is still bounded. */
        if (time_mono() > deadline) {
            char shown[200];
            snprintf(err, err_sz, "%s: '%s' timed out after %.0fs", c->label,
                     text_escape(cmdline, strlen(cmdline), shown, sizeof shown), timeout_s);
            r = -ETIMEDOUT;
            goto out;
        }
        if (exec_interrupted && !cleanup) { /* the channel is closed below: the output is dropped */
            snprintf(err, err_sz, "%s: interrupted", c->label);
            r = -EINTR;
            goto out;
        }
        int n1 = ssh_channel_read_nonblocking(ch, buf, sizeof buf, 0);
        if (n1 > 0 && exec_result_add_out(&res, buf, (size_t)n1) < 0) {
            r = -ENOMEM;
            goto out;
        }
        int n2 = ssh_channel_read_nonblocking(ch, buf, sizeof buf, 1);
        if (n2 > 0 && exec_result_add_err(&res, buf, (size_t)n2) < 0) {
            r = -ENOMEM;
            goto out;
        }
        if (n1 > 0 || n2 > 0)
            continue;
        if (ssh_channel_is_eof(ch) || ssh_channel_is_closed(ch))
            break;
        if (n1 == SSH_ERROR || n2 == SSH_ERROR) {
            snprintf(err, err_sz, "%s: channel failed: %s", c->label, conn_why(c));
            goto out;
        }
        wait_fd(c->s, 100);
    }
    /* -1: no exit-status (killed by a signal; libssh 0.10 cannot tell us which). */
    if ((r = exec_result_finish(&res, ssh_channel_get_exit_status(ch))) < 0)
        goto out;
    *ret = res;
    res = (struct exec_result){ 0 };
    r = 0;
out:
    exec_result_done(&res);
    ssh_channel_close(ch);
    ssh_channel_free(ch);
    if (cleanup)
        ssh_conn_block_limit(c, 0);
    return r;
}

int ssh_exec(struct ssh_conn *c, const char *cmdline, double timeout_s, struct exec_result *ret,
             char *err, size_t err_sz)
{
    return exec_channel(c, cmdline, timeout_s, false, ret, err, err_sz);
}

int ssh_exec_cleanup(struct ssh_conn *c, const char *cmdline, double timeout_s, struct exec_result *ret,
                     char *err, size_t err_sz)
{
    return exec_channel(c, cmdline, timeout_s, true, ret, err, err_sz);
}

int ssh_stream_open(struct ssh_conn *c, const char *cmdline, struct ssh_stream **ret_s, char *err,
                    size_t err_sz)
{
    struct ssh_stream *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->c = c;
    s->ch = ssh_channel_new(c->s);
    if (!s->ch || ssh_channel_open_session(s->ch) != SSH_OK ||
        ssh_channel_request_exec(s->ch, cmdline) != SSH_OK) {
        snprintf(err, err_sz, "%s: cannot start a stream: %s", c->label, conn_why(c));
        ssh_stream_free(s);
        return -EIO;
    }
    *ret_s = s;
    return 0;
}

int ssh_stream_read(struct ssh_stream *s, char *buf, size_t buf_sz, char *err_buf, size_t err_sz,
                    size_t *ret_err_n)
{
    uint32_t n = buf_sz > (1u << 30) ? (1u << 30) : (uint32_t)buf_sz;
    uint32_t en = err_sz > (1u << 30) ? (1u << 30) : (uint32_t)err_sz;
    int r = ssh_channel_read_nonblocking(s->ch, buf, n, 0);
    /* stderr is read whatever the caller keeps of it: that keeps the window open */
    int e = ssh_channel_read_nonblocking(s->ch, err_buf, en, 1);
    *ret_err_n = e > 0 ? (size_t)e : 0;
    if (r > 0)
        return r;
    if (ssh_channel_is_eof(s->ch) || ssh_channel_is_closed(s->ch))
        return -EPIPE;
    if (r == SSH_ERROR)
        return -EIO;
    return 0;
}

void ssh_stream_free(struct ssh_stream *s)
{
    if (!s)
        return;
    if (s->ch) {
        if (ssh_channel_is_open(s->ch)) {
            /* Ask the remote command to go away; sshd closes its stdin and sends SIGHUP. */
            (void)ssh_channel_request_send_signal(s->ch, "TERM");
            (void)ssh_channel_close(s->ch);
        }
        ssh_channel_free(s->ch);
    }
    free(s);
}

static int translate_sftp_error(int code)
{
    switch (code) {
    case SSH_FX_NO_SUCH_FILE:
        return -ENOENT;
    case SSH_FX_PERMISSION_DENIED:
        return -EACCES;
    case SSH_FX_FILE_ALREADY_EXISTS:
        return -EEXIST;
    case SSH_FX_NO_CONNECTION:
    case SSH_FX_CONNECTION_LOST:
        return -ECONNRESET;
    default:
        return -EIO; /* SSH_FX_FAILURE: often a full disk; the caller's sha256 check tells */
    }
}

int ssh_remote_size(struct ssh_conn *c, const char *path, uint64_t *ret_size)
{
    sftp_session sftp = sftp_new(c->s);
    if (!sftp)
        return -EIO;
    int r = -EIO;
    if (sftp_init(sftp) != SSH_OK)
        goto out;
    sftp_attributes a = sftp_stat(sftp, path);
    if (!a) {
        r = translate_sftp_error(sftp_get_error(sftp));
        goto out;
    }
    *ret_size = a->size;
    sftp_attributes_free(a);
    r = 0;
out:
    sftp_free(sftp);
    return r;
}

static void progress_show(const char *label, uint64_t done, uint64_t total, double t0)
{
    double el = time_mono() - t0;
    double mib = (double)done / 1048576.0;
    fprintf(stderr, "\r%s: %5.1f%% %.1f/%.1f MiB %.1f MiB/s ", label,
            total ? 100.0 * (double)done / (double)total : 100.0, mib, (double)total / 1048576.0,
            el > 0 ? mib / el : 0.0);
}

int ssh_upload(struct ssh_conn *c, const char *local_path, const char *remote_path,
               double idle_timeout_s, const char *progress_label, char *err, size_t err_sz)
{
    int fd = open(local_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, err_sz, "cannot open '%s': %s", local_path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        snprintf(err, err_sz, "cannot stat '%s': %s", local_path, strerror(e));
        return -e;
    }
    long t = (long)(idle_timeout_s > 0 ? idle_timeout_s : 30);
    (void)ssh_options_set(c->s, SSH_OPTIONS_TIMEOUT, &t);
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.part.%d", remote_path, (int)getpid());
    sftp_session sftp = sftp_new(c->s);
    sftp_file f = NULL;
    int r = -EIO;
    bool show = progress_label && isatty(STDERR_FILENO);
    char *buf = malloc(SSH_SFTP_CHUNK);
    if (!sftp || !buf || sftp_init(sftp) != SSH_OK) {
        snprintf(err, err_sz, "%s: cannot start SFTP (is the sftp subsystem enabled?): %s", c->label,
                 ssh_get_error(c->s));
        goto out;
    }
    /* O_EXCL on the predictable temp name: never written through something left there; a
     * stale one (an earlier run with our pid) is removed once */
    f = sftp_open(sftp, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (!f) {
        (void)sftp_unlink(sftp, tmp);
        f = sftp_open(sftp, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    }
    if (!f) {
        r = translate_sftp_error(sftp_get_error(sftp));
        snprintf(err, err_sz, "%s: cannot create '%s' by SFTP: %s", c->label, tmp,
                 ssh_get_error(c->s));
        goto out;
    }
    uint64_t done = 0, total = (uint64_t)st.st_size;
    double t0 = time_mono(), last = 0;
    for (;;) {
        ssize_t n = read(fd, buf, SSH_SFTP_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            snprintf(err, err_sz, "cannot read '%s': %s", local_path, strerror(-r));
            goto out;
        }
        if (n == 0)
            break;
        ssize_t w = sftp_write(f, buf, (size_t)n);
        if (w != n) {
            r = translate_sftp_error(sftp_get_error(sftp));
            snprintf(err, err_sz, "%s: SFTP write to '%s' failed after %llu bytes (disk full?): %s",
                     c->label, tmp, (unsigned long long)done, ssh_get_error(c->s));
            goto out;
        }
        done += (uint64_t)n;
        if (show && time_mono() - last > 0.2) {
            progress_show(progress_label, done, total, t0);
            last = time_mono();
        }
    }
    if (show) {
        progress_show(progress_label, done, total, t0);
        fputc('\n', stderr);
    }
    if (sftp_close(f) != SSH_OK) {
        f = NULL;
        r = translate_sftp_error(sftp_get_error(sftp));
        snprintf(err, err_sz, "%s: closing '%s' failed (disk full?): %s", c->label, tmp,
                 ssh_get_error(c->s));
        goto out;
    }
    f = NULL;
    if (sftp_rename(sftp, tmp, remote_path) != SSH_OK) {
        /* SFTP v3 rename refuses to replace; the old file was wrong anyway (caller checked). */
        (void)sftp_unlink(sftp, remote_path);
        if (sftp_rename(sftp, tmp, remote_path) != SSH_OK) {
            r = translate_sftp_error(sftp_get_error(sftp));
            snprintf(err, err_sz, "%s: cannot rename '%s' to '%s': %s", c->label, tmp, remote_path,
                     ssh_get_error(c->s));
            goto out;
        }
    }
    r = 0;
out:
    if (f)
        sftp_close(f);
    if (r < 0 && sftp)
        (void)sftp_unlink(sftp, tmp);
    if (sftp)
        sftp_free(sftp);
    free(buf);
    close(fd);
    return r;
}

void *ssh_conn_session(struct ssh_conn *c)
{
    return c->s;
}

void ssh_conn_block_limit(struct ssh_conn *c, double s)
{
    long t = s > 0 ? (long)ceil(s) : c->timeout_s;
    if (t < 1)
        t = 1;
    (void)ssh_options_set(c->s, SSH_OPTIONS_TIMEOUT, &t);
}
