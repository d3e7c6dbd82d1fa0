/* controller/top/top.c: `drover top`, the live fleet dashboard (ncursesw), and `drover top --once`
 * (one text frame on stdout).  Owns the screen, the keys and the options; the data comes from
 * top_poll.c's threads and every cell from top_model.c.  The input loop never waits on a host:
 * it only copies the newest snapshot.  Its one action that changes the fleet (R: roll a job
 * back, by running `drover rollback --job J` as a child with its output in a log file) asks
 * first, naming the job, its containers and the release it goes to; --readonly removes it.
 * While the screen is up, stderr goes to /dev/null so that no log line can tear the frame.
 */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/cli.h"
#include "controller/cmd.h"
#include "controller/top/top.h"
#include "controller/verbs.h"

static const double intervals[] = { 0.5, 1, 2, 5, 10, 30, 60 };

struct top_opts {
    double interval_s;
    bool once, ascii, readonly, flat, problems_first;
    double watch_s;          /* --watch N: a text frame every N s, no curses */
    int width;
    double timeout_s;
    const char *filter;
};

static void usage_top(FILE *fp)
{
    fprintf(fp, "usage: drover top %s\n", verb_find("top")->args); /* the verb table's line */
    fprintf(fp, "--once prints one frame as text, --watch N one every N s (no curses)\n"
                "keys: q quit, arrows/j k move, enter fold/unfold, / filter, s sort (problems\n"
                "first), t tree/flat, + - refresh interval, l recent events, R roll back the selected\n"
                "job (asks first; not with --readonly), ? help\n");
}

static bool locale_is_utf8(void)
{
    const char *cs = nl_langinfo(CODESET);
    return cs && (strcasecmp(cs, "UTF-8") == 0 || strcasecmp(cs, "utf8") == 0);
}

static bool no_color_env(void)
{
    const char *nc = getenv("NO_COLOR");
    return nc && *nc;
}

/* ------------------------------------------------------------------ --once */

static bool all_answered(const struct top_snapshot *s, double now)
{
    for (int i = 0; i < s->ncts; i++) {
        const struct top_ct *ct = &s->cts[i];
        if (!ct->seen && !ct->err[0] && !s->hosts[ct->host].err[0] && !top_ct_is_stale(s, ct, now))
            return false;
    }
    return true;
}

static int top_once(struct fleet *f, const struct top_opts *o)
{
    struct top_poll *p;
    int r = top_poll_start(f->inv, o->interval_s, &p);
    if (r < 0) {
        log_error("cannot start the status threads: %s", strerror(-r));
        return EXIT_FAIL;
    }
    struct top_snapshot s = { 0 };
    double started = time_mono(), deadline = started + o->timeout_s;
    /* every container answered (or failed), and the state thread ran once */
    for (;;) {
        if (top_poll_snapshot(p, &s) < 0)
            break;
        if (all_answered(&s, time_mono()) && time_mono() > deadline - o->timeout_s + 0.3)
            break;
        if (time_mono() > deadline)
            break;
        top_poll_wait(p, 200);
    }
    double now = time_mono();
    /* what has sent nothing by now did not answer: its row says unreachable and the alerts
     * count it, as `drover status` says agent-unreachable (it showed `starting`, alerts none) */
    if (s.cts && o->watch_s <= 0)
        top_snapshot_wait_over(&s, started, now);
    struct top_view v = { .flat = o->flat, .problems_first = o->problems_first,
                          .ascii = o->ascii || !locale_is_utf8(), .inv_arg = f->inv_arg,
                          .state_dir = f->inv->state_dir };
    if (o->filter)
        (void)str_copy(v.filter, sizeof v.filter, o->filter);
    int width = o->width;
    if (width <= 0) {
        struct winsize ws;
        const char *cols = getenv("COLUMNS");
        if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
            width = ws.ws_col;
        else if (cols && atoi(cols) > 0)
            width = atoi(cols);
        else
            width = 132;
    }
    bool tty = isatty(STDOUT_FILENO);
    int code = EXIT_OK;
    bool filter_warned = false;
    for (int frame = 0;; frame++) {
        char *text = NULL;
        if (s.cts) {
            r = top_render_text(&s, f->inv, &v, now, width, tty && !no_color_env(), &text);
            /* the rule of `drover status` (docs/errors.md): an incomplete answer is exit 1 (5
             * for a refused host key), a job's bad state is not */
            int unanswered = 0;
            code = top_snapshot_exit(&s, now, &unanswered);
            for (int i = 0; i < s.ncts && unanswered && o->watch_s <= 0; i++)
                if (top_ct_report_unanswered(&s, i, now))
                    log_error("%s: no answer within %g s (--timeout)", s.cts[i].label, o->timeout_s);
        } else
            r = -ENOMEM;
        if (r < 0) {
            log_error("cannot render the frame: %s", strerror(-r));
            break;
        }
        if (o->watch_s > 0) {
            /* the `status --watch` way: a fresh screen on a terminal, a dated separator in a log */
            char clock[16];
            time_t t = time(NULL);
            struct tm tm;
            strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&t, &tm));
            if (tty)
                printf("\033[H\033[2J");
            else if (frame)
                printf("\n");
            printf("drover top %s (every %gs)\n", clock, o->watch_s);
        }
        fputs(text, stdout);
        free(text);
        /* kubectl's "No resources found": still exit 0 (the question was answered), but say why
         * the table is empty, once (again in --watch only after the filter showed rows) */
        bool hides = s.cts && top_filter_hides_all(&s, f->inv, &v, now);
        if (hides && !filter_warned)
            log_warn("top: --filter '%s' matches no host, container, job, rank, state or release: "
                     "it hides every row", v.filter);
        filter_warned = hides;
        if (fflush(stdout) != 0 || o->watch_s <= 0)
            break;
        double until = time_mono() + o->watch_s;
        while (time_mono() < until)
            top_poll_wait(p, (int)((until - time_mono()) * 1000) + 1);
        if (top_poll_snapshot(p, &s) < 0)
            break;
        now = time_mono();
    }
    top_snapshot_done(&s);
    top_poll_stop(p, 2);
    return r < 0 && code == EXIT_OK ? EXIT_FAIL : code;
}

/* ------------------------------------------------------------------ the screen */

enum { PAIR_RED = 1, PAIR_YELLOW, PAIR_GREEN, PAIR_TITLE };

struct ui {
    struct fleet *f;
    struct top_poll *p;
    struct top_opts *o;
    struct top_view v;
    struct top_snapshot s;
    struct top_row *rows;
    int max_rows, nrows;
    int sel, first;          /* selected row, first row shown */
    int64_t sel_key;
    bool color;
    int interval_idx;
    enum { MODE_TABLE, MODE_FILTER, MODE_HELP, MODE_EVENTS, MODE_CONFIRM } mode;
    int confirm_job;         /* job index the confirmation is about */
    char confirm[900];       /* the question, naming the targets */
    pid_t action_pid;        /* running `drover rollback`, 0 none */
    char action_job[INV_NAME_MAX];
    char action_log[INV_PATH_MAX + 64];
    char filter_edit[TOP_FILTER_MAX];
    char events_title[400];
    char msg[640];           /* one-line message in the footer */
    double msg_until;
};

static attr_t cell_attr(const struct ui *u, unsigned a)
{
    attr_t at = A_NORMAL;
    if (a & TOP_A_BOLD)
        at |= A_BOLD;
    if (a & TOP_A_DIM)
        at |= A_DIM;
    if (u->color) {
        if (a & TOP_A_RED)
            at |= COLOR_PAIR(PAIR_RED);
        else if (a & TOP_A_YELLOW)
            at |= COLOR_PAIR(PAIR_YELLOW);
        else if (a & TOP_A_GREEN)
            at |= COLOR_PAIR(PAIR_GREEN);
    } else if (a & TOP_A_RED)
        at |= A_BOLD | A_UNDERLINE; /* NO_COLOR: alerts still stand out */
    return at;
}

static void put_line(int y, const char *text, attr_t at)
{
    char buf[1024];
    move(y, 0);
    clrtoeol();
    attrset(at);
    addstr(top_fmt_cell(text, COLS, false, buf, sizeof buf));
    attrset(A_NORMAL);
}

static void draw_table(struct ui *u, const int w[TOP_NCOLS], int y0, int height)
{
    char buf[TOP_CELL_MAX * 4];
    if (u->sel >= u->nrows)
        u->sel = u->nrows - 1;
    if (u->sel < 0)
        u->sel = 0;
    if (u->sel < u->first)
        u->first = u->sel;
    if (u->sel >= u->first + height)
        u->first = u->sel - height + 1;
    if (u->first > u->nrows - height)
        u->first = u->nrows - height > 0 ? u->nrows - height : 0;
    for (int y = 0; y < height; y++) {
        int i = u->first + y;
        move(y0 + y, 0);
        clrtoeol();
        if (i >= u->nrows)
            continue;
        const struct top_row *row = &u->rows[i];
        bool selected = i == u->sel;
        int x = 0;
        for (int c = 0; c < TOP_NCOLS && x < COLS; c++) {
            if (!w[c])
                continue;
            int cw = w[c] < COLS - x ? w[c] : COLS - x;
            attr_t at = cell_attr(u, row->attr[c] | (row->stale ? TOP_A_DIM : 0));
            if (selected)
                at |= A_REVERSE;
            attrset(at);
            mvaddstr(y0 + y, x, top_fmt_cell(row->cell[c], cw, top_col_right_aligned((enum top_col)c),
                                              buf, sizeof buf));
            x += cw;
            if (x < COLS) {
                attrset(selected ? A_REVERSE : A_NORMAL);
                addch(' ');
                x++;
            }
        }
        if (selected && x < COLS) {
            attrset(A_REVERSE);
            for (; x < COLS; x++)
                addch(' ');
        }
        attrset(A_NORMAL);
    }
}

static void draw_box(struct ui *u, const char *title, const char *text)
{
    int h = LINES - 4, w = COLS - 4;
    if (h < 3 || w < 10)
        return;
    for (int y = 0; y < h; y++) {
        move(2 + y, 2);
        attrset(y == 0 ? (A_BOLD | A_REVERSE) : A_NORMAL);
        for (int x = 0; x < w; x++)
            addch(' ');
    }
    char buf[1024];
    attrset(A_BOLD | A_REVERSE);
    mvaddstr(2, 2, top_fmt_cell(title, w, false, buf, sizeof buf));
    attrset(A_NORMAL);
    int y = 1;
    for (const char *l = text; *l && y < h - 1; y++) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), l);
        mvaddstr(2 + y, 3, top_fmt_cell(line, w - 2, false, buf, sizeof buf));
        l = nl ? nl + 1 : l + len;
    }
    attrset(A_DIM);
    mvaddstr(2 + h - 1, 3, top_fmt_cell("any key closes", w - 2, false, buf, sizeof buf));
    attrset(A_NORMAL);
    (void)u;
}

static const char help_text[] =
    "q            quit\n"
    "up/down j k  move the selection (PgUp/PgDn, Home/End)\n"
    "enter        fold or unfold the selected host or container\n"
    "/            filter: rows whose name, state or release contain the text (enter applies,\n"
    "             esc cancels, an empty filter shows everything)\n"
    "s            sort: problems first / by name\n"
    "t            tree (host > container > rank) or flat (one row per rank)\n"
    "+ -          refresh interval (0.5s .. 60s; 2s by default)\n"
    "l            recent events of the selected container (its agent's journal)\n"
    "R            roll the selected container's job back (drover rollback --job J), after a\n"
    "             confirmation naming the job, its containers and the release; not with --readonly\n"
    "?            this help\n"
    "\n"
    "STATE red: unreachable, failed, reverted, stalled, silent, backoff.  LOSS red: not finite.\n"
    "KTOK/S red: below (1 - tolerance) x the job's baseline share.  HB yellow: late (> 2x the\n"
    "step time, at least 1s), red: stalled (> 5x).  REL*: differs from the job's target.\n"
    "Dimmed rows: no fresh data (host or agent not answering); values are the last known.\n"
    "R is the only key that changes the fleet; everything else only reads.\n";

static void draw(struct ui *u)
{
    double now = time_mono();
    int w[TOP_NCOLS];
    top_layout(COLS, &u->v, w);
    u->nrows = top_build_rows(&u->s, u->f->inv, &u->v, now, u->rows, u->max_rows);
    /* keep the selection on the same row across frames */
    for (int i = 0; i < u->nrows; i++)
        if (u->rows[i].key == u->sel_key) {
            u->sel = i;
            break;
        }
    struct top_summary m;
    top_summarize(&u->s, now, &m);
    char l1[600], l2[600], title[700], clock[16];
    top_header_lines(&u->s, &m, u->v.ascii, l1, sizeof l1, l2, sizeof l2);
    time_t t = time(NULL);
    struct tm tm;
    strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&t, &tm));
    snprintf(title, sizeof title, "drover top %s  %s", clock, l1);
    erase();
    put_line(0, title, A_BOLD);
    bool alerts = strstr(l2, "alerts: none") == NULL;
    put_line(1, l2, alerts ? cell_attr(u, TOP_A_RED | TOP_A_BOLD) : A_NORMAL);
    /* column titles */
    move(2, 0);
    attrset(A_REVERSE | A_BOLD);
    char buf[256];
    int x = 0;
    for (int c = 0; c < TOP_NCOLS && x < COLS; c++) {
        if (!w[c])
            continue;
        int cw = w[c] < COLS - x ? w[c] : COLS - x;
        mvaddstr(2, x, top_fmt_cell(top_col_title((enum top_col)c), cw,
                                    top_col_right_aligned((enum top_col)c), buf, sizeof buf));
        x += cw;
        if (x < COLS) {
            addch(' ');
            x++;
        }
    }
    for (; x < COLS; x++)
        addch(' ');
    attrset(A_NORMAL);
    /* `drover status`'s warnings (a job's good release marked bad), the same lines, above the
     * footer: the table gives up as many lines, at most half the screen's */
    char notes[8192];
    int nnotes = top_notes(&u->s, &u->v, notes, sizeof notes);
    if (nnotes > (LINES - 4) / 2)
        nnotes = (LINES - 4) / 2;
    int height = LINES - 4 - nnotes;
    char *note = notes;
    for (int k = 0; k < nnotes; k++) {
        char *nl = strchr(note, '\n');
        *nl = '\0';
        char line[2400];
        snprintf(line, sizeof line, "! %.2390s", note);
        put_line(LINES - 1 - nnotes + k, line, cell_attr(u, TOP_A_YELLOW));
        note = nl + 1;
    }
    if (height > 0) {
        if (u->nrows == 0) {
            move(3, 0);
            addstr(u->v.filter[0] ? "(no row matches the filter)" : "(no containers)");
        } else
            draw_table(u, w, 3, height);
    }
    if (u->sel >= 0 && u->sel < u->nrows)
        u->sel_key = u->rows[u->sel].key;
    /* footer */
    char foot[1200];
    if (u->mode == MODE_FILTER)
        snprintf(foot, sizeof foot, "filter: %s_   (enter apply, esc cancel)", u->filter_edit);
    else if (u->mode == MODE_CONFIRM)
        snprintf(foot, sizeof foot, "%s", u->confirm);
    else if (u->msg[0] && now < u->msg_until)
        snprintf(foot, sizeof foot, "%s", u->msg);
    else if (u->sel >= 0 && u->sel < u->nrows &&
             top_row_problem(&u->s, &u->rows[u->sel], now, foot, sizeof foot)[0])
        ; /* the selected row's problem (why it is unreachable, the agent's reason) */
    else
        snprintf(foot, sizeof foot, "q quit  %s move  enter fold  / filter%s%s  s sort  t %s  +- %gs  l events  %s? help",
                 u->v.ascii ? "up/dn" : "\u2191\u2193", u->v.filter[0] ? "=" : "", u->v.filter,
                 u->v.flat ? "tree" : "flat", intervals[u->interval_idx],
                 u->o->readonly ? "[readonly]  " : "R rollback  ");
    if (LINES > 1)
        put_line(LINES - 1, foot, u->mode == MODE_CONFIRM ? (A_REVERSE | A_BOLD) : A_REVERSE);
    if (u->mode == MODE_HELP)
        draw_box(u, "drover top: keys and colours", help_text);
    else if (u->mode == MODE_EVENTS) {
        char text[16384], err[TOP_ERR_MAX];
        int r = top_poll_events(u->p, text, sizeof text, err, sizeof err);
        if (r == 0)
            snprintf(text, sizeof text, "loading...");
        else if (r < 0)
            snprintf(text, sizeof text, "cannot read the events: %s", err);
        draw_box(u, u->events_title, text);
    }
    refresh();
}

static void toggle_fold(struct ui *u)
{
    if (u->sel < 0 || u->sel >= u->nrows || u->v.flat)
        return;
    const struct top_row *row = &u->rows[u->sel];
    if (row->level == TOP_L_HOST)
        u->v.host_folded[row->host] = !u->v.host_folded[row->host];
    else if (row->ct >= 0 && row->ct < TOP_MAX_CTS) {
        u->v.ct_folded[row->ct] = !u->v.ct_folded[row->ct];
        if (row->level == TOP_L_RANK) /* folding from a rank selects its container */
            u->sel_key = top_row_key(TOP_L_CT, row->host, row->ct, 0);
    }
}

static void show_events(struct ui *u)
{
    if (u->sel < 0 || u->sel >= u->nrows)
        return;
    const struct top_row *row = &u->rows[u->sel];
    if (row->ct < 0) {
        snprintf(u->msg, sizeof u->msg, "select a container or rank row to see its events");
        u->msg_until = time_mono() + 3;
        return;
    }
    const struct top_ct *ct = &u->s.cts[row->ct];
    snprintf(u->events_title, sizeof u->events_title, "events of %s (agent journal, newest first)",
             ct->label);
    top_poll_request_events(u->p, row->ct);
    u->mode = MODE_EVENTS;
}

static void ask_rollback(struct ui *u)
{
    if (u->o->readonly) {
        snprintf(u->msg, sizeof u->msg, "read-only (--readonly): no actions");
        u->msg_until = time_mono() + 3;
        return;
    }
    if (u->action_pid > 0) {
        snprintf(u->msg, sizeof u->msg, "a rollback of '%s' is still running (log: %s)", u->action_job,
                 u->action_log);
        u->msg_until = time_mono() + 3;
        return;
    }
    if (u->sel < 0 || u->sel >= u->nrows || u->rows[u->sel].ct < 0) {
        snprintf(u->msg, sizeof u->msg, "select a container or rank of the job to roll back");
        u->msg_until = time_mono() + 3;
        return;
    }
    int job = u->s.cts[u->rows[u->sel].ct].job;
    const struct inv_job *ij = &u->f->inv->jobs[job];
    bool to_good;
    const char *target = top_rollback_target(&u->s, job, &to_good);
    if (!target[0]) {
        snprintf(u->msg, sizeof u->msg, "job '%s' has no release to roll back to", ij->name);
        u->msg_until = time_mono() + 3;
        return;
    }
    size_t len = (size_t)snprintf(u->confirm, sizeof u->confirm, "Roll back job '%s' on", ij->name);
    for (int i = 0; i < ij->ncts && len < sizeof u->confirm; i++)
        len += (size_t)snprintf(u->confirm + len, sizeof u->confirm - len, " %s", ij->cts[i].label);
    if (len < sizeof u->confirm)
        snprintf(u->confirm + len, sizeof u->confirm - len, " to %.12s (%s)? y to confirm, any other key cancels",
                 target, to_good ? "its last good release" : "the release before the good one");
    u->confirm_job = job;
    u->mode = MODE_CONFIRM;
}

extern char **environ;

static void start_rollback(struct ui *u)
{
    const struct inv_job *ij = &u->f->inv->jobs[u->confirm_job];
    snprintf(u->action_log, sizeof u->action_log, "%s/top-rollback-%s.log", u->f->inv->state_dir, ij->name);
    (void)str_copy(u->action_job, sizeof u->action_job, ij->name);
    const char *argv[] = { "drover", "-i", u->f->inv->path, "rollback", "--job", ij->name, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, u->action_log, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int r = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0) {
        snprintf(u->msg, sizeof u->msg, "cannot start drover rollback: %s", strerror(r));
        u->msg_until = time_mono() + 5;
        return;
    }
    u->action_pid = pid;
    snprintf(u->msg, sizeof u->msg, "rolling back '%s' (log: %s)", ij->name, u->action_log);
    u->msg_until = time_mono() + 5;
}

static void reap_action(struct ui *u)
{
    int st;
    if (u->action_pid <= 0 || waitpid(u->action_pid, &st, WNOHANG) != u->action_pid)
        return;
    u->action_pid = 0;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    snprintf(u->msg, sizeof u->msg, "rollback of '%s' %s (exit %d; log: %s)", u->action_job,
             code == 0 ? "done" : "FAILED", code, u->action_log);
    u->msg_until = time_mono() + 15;
}

/* Handle one key; false to quit. */
static bool handle_key(struct ui *u, int ch)
{
    if (u->mode == MODE_HELP || u->mode == MODE_EVENTS) {
        u->mode = MODE_TABLE;
        return true;
    }
    if (u->mode == MODE_CONFIRM) {
        u->mode = MODE_TABLE;
        if (ch == 'y' || ch == 'Y')
            start_rollback(u);
        else {
            snprintf(u->msg, sizeof u->msg, "cancelled: nothing was changed");
            u->msg_until = time_mono() + 3;
        }
        return true;
    }
    if (u->mode == MODE_FILTER) {
        size_t n = strlen(u->filter_edit);
        if (ch == 27) {
            u->mode = MODE_TABLE;
        } else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
            (void)str_copy(u->v.filter, sizeof u->v.filter, u->filter_edit);
            u->mode = MODE_TABLE;
        } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
            if (n)
                u->filter_edit[n - 1] = '\0';
        } else if (ch >= 32 && ch < 127 && n + 1 < sizeof u->filter_edit) {
            u->filter_edit[n] = (char)ch;
            u->filter_edit[n + 1] = '\0';
        }
        return true;
    }
    int page = LINES - 5 > 1 ? LINES - 5 : 1;
    switch (ch) {
    case 'q':
    case 'Q':
        return false;
    case KEY_UP:
    case 'k':
        u->sel--;
        break;
    case KEY_DOWN:
    case 'j':
        u->sel++;
        break;
    case KEY_PPAGE:
        u->sel -= page;
        break;
    case KEY_NPAGE:
        u->sel += page;
        break;
    case KEY_HOME:
    case 'g':
        u->sel = 0;
        break;
    case KEY_END:
    case 'G':
        u->sel = u->nrows - 1;
        break;
    case '\n':
    case '\r':
    case KEY_ENTER:
    case ' ':
        toggle_fold(u);
        break;
    case '/':
        (void)str_copy(u->filter_edit, sizeof u->filter_edit, u->v.filter);
        u->mode = MODE_FILTER;
        break;
    case 's':
        u->v.problems_first = !u->v.problems_first;
        snprintf(u->msg, sizeof u->msg, "sort: %s", u->v.problems_first ? "problems first" : "by name");
        u->msg_until = time_mono() + 2;
        break;
    case 't':
        u->v.flat = !u->v.flat;
        break;
    case '?':
    case 'h':
        u->mode = MODE_HELP;
        break;
    case '+':
    case '=':
    case '-':
    case '_': {
        int n = (int)ARRAY_SIZE(intervals);
        if ((ch == '+' || ch == '=') && u->interval_idx + 1 < n)
            u->interval_idx++;
        else if ((ch == '-' || ch == '_') && u->interval_idx > 0)
            u->interval_idx--;
        top_poll_set_interval(u->p, intervals[u->interval_idx]);
        snprintf(u->msg, sizeof u->msg, "refresh every %gs", intervals[u->interval_idx]);
        u->msg_until = time_mono() + 2;
        break;
    }
    case 'l':
    case 'L':
        show_events(u);
        break;
    case 'R':
        ask_rollback(u);
        break;
    default:
        break;
    }
    if (u->sel >= u->nrows)
        u->sel = u->nrows - 1;
    if (u->sel < 0)
        u->sel = 0;
    if (u->nrows > 0)
        u->sel_key = u->rows[u->sel].key;
    return true;
}

static int top_screen(struct fleet *f, struct top_opts *o)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        log_error("drover top needs a terminal (use --once for one frame on stdout)");
        return EXIT_USAGE;
    }
    struct ui u = { .f = f, .o = o };
    u.v.flat = o->flat;
    u.v.problems_first = o->problems_first;
    u.v.ascii = o->ascii || !locale_is_utf8();
    u.v.inv_arg = f->inv_arg;
    u.v.state_dir = f->inv->state_dir;
    if (o->filter)
        (void)str_copy(u.v.filter, sizeof u.v.filter, o->filter);
    u.interval_idx = 2;
    for (int i = 0; i < (int)ARRAY_SIZE(intervals); i++)
        if (fabs(intervals[i] - o->interval_s) < 1e-9)
            u.interval_idx = i;
    int r = top_poll_start(f->inv, o->interval_s, &u.p);
    if (r < 0) {
        log_error("cannot start the status threads: %s", strerror(-r));
        return EXIT_FAIL;
    }
    int nct = 0;
    for (int j = 0; j < f->inv->njobs; j++)
        nct += f->inv->jobs[j].ncts;
    u.max_rows = f->inv->nhosts + nct * (STATUS_MAX_RANKS + 1) + 1;
    u.rows = calloc((size_t)u.max_rows, sizeof *u.rows);
    if (!u.rows) {
        top_poll_stop(u.p, 1);
        return EXIT_FAIL;
    }
    /* no log line may tear the screen: stderr to /dev/null while it is up */
    fflush(stderr);
    int saved_err = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) {
        (void)dup2(devnull, STDERR_FILENO);
        close(devnull);
    }
    initscr();
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    timeout(100);
    u.color = !no_color_env() && has_colors();
    if (u.color) {
        start_color();
        use_default_colors();
        init_pair(PAIR_RED, COLOR_RED, -1);
        init_pair(PAIR_YELLOW, COLOR_YELLOW, -1);
        init_pair(PAIR_GREEN, COLOR_GREEN, -1);
    }
    double next = 0, last_draw = 0;
    int last_seq = -1;
    for (;;) {
        double now = time_mono();
        bool redraw = false;
        int ch = getch();
        if (ch == KEY_RESIZE) {
            redraw = true;
        } else if (ch != ERR) {
            if (!handle_key(&u, ch))
                break;
            redraw = true;
            /* drain what else is queued before drawing */
        }
        reap_action(&u);
        /* redraw: on a key, on new data (at most every 0.5 s) and once per interval (ages) */
        double interval = intervals[u.interval_idx];
        int seq = top_poll_seq(u.p);
        if (seq != last_seq && now - last_draw >= 0.5)
            redraw = true;
        if (now >= next || redraw) {
            if (seq != last_seq || !u.s.cts)
                (void)top_poll_snapshot(u.p, &u.s);
            last_seq = seq;
            last_draw = now;
            next = now + interval;
            if (u.s.cts)
                draw(&u);
        }
    }
    endwin();
    if (u.action_pid > 0)
        fprintf(stdout, "drover rollback --job %s still runs (pid %d); its log: %s\n", u.action_job,
                (int)u.action_pid, u.action_log);
    if (saved_err >= 0) {
        (void)dup2(saved_err, STDERR_FILENO);
        close(saved_err);
    }
    top_poll_stop(u.p, 1);
    top_snapshot_done(&u.s);
    free(u.rows);
    return EXIT_OK;
}

int cmd_top(struct fleet *f, int argc, char **argv)
{
    static const struct option opts[] = {
        { "once", no_argument, NULL, '1' },
        { "interval", required_argument, NULL, 'n' },
        { "ascii", no_argument, NULL, 'a' },
        { "readonly", no_argument, NULL, 'r' },
        { "flat", no_argument, NULL, 'F' },
        { "sort", no_argument, NULL, 's' },
        { "filter", required_argument, NULL, 'f' },
        { "width", required_argument, NULL, 'w' },
        { "timeout", required_argument, NULL, 'T' },
        { "watch", required_argument, NULL, 'W' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    setlocale(LC_ALL, "");
    struct top_opts o = { .interval_s = 2, .timeout_s = f->inv->connect_timeout_s + 5 };
    char typed[32];
    int c;
    bool once_given = false;
    optind = 0; /* 0: glibc re-initialises (cli.c parses argv before this, twice) */
    while ((c = cli_getopt(argc, argv, "n:h", opts)) != -1) {
        switch (c) {
        case '1':
            o.once = once_given = true;
            break;
        case 'n':
            if (cli_duration(verb_opt_typed(argv, optind, optarg, typed, sizeof typed), optarg, 0.5,
                             false, 60, &o.interval_s) != EXIT_OK)
                return EXIT_USAGE;
            break;
        case 'a':
            o.ascii = true;
            break;
        case 'r':
            o.readonly = true;
            break;
        case 'F':
            o.flat = true;
            break;
        case 's':
            o.problems_first = true;
            break;
        case 'f':
            o.filter = optarg;
            break;
        case 'w': {
            char *end;
            errno = 0;
            long w = strtol(optarg, &end, 10);
            o.width = errno || end == optarg || *end || w < 40 || w > 1000 ? -1 : (int)w; /* "80abc" was 80 */
            if (o.width < 0) {
                log_error("%s takes 40..1000 columns, not '%s'", verb_opt_typed(argv, optind, optarg, typed, sizeof typed), optarg);
                return EXIT_USAGE;
            }
            break;
        }
        case 'T':
            if (cli_duration(verb_opt_typed(argv, optind, optarg, typed, sizeof typed), optarg, 0,
                             true, 600, &o.timeout_s) != EXIT_OK)
                return EXIT_USAGE;
            break;
        case 'W':
            if (cli_duration(verb_opt_typed(argv, optind, optarg, typed, sizeof typed), optarg, 0.5,
                             false, 3600, &o.watch_s) != EXIT_OK)
                return EXIT_USAGE;
            o.once = true;
            break;
        case 'h':
            usage_top(stdout);
            return EXIT_OK;
        default:
            return verb_usage_error(argv[0], NULL);
        }
    }
    if (optind != argc)
        return verb_usage_error(argv[0], argv[optind]);
    if (once_given && o.watch_s > 0) { /* --watch won silently: `--once --watch 2` never ended */
        log_error("top: --once and --watch cannot go together: --once prints one frame and exits, "
                  "--watch N prints one every N s until interrupted");
        return EXIT_USAGE;
    }
    if (f->args_only) /* controller/cli.c: arguments checked, no inventory yet */
        return EXIT_OK;
    if (o.watch_s > 0)
        o.interval_s = o.watch_s < 60 ? o.watch_s : 60;
    return o.once ? top_once(f, &o) : top_screen(f, &o);
}
