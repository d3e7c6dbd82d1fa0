/* controller/cmd_history.c: `drover history [--job J] [-o json]`: the controller's record of
 * deploys, reverts and rollbacks (state_dir/history.jsonl), oldest first.  Read-only.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/text.h"
#include "controller/cmd.h"
#include "controller/verbs.h"
#include "controller/deploy/state.h"

int cmd_history(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "output", required_argument, NULL, 'o' },
        { "job", required_argument, NULL, 'j' },
        { NULL, 0, NULL, 0 },
    };
    const char *job = NULL;
    bool json = false;
    int c;
    optind = 0; /* 0: glibc re-initialises (main parsed with "+") */
    while ((c = getopt_long(argc, argv, "o:j:", opts, NULL)) != -1) {
        if (c == 'o' && strcmp(optarg, "json") == 0)
            json = true;
        else if (c == 'j')
            job = optarg;
        else {
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc) {
        return verb_usage_error(argv[0], argv[optind]);
    }
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    struct history_entry *h;
    size_t n;
    int r = state_history_read(f->inv->state_dir, job, &h, &n);
    if (r < 0) {
        log_error("cannot read the history in '%s': %s", f->inv->state_dir, strerror(-r));
        return EXIT_FAIL;
    }
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *o = json_pack("{s:f,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "time", h[i].time, "job",
                                  h[i].job, "release", h[i].release, "name", h[i].name, "result",
                                  h[i].result, "previous", h[i].previous, "reason", h[i].reason,
                                  "containers", h[i].containers);
            json_object_set_new(o, "ktok_s", h[i].ktok_s >= 0 ? json_real(h[i].ktok_s) : json_null());
            json_object_set_new(o, "baseline_ktok_s",
                                h[i].baseline_ktok_s >= 0 ? json_real(h[i].baseline_ktok_s)
                                                          : json_null());
            json_array_append_new(arr, o);
        }
        json_t *root = json_pack("{s:i,s:o}", "v", 1, "history", arr);
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(root);
    } else {
        printf("%-20s %-12s %-13s %-10s %-14s %8s  %s\n", "TIME (UTC)", "JOB", "RELEASE", "NAME",
               "RESULT", "KTOK/S", "REASON");
        for (size_t i = 0; i < n; i++) {
            char when[32], sid[RELEASE_SHORT_LEN + 1], k[16] = "-";
            time_t t = (time_t)h[i].time;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
            if (h[i].ktok_s >= 0)
                snprintf(k, sizeof k, "%.1f", h[i].ktok_s);
            /* reasons quote workers and agents; records written before escaping existed too */
            char name_e[4 * sizeof h[i].name], reason_e[4 * sizeof h[i].reason];
            printf("%-20s %-12s %-13s %-10s %-14s %8s  %s\n", when, h[i].job,
                   ui_short(h[i].release, sid),
                   text_escape(h[i].name, strlen(h[i].name), name_e, sizeof name_e), h[i].result, k,
                   text_escape(h[i].reason, strlen(h[i].reason), reason_e, sizeof reason_e));
        }
    }
    free(h);
    return EXIT_OK;
}
