/* controller/verbs.c: drover's verb table and what is generated from it: help, per-verb help and
 * shell completion.  Adding a verb is one line here; help and completion follow.
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "controller/cmd.h"
#include "controller/verbs.h"

const struct verb verbs[] = {
    { "trust", cmd_trust, NULL, "HOST... [--replace] [-o json] | HOST --fingerprint SHA256:... [--replace] [-o json]",
      "add HOST's SSH host key to known_hosts", "--replace --fingerprint --output" },
    { "install", cmd_install, NULL,
      "[--job J | HOST:VMID...] [--agent-binary PATH] [--restart-agent] [-o json]",
      "put drover-agent into containers and start it",
      "--job --agent-binary --restart-agent --output" },
    { "plan", cmd_plan, NULL, "DIR [--env ENVDIR] [--job J]... | --all-jobs [-o json]",
      "what deploy would do (changes nothing)", "--env --job --all-jobs --output" },
    { "deploy", cmd_deploy, NULL,
      "DIR [--env ENVDIR] [--stage-only] [--job J]... | --all-jobs [--dry-run | --analysis-only] [--force] [-o json]",
      "stage, push, verify, activate, probation, then promote or revert (several jobs: in waves)",
      "--env --stage-only --job --all-jobs --dry-run --analysis-only --force --output" },
    { "gc", cmd_gc, NULL, "[--keep N]", "collect host object stores and the manifest cache",
      "--keep" },
    { "status", cmd_status, NULL, "[-o json|wide] [--job J] [--watch N]",
      "every job, container and rank", "--output --job --watch" },
    { "rollback", cmd_rollback, NULL, "--job J [--to ID [--force]] [--now] [--dry-run] [-o json]",
      "return J to its last good (release, job spec) pair (--now: no analysis, in an incident)",
      "--job --to --force --now --dry-run --output" },
    { "stop", cmd_stop, NULL, "--job J... | --all-jobs [--dry-run] [-o json]",
      "stop the jobs' gangs in every container at once; they stay stopped until start or a deploy",
      "--job --all-jobs --dry-run --output" },
    { "start", cmd_start, NULL, "--job J... | --all-jobs [--dry-run] [-o json]",
      "start the jobs' current release again with its recorded spec (already running is fine)",
      "--job --all-jobs --dry-run --output" },
    { "promote", cmd_promote, NULL, "--job J",
      "promote a release held on an inconclusive verdict (on_inconclusive = hold)", "--job" },
    { "revert", cmd_revert, NULL, "--job J",
      "revert a release held on an inconclusive verdict to the good release", "--job" },
    { "rebaseline", cmd_rebaseline, NULL, "--job J",
      "measure J's running good release again and make its samples the throughput baseline",
      "--job" },
    { "history", cmd_history, NULL, "[--job J] [--local] [-o json]",
      "deploys, reverts and rollbacks: this controller's record merged with the agents'",
      "--job --local --output" },
    { "top", cmd_top, NULL,
      "[--once | --watch N] [--width N] [--timeout S] [-n|--interval S] [--ascii] [--flat] [--sort] "
      "[--filter TEXT] [--readonly]",
      "live fleet dashboard (docs/dashboard.md)",
      "--once --watch --width --timeout --interval --ascii --flat --sort --filter --readonly" },
    { "logs", cmd_logs, NULL, "--job J [--rank N] [-n LINES] [-f] [--agent]",
      "a rank's worker log from its container (every rank without --rank); --agent: the agent's own log",
      "--job --rank --lines --follow --agent" },
    { "events", cmd_events, NULL, "[--job J] [-f] [-o json]",
      "the agents' event journals, oldest first", "--job --follow --output" },
    { "exporter", cmd_exporter, NULL, "[--listen HOST:PORT] [--interval S]",
      "serve the fleet's Prometheus metrics over HTTP (/metrics)", "--listen --interval" },
    { "validate", cmd_validate, NULL, "[DIR [--env ENVDIR]] [--job J]",
      "check the inventory and, with DIR (and ENVDIR), a release directory against each job",
      "--job --env" },
    { "completion", NULL, cmd_completion, "bash|zsh", "shell completion script on stdout", "" },
    { "version", NULL, NULL, "", "print the version", "" },
    { "help", NULL, NULL, "[VERB]", "this list, or one verb's usage", "" },
};
const size_t verbs_n = sizeof verbs / sizeof verbs[0];

const struct verb *verb_find(const char *name)
{
    for (size_t i = 0; i < verbs_n; i++)
        if (strcmp(verbs[i].name, name) == 0)
            return &verbs[i];
    return NULL;
}

/* How far a typo may be from what was meant: 1 edit in a short word, 2 in a longer one. */
static bool is_near(const char *typed, int dist)
{
    return dist <= (strlen(typed) <= 4 ? 1 : 2);
}

const char *verb_suggest(const char *word)
{
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < verbs_n; i++) {
        int d = str_edit_distance(word, verbs[i].name);
        if (d < bd) {
            bd = d;
            best = verbs[i].name;
        }
    }
    return best && is_near(word, bd) ? best : NULL;
}

int verb_check_options(const struct verb *v, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--") == 0)
            break;
        if (w[0] != '-' || w[1] != '-' || !w[2])
            continue;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(w, "="), w);
        size_t nl = strlen(name);
        /* v's options, space-separated, and --help (answered before the verb) */
        bool known = strncmp("--help", name, nl) == 0;
        char best[64] = "";
        int bd = 99;
        for (const char *o = v->opts; *o && !known;) {
            size_t ol = strcspn(o, " ");
            char opt[64];
            snprintf(opt, sizeof opt, "%.*s", (int)ol, o);
            if (nl <= ol && strncmp(opt, name, nl) == 0)
                known = true; /* the option, or an abbreviation getopt_long takes */
            int d = str_edit_distance(name + 2, opt + 2);
            if (d < bd) {
                bd = d;
                snprintf(best, sizeof best, "%s", opt);
            }
            o += ol;
            o += strspn(o, " ");
        }
        if (known)
            continue;
        if (best[0] && is_near(name + 2, bd))
            log_error("unknown option '%s' for drover %s: did you mean %s?", name, v->name, best);
        else
            log_error("unknown option '%s' for drover %s", name, v->name);
        return verb_usage_error(v->name, NULL);
    }
    return EXIT_OK;
}

void verbs_usage(FILE *fp)
{
    fprintf(fp, "usage: drover [-i INVENTORY] [-v] VERB [ARGS]\n\n");
    for (size_t i = 0; i < verbs_n; i++)
        fprintf(fp, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(fp,
            "\n`drover VERB --help` shows a verb's arguments (no inventory needed).\n"
            "INVENTORY defaults to $DROVER_INVENTORY, then ./drover.ini (docs/config.md).\n");
    drover_exit_usage(fp);
}

void verb_help(const struct verb *v, FILE *fp)
{
    fprintf(fp, "usage: drover [-i INVENTORY] %s%s%s\n\n  %s\n", v->name, v->args[0] ? " " : "",
            v->args, v->summary);
    if (v->opts[0])
        fprintf(fp, "\noptions: %s (docs/controller.md)\n", v->opts);
}

int verb_usage_error(const char *name, const char *unexpected)
{
    const struct verb *v = verb_find(name);
    const char *args = v ? v->args : "";
    if (unexpected)
        log_error("usage: drover %s%s%s (unexpected '%s')", name, args[0] ? " " : "", args, unexpected);
    else
        log_error("usage: drover %s%s%s", name, args[0] ? " " : "", args);
    return EXIT_USAGE;
}

const char *verb_opt_typed(char **argv, int optind_now, const char *optarg_now, char *buf, size_t size)
{
    /* "-n abc" / "--interval abc": optarg is the word before optind and the option the one
     * before it; "-nabc" / "--interval=abc": both are in the word before optind */
    const char *w = optind_now >= 1 ? argv[optind_now - 1] : "";
    bool apart = optind_now >= 2 && w == optarg_now;
    if (apart)
        w = argv[optind_now - 2];
    if (w[0] == '-' && w[1] == '-')
        snprintf(buf, size, "%.*s", (int)strcspn(w, "="), w);
    else if (w[0] == '-' && w[1]) /* a short option, maybe in a cluster ("-1n 5", "-1n5") */
        snprintf(buf, size, "-%c", apart ? w[strlen(w) - 1] : optarg_now > w ? optarg_now[-1] : w[1]);
    else
        snprintf(buf, size, "%s", w);
    return buf;
}

bool verb_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

static void completion_bash(FILE *fp)
{
    fprintf(fp, "# bash completion for drover, generated by `drover completion bash`\n"
                "_drover() {\n"
                "    local cur=${COMP_WORDS[COMP_CWORD]} verb= i\n"
                "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
                "        case ${COMP_WORDS[i]} in\n"
                "        -i|--inventory) ((i++)) ;;\n"
                "        -*) ;;\n"
                "        *) verb=${COMP_WORDS[i]}; break ;;\n"
                "        esac\n"
                "    done\n"
                "    local words\n"
                "    case $verb in\n"
                "    '') words='-i --inventory -v --verbose --help --version");
    for (size_t i = 0; i < verbs_n; i++)
        fprintf(fp, " %s", verbs[i].name);
    fprintf(fp, "' ;;\n");
    for (size_t i = 0; i < verbs_n; i++) {
        if (strcmp(verbs[i].name, "completion") == 0)
            fprintf(fp, "    completion) words='bash zsh' ;;\n");
        else if (strcmp(verbs[i].name, "help") == 0) {
            fprintf(fp, "    help) words='");
            for (size_t j = 0; j < verbs_n; j++)
                fprintf(fp, "%s%s", j ? " " : "", verbs[j].name);
            fprintf(fp, "' ;;\n");
        } else
            fprintf(fp, "    %s) words='--help%s%s' ;;\n", verbs[i].name,
                    verbs[i].opts[0] ? " " : "", verbs[i].opts);
    }
    fprintf(fp, "    esac\n"
                "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
                "    [[ $cur == -* || $verb == '' || $verb == completion || $verb == help ]] || "
                "COMPREPLY+=($(compgen -f -- \"$cur\"))\n"
                "}\n"
                "complete -F _drover drover\n");
}

static void completion_zsh(FILE *fp)
{
    fprintf(fp, "#compdef drover\n"
                "# zsh completion for drover, generated by `drover completion zsh`\n"
                "_drover() {\n"
                "    local -a verbs\n"
                "    verbs=(\n");
    for (size_t i = 0; i < verbs_n; i++) {
        fprintf(fp, "        '%s:", verbs[i].name);
        for (const char *p = verbs[i].summary; *p; p++)
            fputs(*p == '\'' ? "'\\''" : (char[]){ *p, 0 }, fp);
        fprintf(fp, "'\n");
    }
    fprintf(fp, "    )\n"
                "    local verb i\n"
                "    for ((i = 2; i < CURRENT; i++)); do\n"
                "        case ${words[i]} in\n"
                "        -i|--inventory) ((i++)) ;;\n"
                "        -*) ;;\n"
                "        *) verb=${words[i]}; break ;;\n"
                "        esac\n"
                "    done\n"
                "    if [[ -z $verb ]]; then\n"
                "        _describe 'drover verb' verbs\n"
                "        return\n"
                "    fi\n"
                "    case $verb in\n");
    for (size_t i = 0; i < verbs_n; i++) {
        if (strcmp(verbs[i].name, "completion") == 0)
            fprintf(fp, "    completion) compadd bash zsh ;;\n");
        else if (strcmp(verbs[i].name, "help") == 0)
            fprintf(fp, "    help) _describe 'drover verb' verbs ;;\n");
        else
            fprintf(fp, "    %s) compadd -- --help %s; _files ;;\n", verbs[i].name, verbs[i].opts);
    }
    fprintf(fp, "    esac\n"
                "}\n"
                "compdef _drover drover\n");
}

int verbs_completion(const char *shell, FILE *fp)
{
    if (strcmp(shell, "bash") == 0)
        completion_bash(fp);
    else if (strcmp(shell, "zsh") == 0)
        completion_zsh(fp);
    else
        return -EINVAL;
    return 0;
}

int cmd_completion(int argc, char **argv)
{
    if (argc != 2 || verbs_completion(argv[1], stdout) < 0) {
        log_error("usage: drover completion bash|zsh");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* kubectl-style: the global -i/--inventory may also follow the verb ("drover status -i x.ini");
 * it is taken out of the verb's arguments (up to a "--"), so no verb ever sees it.  Returns
 * false when -i has no value. */
bool verbs_take_inventory_arg(int *argc, char **argv, const char **ret_path)
{
    int out = 1, i;
    for (i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "-i") == 0 || strcmp(a, "--inventory") == 0) {
            if (i + 1 >= *argc)
                return false;
            *ret_path = argv[++i];
        } else if (strncmp(a, "--inventory=", 12) == 0) {
            *ret_path = a + 12;
        } else { /* not "-iFILE": a verb's value such as --reason -interrupted stays its own */
            argv[out++] = argv[i];
        }
    }
    while (i < *argc)
        argv[out++] = argv[i++];
    argv[out] = NULL;
    *argc = out;
    return true;
}
