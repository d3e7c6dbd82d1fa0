/* common/heartbeat.h: the worker -> agent heartbeat wire format, version 1 (docs/protocol.md).
 *
 * One JSON object per line, at most HEARTBEAT_LINE_MAX bytes including the newline, written by
 * each rank to the file descriptor named by DROVER_HEARTBEAT_FD.  Example:
 *   {"v":1,"rank":0,"pid":812,"step":120,"tokens":7864320,"loss":3.91,"nonfinite":0,
 *    "tok_s":412345.6,"step_ms":19.1,"phase":"train","resumed_from":100,"ckpt_step":100,
 *    "release":"3f2a...","backend":"cpu"}
 * A non-finite loss is sent as "loss":null with "nonfinite" > 0 (JSON has no NaN).
 * The reader forgives what real workers send: Python's json.dumps tokens NaN, Infinity and
 * -Infinity (outside strings) read as null, and a null loss means non-finite, never a dropped
 * line; "release" may be left out (the agent fills in the gang's); "phase" left out means train
 * once step > 0, else init; unknown keys are ignored; "v" stays required.
 * A line with "kind":"hello" says only that the worker's heartbeat module started (the Python
 * module sends it from Heartbeat(), before the rendezvous): it reads as phase init, step 0, with
 * hello set.  An older agent ignores "kind" and takes it for the init heartbeat it looks like,
 * which is why it is one: a new kind must be a line an older agent may read as a heartbeat.
 * Only this file knows the format: the trainer formats with heartbeat_format(), the agent parses
 * with heartbeat_parse().  Unknown keys are ignored so that newer workers talk to older agents.
 */
#ifndef DROVER_HEARTBEAT_H
#define DROVER_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEARTBEAT_VERSION 1
#define HEARTBEAT_LINE_MAX 1024

enum hb_phase {
    HB_PHASE_INIT = 0,   /* loading data / checkpoint, before the first step */
    HB_PHASE_TRAIN,      /* stepping */
    HB_PHASE_CHECKPOINT, /* writing a checkpoint */
    HB_PHASE_DONE,       /* finished (max steps reached or stopping after SIGTERM) */
};

struct heartbeat {
    int rank;             /* global rank (RANK) */
    int64_t pid;
    int64_t step;         /* optimizer steps completed, counted over the whole run incl. resumes */
    int64_t tokens;       /* tokens processed by this rank since the process started */
    double loss;          /* last step's training loss; meaningful when loss_finite */
    bool loss_finite;
    bool has_loss;        /* the worker sent "loss" (a number, or null/NaN = non-finite);
                             false: it never reports one, which is not a failure */
    int nonfinite;        /* consecutive steps with a non-finite loss or gradient norm */
    double tok_s;         /* this rank's tokens per second over the last step(s); 0 if unknown */
    double step_ms;       /* last step's wall time in ms; 0 if unknown */
    enum hb_phase phase;
    int64_t resumed_from; /* step of the checkpoint this process resumed from; -1 if fresh */
    int64_t ckpt_step;    /* step of the newest checkpoint this process wrote; -1 if none */
    double mfu;           /* model FLOPs utilisation 0..1; -1 if unknown (CPU) */
    int64_t mem_peak;     /* peak device memory in bytes; -1 if unknown */
    char release[72];     /* DROVER_RELEASE the worker was started with; "" if unknown */
    char backend[16];     /* "cpu", "cuda", or what a foreign worker says */
    char error[160];      /* set with phase "done" when the worker is exiting on an error */
    bool hello;           /* "kind":"hello": the heartbeat module started, nothing more yet (phase
                             init; the worker has not called hb.init(): in its imports or the
                             rendezvous); written back as "kind":"hello" */
};

/* Fill defaults (-1 for unknown fields, phase init, has_loss true). */
void heartbeat_init(struct heartbeat *hb);

/* Format hb as one line ending in '\n' into out[outsz].  Returns the length written (without
 * NUL), or -ENOSPC if it would not fit in min(outsz, HEARTBEAT_LINE_MAX). */
int heartbeat_format(const struct heartbeat *hb, char *out, size_t outsz);

#define HB_RANK_MAX (1 << 20) /* the largest global rank a heartbeat may carry */

/* Said after a verdict on a rank that sent no heartbeat and no other line either (agent
 * liveness, controller probation): most often a worker that never reports (a PyTorch script
 * without drover_heartbeat), which trains and prints its steps while drover sees nothing. */
/* Said after a verdict on a rank whose heartbeat module started (a hello line) but which never
 * sent init: the script is past its imports and most often in the rendezvous. */
#define HB_HELLO_ONLY_HINT "waiting for a peer in init_process_group or a first collective?"
/* Said when every rank of a gang sent its hello and none its init (the controller's probation
 * sees every rank): none waits for a peer that never came, all wait for each other, so no rank is
 * named; worded for any worker that sends a hello (drover_heartbeat, drover-train). */
#define HB_ALL_HELLO_HINT "all wait in the rendezvous: is a rank's MASTER_ADDR, MASTER_PORT or world " \
    "size different, or one rank slow before init_process_group?"

#define HB_NONE_SENT_HINT "it sent none: does the worker use drover_heartbeat (docs/pytorch.md, docs/protocol.md)?"

/* Parse one line (len bytes, newline optional, no NUL needed).  -E2BIG when len exceeds
 * HEARTBEAT_LINE_MAX, -EINVAL when not a JSON object of version 1 with integer rank and step,
 * -EPROTONOSUPPORT for another version.  The bare tokens NaN, Infinity, -Infinity (Python's
 * json.dumps) read as null.  ret_hb is written only on success. */
int heartbeat_parse(const char *line, size_t len, struct heartbeat *ret_hb);

/* Why heartbeat_parse() refused line, for the agent's log (a worker that writes its own lines
 * was told only "Invalid argument"): "not JSON: ...", "not a JSON object", "no integer \"v\"
 * (heartbeats carry \"v\": 1)", "no \"rank\" (...)", "\"tok_s\" has the wrong type or value",
 * ...  Into buf; returns buf.  Only for a line heartbeat_parse() refused (cold path). */
const char *heartbeat_refusal(const char *line, size_t len, char *buf, size_t sz);

/* The same fields as a JSON object, for documents that embed a heartbeat (the agent status
 * document does).  heartbeat_to_json returns a new reference (json_decref), NULL on ENOMEM.
 * heartbeat_from_json requires "rank" and "step" (integers) and the types above; unknown keys
 * are ignored; -EINVAL otherwise, ret_hb written only on success. */
struct json_t;
struct json_t *heartbeat_to_json(const struct heartbeat *hb);
int heartbeat_from_json(struct json_t *o, struct heartbeat *ret_hb);

const char *hb_phase_name(enum hb_phase p);
/* -EINVAL for an unknown name. */
int hb_phase_from_name(const char *name, enum hb_phase *ret_phase);

#endif
