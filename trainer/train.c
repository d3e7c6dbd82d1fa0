/* trainer/train.c: the training loop shared by every backend (see train.h): config, environment,
 * rendezvous, resume, data, LR schedule, heartbeats, checkpoints, signals, fault knobs.
 * Only rank 0 reads and writes checkpoints; the other ranks receive the resumed state from it.
 * A rank that leaves the loop only because another rank voted to stop checkpoints as any stop
 * does but exits TX_PEER_STOPPED, never TX_OK: "finished" is for its own stop or max_steps.
 * Never: write a checkpoint after a non-finite loss or gradient appeared; exit without a
 * heartbeat in phase done when it can still send one; open a socket when WORLD_SIZE is 1. */
#include "trainer/train.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/heartbeat.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "trainer/backend.h"
#include "trainer/ckpt.h"
#include "trainer/config.h"
#include "trainer/data.h"
#include "trainer/dist.h"
#include "trainer/exitcode.h"
#include "trainer/fault.h"

#define NONFINITE_LIMIT 3

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

struct run {
    struct train_config cfg;
    struct train_faults faults;
    const struct backend_ops *be_ops;
    void *be;
    struct dist *dist;
    struct loader *loader;
    struct loader *val_loader; /* NULL unless [data] val and val_every are set */
    int rank, world, local_rank;
    int hb_fd;
    struct heartbeat hb;
    char ckpt_dir[CKPT_PATH_MAX];
    struct rng rng;
    int64_t step;      /* optimizer steps completed (whole run incl. resumes) */
    int64_t tokens;    /* gang tokens consumed, for the checkpoint */
    int64_t stop_at;   /* --max-steps: stop after this step (schedule unchanged); -1 none */
    bool poisoned;     /* a non-finite value appeared: never checkpoint again */
    double last_loss;
    size_t nparams;
    float *params, *m, *v; /* host copies for checkpoints */
    int *inputs, *targets;
    double t_start;
};

static int env_int(const char *name, int def, int min, int max, int *ret)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        *ret = def;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < min || v > max) {
        log_error("environment %s='%s' is not an integer in %d..%d", name, s, min, max);
        return -EINVAL;
    }
    *ret = (int)v;
    return 0;
}

static void hb_send(struct run *r, enum hb_phase phase, const char *error)
{
    if (r->hb_fd < 0)
        return;
    r->hb.phase = phase;
    r->hb.step = r->step;
    if (error)
        (void)str_copy(r->hb.error, sizeof r->hb.error, error);
    char line[HEARTBEAT_LINE_MAX];
    int n = heartbeat_format(&r->hb, line, sizeof line);
    if (n > 0 && fd_write_all(r->hb_fd, line, (size_t)n) < 0) {
        /* a full or closed pipe must never stop training; the agent sees the silence */
        log_debug("heartbeat write failed");
    }
}

/* The first line: "this rank's process started" (docs/protocol.md, "hello"), before the config,
 * the rendezvous, NCCL and the data load, so that a rank that waits for a peer in the rendezvous
 * is told from one that never started (the agent's first-step verdict, `drover status`'s
 * "rendezvous").  Its phase init comes once the gang has met.  An agent that does not know
 * "kind" reads it as the init heartbeat it also is. */
static void hb_send_hello(struct run *r)
{
    r->hb.hello = true;
    hb_send(r, HB_PHASE_INIT, NULL);
    r->hb.hello = false;
}

static int exit_for_errno(int err)
{
    switch (err) {
    case -ENOSPC:
    case -EDQUOT:
        return TX_DISK_FULL;
    case -ENOMEM:
        return TX_NOMEM;
    case -ETIMEDOUT:
    case -ECONNRESET:
    case -ECONNREFUSED:
    case -EPROTO:
    case -EPIPE:
        return TX_PEER_LOST;
    default:
        return TX_FAILURE;
    }
}

static int fail(struct run *r, int code, const char *what)
{
    hb_send(r, HB_PHASE_DONE, what);
    return code;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int save_checkpoint(struct run *r)
{
    if (r->rank != 0 || r->poisoned)
        return 0;
    hb_send(r, HB_PHASE_CHECKPOINT, NULL);
    sleep_s(r->faults.ckpt_sleep);
    int e = r->be_ops->get_state(r->be, r->params, r->m, r->v);
    if (e < 0) {
        log_error("checkpoint at step %lld: reading state from the %s backend failed: %s",
                  (long long)r->step, r->be_ops->name, strerror(-e));
        return e;
    }
    struct ckpt_meta meta = {.model = r->cfg.model, .step = r->step, .rng_state = r->rng.s,
                             .tokens = r->tokens, .loss = r->last_loss, .world_size = r->world,
                             .batch = r->cfg.batch};
    loader_get_pos(r->loader, &meta.pos);
    (void)str_copy(meta.release, sizeof meta.release, r->hb.release);
    (void)str_copy(meta.backend, sizeof meta.backend, r->be_ops->name);
    char path[CKPT_PATH_MAX];
    double t0 = time_mono();
    e = ckpt_write(r->ckpt_dir, &meta, r->params, r->m, r->v, path);
    if (e < 0) {
        log_error("writing a checkpoint into '%s' failed: %s", r->ckpt_dir, strerror(-e));
        return e;
    }
    int pruned = ckpt_prune(r->ckpt_dir, &r->cfg.model, r->cfg.keep_checkpoints, r->hb.release,
                            getenv("DROVER_RESUME_RELEASES"));
    log_info("checkpoint '%s' written in %.0f ms (step %lld)%s", path, (time_mono() - t0) * 1e3,
             (long long)r->step, pruned > 0 ? ", older ones pruned" : "");
    r->hb.ckpt_step = r->step;
    hb_send(r, HB_PHASE_CHECKPOINT, NULL); /* "around" the save: the agent sees ckpt_step at once */
    return 0;
}

/* Rank 0 loads the newest compatible checkpoint (if any) and shares it; returns 1 resumed, 0
 * fresh, <0 error (already logged). */
static int resume_or_init(struct run *r)
{
    struct ckpt_meta meta;
    int found = 0;
    if (r->rank == 0) {
        char path[CKPT_PATH_MAX];
        found = ckpt_load_latest(r->ckpt_dir, &r->cfg.model, getenv("DROVER_RESUME_RELEASES"), &meta, r->params, r->m, r->v, path);
        if (found < 0) {
            log_error("looking for checkpoints in '%s' failed: %s", r->ckpt_dir, strerror(-found));
            return found;
        }
        if (found) {
            int e = loader_set_pos(r->loader, &meta.pos);
            if (e < 0) {
                log_warn("checkpoint '%s' data position (shard %lld, offset %lld) does not fit the "
                         "current shards and batch; starting the data from the beginning",
                         path, (long long)meta.pos.shard, (long long)meta.pos.offset);
                meta.pos = (struct data_pos){0, 0};
            }
            log_info("resuming from '%s' (step %lld, written by release '%s', backend %s)", path,
                     (long long)meta.step, meta.release, meta.backend);
        }
    }
    if (r->dist) {
        /* one small record then the arrays, from rank 0 to all */
        int64_t rec[6] = {found, found ? meta.step : 0, found ? meta.pos.shard : 0,
                          found ? meta.pos.offset : 0, found ? (int64_t)meta.rng_state : 0,
                          found ? meta.tokens : 0};
        int e = dist_broadcast(r->dist, rec, sizeof rec);
        if (e >= 0 && rec[0]) {
            size_t nb = r->nparams * sizeof(float);
            if ((e = dist_broadcast(r->dist, r->params, nb)) >= 0 &&
                (e = dist_broadcast(r->dist, r->m, nb)) >= 0)
                e = dist_broadcast(r->dist, r->v, nb);
        }
        if (e < 0) {
            log_error("sharing the resumed state between ranks failed: %s", strerror(-e));
            return e;
        }
        found = (int)rec[0];
        if (found && r->rank != 0) {
            meta.step = rec[1];
            meta.pos = (struct data_pos){rec[2], rec[3]};
            meta.rng_state = (uint64_t)rec[4];
            meta.tokens = rec[5];
            if (loader_set_pos(r->loader, &meta.pos) < 0)
                (void)loader_set_pos(r->loader, &(struct data_pos){0, 0});
        }
    }
    int e;
    if (found) {
        r->step = meta.step;
        r->tokens = meta.tokens;
        r->rng.s = meta.rng_state;
        r->last_loss = meta.loss;
        r->hb.resumed_from = meta.step;
        e = r->be_ops->set_state(r->be, r->params, r->m, r->v);
    } else {
        rng_seed(&r->rng, r->cfg.seed);
        gpt_params_init(&r->cfg.model, r->params, &r->rng);
        e = r->be_ops->set_state(r->be, r->params, NULL, NULL);
    }
    if (e < 0) {
        log_error("loading the model into the %s backend failed: %s", r->be_ops->name, strerror(-e));
        return e;
    }
    return found;
}

static void choose_ckpt_dir(struct run *r, const char *arg)
{
    const char *rd = getenv("DROVER_RUN_DIR");
    if (arg)
        (void)str_copy(r->ckpt_dir, sizeof r->ckpt_dir, arg);
    else if (rd && *rd)
        snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s/checkpoints", rd);
    else
        (void)str_copy(r->ckpt_dir, sizeof r->ckpt_dir, "checkpoints");
}

static void run_free(struct run *r)
{
    if (r->be_ops && r->be)
        r->be_ops->destroy(r->be);
    loader_free(r->loader);
    loader_free(r->val_loader);
    dist_free(r->dist);
    free(r->params);
    free(r->m);
    free(r->v);
    free(r->inputs);
    free(r->targets);
}

/* Mean loss over the first val_batches micro-batches of [data] val (the same batches every time,
 * each rank its own stride); logged by rank 0.  A data error here is logged and ends validation
 * for the run, never the training. */
static void run_validation(struct run *r)
{
    if (!r->val_loader || !r->be_ops->forward)
        return;
    struct data_pos start = {0, 0};
    (void)loader_set_pos(r->val_loader, &start);
    double sum = 0;
    char err[512];
    for (int i = 0; i < r->cfg.val_batches; i++) {
        float loss;
        int e = loader_next(r->val_loader, r->cfg.model.vocab, r->inputs, r->targets, err, sizeof err);
        if (e >= 0)
            e = r->be_ops->forward(r->be, r->inputs, r->targets, &loss);
        if (e < 0) {
            log_warn("validation stopped: %s", e == -ERANGE || e == -EIO ? err : strerror(-e));
            loader_free(r->val_loader);
            r->val_loader = NULL;
            return;
        }
        sum += loss;
    }
    if (r->rank == 0)
        log_info("step %lld val loss %.4f (%d batches)", (long long)r->step,
                 sum / r->cfg.val_batches, r->cfg.val_batches);
}

/* Tell every rank whether any rank wants to stop, so they all leave after the same step.
 * Returns 1 stop, 0 continue, <0 peer lost. */
static int agree_stop(struct run *r, bool mine)
{
    if (!r->dist)
        return mine;
    float x = mine ? 1.0f : 0.0f;
    int e = dist_allreduce_sum_f32(r->dist, &x, 1);
    return e < 0 ? e : x > 0;
}

static int train_loop(struct run *r)
{
    struct adamw_hparams h = {(float)r->cfg.beta1, (float)r->cfg.beta2, (float)r->cfg.eps,
                              (float)r->cfg.weight_decay, (float)r->cfg.grad_clip};
    int nonfinite = 0;
    int64_t bt = (int64_t)r->cfg.batch * r->cfg.model.seq;
    int64_t run_steps = 0;
    bool peer_voted = false; /* the loop ended on the stop vote, not on max_steps / --max-steps */
    double loss_sum = 0;
    int loss_n = 0;
    for (;;) {
        int stop = agree_stop(r, stop_requested);
        if (stop < 0) {
            log_error("lost a peer rank while agreeing on the next step: %s", strerror(-stop));
            return fail(r, TX_PEER_LOST, "peer lost");
        }
        if (stop || (r->cfg.max_steps > 0 && r->step >= r->cfg.max_steps) ||
            (r->stop_at >= 0 && r->step >= r->stop_at)) {
            peer_voted = stop && !(r->cfg.max_steps > 0 && r->step >= r->cfg.max_steps) &&
                         !(r->stop_at >= 0 && r->step >= r->stop_at);
            break;
        }
        int64_t next = r->step + 1;
        fault_step_begin(&r->faults, next);
        double t0 = time_mono();
        char err[512];
        int e = loader_next(r->loader, r->cfg.model.vocab, r->inputs, r->targets, err, sizeof err);
        if (e < 0) {
            log_error("%s", err);
            return fail(r, TX_DATA, "data error");
        }
        float loss, gnorm = 0;
        e = r->be_ops->forward_backward(r->be, r->inputs, r->targets, &loss);
        if (e >= 0)
            e = r->be_ops->allreduce_grads(r->be);
        if (e < 0) {
            log_error("step %lld failed in the %s backend: %s", (long long)next, r->be_ops->name, strerror(-e));
            return fail(r, exit_for_errno(e) == TX_FAILURE ? TX_DEVICE : exit_for_errno(e), strerror(-e));
        }
        fault_step_end(&r->faults, next, time_mono() - r->t_start, time_mono() - t0, &loss);
        bool finite = isfinite(loss);
        float lr = (float)train_lr_at(&r->cfg, r->step);
        if (finite) {
            e = r->be_ops->update(r->be, &h, lr, next, &gnorm);
            if (e < 0) {
                log_error("optimizer step %lld failed: %s", (long long)next, strerror(-e));
                return fail(r, TX_DEVICE, strerror(-e));
            }
            finite = isfinite(gnorm);
        }
        /* A non-finite loss on one rank makes the averaged gradient non-finite on all of them,
         * so every rank counts the same step as non-finite. */
        r->step = next;
        r->tokens += bt * r->world;
        run_steps++;
        double dt = time_mono() - t0;
        if (finite) {
            nonfinite = 0;
            r->last_loss = loss;
            loss_sum += loss;
            loss_n++;
        } else {
            nonfinite++;
            if (!r->poisoned)
                log_warn("step %lld: non-finite %s; no checkpoint will be written by this process",
                         (long long)next, isfinite(loss) ? "gradient norm" : "loss");
            r->poisoned = true;
        }
        r->hb.loss = loss;
        r->hb.loss_finite = finite;
        r->hb.nonfinite = nonfinite;
        r->hb.tokens += bt;
        r->hb.step_ms = dt * 1e3;
        r->hb.tok_s = dt > 0 ? (double)bt / dt : 0;
        if (r->be_ops->peak_flops) { /* a device backend: MFU and peak memory (docs/cuda.md) */
            double peak = r->be_ops->peak_flops(r->be);
            double fpt = gpt_flops_per_token(&r->cfg.model, r->cfg.model.seq);
            r->hb.mfu = peak > 0 ? r->hb.tok_s * fpt / peak : 0;
            r->hb.mem_peak = r->be_ops->mem_peak ? r->be_ops->mem_peak(r->be) : -1;
        }
        hb_send(r, HB_PHASE_TRAIN, NULL);
        if (nonfinite >= NONFINITE_LIMIT) {
            log_error("diverged: %d consecutive non-finite steps (last step %lld); exiting without "
                      "a checkpoint", nonfinite, (long long)r->step);
            return fail(r, TX_DIVERGED, "diverged: non-finite loss");
        }
        if (r->rank == 0 && r->cfg.log_every > 0 && (run_steps == 1 || r->step % r->cfg.log_every == 0)) {
            char of[32] = "";
            if (r->cfg.max_steps > 0)
                snprintf(of, sizeof of, "/%lld", (long long)r->cfg.max_steps);
            log_info("step %lld%s loss %.4f (avg %.4f over %d) lr %.2e norm %.3f %.1f ms %.1f Ktok/s",
                     (long long)r->step, of, (double)loss, loss_n ? loss_sum / loss_n : 0.0, loss_n,
                     (double)lr, (double)gnorm, dt * 1e3, (double)bt * r->world / dt / 1e3);
            loss_sum = 0;
            loss_n = 0;
        }
        if (r->cfg.val_every > 0 && r->step % r->cfg.val_every == 0)
            run_validation(r);
        if (r->cfg.checkpoint_every > 0 && r->step % r->cfg.checkpoint_every == 0) {
            e = save_checkpoint(r);
            if (e < 0)
                return fail(r, e == -ENOSPC || e == -EDQUOT ? TX_DISK_FULL : TX_CHECKPOINT,
                            e == -ENOSPC ? "disk full" : "checkpoint failed");
        }
    }
    if (r->step > 0 && r->step != r->hb.ckpt_step && r->step != r->hb.resumed_from) {
        int e = save_checkpoint(r);
        if (e < 0)
            return fail(r, e == -ENOSPC || e == -EDQUOT ? TX_DISK_FULL : TX_CHECKPOINT,
                        e == -ENOSPC ? "disk full" : "checkpoint failed");
    }
    /* Read after the checkpoint: a signal that reached this rank meanwhile makes the stop its
     * own (its agent is stopping it), not a peer's. */
    if (peer_voted && !stop_requested) {
        /* Another rank was stopped (its agent was stopping it, or stopping what an agent
         * before it left) and every rank agreed to stop with it.  This rank's own agent did
         * not ask: a distinct code, so that it restarts the gang (after a grace for its own
         * stop request, which may be on its way) rather than record a finished job. */
        log_info("stopping after step %lld: another rank was stopped", (long long)r->step);
        hb_send(r, HB_PHASE_DONE, NULL);
        return TX_PEER_STOPPED;
    }
    log_info("stopping after step %lld%s", (long long)r->step, stop_requested ? " (signal)" : "");
    hb_send(r, HB_PHASE_DONE, NULL);
    return TX_OK;
}

int train_run(const struct train_args *a)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.hb_fd = -1;
    r.t_start = time_mono();
    heartbeat_init(&r.hb);
    r.hb.pid = getpid();
    (void)signal(SIGPIPE, SIG_IGN); /* a closed heartbeat pipe or peer socket is an error, not death */

    /* heartbeat first, so that even a config error reaches the agent */
    int fd;
    if (env_int("DROVER_HEARTBEAT_FD", -1, 0, 65535, &fd) < 0)
        return TX_USAGE;
    if (fd >= 0) {
        if (fcntl(fd, F_GETFD) < 0) {
            log_warn("DROVER_HEARTBEAT_FD=%d is not open; heartbeats off", fd);
        } else {
            r.hb_fd = fd;
            (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
            (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        }
    }
    const char *rel = getenv("DROVER_RELEASE");
    (void)str_copy(r.hb.release, sizeof r.hb.release, rel ? rel : "");
    if (env_int("RANK", 0, 0, 1023, &r.rank) < 0 || env_int("WORLD_SIZE", 1, 1, 1024, &r.world) < 0 ||
        env_int("LOCAL_RANK", r.rank, 0, 1023, &r.local_rank) < 0)
        return fail(&r, TX_USAGE, "bad environment");
    r.hb.rank = r.rank;
    if (r.rank >= r.world) {
        log_error("RANK %d is not below WORLD_SIZE %d", r.rank, r.world);
        return fail(&r, TX_USAGE, "bad environment");
    }
    hb_send_hello(&r);
    const char *fs = getenv("DROVER_TRAIN_FAULT");
    if (!fs || !*fs)
        fs = getenv("TRAINER_FAULT");
    if (fault_parse(fs, &r.faults) < 0) {
        log_error("DROVER_TRAIN_FAULT='%s' is not a valid fault list (docs/trainer.md)", fs);
        return fail(&r, TX_USAGE, "bad fault knob");
    }
    ckpt_set_chunk_delay_ms(r.faults.ckpt_chunk_delay_ms);

    char err[512];
    int e = train_config_load(a->config, &r.cfg, err, sizeof err);
    if (e < 0) {
        log_error("config: %s", err);
        return fail(&r, TX_CONFIG, "config error");
    }
    r.stop_at = a->max_steps;
    if (a->device)
        (void)str_copy(r.cfg.device, sizeof r.cfg.device, a->device);
    choose_ckpt_dir(&r, a->ckpt_dir);
    r.be_ops = backend_find(r.cfg.device);
    if (!r.be_ops) {
        log_error("backend '%s' is not built into this drover-train", r.cfg.device);
        return fail(&r, TX_DEVICE, "backend not available");
    }
    (void)str_copy(r.hb.backend, sizeof r.hb.backend, r.be_ops->name);

    if (r.faults.exit_immediately >= 0) {
        log_error("fault knob exit_immediately=%d", r.faults.exit_immediately);
        return r.faults.exit_immediately;
    }
    if (r.faults.init_fail_rank == r.rank) {
        log_error("fault knob init_fail_rank=%d: failing init", r.rank);
        return fail(&r, TX_DEVICE, "injected init failure");
    }

    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);

    int code = TX_OK;
    if (r.world > 1) {
        const char *addr = getenv("MASTER_ADDR");
        int port;
        if (env_int("MASTER_PORT", 29500, 1, 65535, &port) < 0) {
            code = fail(&r, TX_USAGE, "bad MASTER_PORT");
            goto out;
        }
        e = dist_open(r.rank, r.world, addr && *addr ? addr : "127.0.0.1", port, r.cfg.dist_timeout,
                      &stop_requested, &r.dist);
        if (e == -ECANCELED) {
            /* stopped while the gang formed: nothing trained, nothing to checkpoint; a peer the
             * same stop killed before it could catch the signal is not waited for */
            log_info("rank %d of %d: stopped (signal) while joining the gang", r.rank, r.world);
            code = TX_OK;
            goto out;
        }
        if (e < 0) {
            log_error("rank %d of %d: joining the gang at %s:%d failed: %s", r.rank, r.world,
                      addr ? addr : "127.0.0.1", port, strerror(-e));
            code = fail(&r, TX_PEER_LOST, "rendezvous failed");
            goto out;
        }
    }
    /* the gang has met (or is this rank alone): phase init, loading data and the model */
    hb_send(&r, HB_PHASE_INIT, NULL);
    e = loader_open(r.cfg.train, r.cfg.batch, r.cfg.model.seq, r.rank, r.world, &r.loader, err, sizeof err);
    if (e < 0) {
        log_error("%s%s", err, e == -ENOENT ? " (config [data] train)" : "");
        code = fail(&r, TX_DATA, err); /* the path goes to the agent: it is what to fix */
        goto out;
    }
    if (r.cfg.val[0] && r.cfg.val_every > 0) {
        e = loader_open(r.cfg.val, r.cfg.batch, r.cfg.model.seq, r.rank, r.world, &r.val_loader, err, sizeof err);
        if (e < 0) {
            log_error("%s (config [data] val)", err);
            code = fail(&r, TX_DATA, err);
            goto out;
        }
    }
    struct backend_opts bo = {.batch = r.cfg.batch, .seq = r.cfg.model.seq, .threads = r.cfg.threads,
                              .rank = r.rank, .world_size = r.world, .local_rank = r.local_rank,
                              .dist = r.dist};
    log_clear_last_error();
    e = r.be_ops->create(&r.cfg.model, &bo, &r.be);
    if (e < 0) {
        /* the backend's own words (which variable, which head size) reach the verdict */
        char why[sizeof r.hb.error];
        log_last_error(why, sizeof why);
        log_error("starting the %s backend failed: %s", r.be_ops->name, strerror(-e));
        /* -EINVAL: the model, batch or environment asks for what the backend cannot run */
        code = fail(&r, e == -ENOMEM ? TX_NOMEM : e == -EINVAL ? TX_CONFIG : TX_DEVICE,
                    why[0] ? why : "backend init failed");
        goto out;
    }
    r.nparams = gpt_num_params(&r.cfg.model);
    size_t bt = (size_t)r.cfg.batch * r.cfg.model.seq;
    r.params = malloc(r.nparams * sizeof(float));
    r.m = malloc(r.nparams * sizeof(float));
    r.v = malloc(r.nparams * sizeof(float));
    r.inputs = malloc(bt * sizeof(int));
    r.targets = malloc(bt * sizeof(int));
    if (!r.params || !r.m || !r.v || !r.inputs || !r.targets) {
        log_error("out of memory for %zu parameters", r.nparams);
        code = fail(&r, TX_NOMEM, "out of memory");
        goto out;
    }
    e = resume_or_init(&r);
    if (e < 0) {
        code = fail(&r, exit_for_errno(e) == TX_FAILURE ? TX_CHECKPOINT : exit_for_errno(e), "resume failed");
        goto out;
    }
    if (r.rank == 0)
        log_info("model: %d layers, %d heads, dim %d, vocab %d (padded %d), seq %d: %zu parameters; "
                 "batch %d x %d %s; %d %s, %lld tokens; backend %s; checkpoints in '%s'",
                 r.cfg.model.layers, r.cfg.model.heads, r.cfg.model.dim, r.cfg.model.vocab,
                 r.cfg.model.vocab_padded, r.cfg.model.seq, r.nparams, r.cfg.batch, r.world, text_plural(r.world, "rank", "ranks"),
                 loader_num_shards(r.loader), text_plural(loader_num_shards(r.loader), "shard", "shards"),
                 (long long)loader_num_tokens(r.loader),
                 r.be_ops->name, r.ckpt_dir);
    if (r.be_ops->mem_peak)
        r.hb.mem_peak = r.be_ops->mem_peak(r.be);
    hb_send(&r, HB_PHASE_INIT, NULL);
    code = train_loop(&r);
out:
    run_free(&r);
    return code;
}
