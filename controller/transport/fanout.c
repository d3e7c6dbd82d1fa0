/* controller/transport/fanout.c: see fanout.h. */
#include "controller/transport/fanout.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

struct pool {
    int n, next;
    void (*fn)(int, void *);
    void *ctx;
    pthread_mutex_t mu;
};

static void *worker(void *arg)
{
    struct pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next < p->n ? p->next++ : -1;
        pthread_mutex_unlock(&p->mu);
        if (i < 0)
            return NULL;
        p->fn(i, p->ctx);
    }
}

void fanout_run(int n, int max_parallel, void (*fn)(int i, void *ctx), void *ctx)
{
    struct pool p = { .n = n, .fn = fn, .ctx = ctx, .mu = PTHREAD_MUTEX_INITIALIZER };
    int nt = max_parallel < n ? max_parallel : n;
    if (nt <= 1) {
        for (int i = 0; i < n; i++)
            fn(i, ctx);
        return;
    }
    pthread_t th[256];
    if (nt > 256)
        nt = 256;
    int started = 0;
    for (int k = 0; k < nt; k++)
        if (pthread_create(&th[started], NULL, worker, &p) == 0)
            started++;
    if (started == 0)
        worker(&p); /* no threads to be had: do it here */
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
}

void fleet_hosts_of(const struct inventory *inv, const struct inv_job *job, bool need[INV_MAX_HOSTS])
{
    memset(need, 0, sizeof(bool) * INV_MAX_HOSTS);
    for (int j = 0; j < inv->njobs; j++) {
        if (job && job != &inv->jobs[j])
            continue;
        for (int i = 0; i < inv->jobs[j].ncts; i++)
            need[inv->jobs[j].cts[i].host] = true;
    }
}

void fleet_hosts_of_jobs(const struct inventory *inv, const char *const *jobs, int njobs, bool need[INV_MAX_HOSTS])
{
    memset(need, 0, sizeof(bool) * INV_MAX_HOSTS);
    for (int k = 0; k < njobs; k++) {
        const struct inv_job *jb = inventory_find_job(inv, jobs[k]);
        for (int i = 0; jb && i < jb->ncts; i++)
            need[jb->cts[i].host] = true;
    }
}

struct connect_job {
    struct fleet *f;
    int hosts[INV_MAX_HOSTS];
    int r[INV_MAX_HOSTS];
    struct conn *c[INV_MAX_HOSTS];
    char trust[INV_MAX_HOSTS][600];
};

static void connect_one(int k, void *ctx)
{
    struct connect_job *cj = ctx;
    struct fleet *f = cj->f;
    int h = cj->hosts[k];
    cj->r[k] = conn_open(f->inv, h, cj->trust[k], &cj->c[k], f->conn_msg[h], sizeof f->conn_msg[h]);
}

int fleet_connect_all(struct fleet *f, const bool need[INV_MAX_HOSTS])
{
    static struct connect_job cj; /* large; one caller at a time (the main thread) */
    memset(&cj, 0, sizeof cj);
    cj.f = f;
    int n = 0;
    for (int h = 0; h < f->inv->nhosts; h++) {
        if (!need[h] || f->conns[h] || f->conn_err[h] < 0)
            continue;
        snprintf(cj.trust[n], sizeof cj.trust[n], "drover%s%s trust %s", f->inv_arg ? " -i " : "",
                 f->inv_arg ? f->inv_arg : "", f->inv->hosts[h].name);
        cj.hosts[n++] = h;
    }
    fanout_run(n, f->inv->parallel > 0 ? f->inv->parallel : 1, connect_one, &cj);
    int failed = 0;
    for (int k = 0; k < n; k++) {
        int h = cj.hosts[k];
        if (cj.r[k] < 0) {
            f->conn_err[h] = cj.r[k];
            if (cj.r[k] == -ENOKEY || cj.r[k] == -EKEYREJECTED)
                f->key_refused = true;
            log_error("%s", f->conn_msg[h]);
            failed++;
        } else {
            f->conns[h] = cj.c[k];
        }
    }
    return failed;
}
