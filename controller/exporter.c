/* controller/exporter.c: see exporter.h.  One thread serves HTTP (a request at a time: scrapes
 * are rare and small); the top poller's threads, one per host, keep the snapshot fresh, so a
 * dead host never delays a scrape.  Read-only towards the fleet.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/ini.h"
#include "common/log.h"
#include "common/promtext.h"
#include "common/util.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/exporter.h"
#include "controller/top/top_poll.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

#define REQ_MAX 8192

/* Derived values (a Ktok/s figure times 1000, ages summed from clocks) to the millisecond or
 * milli-token: 2995 and 0.5, not 2995.0000000000005 and 0.50000000100000001. */
static double milli(double x)
{
    return isfinite(x) ? round(x * 1000) / 1000 : x;
}

/* The GPU index of local rank lr from the job's gpus ("0,1"); "" when not set. */
static void gpu_of(const struct inv_job *j, int lr, char *out, size_t out_sz)
{
    out[0] = '\0';
    const char *p = j ? j->gpus : "";
    for (int i = 0; *p; i++) {
        size_t n = strcspn(p, ",");
        if (i == lr) {
            snprintf(out, out_sz, "%.*s", (int)n, p);
            return;
        }
        p += n + (p[n] == ',');
    }
}

static void ct_host_vmid(const struct inventory *inv, const struct top_ct *ct, const char **host,
                         char vmid[24])
{
    *host = ct->host >= 0 && ct->host < inv->nhosts ? inv->hosts[ct->host].name : "";
    const char *colon = strchr(ct->label, ':');
    snprintf(vmid, 24, "%s", colon ? colon + 1 : "");
    if (!strncmp(vmid, "local", 5))
        snprintf(vmid, 24, "local");
}

void exporter_render(const struct top_snapshot *s, const struct inventory *inv, double now,
                     double start_wall, uint64_t scrapes, FILE *out)
{
    prom_head(out, "drover_build_info", "gauge", "The exporter's build: its version as a label, value 1.");
    const char *bl[] = { "program", "drover", "version", DROVER_VERSION, NULL };
    prom_sample(out, "drover_build_info", bl, 1);
    prom_head(out, "process_start_time_seconds", "gauge", "Start time of the exporter since the epoch.");
    prom_sample(out, "process_start_time_seconds", NULL, start_wall);
    prom_head(out, "drover_exporter_scrapes_total", "counter", "Answers to /metrics since the start.");
    prom_sample(out, "drover_exporter_scrapes_total", NULL, (double)scrapes);

    prom_head(out, "drover_host_up", "gauge", "1 when the host's SSH session is open and answering.");
    for (int h = 0; h < s->nhosts; h++) {
        const char *l[] = { "host", s->hosts[h].name, NULL };
        prom_sample(out, "drover_host_up", l, s->hosts[h].up ? 1 : 0);
    }

    prom_head(out, "drover_job_baseline_tokens_per_second", "gauge",
              "Tokens per second of the job's last good release on these containers (the probation baseline).");
    for (int j = 0; j < s->njobs; j++) {
        if (s->jobs[j].baseline_ktok <= 0)
            continue;
        const char *l[] = { "drover_job", s->jobs[j].name, NULL };
        prom_sample(out, "drover_job_baseline_tokens_per_second", l, milli(s->jobs[j].baseline_ktok * 1000));
    }
    prom_head(out, "drover_job_tolerance_ratio", "gauge", "The job's probation tolerance (0.2: 20% below baseline passes).");
    for (int j = 0; j < s->njobs; j++) {
        const char *l[] = { "drover_job", s->jobs[j].name, NULL };
        prom_sample(out, "drover_job_tolerance_ratio", l, s->jobs[j].tolerance);
    }

    /* Per container: up, gang state, restarts, age. */
    static const char *const fams[][3] = {
        { "drover_container_up", "gauge", "1 when the container's agent answers with fresh status documents." },
        { "drover_gang_info", "gauge", "One sample per (job, container): gang state and releases as labels." },
        { "drover_gang_restarts", "gauge", "Restarts of the job's current release since its activation (reset by a new release, a revert or a drover start)." },
        { "drover_gang_age_seconds", "gauge", "Seconds since this gang generation started." },
    };
    for (int f = 0; f < 4; f++) {
        prom_head(out, fams[f][0], fams[f][1], fams[f][2]);
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            const struct top_job *tj = top_job_of(s, ct);
            const char *host;
            char vmid[24];
            ct_host_vmid(inv, ct, &host, vmid);
            const char *job = tj ? tj->name : "";
            bool fresh = ct->seen && !top_ct_is_stale(s, ct, now) && !ct->err[0];
            if (f == 0) {
                const char *l[] = { "drover_job", job, "host", host, "vmid", vmid, NULL };
                prom_sample(out, fams[f][0], l, fresh ? 1 : 0);
                continue;
            }
            if (!ct->seen || !ct->has_job)
                continue;
            if (f == 1) {
                char cur[RELEASE_SHORT_LEN + 1], good[RELEASE_SHORT_LEN + 1];
                snprintf(cur, sizeof cur, "%.12s", ct->current);
                snprintf(good, sizeof good, "%.12s", ct->good);
                const char *l[] = { "drover_job", job, "host", host, "vmid", vmid, "state",
                                    gang_state_name(ct->gang), "current", cur, "good", good, NULL };
                prom_sample(out, fams[f][0], l, 1);
            } else {
                const char *l[] = { "drover_job", job, "host", host, "vmid", vmid, NULL };
                prom_sample(out, fams[f][0], l, f == 2 ? ct->restarts : milli(ct->age_s));
            }
        }
    }

    /* Per rank. */
    enum { R_STEP, R_TOKS, R_LOSS, R_FINITE, R_HB, R_GU, R_GM, R_GMT, R_GT, R_N };
    static const char *const rf[R_N][3] = {
        [R_STEP] = { "drover_rank_step", "gauge", "Optimizer steps completed by the rank (resets to the checkpoint's step on a restart)." },
        [R_TOKS] = { "drover_rank_tokens_per_second", "gauge", "Training tokens per second of the rank over its last step." },
        [R_LOSS] = { "drover_rank_loss", "gauge", "Last training loss of the rank; NaN when not finite." },
        [R_FINITE] = { "drover_rank_loss_finite", "gauge", "1 while the rank's loss is finite, 0 after a non-finite loss." },
        [R_HB] = { "drover_rank_heartbeat_age_seconds", "gauge", "Seconds since the rank's last heartbeat, as of the scrape." },
        [R_GU] = { "drover_gpu_utilization_ratio", "gauge", "GPU utilisation of the rank's device, 0..1 (NVML)." },
        [R_GM] = { "drover_gpu_memory_used_bytes", "gauge", "Memory used on the rank's device (NVML)." },
        [R_GMT] = { "drover_gpu_memory_total_bytes", "gauge", "Memory of the rank's device (NVML)." },
        [R_GT] = { "drover_gpu_temperature_celsius", "gauge", "Temperature of the rank's device (NVML)." },
    };
    for (int f = 0; f < R_N; f++) {
        prom_head(out, rf[f][0], rf[f][1], rf[f][2]);
        for (int i = 0; i < s->ncts; i++) {
            const struct top_ct *ct = &s->cts[i];
            if (!ct->seen || !ct->has_job)
                continue;
            const struct top_job *tj = top_job_of(s, ct);
            const struct inv_job *ij = tj ? inventory_find_job(inv, tj->name) : NULL;
            const char *host;
            char vmid[24];
            ct_host_vmid(inv, ct, &host, vmid);
            for (int k = 0; k < ct->nranks; k++) {
                const struct top_rank *r = &ct->ranks[k];
                char rank[16], gpu[16];
                snprintf(rank, sizeof rank, "%d", r->rank);
                /* gpu: the index the agent read through NVML, else the inventory's gpus entry;
                 * UUID: NVML's, as dcgm-exporter names both, so `on(UUID)` joins with DCGM's
                 * series.  A label nobody knows is left out, never "" */
                if (r->gpu.valid && r->gpu.index >= 0)
                    snprintf(gpu, sizeof gpu, "%d", r->gpu.index);
                else
                    gpu_of(ij, ij && ij->nproc_per_node > 0 ? r->rank % ij->nproc_per_node : 0, gpu, sizeof gpu);
                const char *l[13] = { "drover_job", tj ? tj->name : "", "host", host, "vmid", vmid, "rank", rank };
                int nl = 8;
                if (gpu[0]) {
                    l[nl++] = "gpu";
                    l[nl++] = gpu;
                }
                if (r->gpu.valid && r->gpu.uuid[0]) {
                    l[nl++] = "UUID";
                    l[nl++] = r->gpu.uuid;
                }
                l[nl] = NULL;
                bool g = r->gpu.valid;
                switch (f) {
                case R_STEP: if (r->has_hb) prom_sample(out, rf[f][0], l, (double)r->step); break;
                case R_TOKS: if (r->has_hb) prom_sample(out, rf[f][0], l, milli(r->ktok * 1000)); break;
                case R_LOSS:
                    if (r->has_hb)
                        prom_sample(out, rf[f][0], l, r->loss_finite ? r->loss : NAN);
                    break;
                case R_FINITE: if (r->has_hb) prom_sample(out, rf[f][0], l, r->loss_finite ? 1 : 0); break;
                case R_HB:
                    if (r->has_hb && r->hb_age_s >= 0)
                        prom_sample(out, rf[f][0], l, milli(top_rank_hb_age(s, ct, r, now)));
                    break;
                case R_GU: if (g) prom_sample(out, rf[f][0], l, r->gpu.util / 100); break;
                case R_GM: if (g) prom_sample(out, rf[f][0], l, (double)r->gpu.mem_used); break;
                case R_GMT: if (g) prom_sample(out, rf[f][0], l, (double)r->gpu.mem_total); break;
                case R_GT: if (g && r->gpu.temp > 0) prom_sample(out, rf[f][0], l, r->gpu.temp); break;
                }
            }
        }
    }
}

int exporter_parse_listen(const char *spec, char *ret_host, size_t host_sz, int *ret_port)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || !colon[1])
        return -EINVAL;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return -EINVAL;
    const char *h = spec;
    size_t hl = (size_t)(colon - spec);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= host_sz)
        return -EINVAL;
    memcpy(ret_host, h, hl);
    ret_host[hl] = '\0';
    *ret_port = (int)port;
    return 0;
}

static volatile sig_atomic_t exporter_stop;
static void on_signal(int sig)
{
    (void)sig;
    exporter_stop = 1;
}

static int listen_on(const char *host, int port, char *err, size_t err_sz)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
    struct addrinfo *ai;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host[0] ? host : NULL, ps, &hints, &ai);
    if (g) {
        snprintf(err, err_sz, "cannot resolve '%s': %s", host, gai_strerror(g));
        return -EINVAL;
    }
    int fd = -1, r = -EADDRNOTAVAIL;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 16) < 0) {
            r = -errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        snprintf(err, err_sz, "cannot listen on '%s:%d': %s", host, port, strerror(-r));
    return fd >= 0 ? fd : r;
}

/* Read the request head (bounded, 2 s), answer, close. */
static void serve_one(int c, struct top_poll *p, struct top_snapshot *s,
                      const struct inventory *inv, double start_wall, uint64_t *scrapes)
{
    char req[REQ_MAX];
    size_t got = 0;
    double deadline = time_mono() + 2;
    while (got < sizeof req - 1 && !memmem(req, got, "\r\n\r\n", 4)) {
        struct pollfd pf = { c, POLLIN, 0 };
        int ms = (int)((deadline - time_mono()) * 1000);
        if (ms <= 0 || poll(&pf, 1, ms) <= 0)
            return;
        ssize_t k = read(c, req + got, sizeof req - 1 - got);
        if (k <= 0)
            return;
        got += (size_t)k;
    }
    req[got] = '\0';
    char *body = NULL;
    size_t blen = 0;
    const char *status = "200 OK", *ctype = "text/plain; version=0.0.4; charset=utf-8";
    FILE *m = open_memstream(&body, &blen);
    if (!m)
        return;
    if (!strncmp(req, "GET /metrics ", 13) || !strncmp(req, "GET /metrics?", 13)) {
        (void)top_poll_snapshot(p, s);
        (*scrapes)++;
        exporter_render(s, inv, time_mono(), start_wall, *scrapes, m);
    } else if (!strncmp(req, "GET / ", 6)) {
        ctype = "text/html; charset=utf-8";
        fputs("<html><body><a href=\"/metrics\">/metrics</a> (drover exporter)</body></html>\n", m);
    } else {
        status = strncmp(req, "GET ", 4) ? "405 Method Not Allowed" : "404 Not Found";
        fprintf(m, "%s\n", status);
    }
    fclose(m);
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, ctype, blen);
    if (fd_write_all(c, head, (size_t)hn) == 0)
        (void)fd_write_all(c, body, blen);
    free(body);
}

int cmd_exporter(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "listen", required_argument, NULL, 'l' },
        { "interval", required_argument, NULL, 'n' },
        { NULL, 0, NULL, 0 },
    };
    const char *listen_spec = "127.0.0.1:9464";
    double interval = 5;
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, "l:n:", opts)) != -1) {
        if (c == 'l')
            listen_spec = optarg;
        else if (c == 'n') { /* a bad value printed the usage line alone */
            if (cli_duration("--interval", optarg, 0.5, false, INI_DURATION_MAX_S, &interval))
                return EXIT_USAGE;
        } else {
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc) {
        return verb_usage_error(argv[0], argv[optind]);
    }
    char host[256], err[512];
    int port;
    if (exporter_parse_listen(listen_spec, host, sizeof host, &port) < 0) {
        log_error("--listen '%s' is not HOST:PORT (like 127.0.0.1:9464 or :9464)", listen_spec);
        return EXIT_USAGE;
    }
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    int lfd = listen_on(host, port, err, sizeof err);
    if (lfd < 0) {
        log_error("%s", err);
        return EXIT_FAIL;
    }
    struct top_poll *p;
    int r = top_poll_start(f->inv, interval, &p);
    if (r < 0) {
        close(lfd);
        log_error("cannot start the status threads: %s", strerror(-r));
        return EXIT_FAIL;
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    log_info("serving /metrics on %s:%d (refresh every %gs)", host[0] ? host : "*", port, interval);
    double start_wall = time_wall();
    uint64_t scrapes = 0;
    struct top_snapshot s = { 0 };
    while (!exporter_stop) {
        struct pollfd pf = { lfd, POLLIN, 0 };
        if (poll(&pf, 1, 500) <= 0)
            continue;
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            continue;
        serve_one(cfd, p, &s, f->inv, start_wall, &scrapes);
        close(cfd);
    }
    close(lfd);
    top_poll_stop(p, 2);
    top_snapshot_done(&s);
    return EXIT_OK;
}
