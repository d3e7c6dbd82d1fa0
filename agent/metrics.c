/* agent/metrics.c: see metrics.h.  Reads a status document only; never talks to the daemon. */
#include "agent/metrics.h"
#include "common/promtext.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "unknown"
#endif

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Label escaping and number formatting: common/promtext.c (shared with drover exporter). */
static void put_label(FILE *out, const char *v)
{
    prom_label(out, v);
}

static void put_value(FILE *out, double v)
{
    char num[40];
    fprintf(out, "%s\n", prom_number(v, num, sizeof num));
}

static void head(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void job_sample(FILE *out, const char *name, const struct job_status *j, double v)
{
    fprintf(out, "%s{drover_job=\"", name);
    put_label(out, j->job);
    fputs("\"} ", out);
    put_value(out, v);
}

static void rank_sample(FILE *out, const char *name, const struct job_status *j,
                        const struct rank_status *r, double v)
{
    fprintf(out, "%s{drover_job=\"", name);
    put_label(out, j->job);
    fprintf(out, "\",rank=\"%d\"", r->rank);
    /* the device as dcgm-exporter labels it (gpu index, UUID), to join with its series; absent
     * when NVML did not say */
    if (r->gpu.valid && r->gpu.index >= 0)
        fprintf(out, ",gpu=\"%d\"", r->gpu.index);
    if (r->gpu.valid && gpu_uuid_is_valid(r->gpu.uuid))
        fprintf(out, ",UUID=\"%s\"", r->gpu.uuid);
    fputs("} ", out);
    put_value(out, v);
}

enum rank_field { RF_STEP, RF_TOKS, RF_LOSS, RF_NONFINITE, RF_HBAGE, RF_GPU_UTIL, RF_GPU_MEM, RF_GPU_TEMP };

static const struct {
    const char *name, *type, *help;
    bool gpu;
} rank_metrics[] = {
    [RF_STEP] = {"drover_rank_step", "gauge", "Optimizer steps completed by the rank (last heartbeat).", false},
    [RF_TOKS] = {"drover_rank_tokens_per_second", "gauge", "Training tokens per second of the rank over its last step.", false},
    [RF_LOSS] = {"drover_rank_loss", "gauge", "Last training loss of the rank; NaN when not finite.", false},
    [RF_NONFINITE] = {"drover_rank_nonfinite_steps", "gauge", "Consecutive steps with a non-finite loss or gradient norm.", false},
    [RF_HBAGE] = {"drover_rank_heartbeat_age_seconds", "gauge", "Seconds since the rank's last heartbeat (agent's monotonic clock).", false},
    [RF_GPU_UTIL] = {"drover_gpu_utilization_ratio", "gauge", "GPU utilisation of the rank's device, 0..1 (NVML).", true},
    [RF_GPU_MEM] = {"drover_gpu_memory_used_bytes", "gauge", "Memory used on the rank's device (NVML).", true},
    [RF_GPU_TEMP] = {"drover_gpu_temperature_celsius", "gauge", "Temperature of the rank's device (NVML).", true},
};

static double rank_value(const struct rank_status *r, enum rank_field f)
{
    switch (f) {
    case RF_STEP: return (double)r->hb.step;
    case RF_TOKS: return r->hb.tok_s;
    case RF_LOSS: return r->hb.loss_finite ? r->hb.loss : NAN;
    case RF_NONFINITE: return r->hb.nonfinite;
    case RF_HBAGE: return r->hb_age_s;
    case RF_GPU_UTIL: return r->gpu.util / 100.0;
    case RF_GPU_MEM: return (double)r->gpu.mem_used;
    case RF_GPU_TEMP: return r->gpu.temp;
    }
    return NAN;
}

int metrics_write(const struct agent_status *st, FILE *out)
{
    head(out, "drover_agent_uptime_seconds", "gauge", "Seconds since the agent started.");
    fputs("drover_agent_uptime_seconds ", out);
    put_value(out, st->uptime_s);

    head(out, "drover_build_info", "gauge", "The agent's build: its version as a label, value 1.");
    fputs("drover_build_info{program=\"drover-agent\",version=\"", out);
    put_label(out, DROVER_VERSION);
    fputs("\"} 1\n", out);

    head(out, "drover_job_info", "gauge", "One sample per job: its releases and gang state as labels.");
    for (int i = 0; i < st->njobs; i++) {
        const struct job_status *j = &st->jobs[i];
        fputs("drover_job_info{drover_job=\"", out);
        put_label(out, j->job);
        fprintf(out, "\",state=\"%s\",current=\"%.12s\",good=\"%.12s\"} 1\n", gang_state_name(j->state),
                j->current, j->good);
    }
    head(out, "drover_job_generation", "gauge", "Gangs started for the job since the agent's state began.");
    for (int i = 0; i < st->njobs; i++)
        job_sample(out, "drover_job_generation", &st->jobs[i], st->jobs[i].generation);
    head(out, "drover_job_restarts", "gauge", "Gang restarts of the job's current release since its activation.");
    for (int i = 0; i < st->njobs; i++)
        job_sample(out, "drover_job_restarts", &st->jobs[i], st->jobs[i].restarts);

    for (size_t f = 0; f < sizeof rank_metrics / sizeof rank_metrics[0]; f++) {
        head(out, rank_metrics[f].name, rank_metrics[f].type, rank_metrics[f].help);
        for (int i = 0; i < st->njobs; i++) {
            const struct job_status *j = &st->jobs[i];
            for (int k = 0; k < j->nranks; k++) {
                const struct rank_status *r = &j->ranks[k];
                if (rank_metrics[f].gpu ? !r->gpu.valid : !r->has_hb)
                    continue; /* absent, not zero: no heartbeat yet, or no NVML */
                rank_sample(out, rank_metrics[f].name, j, r, rank_value(r, (enum rank_field)f));
            }
        }
    }
    return ferror(out) ? -EIO : 0;
}
