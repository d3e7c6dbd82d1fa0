/* controller/deploy/jobspec.c: see jobspec.h. */
#include "controller/deploy/jobspec.h"

#include <stdio.h>
#include <string.h>

int jobspec_digest(const struct inv_job *j, int node_rank, struct spec_digest *ret)
{
    const char *env[16], *args[INV_MAX_ARGS];
    int nenv = j->nenv < 16 ? j->nenv : 16, nargs = j->nargs < INV_MAX_ARGS ? j->nargs : INV_MAX_ARGS;
    for (int k = 0; k < nenv; k++)
        env[k] = j->env[k];
    for (int k = 0; k < nargs; k++)
        args[k] = j->args[k];
    struct launch_spec ls = {
        .job = j->name, .nnodes = j->ncts, .node_rank = node_rank,
        .nproc_per_node = j->nproc_per_node, .gpus = j->gpus, .master_addr = j->master_addr,
        .master_port = j->master_port, .nenv = nenv, .env = env, .command = j->command,
        .nargs = nargs, .args = args,
    };
    return spec_digest_compute(&ls, ret);
}

bool jobspec_is_current(const struct job_status *js, const struct spec_digest *want)
{
    return js && !strcmp(js->spec_digest, want->hex);
}

bool jobspec_is_good_pair(const struct job_status *js, const char *id, const struct spec_digest *want)
{
    return js && id && id[0] && !strcmp(js->good, id) && js->good_spec_digest[0] &&
           !strcmp(js->good_spec_digest, want->hex);
}

bool jobspec_is_settled(const struct job_status *js, const char *id, const struct spec_digest *want)
{
    /* the good pair, and it is what runs */
    return jobspec_is_good_pair(js, id, want) && !strcmp(js->current, id) && jobspec_is_current(js, want);
}

bool jobspec_revertible_here(const struct job_status *js, unsigned features)
{
    return (features & STATUS_FEAT_SPEC_PAIRS) || (js && js->spec_digest[0]);
}

const char *jobspec_describe_change(const struct inv_job *j, const struct job_status *js,
                                    const struct spec_digest *want, char *out, size_t out_sz)
{
    if (!out_sz)
        return out;
    out[0] = '\0';
    if (jobspec_is_current(js, want)) {
        /* the spec runs, but was never promoted with this release: a spec change on probation,
         * held, or left by a drover that stopped; deploying it again runs its probation */
        if (js->current[0] && !strcmp(js->current, js->good) && strcmp(js->good_spec_digest, want->hex) != 0)
            snprintf(out, out_sz, "not promoted yet (on probation, or left there by a deploy that "
                     "did not finish)");
        return out;
    }
    if (!js->spec_digest[0] || !js->spec_fields[0]) {
        snprintf(out, out_sz, "unknown: its agent recorded no job spec digest (an agent or a "
                 "deploy from before them)");
        return out;
    }
    char names[300];
    if (spec_fields_diff(js->spec_fields, want->fields, names, sizeof names) <= 0) {
        snprintf(out, out_sz, "changed"); /* the whole digest differs: a field not named here */
        return out;
    }
    /* nproc_per_node with its values: the status carries the running one */
    const char *np = spec_field_name(SPEC_F_NPROC);
    size_t nl = strlen(np), off = 0;
    for (const char *p = names; *p && off < out_sz;) {
        size_t len = strcspn(p, ",");
        if (len == nl && !strncmp(p, np, nl) && js->nproc > 0)
            off += (size_t)snprintf(out + off, out_sz - off, "%s%s %d -> %d", off ? ", " : "", np,
                                    js->nproc, j->nproc_per_node);
        else
            off += (size_t)snprintf(out + off, out_sz - off, "%s%.*s", off ? ", " : "", (int)len, p);
        p += len;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return out;
}
