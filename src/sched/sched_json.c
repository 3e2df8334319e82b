/* The streams as one JSON object (`merak sched --json`, src/sched/README.md "Pipeline schedules"). */
#include "config.h"
#include "sched/sched_internal.h"

#include <jansson.h>

static json_t *instr_json(const mk_instr_t *in)
{
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i}", "op", mk_instr_op_name(in->op), "mb", in->mb,
                          "chunk", in->chunk, "peer", in->peer, "ckpt", in->ckpt);
    if (o && in->overlap) json_object_set_new(o, "overlap", json_true()); /* dualpipev's pairs only */
    return o;
}

json_t *mk_sched_to_json(const mk_sched_t *s, const mk_sched_report_t *rep)
{
    json_t *o = json_pack("{s:s, s:i, s:i, s:i}", "schedule", mk_sched_kind_name(s->spec.kind),
                          "stages", s->spec.pp, "micro_batches", s->spec.m, "vpp", s->spec.vpp);
    json_t *streams = json_array();
    if (!o || !streams) goto fail;
    for (int st = 0; st < s->spec.pp; st++) {
        json_t *a = json_array();
        if (!a || json_array_append_new(streams, a) < 0) goto fail;
        for (int i = 0; i < s->streams[st].n; i++)
            if (json_array_append_new(a, instr_json(&s->streams[st].v[i])) < 0) goto fail;
    }
    if (s->vshape) { /* the V's placement stated: each stage's virtual stages, chunk by chunk */
        json_t *vs = json_array();
        for (int st = 0; vs && st < s->spec.pp; st++) {
            json_t *a = json_array();
            for (int c = 0; a && c < s->spec.vpp; c++) json_array_append_new(a, json_integer(mk_sched_vstage(1, s->spec.pp, st, c)));
            json_array_append_new(vs, a);
        }
        json_object_set_new(o, "placement", json_string("v"));
        json_object_set_new(o, "virtual_stages", vs);
    }
    if (json_object_set_new(o, "streams", streams) < 0) {
        streams = NULL;
        goto fail;
    }
    streams = NULL;
    if (rep && rep->max_inflight) {
        json_t *mi = json_array();
        for (int st = 0; st < s->spec.pp; st++)
            json_array_append_new(mi, json_integer(rep->max_inflight[st]));
        json_object_set_new(o, "max_inflight", mi);
        json_object_set_new(o, "makespan", json_real(rep->makespan));
    }
    return o;
fail:
    json_decref(streams);
    json_decref(o);
    mk_error_set("sched: could not build the JSON streams");
    return NULL;
}
