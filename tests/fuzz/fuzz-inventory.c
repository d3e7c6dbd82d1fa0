/* Fuzz target: the controller's inventory parser (controller/inventory.c) on arbitrary bytes,
 * then the lookups the verbs do on what it accepted. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controller/inventory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct inventory *inv = NULL;
    char err[INV_ERR_MAX];
    if (inventory_parse((const char *)data, size, "fuzz.ini", &inv, err, sizeof err) < 0) {
        if (!memchr(err, '\0', sizeof err))
            abort(); /* the message must be terminated */
        return 0;
    }
    char key[2048];
    for (int i = 0; i < inv->njobs; i++) {
        inventory_job_key(&inv->jobs[i], key, sizeof key);
        if (inventory_find_job(inv, inv->jobs[i].name) != &inv->jobs[i])
            abort();
        for (int k = 0; k < inv->jobs[i].ncts; k++) {
            struct inv_ct ct;
            if (inventory_parse_ct(inv, inv->jobs[i].cts[k].label, &ct, err, sizeof err) < 0)
                abort(); /* what the parser accepted must parse again */
            if (ct.host < 0 || ct.host >= inv->nhosts)
                abort();
        }
    }
    inventory_free(inv);
    return 0;
}
