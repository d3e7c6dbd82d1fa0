/* bench/top/bench.c: CPU time of one dashboard frame for a synthetic fleet (default 8 hosts x
 * 8 containers x 8 ranks, 20 documents of history each), without SSH: the model (states, rows,
 * sort, filter), the text frame of `drover top --once`, and the same frame drawn by ncursesw
 * into a 200x60 screen on /dev/null.  Prints one JSON line per measure; exits 1 when the full
 * frame (model + curses) takes 50 ms of CPU or more.
 * usage: bench HOSTS CTS RANKS [FRAMES]
 */
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/top/synth.h"
#include "controller/top/top_model.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int nh = argc > 1 ? atoi(argv[1]) : 8, nc = argc > 2 ? atoi(argv[2]) : 8;
    int nr = argc > 3 ? atoi(argv[3]) : 8, frames = argc > 4 ? atoi(argv[4]) : 50;
    if (nh < 1 || nh > INV_MAX_HOSTS || nc < 1 || nc > INV_MAX_CTS || nr < 1 || nr > STATUS_MAX_RANKS) {
        fprintf(stderr, "usage: bench HOSTS(1-%d) CTS(1-%d) RANKS(1-%d) [FRAMES]\n", INV_MAX_HOSTS,
                INV_MAX_CTS, STATUS_MAX_RANKS);
        return 2;
    }
    struct inventory *inv = calloc(1, sizeof *inv);
    struct agent_status *st = malloc(sizeof *st);
    if (!inv || !st)
        return 1;
    inv->nhosts = nh;
    inv->connect_timeout_s = 10;
    for (int h = 0; h < nh; h++)
        snprintf(inv->hosts[h].name, sizeof inv->hosts[h].name, "pve%02d", h + 1);
    /* one job per host, its containers on that host */
    inv->njobs = nh;
    for (int h = 0; h < nh; h++) {
        struct inv_job *j = &inv->jobs[h];
        snprintf(j->name, sizeof j->name, "train%d", h + 1);
        j->ncts = nc;
        j->nproc_per_node = nr;
        inventory_policy_defaults(&j->policy);
        for (int c = 0; c < nc; c++) {
            j->cts[c].host = h;
            j->cts[c].vmid = 100 * (h + 1) + c;
            snprintf(j->cts[c].label, sizeof j->cts[c].label, "pve%02d:%d", h + 1, j->cts[c].vmid);
        }
    }
    struct top_snapshot s;
    if (top_snapshot_init(&s, inv, 2) < 0)
        return 1;
    for (int h = 0; h < nh; h++) {
        s.hosts[h].up = s.hosts[h].tried = true;
        s.jobs[h].baseline_ktok = 410.0 * nc * nr;
    }
    double now = 1000;
    for (int t = 0; t < 20; t++, now += 2)
        for (int i = 0; i < s.ncts; i++) {
            synth_status(st, s.cts[i].label, s.jobs[s.cts[i].job].name, nr, s.cts[i].node_rank, now,
                         (unsigned)i);
            top_ct_update(&s.cts[i], st, s.jobs[s.cts[i].job].name, 3, now);
        }
    for (int t = 0; t < 20; t++)
        top_trend_push(s.trend, &s.ntrend, (float)(410.0 * nh * nc * nr));
    /* one sick rank so the alert paths run */
    s.cts[3].ranks[1].ktok = 0;
    s.cts[3].ranks[1].loss_finite = false;

    struct top_view v = { 0 };
    int max_rows = s.nhosts + s.ncts * (STATUS_MAX_RANKS + 1) + 1;
    struct top_row *rows = malloc((size_t)max_rows * sizeof *rows);
    if (!rows)
        return 1;
    int w[TOP_NCOLS];
    top_layout(200, &v, w);
    double t0 = cpu_now();
    int n = 0;
    for (int f = 0; f < frames; f++)
        n = top_build_rows(&s, inv, &v, now, rows, max_rows);
    double model_ms = (cpu_now() - t0) * 1000 / frames;
    v.problems_first = true;
    t0 = cpu_now();
    for (int f = 0; f < frames; f++)
        n = top_build_rows(&s, inv, &v, now, rows, max_rows);
    double sorted_ms = (cpu_now() - t0) * 1000 / frames;
    v.problems_first = false;
    t0 = cpu_now();
    size_t bytes = 0;
    for (int f = 0; f < frames; f++) {
        char *text;
        if (top_render_text(&s, inv, &v, now, 200, true, &text) < 0)
            return 1;
        bytes = strlen(text);
        free(text);
    }
    double text_ms = (cpu_now() - t0) * 1000 / frames;

    /* the curses frame: model + every visible cell drawn + refresh into /dev/null */
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    SCREEN *scr = out && in ? newterm("xterm-256color", out, in) : NULL;
    double curses_ms = -1;
    if (scr) {
        resizeterm(60, 200);
        start_color();
        init_pair(1, COLOR_RED, COLOR_BLACK);
        char buf[TOP_CELL_MAX * 4];
        t0 = cpu_now();
        for (int f = 0; f < frames; f++) {
            struct top_snapshot copy = { 0 };
            if (top_snapshot_copy(&copy, &s) < 0)
                return 1;
            n = top_build_rows(&copy, inv, &v, now + f, rows, max_rows);
            struct top_summary m;
            top_summarize(&copy, now, &m);
            erase();
            for (int y = 0; y < LINES - 4 && y < n; y++) {
                int x = 0;
                for (int c = 0; c < TOP_NCOLS; c++) {
                    if (!w[c])
                        continue;
                    attrset(rows[y].attr[c] & TOP_A_RED ? COLOR_PAIR(1) : A_NORMAL);
                    mvaddstr(3 + y, x, top_fmt_cell(rows[y].cell[c], w[c], top_col_right_aligned((enum top_col)c), buf, sizeof buf));
                    x += w[c] + 1;
                }
            }
            refresh();
            top_snapshot_done(&copy);
        }
        curses_ms = (cpu_now() - t0) * 1000 / frames;
        endwin();
        delscreen(scr);
    }
    printf("{\"bench\":\"top-frame\",\"hosts\":%d,\"containers\":%d,\"ranks\":%d,\"rows\":%d,"
           "\"model_ms\":%.3f,\"model_sorted_ms\":%.3f,\"text_frame_ms\":%.3f,\"text_bytes\":%zu,"
           "\"curses_frame_ms\":%.3f,\"limit_ms\":50}\n",
           nh, nh * nc, nh * nc * nr, n, model_ms, sorted_ms, text_ms, bytes, curses_ms);
    top_snapshot_done(&s);
    free(rows);
    free(st);
    free(inv);
    double worst = curses_ms > text_ms ? curses_ms : text_ms;
    return worst < 50 ? 0 : 1;
}
