/* controller/cmd_result.c: `-o json` for the verbs that change things (deploy, rollback, plan,
 * install): the result document, version 1 (docs/protocol.md, "Result document").  While the
 * verb runs, its human-readable lines go to stderr so that stdout carries one JSON document and
 * nothing else; afterwards the outcome is read back from the history records the engine
 * appended (the one record of what happened), plus the exit code and the verb's own members
 * (plan's "plans", install's "containers").
 */
#include <jansson.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/deploy/state.h"

int cmd_result_begin(struct cmd_result *cr)
{
    cr->t0 = time_wall();
    log_clear_last_error(); /* the document's "error" is one this run logged */
    fflush(stdout);
    cr->saved_fd = dup(STDOUT_FILENO);
    if (cr->saved_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        return -errno;
    return 0;
}

json_t *cmd_result_doc(const char *kind, const char *const *jobs, int njobs, int code,
                       const char *error, json_t *records, json_t *extra)
{
    json_t *jl = json_array();
    for (int j = 0; j < njobs; j++)
        json_array_append_new(jl, json_string(jobs[j]));
    /* a failure says why (the line also printed on stderr); success, or a failure nobody
     * explained, has null */
    json_t *err = code != EXIT_OK && error && *error ? json_string(error) : json_null();
    json_t *root = json_pack("{s:i,s:s,s:o,s:i,s:s,s:o,s:o}", "v", 1, "kind", kind, "jobs", jl,
                             "exit", code, "outcome", drover_exit_name(code) ? drover_exit_name(code) : "unknown",
                             "error", err, "records", records);
    if (root && extra && json_object_update(root, extra) < 0) {
        json_decref(root);
        root = NULL;
    }
    json_decref(extra);
    return root;
}

void cmd_result_want(struct fleet *f, bool json, const char *kind, const char *const *jobs, int njobs)
{
    if (!json || !f->args_only)
        return;
    f->json_kind = kind;
    f->json_njobs = 0;
    for (int j = 0; j < njobs && j < INV_MAX_JOBS; j++)
        if (jobs[j])
            f->json_jobs[f->json_njobs++] = jobs[j];
}

int cmd_result_early(const char *kind, const char *const *jobs, int njobs, int code, const char *error)
{
    json_t *extra = NULL;
    if (strcmp(kind, "trust") == 0)
        extra = json_pack("{s:n,s:[]}", "known_hosts", "hosts");
    else if (strcmp(kind, "install") == 0)
        extra = json_pack("{s:n,s:n,s:[]}", "agent_binary", "sha256", "containers");
    else if (strcmp(kind, "plan") == 0)
        extra = json_pack("{s:[]}", "plans");
    else if (strcmp(kind, "deploy") == 0)
        extra = json_pack("{s:[]}", "unchanged");
    json_t *root = cmd_result_doc(kind, jobs, njobs, code, error, json_array(), extra);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (text) {
        puts(text);
        fflush(stdout);
    }
    free(text);
    return code;
}

int cmd_result_end(struct cmd_result *cr, const struct inventory *inv, const char *kind,
                   const char *const *jobs, int njobs, int code)
{
    fflush(stdout);
    if (cr->saved_fd >= 0) {
        (void)dup2(cr->saved_fd, STDOUT_FILENO);
        close(cr->saved_fd);
        cr->saved_fd = -1;
    }
    json_t *records = json_array();
    for (int j = 0; j < njobs; j++) {
        struct history_entry *h = NULL;
        size_t n = 0;
        if (state_history_read(inv->state_dir, jobs[j], &h, &n, NULL) < 0)
            continue;
        for (size_t i = 0; i < n; i++)
            if (h[i].time >= cr->t0 - 1)
                json_array_append_new(records, history_entry_json(&h[i]));
        free(h);
    }
    /* why it failed: the last error this run logged; else the reason of the last record it
     * appended (a revert's verdict is a record, not an error line) */
    char error[1024];
    log_last_error(error, sizeof error);
    if (!*error && json_array_size(records)) {
        const char *why = json_string_value(json_object_get(json_array_get(records, json_array_size(records) - 1),
                                                            "reason"));
        snprintf(error, sizeof error, "%s", why ? why : "");
    }
    json_t *root = cmd_result_doc(kind, jobs, njobs, code, error, records, cr->extra);
    cr->extra = NULL;
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!text) {
        log_error("cannot build the result document");
        return code == EXIT_OK ? EXIT_FAIL : code;
    }
    puts(text);
    free(text);
    fflush(stdout);
    return code;
}
