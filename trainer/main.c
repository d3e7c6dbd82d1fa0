/* trainer/main.c: drover-train's command line: train, prepare, selftest, version.
 * Owns argument parsing and exit codes only; the work is in train.c, prepare.c, selftest.c.
 * Never: start work before the arguments are fully checked. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "trainer/exitcode.h"
#include "trainer/prepare.h"
#include "trainer/selftest.h"
#include "trainer/train.h"

int main(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drover-train train --config FILE [--checkpoint-dir DIR] [--max-steps N] [--device cpu|cuda]\n"
            "       drover-train prepare --out DIR [--vocab-limit N] [--val-tokens N] [--encoder-dir DIR] FILES...\n"
            "       drover-train selftest [--device cpu|cuda|all]\n"
            "       drover-train version\n"
            "Exit codes: docs/errors.md.  Config and environment: docs/trainer.md.\n");
}

static int parse_i64(const char *s, long long min, long long *ret)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < min)
        return -1;
    *ret = v;
    return 0;
}

static int cmd_train(int argc, char **argv)
{
    struct train_args a = {.max_steps = -1};
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"checkpoint-dir", required_argument, NULL, 'd'},
        {"max-steps", required_argument, NULL, 'm'}, {"device", required_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    long long v;
    while ((c = getopt_long(argc, argv, "c:d:m:D:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a.config = optarg; break;
        case 'd': a.ckpt_dir = optarg; break;
        case 'D': a.device = optarg; break;
        case 'm':
            if (parse_i64(optarg, 0, &v) < 0) {
                log_error("--max-steps '%s' is not a non-negative integer", optarg);
                return TX_USAGE;
            }
            a.max_steps = v;
            break;
        case 'h': usage(stdout); return TX_OK;
        default: usage(stderr); return TX_USAGE;
        }
    }
    if (!a.config || optind != argc) {
        if (!a.config)
            log_error("train: --config FILE is required");
        else
            log_error("train: unexpected argument '%s'", argv[optind]);
        usage(stderr);
        return TX_USAGE;
    }
    return train_run(&a);
}

static int cmd_prepare(int argc, char **argv)
{
    struct prepare_args a = {.vocab_limit = 0, .val_tokens = -1};
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"vocab-limit", required_argument, NULL, 'v'},
        {"val-tokens", required_argument, NULL, 'V'}, {"encoder-dir", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    long long v;
    while ((c = getopt_long(argc, argv, "o:v:V:e:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': a.out_dir = optarg; break;
        case 'e': a.encoder_dir = optarg; break;
        case 'v':
            if (parse_i64(optarg, 2, &v) < 0 || v > 65536) {
                log_error("--vocab-limit '%s' must be 2..65536", optarg);
                return TX_USAGE;
            }
            a.vocab_limit = (int)v;
            break;
        case 'V':
            if (parse_i64(optarg, 0, &v) < 0) {
                log_error("--val-tokens '%s' is not a non-negative integer", optarg);
                return TX_USAGE;
            }
            a.val_tokens = v;
            break;
        case 'h': usage(stdout); return TX_OK;
        default: usage(stderr); return TX_USAGE;
        }
    }
    if (!a.out_dir || optind >= argc) {
        log_error(!a.out_dir ? "prepare: --out DIR is required"
                             : "prepare: no input FILES (text files to tokenize) given");
        usage(stderr);
        return TX_USAGE;
    }
    a.files = (const char *const *)argv + optind;
    a.nfiles = argc - optind;
    return prepare_run(&a);
}

static int cmd_selftest(int argc, char **argv)
{
    const char *dev = NULL;
    static const struct option opts[] = {{"device", required_argument, NULL, 'D'},
                                         {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "D:h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return TX_OK;
        }
        if (c != 'D') {
            usage(stderr);
            return TX_USAGE;
        }
        dev = optarg;
    }
    if (optind != argc) {
        log_error("selftest: unexpected argument '%s'", argv[optind]);
        usage(stderr);
        return TX_USAGE;
    }
    if (dev && strcmp(dev, "cpu") && strcmp(dev, "cuda") && strcmp(dev, "all")) {
        log_error("--device '%s' is not cpu, cuda or all", dev);
        return TX_USAGE;
    }
    return selftest_run(dev);
}

int main(int argc, char **argv)
{
    log_init("drover-train");
    if (argc < 2) {
        usage(stderr);
        return TX_USAGE;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "version") || !strcmp(verb, "--version")) {
        printf("drover-train %s\n", DROVER_VERSION);
        return TX_OK;
    }
    if (!strcmp(verb, "-h") || !strcmp(verb, "--help") || !strcmp(verb, "help")) {
        usage(stdout);
        return TX_OK;
    }
    if (!strcmp(verb, "train"))
        return cmd_train(argc - 1, argv + 1);
    if (!strcmp(verb, "prepare"))
        return cmd_prepare(argc - 1, argv + 1);
    if (!strcmp(verb, "selftest"))
        return cmd_selftest(argc - 1, argv + 1);
    log_error("unknown command '%s'", verb);
    usage(stderr);
    return TX_USAGE;
}
