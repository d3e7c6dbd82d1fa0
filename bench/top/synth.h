/* bench/top/synth.h: synthetic agent status documents for the dashboard's bench and fake agent:
 * one job "train" with nranks ranks whose step, loss and Ktok/s move with t (seconds), and GPU
 * figures like NVML's.  Header-only so both programs build with one cc line.
 */
#ifndef DROVER_BENCH_TOP_SYNTH_H
#define DROVER_BENCH_TOP_SYNTH_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"

static inline void synth_status(struct agent_status *st, const char *host, const char *job,
                                int nranks, int node, double t, unsigned seed)
{
    memset(st, 0, sizeof *st);
    snprintf(st->host, sizeof st->host, "%.60s", host);
    st->agent_pid = 100;
    snprintf(st->agent_version, sizeof st->agent_version, "bench");
    st->uptime_s = t;
    st->njobs = 1;
    struct job_status *js = &st->jobs[0];
    snprintf(js->job, sizeof js->job, "%.30s", job);
    memset(js->current, 'a', RELEASE_ID_LEN);
    memcpy(js->good, js->current, sizeof js->good);
    memcpy(js->release, js->current, sizeof js->release);
    js->state = GANG_RUNNING;
    js->generation = 1;
    js->age_s = t;
    js->nproc = nranks;
    js->node_rank = node;
    js->nranks = nranks > STATUS_MAX_RANKS ? STATUS_MAX_RANKS : nranks;
    for (int k = 0; k < js->nranks; k++) {
        struct rank_status *rs = &js->ranks[k];
        rs->rank = node * nranks + k;
        rs->local_rank = k;
        rs->pid = 1000 + k;
        snprintf(rs->state, sizeof rs->state, "running");
        rs->hb_age_s = 0.2;
        rs->exit_code = -1;
        rs->has_hb = true;
        heartbeat_init(&rs->hb);
        rs->hb.rank = rs->rank;
        rs->hb.step = (int64_t)(t * 5) + 10;
        rs->hb.tokens = rs->hb.step * 4096;
        double wobble = sin(t * 0.3 + (double)((seed + (unsigned)k) % 17));
        rs->hb.loss = 3.5 + 0.2 * wobble;
        rs->hb.loss_finite = true;
        rs->hb.tok_s = 410000 + 30000 * wobble;
        rs->hb.step_ms = 200;
        rs->hb.phase = HB_PHASE_TRAIN;
        rs->hb.resumed_from = -1;
        memcpy(rs->hb.release, js->current, RELEASE_ID_LEN);
        snprintf(rs->hb.backend, sizeof rs->hb.backend, "cuda");
        rs->gpu.valid = true;
        rs->gpu.util = 95 + 4 * wobble;
        rs->gpu.mem_used = (int64_t)60 << 30;
        rs->gpu.mem_total = (int64_t)80 << 30;
        rs->gpu.temp = 62 + 5 * wobble;
        rs->gpu.slowdown_temp = 87;
    }
}

#endif
