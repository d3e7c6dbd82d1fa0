/* trainer/selftest.c: `drover-train selftest` (see selftest.h).  One tiny model, a few steps on a
 * repeating batch: the loss starts near ln(V), stays finite and falls; state round-trips.
 * Never: touch files. */
#include "trainer/selftest.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "trainer/backend.h"
#include "trainer/exitcode.h"
#include "trainer/model.h"

__attribute__((weak)) int selftest_cuda_checks(json_t *checks)
{
    (void)checks;
    return -ENOSYS;
}

static void add(json_t *checks, const char *name, bool ok, const char *detail)
{
    json_t *o = json_pack("{s:s, s:b, s:s}", "name", name, "ok", ok, "detail", detail);
    if (o)
        json_array_append_new(checks, o);
}

/* Train a tiny model for a few steps on one backend; false when a check failed. */
static bool check_backend(const struct backend_ops *ops, json_t *checks)
{
    struct gpt_config c = {.layers = 2, .heads = 2, .dim = 32, .vocab = 64, .seq = 16};
    (void)gpt_config_check(&c);
    struct backend_opts o = {.batch = 2, .seq = c.seq, .threads = 1, .world_size = 1};
    char name[64], detail[200];
    void *be = NULL;
    size_t n = gpt_num_params(&c);
    float *p = malloc(n * sizeof(float)), *p2 = malloc(n * sizeof(float));
    int in[32], tg[32];
    bool ok = false;
    snprintf(name, sizeof name, "%s.create", ops->name);
    int e = p && p2 ? ops->create(&c, &o, &be) : -ENOMEM;
    add(checks, name, e >= 0, e < 0 ? strerror(-e) : "tiny model allocated");
    if (e < 0)
        goto out;
    struct rng r;
    rng_seed(&r, 7);
    gpt_params_init(&c, p, &r);
    for (int i = 0; i < 32; i++)
        in[i] = (int)(rng_next_u64(&r) % 64);
    for (int i = 0; i < 32; i++)
        tg[i] = in[(i + 1) % 32];
    (void)ops->set_state(be, p, NULL, NULL);
    struct adamw_hparams h = {0.9f, 0.95f, 1e-8f, 0.0f, 1.0f};
    float first = NAN, loss = NAN, gn = 0;
    for (int s = 1; s <= 10 && e >= 0; s++) {
        if ((e = ops->forward_backward(be, in, tg, &loss)) >= 0 && (e = ops->allreduce_grads(be)) >= 0)
            e = ops->update(be, &h, 1e-2f, s, &gn);
        if (s == 1)
            first = loss;
    }
    snprintf(name, sizeof name, "%s.initial_loss", ops->name);
    snprintf(detail, sizeof detail, "%.4f, expected about ln(64) = %.4f", (double)first, log(64.0));
    bool ok1 = e >= 0 && fabs(first - log(64.0)) < 0.3;
    add(checks, name, ok1, e < 0 ? strerror(-e) : detail);
    snprintf(name, sizeof name, "%s.loss_falls", ops->name);
    snprintf(detail, sizeof detail, "%.4f -> %.4f in 10 steps, grad norm %.3f", (double)first,
             (double)loss, (double)gn);
    bool ok2 = e >= 0 && isfinite(loss) && isfinite(gn) && loss < 0.8f * first;
    add(checks, name, ok2, detail);
    snprintf(name, sizeof name, "%s.state_roundtrip", ops->name);
    bool ok3 = ops->get_state(be, p2, NULL, NULL) >= 0 && ops->set_state(be, p2, NULL, NULL) >= 0 &&
               ops->get_state(be, p, NULL, NULL) >= 0 && !memcmp(p, p2, n * sizeof(float));
    add(checks, name, ok3, "get_state/set_state give back the same parameters");
    ok = ok1 && ok2 && ok3;
out:
    if (be)
        ops->destroy(be);
    free(p);
    free(p2);
    return ok;
}

int selftest_run(const char *device)
{
    json_t *rep = json_object(), *checks = json_array();
    if (!rep || !checks)
        return TX_NOMEM;
    bool ok = true;
    bool want_cpu = !device || !strcmp(device, "cpu") || !strcmp(device, "all");
    bool want_cuda = (device && (!strcmp(device, "cuda") || !strcmp(device, "all")));
    if (want_cpu)
        ok &= check_backend(&backend_cpu, checks);
    if (want_cuda) {
        const struct backend_ops *cu = backend_find("cuda");
        int e = selftest_cuda_checks(checks);
        if (e == -ENOSYS || !cu) {
            add(checks, "cuda.available", false, "this drover-train has no CUDA backend");
            ok = false;
        } else {
            ok &= e >= 0;
            ok &= check_backend(cu, checks);
        }
    }
    json_object_set_new(rep, "ok", json_boolean(ok));
    json_object_set_new(rep, "version", json_string(DROVER_VERSION));
    json_object_set_new(rep, "checks", checks);
    char *s = json_dumps(rep, JSON_COMPACT);
    if (s) {
        puts(s);
        free(s);
    }
    json_decref(rep);
    return ok ? TX_OK : TX_SELFTEST;
}
