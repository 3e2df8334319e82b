/* Deadlock check under the strongest p2p semantics: a send completes only
 * when its peer stands at the matching receive (MPI_Ssend / unbuffered
 * NCCL send without a paired receive).  Each blocking op waits on one
 * known partner, so the outcome does not depend on the visiting order;
 * the walker's rendezvous mode (merak/walk.h) does the matching. */
#include "config.h"
#include "sched/sched_internal.h"
#include "merak/walk.h"

int mk_sched_rendezvous_ok(const mk_sched_t *s)
{
    mk_walk_opts_t o = {.mode = MK_WALK_RENDEZVOUS};
    mk_walk_t w;
    if (mk_walk_init(&w, s, &o, NULL) < 0) return 0;
    int ok = mk_walk_run(&w) == 0;
    mk_walk_free(&w);
    return ok;
}
