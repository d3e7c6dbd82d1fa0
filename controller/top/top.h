/* controller/top/top.h: `drover top`, the live fleet dashboard, split in three:
 *   top_model.h  the pure model (top_model.c states and snapshots, top_rows.c rows and cells,
 *                top_render.c layout and the text frame).
 *   top_poll.h   one background thread per host feeding snapshots (top_poll.c).
 *   top.c        the verb: options, the ncursesw screen and keys, `--once`.
 * Nothing here changes the fleet: the dashboard only reads (agent status and events, the
 * controller's state dir).
 */
#ifndef DROVER_TOP_H
#define DROVER_TOP_H

#include "controller/top/top_model.h"
#include "controller/top/top_poll.h"
#include "controller/transport/fleet.h"

/* The verb, cmd_top(), is declared with the others in controller/cmd.h. */

#endif
