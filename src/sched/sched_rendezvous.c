/* Deadlock check under the strongest p2p semantics: a send completes only
 * when its peer stands at the matching receive (MPI_Ssend / unbuffered
 * NCCL send without a paired receive).  Each blocking op waits on one
 * known partner, so the outcome does not depend on the visiting order. */
#include "config.h"
#include "sched/sched_internal.h"

#include <stdlib.h>

static int partner_op(mk_instr_op_t op)
{
    switch (op) {
    case MK_INSTR_SEND_ACT: return MK_INSTR_RECV_ACT;
    case MK_INSTR_RECV_ACT: return MK_INSTR_SEND_ACT;
    case MK_INSTR_SEND_GRAD: return MK_INSTR_RECV_GRAD;
    case MK_INSTR_RECV_GRAD: return MK_INSTR_SEND_GRAD;
    case MK_INSTR_REDUCE_TIED: return MK_INSTR_REDUCE_TIED;
    default: return -1;
    }
}

/* Can stage st's current instruction complete together with its peer's? */
static int meets(const mk_sched_t *s, const int *pos, int st)
{
    const mk_instr_t *in = &s->streams[st].v[pos[st]];
    int q = in->peer;
    if (q < 0 || q >= s->spec.pp || pos[q] >= s->streams[q].n) return 0;
    const mk_instr_t *o = &s->streams[q].v[pos[q]];
    if ((int)o->op != partner_op(in->op)) return 0;
    return in->op == MK_INSTR_REDUCE_TIED || mk_sched_msg_key(s, st, in) == mk_sched_msg_key(s, q, o);
}

int mk_sched_rendezvous_ok(const mk_sched_t *s)
{
    int p = s->spec.pp, moved = 1, ok = 1;
    int *pos = calloc((size_t)p, sizeof *pos);
    if (!pos) return 0;
    while (moved) {
        moved = 0;
        for (int st = 0; st < p; st++)
            while (pos[st] < s->streams[st].n) {
                const mk_instr_t *in = &s->streams[st].v[pos[st]];
                if (partner_op(in->op) < 0) {
                    pos[st]++;
                } else if (meets(s, pos, st)) {
                    pos[in->peer]++;
                    pos[st]++;
                } else {
                    break;
                }
                moved = 1;
            }
    }
    for (int st = 0; st < p; st++) ok &= pos[st] == s->streams[st].n;
    free(pos);
    return ok;
}
