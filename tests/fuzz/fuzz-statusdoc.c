/* Fuzz target: status documents as the controller uses them: a stream of lines from
 * `drover-agent watch --json`, each parsed with status_parse() and fed to a probation for a
 * two-container job, with the verdict and progress line evaluated after each. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "controller/deploy/probation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *labels[] = { "h1:101", "h1:102" };
    struct inv_policy pol;
    inventory_policy_defaults(&pol);
    pol.healthy_deadline_s = 5;
    pol.min_healthy_time_s = 2;
    pol.warmup_steps = 1;
    struct probation *p;
    const char *rel = "3f2a9c1b7d6e3f2a9c1b7d6e3f2a9c1b7d6e3f2a9c1b7d6e3f2a9c1b7d6e0000";
    if (probation_new(&pol, "train", rel, 2, labels, 2, size % 2 ? 50.0 : -1, size % 3 == 0, 0, &p) < 0)
        return 0;
    struct agent_status *st = malloc(sizeof *st);
    if (!st) {
        probation_free(p);
        return 0;
    }
    const char *s = (const char *)data, *end = s + size;
    double t = 0;
    int ct = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (status_parse(s, n, st) == 0) {
            const struct job_status *js = status_find_job(st, "train");
            if (js && (js->nranks < 0 || js->nranks > STATUS_MAX_RANKS))
                abort();
            probation_feed(p, ct, st, t);
        }
        probation_check(p, t);
        char line[512];
        probation_describe(p, t, line, sizeof line);
        if (strlen(probation_reason(p)) >= PROBATION_REASON_MAX)
            abort();
        ct ^= 1;
        t += 0.7;
        s += n + 1;
    }
    free(st);
    probation_free(p);
    return 0;
}
