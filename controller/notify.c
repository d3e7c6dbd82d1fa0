/* controller/notify.c: webhooks (libcurl) and the exec hook for deploy outcomes.  See notify.h
 * for the promise that matters: a verdict is never delayed or changed by a notification.
 * libcurl's errors are translated here, where they enter; its own text is kept for the message.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/notify.h"

const char *notify_event_of(const struct history_entry *h)
{
    if (strcmp(h->result, "promoted") == 0)
        return "promote";
    if (strcmp(h->result, "reverted") == 0)
        return h->reason_code == HISTORY_RC_AGENT_REVERT ? "agent-revert" : "revert";
    if (strcmp(h->result, "revert-failed") == 0)
        return "revert-failed";
    if (strncmp(h->result, "rollback", 8) == 0)
        return "rollback";
    return NULL;
}

int notify_payload(const char *event, const struct history_entry *h, bool slack, char **ret_text)
{
    json_t *root;
    if (slack) {
        char text[1400];
        snprintf(text, sizeof text, "drover: %s of job %s, release %.12s%s%s: %s", event, h->job,
                 h->release, h->name[0] ? " " : "", h->name, h->reason[0] ? h->reason : h->result);
        root = json_pack("{s:s}", "text", text);
    } else {
        json_t *rec = history_entry_json(h); /* the record as every document shows it */
        root = rec ? json_pack("{s:i,s:s,s:s,s:o}", "v", NOTIFY_VERSION, "event", event, "verdict",
                               h->reason, "record", rec)
                   : NULL;
    }
    char *t = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!t)
        return -ENOMEM;
    *ret_text = t;
    return 0;
}

void notify_redact_url(const char *url, char *out, size_t out_sz)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *at = strpbrk(p, "@/?#"); /* user:password@ is a secret too */
    if (at && *at == '@')
        p = at + 1;
    size_t hl = strcspn(p, "/?#");
    const char *s = strstr(url, "://");
    int sl = s ? (int)(s - url) : 0;
    snprintf(out, out_sz, "%.*s://%.*s%s", sl, url, (int)hl, p, p[hl] ? "/..." : "");
}

int notify_secret(const struct inv_notify *n, char *out, size_t out_sz)
{
    out[0] = '\0';
    if (n->secret_file[0]) {
        int fd = open(n->secret_file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        ssize_t k = read(fd, out, out_sz - 1);
        int e = errno;
        close(fd);
        if (k < 0)
            return -e;
        out[k] = '\0';
        out[strcspn(out, "\r\n")] = '\0';
        return 0;
    }
    if (n->secret_env[0]) {
        const char *v = getenv(n->secret_env);
        if (!v)
            return -ENOENT;
        if (str_copy(out, out_sz, v) < 0)
            return -E2BIG;
    }
    return 0;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static size_t discard(char *p, size_t size, size_t n, void *u)
{
    (void)p;
    (void)u;
    return size * n;
}

/* One attempt.  0 on 2xx; -errno with err set. */
static int post_once(CURL *h, long *ret_code, char *curl_err, char *err, size_t err_sz,
                     const char *shown)
{
    curl_err[0] = '\0';
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        snprintf(err, err_sz, "%s: %s", shown, curl_err[0] ? curl_err : curl_easy_strerror(cc));
        switch (cc) {
        case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
        case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
        default: return -EIO;
        }
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, ret_code);
    if (*ret_code >= 200 && *ret_code < 300)
        return 0;
    snprintf(err, err_sz, "%s: HTTP %ld", shown, *ret_code);
    return *ret_code == 401 || *ret_code == 403 ? -EACCES : -EPROTO;
}

int notify_post(const char *url, const char *payload, const char *secret, double timeout_s,
                int retries, char *err, size_t err_sz)
{
    char shown[256];
    notify_redact_url(url, shown, sizeof shown);
    static bool inited;
    if (!inited) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            snprintf(err, err_sz, "libcurl did not initialise");
            return -EIO;
        }
        inited = true;
    }
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, err_sz, "libcurl: out of memory");
        return -ENOMEM;
    }
    char curl_err[CURL_ERROR_SIZE];
    char auth[NOTIFY_SECRET_MAX + 32];
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (secret && secret[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", secret);
        hdr = curl_slist_append(hdr, auth);
        explicit_bzero(auth, sizeof auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_USERAGENT, "drover-notify/1");
    int r = -EIO;
    double backoff = 0.25;
    for (int attempt = 0; attempt <= retries; attempt++) {
        long code = 0;
        r = post_once(h, &code, curl_err, err, err_sz, shown);
        if (r == 0 || (code >= 400 && code < 500))
            break; /* delivered, or refused: asking again will not help */
        if (attempt < retries) {
            sleep_s(backoff);
            backoff *= 2;
        }
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return r;
}

int notify_exec(const char *exec, const char *event, const char *job, const char *payload,
                double timeout_s, char *err, size_t err_sz)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return -e;
    }
    if (pid == 0) {
        dup2(p[0], STDIN_FILENO);
        char *const argv[] = { (char *)exec, (char *)event, (char *)job, NULL };
        execv(exec, argv);
        _exit(127);
    }
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    (void)fd_write_all(p[1], payload, strlen(payload)); /* a hook may ignore its stdin */
    close(p[1]);
    double deadline = time_mono() + timeout_s;
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0)
            return -errno;
        if (time_mono() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            snprintf(err, err_sz, "hook '%s' still running after %.1fs: killed", exec, timeout_s);
            return -ETIMEDOUT;
        }
        sleep_s(0.02);
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    snprintf(err, err_sz, "hook '%s' %s %d", exec, WIFEXITED(st) ? "exited with" : "killed by signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return -EIO;
}

int notify_deliver(const struct inventory *inv, const char *event, const struct history_entry *h)
{
    const struct inv_notify *n = &inv->notify;
    char secret[NOTIFY_SECRET_MAX], err[512];
    int first = 0, r;
    if ((r = notify_secret(n, secret, sizeof secret)) < 0) {
        log_warn("notify: cannot read the webhook secret (%s %s): %s",
                 n->secret_file[0] ? "secret_file" : "secret_env",
                 n->secret_file[0] ? n->secret_file : n->secret_env, strerror(-r));
        secret[0] = '\0';
        first = r;
    }
    char *body = NULL;
    for (int i = 0; i < n->nwebhooks; i++) {
        free(body);
        body = NULL;
        if ((r = notify_payload(event, h, n->slack, &body)) < 0)
            break;
        if ((r = notify_post(n->webhook[i], body, secret, n->timeout_s, n->retries, err, sizeof err)) < 0) {
            log_warn("notify: %s of job '%s' not delivered: %s", event, h->job, err);
            first = first ? first : r;
        }
    }
    explicit_bzero(secret, sizeof secret);
    if (n->exec[0]) {
        free(body);
        body = NULL;
        if ((r = notify_payload(event, h, false, &body)) == 0 &&
            (r = notify_exec(n->exec, event, h->job, body, n->timeout_s, err, sizeof err)) < 0) {
            log_warn("notify: %s of job '%s': %s", event, h->job, err);
            first = first ? first : r;
        }
    }
    free(body);
    return first;
}

void notify_history(const struct inventory *inv, const struct history_entry *h)
{
    const char *event = notify_event_of(h);
    if (!event || (!inv->notify.nwebhooks && !inv->notify.exec[0]))
        return;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        log_warn("notify: cannot fork to deliver %s of job '%s': %s", event, h->job, strerror(errno));
        return;
    }
    if (pid > 0) {
        (void)waitpid(pid, NULL, 0); /* the child forks once more and exits at once */
        return;
    }
    if (fork() != 0)
        _exit(0);
    /* The deliverer: no terminal, no part in the caller's sessions. */
    (void)setsid();
    char p[1024];
    snprintf(p, sizeof p, "%s/notify.log", inv->state_dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nul >= 0) {
        dup2(nul, STDIN_FILENO);
        dup2(nul, STDOUT_FILENO);
    }
    if (fd >= 0)
        dup2(fd, STDERR_FILENO);
    else if (nul >= 0)
        dup2(nul, STDERR_FILENO);
    int r = notify_deliver(inv, event, h);
    if (r == 0)
        log_info("notify: %s of job '%s' (release %.12s) delivered", event, h->job, h->release);
    _exit(r == 0 ? 0 : 1);
}
