/* common/trainexit.c: drover-train's exit code table (see trainexit.h).  Pure data. */
#include "common/trainexit.h"

#define ROW(id, code, name, retry, text) { id, name, retry, text },
const struct train_exit_info train_exit_table[] = { TRAIN_EXITS(ROW) };
#undef ROW
const size_t train_exit_count = sizeof train_exit_table / sizeof train_exit_table[0];

const struct train_exit_info *train_exit_info(int code)
{
    for (size_t i = 0; i < train_exit_count; i++)
        if (train_exit_table[i].code == code)
            return &train_exit_table[i];
    return 0;
}

bool train_exit_is_nonretryable(int code)
{
    const struct train_exit_info *x = train_exit_info(code);
    return x && x->retry == TRAIN_RETRY_NO;
}

bool train_exit_is_peer_effect(int code)
{
    return code == TX_PEER_LOST || code == TX_PEER_STOPPED;
}

const char *train_retry_word(enum train_retry r)
{
    switch (r) {
    case TRAIN_RETRY_NO: return "no";
    case TRAIN_RETRY_MAYBE: return "maybe";
    case TRAIN_RETRY_YES: return "yes";
    case TRAIN_RETRY_NA: break;
    }
    return "—";
}
