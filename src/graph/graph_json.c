/* JSON model descriptions (schema and examples: traces/models/README.md).
 *
 * A document has optional op lists "prologue", "block" (repeated
 * "num_blocks" times) and "epilogue".  Inside a list, "inputs" name ops of
 * the same list, ops of earlier lists, or "in" (the list's input: the token
 * input for the prologue, the previous block's output, the last block's
 * output for the epilogue); without "inputs" an op reads the op before it.
 * Ops may be listed in any order; a cycle is an error. */
#include "merak/jsonio.h"
#include "merak/graph.h"
#include "merak/limits.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *path;
    json_t *root;
    int seq, vocab, hidden, heads, input_width;
    mk_graph_t *g;      /* NULL while only checking the top level */
    int last;           /* output of the previous list (MK_GRAPH_INPUT at start) */
} mk_jctx_t;

static int jerr(const mk_jctx_t *c, const char *where, const char *msg)
{
    return mk_error_set("%s: %s%s%s", c->path, where ? where : "", where ? ": " : "", msg);
}

/* Optional integer field in [lo, max] (max from merak/limits.h); returns
 * 0, or -1 on a wrong type / value. */
static int get_int(const mk_jctx_t *c, json_t *obj, const char *where, const char *key,
                   int lo, int max, int *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    char msg[160];
    if (json_is_integer(v) && json_integer_value(v) > max) {
        snprintf(msg, sizeof msg, "field '%s' must be at most %d, got %" JSON_INTEGER_FORMAT, key, max,
                 json_integer_value(v));
        return jerr(c, where, msg);
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo) {
        snprintf(msg, sizeof msg, "field '%s' must be an integer >= %d", key, lo);
        return jerr(c, where, msg);
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_bool(const mk_jctx_t *c, json_t *obj, const char *where, const char *key, int *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) {
        char msg[128];
        snprintf(msg, sizeof msg, "field '%s' must be true or false", key);
        return jerr(c, where, msg);
    }
    *out = json_is_true(v);
    return 0;
}

static int check_keys(const mk_jctx_t *c, json_t *obj, const char *where, const char *const *allowed)
{
    const char *key = mk_json_unknown_key(obj, allowed);
    if (!key) return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "unknown field '%s'", key);
    return jerr(c, where, msg);
}

/* Fill an op from its JSON object (inputs resolved by the caller). */
static int op_fields(const mk_jctx_t *c, json_t *jo, const char *where, mk_op_t *o)
{
    static const char *const keys[] = {"name", "op", "inputs", "out", "dim", "vocab", "heads",
                                       "kv_heads", "bias", "tied", "causal", NULL};
    if (check_keys(c, jo, where, keys) < 0) return -1;
    json_t *kind = json_object_get(jo, "op");
    if (!json_is_string(kind)) return jerr(c, where, "missing string field 'op'");
    if (mk_opkind_parse(json_string_value(kind), &o->kind) < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "unknown op '%s' (embedding, pos_embedding, layernorm, rmsnorm, linear, "
                 "attention, rope, qk_norm, gelu, swiglu, add, dropout, lm_head, loss, moe)", json_string_value(kind));
        return jerr(c, where, msg);
    }
    o->width = o->kind == MK_OPK_EMBEDDING || o->kind == MK_OPK_POS_EMBEDDING ? c->hidden : 0;
    o->vocab = c->vocab;
    o->heads = c->heads;
    o->bias = o->kind != MK_OPK_LM_HEAD;
    o->tied = 1;
    o->causal = 1;
    if (get_int(c, jo, where, "out", 1, MK_MAX_WIDTH, &o->width) < 0 ||
        get_int(c, jo, where, "dim", 1, MK_MAX_WIDTH, &o->width) < 0 ||
        get_int(c, jo, where, "vocab", 1, MK_MAX_VOCAB, &o->vocab) < 0 ||
        get_int(c, jo, where, "heads", 1, MK_MAX_HEADS, &o->heads) < 0 ||
        get_int(c, jo, where, "kv_heads", 1, MK_MAX_HEADS, &o->kv_heads) < 0 ||
        get_bool(c, jo, where, "bias", &o->bias) < 0 || get_bool(c, jo, where, "tied", &o->tied) < 0 ||
        get_bool(c, jo, where, "causal", &o->causal) < 0)
        return -1;
    if (o->kind == MK_OPK_LINEAR && !json_object_get(jo, "out"))
        return jerr(c, where, "a linear op needs field 'out'");
    o->n_in = o->kind == MK_OPK_POS_EMBEDDING ? 0 : o->kind == MK_OPK_ADD ? 2 : 1;
    return 0;
}

/* Names of an op's inputs: the "inputs" array, or the previous op / "in". */
static int op_input_names(const mk_jctx_t *c, json_t *jo, const char *where, int n_in,
                          const char *prev, const char **names)
{
    json_t *ins = json_object_get(jo, "inputs");
    if (!ins) {
        if (n_in > 1) return jerr(c, where, "an add op needs field 'inputs' with two names");
        if (n_in == 1) names[0] = prev;
        return 0;
    }
    if (!json_is_array(ins)) return jerr(c, where, "field 'inputs' must be an array of op names");
    if ((int)json_array_size(ins) != n_in) {
        char msg[96];
        snprintf(msg, sizeof msg, "field 'inputs' must name %d op(s)", n_in);
        return jerr(c, where, msg);
    }
    for (int k = 0; k < n_in; k++) {
        json_t *s = json_array_get(ins, k);
        if (!json_is_string(s)) return jerr(c, where, "field 'inputs' must hold strings");
        names[k] = json_string_value(s);
    }
    return 0;
}

/* Resolve a name: "in", an op of this list (index into local[]), or an
 * earlier global op.  *local_ref receives the local index or -1. */
static int resolve(const mk_jctx_t *c, json_t *list, const char *name, int *local_ref, int *global)
{
    *local_ref = -1;
    if (!strcmp(name, "in")) {
        *global = c->last;
        return 0;
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *nm = json_object_get(json_array_get(list, i), "name");
        if (json_is_string(nm) && !strcmp(json_string_value(nm), name)) {
            *local_ref = (int)i;
            return 0;
        }
    }
    int i = c->g ? mk_graph_find_op(c->g, name) : -1;
    if (i >= 0) *global = i;
    return i >= 0 ? 0 : -1;
}

typedef struct {
    mk_op_t op;
    int dep_local[2];   /* local producer indices, -1 when global */
    int emitted_as;     /* global index once emitted, -1 before */
} mk_jop_t;

/* Parse one list into jops (names and fields; inputs resolved). */
static int parse_list(mk_jctx_t *c, json_t *list, const char *lname, int block, mk_jop_t *j)
{
    const char *prev = "in";
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *jo = json_array_get(list, i);
        char where[96];
        snprintf(where, sizeof where, "%s[%zu]", lname, i);
        if (!json_is_object(jo)) return jerr(c, where, "each op must be an object");
        json_t *nm = json_object_get(jo, "name");
        if (!json_is_string(nm) || !json_string_length(nm))
            return jerr(c, where, "missing string field 'name'");
        snprintf(where, sizeof where, "%s op '%s'", lname, json_string_value(nm));
        mk_op_t *o = &j[i].op;
        memset(o, 0, sizeof *o);
        if (op_fields(c, jo, where, o) < 0) return -1;
        if (block >= 0) snprintf(o->name, sizeof o->name, "%s.%d", json_string_value(nm), block);
        else mk_strlcpy(o->name, json_string_value(nm), sizeof o->name);
        o->block = block;
        const char *names[2] = {0, 0};
        if (op_input_names(c, jo, where, o->n_in, prev, names) < 0) return -1;
        j[i].dep_local[0] = j[i].dep_local[1] = -1;
        j[i].emitted_as = -1;
        for (int k = 0; k < o->n_in; k++) {
            if (!strcmp(names[k], json_string_value(nm)))
                return jerr(c, where, "an op cannot read its own output (cycle)");
            if (resolve(c, list, names[k], &j[i].dep_local[k], &o->in[k]) < 0) {
                char msg[160];
                snprintf(msg, sizeof msg, "input '%s' names no op", names[k]);
                return jerr(c, where, msg);
            }
        }
        prev = json_string_value(nm);
    }
    return 0;
}

/* Emit a list's ops in dependency order (Kahn); a stuck list has a cycle. */
static int emit_list(mk_jctx_t *c, json_t *list, const char *lname, int block)
{
    size_t n = json_array_size(list);
    if (n == 0) return 0;
    mk_jop_t *j = calloc(n, sizeof *j);
    if (!j) return mk_error_set("out of memory");
    int rc = parse_list(c, list, lname, block, j);
    for (size_t done = 0; rc == 0 && done < n;) {
        size_t pick = n;
        for (size_t i = 0; i < n && pick == n; i++) {
            if (j[i].emitted_as >= 0) continue;
            int ready = 1;
            for (int k = 0; k < j[i].op.n_in; k++)
                if (j[i].dep_local[k] >= 0 && j[j[i].dep_local[k]].emitted_as < 0) ready = 0;
            if (ready) pick = i;
        }
        if (pick == n) {
            for (size_t i = 0; i < n; i++)
                if (j[i].emitted_as < 0) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "op '%s' is on a cycle of inputs", j[i].op.name);
                    rc = jerr(c, lname, msg);
                    break;
                }
            break;
        }
        mk_op_t *o = &j[pick].op;
        for (int k = 0; k < o->n_in; k++)
            if (j[pick].dep_local[k] >= 0) o->in[k] = j[j[pick].dep_local[k]].emitted_as;
        if (mk_graph_add_op(c->g, o) < 0) {
            char why[512];
            mk_strlcpy(why, mk_error_last(), sizeof why);
            rc = mk_error_set("%s: %s", c->path, why);
            break;
        }
        j[pick].emitted_as = c->g->n_ops - 1;
        done++;
    }
    if (rc == 0) c->last = j[n - 1].emitted_as;
    free(j);
    return rc;
}

static json_t *get_list(const mk_jctx_t *c, const char *key, int *bad)
{
    json_t *v = json_object_get(c->root, key);
    if (v && !json_is_array(v)) {
        char msg[96];
        snprintf(msg, sizeof msg, "field '%s' must be an array of ops", key);
        jerr(c, NULL, msg);
        *bad = 1;
    }
    return v;
}

/* Parse the file and the top-level fields. */
static int json_open(mk_jctx_t *c, const char *path, int *num_blocks, char *name, size_t name_sz)
{
    static const char *const keys[] = {"name", "seq_length", "vocab_size", "hidden_size",
                                       "num_attention_heads", "input_width", "prologue", "block", "num_blocks",
                                       "epilogue", "description", NULL};
    memset(c, 0, sizeof *c);
    c->path = path;
    c->last = MK_GRAPH_INPUT;
    c->root = mk_json_load(path, "model description");
    if (!c->root) return -1;
    if (!json_is_object(c->root)) return jerr(c, NULL, "a model description must be a JSON object");
    if (check_keys(c, c->root, NULL, keys) < 0) return -1;
    json_t *nm = json_object_get(c->root, "name");
    if (!json_is_string(nm)) return jerr(c, NULL, "missing string field 'name'");
    mk_strlcpy(name, json_string_value(nm), name_sz);
    if (!json_object_get(c->root, "seq_length")) return jerr(c, NULL, "missing field 'seq_length'");
    c->hidden = c->heads = 1;
    *num_blocks = 0;
    if (get_int(c, c->root, NULL, "seq_length", 1, MK_MAX_SEQ, &c->seq) < 0 ||
        get_int(c, c->root, NULL, "vocab_size", 1, MK_MAX_VOCAB, &c->vocab) < 0 ||
        get_int(c, c->root, NULL, "hidden_size", 1, MK_MAX_HIDDEN, &c->hidden) < 0 ||
        get_int(c, c->root, NULL, "num_attention_heads", 1, MK_MAX_HEADS, &c->heads) < 0 ||
        get_int(c, c->root, NULL, "num_blocks", 0, MK_MAX_LAYERS, num_blocks) < 0 ||
        get_int(c, c->root, NULL, "input_width", 1, MK_MAX_WIDTH, &c->input_width) < 0)
        return -1;
    if (c->hidden > INT_MAX / 4) /* the configuration's FFN width is 4 x hidden_size, an int */
        return jerr(c, NULL, "field 'hidden_size' must be at most 536870911 (4 x hidden_size must fit an int)");
    int bad = 0;
    json_t *blk = get_list(c, "block", &bad);
    get_list(c, "prologue", &bad);
    get_list(c, "epilogue", &bad);
    if (bad) return -1;
    if ((blk != NULL) != (json_object_get(c->root, "num_blocks") != NULL))
        return jerr(c, NULL, "fields 'block' and 'num_blocks' go together");
    return 0;
}

mk_graph_t *mk_graph_load_json(const mk_model_config_t *cfg, const mk_graph_opts_t *opts)
{
    mk_jctx_t c;
    int nb;
    char name[64];
    mk_graph_t *g = NULL;
    if (json_open(&c, cfg->json_path, &nb, name, sizeof name) < 0) goto fail;
    mk_model_config_t cc = *cfg;
    cc.seq = cfg->seq > 0 ? cfg->seq : c.seq;
    c.seq = cc.seq;
    g = c.g = mk_graph_new(&cc, opts);
    if (!g) {
        mk_error_set("out of memory");
        goto fail;
    }
    g->input_width = c.input_width;
    if (emit_list(&c, json_object_get(c.root, "prologue"), "prologue", -1) < 0) goto fail;
    for (int i = 0; i < nb; i++) {
        char lname[32];
        snprintf(lname, sizeof lname, "block %d", i);
        if (emit_list(&c, json_object_get(c.root, "block"), lname, i) < 0) goto fail;
    }
    if (emit_list(&c, json_object_get(c.root, "epilogue"), "epilogue", -1) < 0) goto fail;
    if (mk_graph_finish(g) < 0) goto fail;
    json_decref(c.root);
    return g;
fail:
    json_decref(c.root);
    mk_graph_free(g);
    return NULL;
}

int mk_graph_json_probe(const char *path, mk_model_config_t *cfg)
{
    mk_jctx_t c;
    int nb;
    char name[64];
    mk_model_defaults(cfg);
    int rc = json_open(&c, path, &nb, name, sizeof name);
    json_decref(c.root);
    if (rc < 0) return -1;
    mk_strlcpy(cfg->name, name, sizeof cfg->name);
    mk_strlcpy(cfg->json_path, path, sizeof cfg->json_path);
    cfg->family = MK_FAMILY_CUSTOM;
    cfg->seq = c.seq;
    cfg->vocab = c.vocab;
    cfg->hidden = c.hidden;
    cfg->heads = cfg->kv_heads = c.heads;
    cfg->ffn = 4 * c.hidden;
    mk_graph_opts_t o;
    mk_graph_opts_init(&o);
    mk_graph_t *g = mk_graph_load_json(cfg, &o); /* check everything now, not later */
    if (!g) return -1;
    cfg->num_layers = nb > 0 ? nb : g->n_layers;
    mk_graph_free(g);
    return 0;
}
