/* tests/unit/capture.h: run a controller verb with its stdout and stderr captured into files,
 * for the unit tests that check what a verb says (test-controller-plan, test-controller-status,
 * test-controller-stopstart, test-controller-cli), and the fake agent those verbs ask: a script whose status document
 * the test writes.  Header-only: each test program includes it once. */
#ifndef DROVER_TESTS_UNIT_CAPTURE_H
#define DROVER_TESTS_UNIT_CAPTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/status.h"
#include "controller/inventory.h"
#include "controller/transport/fleet.h"

/* Run verb on inv with stdout and stderr into the files out and err; its exit code. */
static inline int capture_verb(int (*verb)(struct fleet *, int, char **), const struct inventory *inv, char **argv,
                               int argc, const char *out, const char *err)
{
    struct fleet f;
    fleet_init(&f, inv, NULL);
    fflush(stdout);
    fflush(stderr);
    int save_out = dup(STDOUT_FILENO), save_err = dup(STDERR_FILENO);
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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

/* *st: an agent that answers and knows no job (host "ct", version "test"); add jobs to it. */
static inline void fake_agent_status_init(struct agent_status *st)
{
    memset(st, 0, sizeof *st);
    strcpy(st->host, "ct");
    strcpy(st->agent_version, "test");
}

/* The fake agent of local-root containers (`agent_path = DIR/agent` in the inventory): DIR/status.json
 * is st as `drover-agent status --json` prints it, DIR/agent a script that prints that file
 * whatever it is asked.  Called again with another st, the agent says that instead. */
static inline void fake_agent(const char *dir, const struct agent_status *st)
{
    char path[512], text[1024], *doc = NULL;
    assert_int_equal(status_format(st, &doc), 0);
    snprintf(path, sizeof path, "%s/status.json", dir);
    capture_put(path, doc, 0600);
    free(doc);
    snprintf(text, sizeof text, "#!/bin/sh\ncat '%s/status.json'\n", dir);
    snprintf(path, sizeof path, "%s/agent", dir);
    capture_put(path, text, 0755);
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
