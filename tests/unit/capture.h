/* tests/unit/capture.h: run a controller verb with its stdout and stderr captured into files,
 * for the unit tests that check what a verb says (test-controller-plan, test-controller-status,
 * test-controller-stopstart, test-controller-cli), and the fake agent those verbs ask: a script whose status document
 * the test writes; its documents and ranks are what test-controller-probation and
 * test-controller-top feed too.  Header-only: each test program includes it once. */
#ifndef DROVER_TESTS_UNIT_CAPTURE_H
#define DROVER_TESTS_UNIT_CAPTURE_H

#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/status.h"
#include "controller/inventory.h"
#include "controller/transport/fleet.h"

/* Run verb on inv with stdout and stderr into the files out and err (the same path: both into
 * one file, in the order a terminal shows them); its exit code. */
static inline int capture_verb(int (*verb)(struct fleet *, int, char **), const struct inventory *inv, char **argv,
                               int argc, const char *out, const char *err)
{
    struct fleet f;
    fleet_init(&f, inv, NULL);
    fflush(stdout);
    fflush(stderr);
    int save_out = dup(STDOUT_FILENO), save_err = dup(STDERR_FILENO);
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int fe = strcmp(out, err) == 0 ? dup(fo) : open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fo >= 0 && fe >= 0);
    dup2(fo, STDOUT_FILENO);
    dup2(fe, STDERR_FILENO);
    close(fo);
    close(fe);
    int code = verb(&f, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(save_out, STDOUT_FILENO);
    dup2(save_err, STDERR_FILENO);
    close(save_out);
    close(save_err);
    fleet_done(&f);
    return code;
}

/* Write path with text, then chmod it to mode. */
static inline void capture_put(const char *path, const char *text, mode_t mode)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(chmod(path, mode), 0);
}

/* The whole of file path, NUL-terminated, to free(). */
static inline char *capture_slurp(const char *path)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char *buf = calloc(1, 1 << 16);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 16) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

/* *rs: rank `rank` (local rank local_rank) of a gang of release that trains: pid 100 + local
 * rank, a heartbeat 0.5 s old in phase train at step with tok_s and loss (a non-finite loss
 * counted as the agent counts it).  The rest of the heartbeat is heartbeat_init()'s. */
static inline void fake_rank_training(struct rank_status *rs, int rank, int local_rank, const char *release,
                                      long long step, double tok_s, double loss)
{
    memset(rs, 0, sizeof *rs);
    rs->rank = rank;
    rs->local_rank = local_rank;
    rs->pid = 100 + local_rank;
    strcpy(rs->state, "running");
    rs->hb_age_s = 0.5;
    rs->exit_code = -1;
    rs->has_hb = true;
    heartbeat_init(&rs->hb);
    rs->hb.rank = rank;
    rs->hb.step = step;
    rs->hb.tok_s = tok_s;
    rs->hb.loss = loss;
    rs->hb.loss_finite = isfinite(loss);
    rs->hb.nonfinite = isfinite(loss) ? 0 : 1;
    rs->hb.phase = HB_PHASE_TRAIN;
    strcpy(rs->hb.release, release);
}

/* *st: an agent that answers and knows no job (host "ct", version "test"); add jobs to it. */
static inline void fake_agent_status_init(struct agent_status *st)
{
    memset(st, 0, sizeof *st);
    strcpy(st->host, "ct");
    strcpy(st->agent_version, "test");
}

/* st as `drover-agent status --json` prints it, malloc'd; older_than_codes: as an agent from
 * before "reason_code" sends it, without that member in any job (the controller then derives
 * the code from the reason's words, common/status.c). */
static inline char *fake_agent_doc(const struct agent_status *st, bool older_than_codes)
{
    static const char key[] = ",\"reason_code\":\"";
    char *doc = NULL;
    assert_int_equal(status_format(st, &doc), 0);
    for (char *m; older_than_codes && (m = strstr(doc, key));) {
        char *end = strchr(m + strlen(key), '"'); /* names hold no quote */
        assert_non_null(end);
        memmove(m, end + 1, strlen(end + 1) + 1);
    }
    return doc;
}

/* The fake agent of local-root containers (`agent_path = DIR/agent` in the inventory): DIR/status.json
 * is st as `drover-agent status --json` prints it (older_than_codes: fake_agent_doc()), DIR/agent
 * a script that prints that file whatever it is asked.  Called again with another st, the agent
 * says that instead. */
static inline void fake_agent_as(const char *dir, const struct agent_status *st, bool older_than_codes)
{
    char path[512], text[1024], *doc = fake_agent_doc(st, older_than_codes);
    snprintf(path, sizeof path, "%s/status.json", dir);
    capture_put(path, doc, 0600);
    free(doc);
    snprintf(text, sizeof text, "#!/bin/sh\ncat '%s/status.json'\n", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    capture_put(path, text, 0755);
}

/* fake_agent_as() of an agent of today. */
static inline void fake_agent(const char *dir, const struct agent_status *st)
{
    fake_agent_as(dir, st, false);
}

/* The inventory of fake_agent()'s tests, as text into buf: one host h1 of local roots whose agent
 * is DIR/agent, job train in DIR/a and DIR/b, job eval in DIR/<eval_root>, state in DIR/state;
 * drover_keys and train_keys ("key = value\n" lines, or "") go into [drover] and [job train]. */
static inline const char *fake_agent_inventory_text(char *buf, size_t size, const char *dir, const char *drover_keys,
                                                    const char *train_keys, const char *eval_root)
{
    snprintf(buf, size,
             "[drover]\nstate_dir = %s/state\n%s[host h1]\nlocal = true\nagent_path = %s/agent\n"
             "[job train]\ncontainers = h1:local:%s/a h1:local:%s/b\ncommand = bin/t\n%s"
             "[job eval]\ncontainers = h1:local:%s/%s\ncommand = bin/e\nmaster_port = 29501\n",
             dir, drover_keys, dir, dir, dir, train_keys, dir, eval_root);
    return buf;
}

/* fake_agent_inventory_text(), parsed. */
static inline struct inventory *fake_agent_inventory(const char *dir, const char *drover_keys,
                                                     const char *train_keys, const char *eval_root)
{
    char text[2048], why[512];
    fake_agent_inventory_text(text, sizeof text, dir, drover_keys, train_keys, eval_root);
    struct inventory *inv = NULL;
    assert_int_equal(inventory_parse(text, strlen(text), "/t/inv.ini", &inv, why, sizeof why), 0);
    return inv;
}

#endif
