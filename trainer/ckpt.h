/* trainer/ckpt.h: checkpoint files, format v1 (docs/protocol.md, "Checkpoint, v1").
 *
 * One file per checkpoint, named ckpt-<fingerprint as 16 hex>-<step as 12 digits>.bin in the
 * checkpoint directory; the fingerprint is gpt_config_fingerprint(), so a release with another
 * model shape neither resumes from nor deletes these files.  Written to a dot-temp file in the
 * same directory, fsync'd, renamed, and the directory fsync'd; verified on load by size, header
 * and a SHA-256 footer, falling back to older checkpoints when the newest is bad.
 * The only file that knows the checkpoint layout is ckpt.c.
 * Logs a warning for each bad checkpoint it skips; otherwise returns -errno.
 */
#ifndef DROVER_TRAINER_CKPT_H
#define DROVER_TRAINER_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/data.h"
#include "trainer/model.h"

#define CKPT_VERSION 1
#define CKPT_HEADER_BYTES 256
#define CKPT_FOOTER_BYTES 64 /* SHA-256 of everything before it, as lowercase hex */
#define CKPT_PATH_MAX 4096

struct ckpt_meta {
    struct gpt_config model;
    int64_t step;          /* optimizer steps completed when it was written */
    struct data_pos pos;   /* loader position for the next step */
    uint64_t rng_state;    /* struct rng.s */
    int64_t tokens;        /* tokens consumed by the whole gang so far */
    double loss;           /* last training loss (finite: non-finite runs never checkpoint) */
    int world_size, batch; /* informative */
    char release[72];      /* DROVER_RELEASE of the writer */
    char backend[16];      /* "cpu" / "cuda" */
};

/* Write meta and the three arrays (gpt_num_params(&meta->model) floats each) into dir (created
 * if missing).  Returns 0 and the final path in ret_path[CKPT_PATH_MAX] (may be NULL); -ENOSPC
 * when the disk is full (the temp file is removed and older checkpoints are untouched), -errno. */
int ckpt_write(const char *dir, const struct ckpt_meta *meta, const float *params, const float *m,
               const float *v, char *ret_path);

/* Read and verify one checkpoint file for model (shape must match exactly).  params, m, v are
 * caller arrays of gpt_num_params(model) floats; their contents are unspecified on failure.
 * Returns 0 and *ret_meta; -EBADMSG corrupt (size, header, hash), -ESTALE another shape or
 * version, -errno. */
int ckpt_read(const char *path, const struct gpt_config *model, struct ckpt_meta *ret_meta,
              float *params, float *m, float *v);

/* Load the newest checkpoint in dir for model that verifies, trying older ones after a bad one.
 * trusted: NULL to accept any writer, else a comma-separated list of release ids (the agent's
 * DROVER_RESUME_RELEASES: this release and those promoted for the job); checkpoints written by
 * other releases are skipped, so a release reverted during probation leaves the good release's
 * progress alone (docs/trainer.md, "Checkpoints").
 * Returns 1 and fills *ret_meta/arrays (ret_path may be NULL), 0 when there is none (dir missing
 * or empty of matching files), -errno on an unexpected error. */
int ckpt_load_latest(const char *dir, const struct gpt_config *model, const char *trusted,
                     struct ckpt_meta *ret_meta, float *params, float *m, float *v, char *ret_path);

/* Delete all but the newest keep checkpoints of model's shape written by release own (NULL or
 * "": whoever wrote them), and stale temp files of that shape.  Other releases' checkpoints
 * are kept when trusted lists their writer (or trusted is NULL): a release on probation cannot
 * prune away the checkpoints the last good release will resume from.  Those of a writer that
 * trusted (DROVER_RESUME_RELEASES: this release and every one promoted for the job) does not
 * list are deleted: a failed release's, which no release of the job resumes from again, and
 * which filled the disk one full model and optimizer state per failed deploy.  Other shapes are
 * never touched.  Returns the number deleted or -errno. */
int ckpt_prune(const char *dir, const struct gpt_config *model, int keep, const char *own, const char *trusted);

/* true when release appears in the comma-separated list (NULL list: true). */
bool ckpt_release_trusted(const char *list, const char *release);

/* Test knob (DROVER_TRAIN_FAULT ckpt_chunk_delay=MS): sleep this long after each 1 MiB written. */
void ckpt_set_chunk_delay_ms(int ms);

#endif
