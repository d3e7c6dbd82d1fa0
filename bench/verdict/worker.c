/* bench/verdict/worker.c: the verdict matrix's synthetic worker for the real agent
 * (bench/verdict/agent-rows.sh).  Started by drover-agent like any worker (cwd = the release,
 * heartbeats on DROVER_HEARTBEAT_FD); reads its scenario from ./scenario in the release, one
 * "key value" per line: step_s (0.1), tokens (4096 per step), slower (0: fraction slower),
 * noise (0.03: sd of the step time), seed, crash_at (step; -1 never), crash_code (1), nan_at
 * (step; -1 never), hang_at (step: stop stepping, keep heartbeating; -1 never), no_rate (1: report
 * neither tok_s nor tokens, like a worker that does not measure throughput).  Exits 0 on
 * SIGTERM after a "done" heartbeat.  No I/O but the heartbeat pipe and stderr.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/heartbeat.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long long rng;
static double uniform(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return ((rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static void send(int fd, const struct heartbeat *hb)
{
    char line[HEARTBEAT_LINE_MAX];
    int n = heartbeat_format(hb, line, sizeof line);
    if (n > 0 && write(fd, line, (size_t)n) < 0 && errno == EPIPE)
        stop = 1;
}

int main(void)
{
    double step_s = 0.1, tokens = 4096, slower = 0, noise = 0.03;
    long long crash_at = -1, nan_at = -1, hang_at = -1, seed = 1, no_rate = 0;
    int crash_code = 1;
    FILE *f = fopen("scenario", "re");
    char k[32];
    double v;
    while (f && fscanf(f, "%31s %lf", k, &v) == 2) {
        if (!strcmp(k, "step_s")) step_s = v;
        else if (!strcmp(k, "tokens")) tokens = v;
        else if (!strcmp(k, "slower")) slower = v;
        else if (!strcmp(k, "noise")) noise = v;
        else if (!strcmp(k, "seed")) seed = (long long)v;
        else if (!strcmp(k, "crash_at")) crash_at = (long long)v;
        else if (!strcmp(k, "crash_code")) crash_code = (int)v;
        else if (!strcmp(k, "nan_at")) nan_at = (long long)v;
        else if (!strcmp(k, "hang_at")) hang_at = (long long)v;
        else if (!strcmp(k, "no_rate")) no_rate = (long long)v;
    }
    if (f)
        fclose(f);
    const char *e = getenv("DROVER_HEARTBEAT_FD"), *rank = getenv("RANK"), *rel = getenv("DROVER_RELEASE");
    int fd = e ? atoi(e) : 3;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    struct heartbeat hb;
    heartbeat_init(&hb);
    hb.rank = rank ? atoi(rank) : 0;
    hb.pid = getpid();
    snprintf(hb.release, sizeof hb.release, "%s", rel ? rel : "");
    snprintf(hb.backend, sizeof hb.backend, "synthetic");
    rng = 0x9E3779B97F4A7C15ULL * (unsigned long long)(seed * 131 + hb.rank + 1);
    hb.loss = 3.0;
    hb.loss_finite = true;
    send(fd, &hb); /* phase init */
    double last_beat = now_s();
    while (!stop) {
        if (hang_at >= 0 && hb.step >= hang_at) {
            usleep(200000);
            if (now_s() - last_beat >= 1) { /* the heartbeat thread lives on */
                send(fd, &hb);
                last_beat = now_s();
            }
            continue;
        }
        double u1 = uniform() + 1e-12, u2 = uniform();
        double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        double dt = step_s / (1 - slower) * exp(noise * z);
        usleep((useconds_t)(dt * 1e6));
        hb.step++;
        if (crash_at >= 0 && hb.step >= crash_at) {
            fprintf(stderr, "worker: crashing at step %lld (scenario)\n", (long long)hb.step);
            return crash_code;
        }
        hb.tokens += no_rate ? 0 : (long long)tokens;
        hb.tok_s = no_rate ? 0 : tokens / dt;
        hb.step_ms = dt * 1000;
        hb.phase = HB_PHASE_TRAIN;
        if (nan_at >= 0 && hb.step >= nan_at) {
            hb.loss_finite = false;
            hb.nonfinite++;
        }
        send(fd, &hb);
        last_beat = now_s();
    }
    hb.phase = HB_PHASE_DONE;
    send(fd, &hb);
    return 0;
}
