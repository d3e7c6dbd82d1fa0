/* bench/top/fake-agent.c: stands in for drover-agent for the dashboard's CPU bench: answers
 * `[--root R] [--socket S] watch --json [--interval N]` with a synthetic status document
 * (FAKE_RANKS ranks, default 8) every interval, and `events --json` with two events.  It changes
 * nothing and is never installed anywhere; bench/top/run.sh points a local inventory at it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/top/synth.h"
#include "common/util.h"

int main(int argc, char **argv)
{
    const char *root = "/fake", *verb = NULL;
    double interval = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--root") && i + 1 < argc)
            root = argv[++i];
        else if (!strcmp(argv[i], "--socket") && i + 1 < argc)
            i++;
        else if (!strcmp(argv[i], "--interval") && i + 1 < argc)
            interval = atof(argv[++i]);
        else if (!verb && argv[i][0] != '-')
            verb = argv[i];
    }
    if (!verb)
        return 2;
    if (!strcmp(verb, "events")) {
        printf("{\"detail\":\"started\",\"job\":\"train\",\"kind\":\"start\",\"release\":\"aaaa\",\"seq\":1,\"ts\":%.1f}\n",
               time_wall() - 60);
        printf("{\"detail\":\"promoted\",\"job\":\"train\",\"kind\":\"promote\",\"release\":\"aaaa\",\"seq\":2,\"ts\":%.1f}\n",
               time_wall() - 30);
        return 0;
    }
    if (strcmp(verb, "watch") && strcmp(verb, "status"))
        return 2;
    const char *nr = getenv("FAKE_RANKS");
    int nranks = nr ? atoi(nr) : 8;
    unsigned seed = 0;
    for (const char *p = root; *p; p++)
        seed = seed * 31 + (unsigned char)*p;
    struct agent_status *st = malloc(sizeof *st);
    if (!st)
        return 1;
    double t0 = time_mono();
    /* the job is the root's parent directory's name: /tmp/x/train3/c1 -> train3 */
    char job[JOB_NAME_MAX] = "train";
    const char *end = strrchr(root, '/'), *start = end;
    while (start && start > root && start[-1] != '/')
        start--;
    if (end && start && end > start && (size_t)(end - start) < sizeof job)
        snprintf(job, sizeof job, "%.*s", (int)(end - start), start);
    for (;;) {
        synth_status(st, root, job, nranks, (int)(seed % 8), time_mono() - t0 + (seed % 100), seed);
        char *text;
        if (status_format(st, &text) < 0)
            return 1;
        printf("%s\n", text);
        free(text);
        if (fflush(stdout) != 0 || !strcmp(verb, "status"))
            break;
        usleep((useconds_t)(interval * 1e6));
    }
    free(st);
    return 0;
}
