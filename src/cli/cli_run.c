/* `merak run`: train a model across MPI ranks (issue 6).  Every rank parses
 * and validates identically before any collective, so a bad layout gives
 * one message (rank 0) and exit 2 everywhere, without a hang. */
#include "merak/backend.h"
#include "config.h"
#include "cli/cli.h"
#include "merak/exec.h"
#include "merak/graph.h"
#include "merak/kernels_cpu.h"
#include "merak/safetensors.h"

#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

static const char *run_usage =
    "usage: mpiexec -n N merak run [--model M] --dp D --pp P --tp T --mbs b --gbs B\n"
    "              --steps K [--schedule S] [--recompute R] [--vpp V] [--json]\n"
    "              [--lr X] [--min-lr X] [--lr-warmup-iters N] [--weight-decay X]\n"
    "              [--clip-grad X] [--adam-eps X] [--seed N] [--backend cpu|cuda]\n"
    "              [--tp-overlap 0|1|2] [--sequence-parallel] [--plan FILE] [--partition P]\n"
    "              [--data FILE] [--eval-interval N] [--save FILE] [--load FILE]\n"
    "              [--save-interval N] [--lr-decay-iters N] [--zero Z] [--trace FILE]\n"
    "              [--zero-shard-group dp|node] [--no-overlap-grad-reduce] [--attention-backend A]\n"
    "              [--adam-beta1 X] [--adam-beta2 X] [--log-interval N] [--quiet]\n"
    "              [--distributed-timeout-minutes X] [--bf16|--fp16] [--loss-scale X]\n"
    "              [--initial-loss-scale X] [--min-loss-scale X] [--loss-scale-window N] [--hysteresis N]\n\n"
    "Train a GPT, Llama or MoE model for real (src/exec/README.md; fp32;\n"
    "CPU backend on OpenBLAS, CUDA when built and a GPU is visible), running\n"
    "each pipeline stage's instruction stream with real kernels and MPI.\n"
    "Ranks: TP fastest, then DP, then PP; dp*pp*tp must equal the rank count.\n\n"
    "  --model M        preset (with model flags) or a Hugging Face config.json or its\n"
    "                   directory (default gpt-tiny)\n"
    "  --dp/--pp/--tp   parallel degrees (default 1)\n"
    "  --mbs b          sequences per micro-batch (default 1)\n"
    "  --gbs B          global batch in sequences, a multiple of dp*mbs (default 2*dp*mbs*pp)\n"
    "  --steps K        optimizer steps (default 10)\n"
    "  --schedule S     gpipe 1f1b interleaved merak merak-pre merak-last zb-h1\n"
    "                   looped-bfs zb-h2 zb-v dualpipev (default 1f1b; torchtitan's names\n"
    "                   too: GPipe, 1F1B, Interleaved1F1B, LoopedBFS, ZBVZeroBubble, DualPipeV)\n"
    "  --recompute R    none full selective stage-aware:R (default full)\n"
    "  --vpp V          model chunks per stage (interleaved, looped-bfs; zb-v, dualpipev: 2)\n"
    "  --tp-overlap L   sub-pipelined TP: 1 hide half of each all-reduce, 2 half chains\n"
    "                   (3 runs as 2); results equal no overlap\n"
    "  --sequence-parallel  Megatron's: norms and residuals on N/tp token rows of each\n"
    "                   micro-batch (tp must divide mbs*seq), all-gather / reduce-scatter\n"
    "                   for each TP all-reduce; not with --tp-overlap; same results\n"
    "  --ep E           expert parallelism (MoE models): E consecutive DP (and CP) ranks\n"
    "                   share the experts (all-to-all dispatch); divides dp x cp and the\n"
    "                   experts; with --sequence-parallel E consecutive ranks of tp x cp x dp\n"
    "                   (MoE parallel folding, Megatron-Core's layout); with --zero the\n"
    "                   experts sharded over their holders (a hybrid group's); same results\n"
    "  --plan FILE      a plan from merak plan --save-plan, run in full (no layout flags\n"
    "                   with it); a 16-bit plan runs as --bf16 / --fp16\n"
    "  --bf16 / --fp16  16-bit weights (over fp32 masters), GEMM operands and saved activations\n"
    "                   (cpu backend; fp32 sums and working tensors);\n"
    "                   fp16 scales the loss as\n"
    "                   Megatron-LM does: dynamic from --initial-loss-scale (2^32), halved after\n"
    "                   --hysteresis (2) overflows, doubled after --loss-scale-window (1000) good\n"
    "                   steps, at least --min-loss-scale (1); --loss-scale X: constant (bf16\n"
    "                   too); a step with inf/NaN gradients is skipped on every rank; fp16\n"
    "                   gradient buffers, each accumulation and the DP sum rounded to fp16,\n"
    "                   unless --accumulate-allreduce-grads-in-fp32 (bf16's are fp32)\n"
    "  --backend B      cpu or cuda (default: cuda when built and a GPU is visible)\n"
    "  --lr X           peak learning rate (default @lr@); --min-lr (default lr/10);\n"
    "  --lr-warmup-iters N  linear warm-up (default 2/(1-beta2) steps: 40), then cosine\n"
    "                   to --min-lr; 0 starts at the peak\n"
    "  --weight-decay (@weight_decay@); --clip-grad (@clip_grad@);\n"
    "  --adam-eps (@adam_eps@); --seed N (@seed@); --adam-beta1 (@adam_beta1@); --adam-beta2 (@adam_beta2@)\n"
    "  --data FILE      token file: bytes, uint16 (.bin/.u16/.tok) or llm.c .bin; ids below\n"
    "                   the vocabulary (--vocab-size); default: a synthetic stream\n"
    "  --eval-interval N  validation loss (the held-out last tenth) every N steps and at the end;\n"
    "                   --eval-batches N global batches each (default up to 8)\n"
    "  --save FILE      safetensors checkpoint at the end (and every --save-interval N steps)\n"
    "  --save-hf DIR    also write the weights at the end as a Hugging Face model directory\n"
    "                   (config.json, model.safetensors or its shards and index: F32, or\n"
    "                   BF16/F16 for a 16-bit run, rounded to nearest even)\n"
    "  --hf-max-shard-size SIZE   --save-hf's shards at most SIZE (5GB, 500MB, 2GiB; default 5GB)\n"
    "  --reset-position-ids --reset-attention-mask   positions restart, and attention stays, inside each\n"
    "                   document of a Megatron dataset (Megatron-LM's)\n"
    "  --load FILE      start from a checkpoint (any layout; checksums verified); --steps more\n"
    "                   steps follow; or a Hugging Face model directory (config.json and its\n"
    "                   safetensors, sharded or not, F32/BF16/F16: the weights, at step 0)\n"
    "  --lr-decay-iters N  cosine horizon (default: the checkpoint's, else the last step)\n"
    "  --zero Z         ZeRO over the DP group: 1 Adam state sharded, 2 + gradients\n"
    "                   (reduce-scattered per micro-batch), 3 + parameters (FSDP:\n"
    "                   gathered per layer, the next one prefetched); same results\n"
    "  --zero-shard-group G  dp (default) or node: shard within the ranks of a node,\n"
    "                   replicate across nodes (a plan's zero_shard_size sets any group)\n"
    "  --no-zero3-prefetch  ZeRO-3: gather each layer as it starts, not behind the layer\n"
    "                   before it (one layer gathered at a time); same results\n"
    "  --overlap-grad-reduce, --no-overlap-grad-reduce\n"
    "                   start each layer's DP all-reduce as the last backward makes its\n"
    "                   gradient final (default), or all of them at REDUCE_GRADS; same results\n"
    "  --attention-backend A, --use-flash-attn  flash or fused: the backend's fused\n"
    "                   attention (FlashAttention-2: no s x s scores kept); unfused or\n"
    "                   auto: the scores kept\n"
    "  --cross-entropy vocab-parallel|fused  the executor's loss (vocab-parallel's memory,\n"
    "                   fused's passes); a plan with torch (merak sim's PyTorch memory) or\n"
    "                   fused-te is refused, as one with --fsdp-reshard-after-forward never\n"
    "                   or --recompute selective-op\n"
    "  --trace FILE     Chrome trace of the last step, all ranks (rank 0 writes it)\n"
    "  --json           one JSON object on stdout (rank 0): losses, step times, memory\n"
    "                   (MoE models: aux_losses, the load-balancing losses, apart)\n"
    "  --log-interval N a step line on stderr every N steps and at the last (default 1):\n"
    "                   step, loss, lr, time, tokens/s; also one line per file written\n"
    "  --quiet          no step or file lines (errors and warnings still go to stderr)\n"
    "  --distributed-timeout-minutes X\n"
    "                   a rank whose collective or p2p message completes nothing for X\n"
    "                   minutes (fractions allowed) says what it waited for and ends\n"
    "                   the job, exit 1 (default 10; 0: wait forever)\n"
    "  --dump-grads F   testing: write the full step-1 gradients to F (rank 0)\n";

/* Testing flags handled here, removed from argv before the shared parser. */
static const char *take_flag(int *argc, char **argv, const char *flag)
{
    for (int i = 1; i + 1 < *argc; i++)
        if (!strcmp(argv[i], flag)) {
            const char *v = argv[i + 1];
            memmove(argv + i, argv + i + 2, (*argc - i - 1) * sizeof *argv);
            *argc -= 2;
            return v;
        }
    return NULL;
}

/* --dump-grads still in argv after take_flag: given twice, or last with
 * no value (the messages mk_args_parse gives its own flags).  -1 printed. */
static int dump_flag_left(int argc, char **argv, int taken)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--dump-grads"))
            return mk_cli_fail("run", taken ? "--dump-grads is given twice: give it once"
                                            : "option '--dump-grads' needs a value"), -1;
    return 0;
}

/* Flags of the contract that this executor does not take yet. */
static int unsupported(const mk_args_t *a)
{
    if (a->cluster) return mk_cli_fail("run", "--cluster is not a run flag");
    if (a->npos) return mk_cli_fail("run", "unexpected argument '%s'", a->pos[0]);
    return 0;
}

/* merak run's defaults (the optimizer's as typed on the command line). */
static const mk_cli_defaults_t run_defaults = {
    .model = "gpt-tiny", .cluster = "ideal", .dtype = MK_DTYPE_FP32, .gbs = 0 /* 2 x dp x mbs x pp */,
    .schedule = "1f1b", .recompute = "full", .partition = "uniform", .vpp = 2,
    .steps = 10, .seed = 1234, .lr = "6e-4", .weight_decay = "0.1", .clip_grad = "1.0", .adam_eps = "1e-8",
    .adam_beta1 = "0.9", .adam_beta2 = "0.95",
};

/* One rule for the dtype, from --dtype or a plan's "dtype" (issue 32): a
 * 16-bit dtype trains with 16-bit weights over fp32 masters and rounds the
 * GEMMs' operands where the backend can (src/exec/exec_p16.c), else runs
 * in fp32, said on stderr (rank 0: the others are silenced while parsing)
 * once the plan is accepted (run_dtype_warn); fp8, whose scaling recipe an
 * fp32 run cannot stand for, is refused. */
static int run_dtype_check(const mk_plan_t *p, int from_plan)
{
    mk_dtype_t given = p->dtype;
    if (given != MK_DTYPE_FP8) return 0;
    return mk_cli_fail("run", "the executor has no fp8 path: %s fp8 is for merak sim and merak plan (bf16 and fp16 "
                       "run)", from_plan ? "the plan's dtype" : "--dtype");
}

/* What ran on the backend, read before it is freed (print_json). */
typedef struct {
    int store16; /* mk_exec_store16 */
    int cpu;     /* the cpu backend */
} run_backend_t;

/* What a 16-bit run kept in 16 bits (--json "precision", "grads", "gemm"):
 * on the CPU its weights (and fp16's gradient buffers) in 16-bit stores
 * (mk_exec_store16); on a device the same values rounded in fp32 buffers. */
static void run_json_precision(json_t *j, const mk_exec_opts_t *o, run_backend_t rb)
{
    const char *p = !rb.store16 ? (o->grad_dtype ? "16-bit GEMM operands and saved activations, gradients rounded to "
                                              "16-bit values in fp32 buffers; fp32 weights (the GEMMs round them as "
                                              "they read them), optimizer, sums and working tensors"
                                            : "16-bit GEMM operands and saved activations; fp32 weights (the GEMMs "
                                              "round them as they read them), gradients, optimizer, sums and "
                                              "working tensors")
                    : o->grad_dtype ? "16-bit weights, GEMM operands, saved activations and gradient buffers; "
                                      "fp32 masters, optimizer, sums and working tensors"
                                    : "16-bit weights, GEMM operands and saved activations; fp32 masters, "
                                      "gradients, optimizer, sums and working tensors";
    json_object_set_new(j, "precision", json_string(p));
    json_object_set_new(j, "grads", json_string(mk_dtype_name(o->grad_dtype ? (mk_dtype_t)o->grad_dtype
                                                                             : MK_DTYPE_FP32)));
    const char *gemm = !rb.cpu ? "cuBLAS on the rounded operands, fp32 sums"
                       : o->gemm_dtype == MK_DTYPE_BF16 && mk_cpu_dnnl_bf16_ok() ? "oneDNN bf16"
                                                                                : "OpenBLAS sgemm of the rounded operands";
    json_object_set_new(j, "gemm", json_string(gemm));
}

/* A 16-bit dtype: the linears' GEMMs take 16-bit operands where the
 * backend can (set_gemm_dtype), the rest stays fp32; where it cannot, the
 * run is fp32 and says so. */
static void run_dtype_warn(mk_dtype_t given, int from_plan, const mk_backend_t *be)
{
    if (given != MK_DTYPE_FP32 && !be->set_gemm_dtype)
        fprintf(stderr, "merak run: warning: %s is %s; the %s backend trains in %s\n",
                from_plan ? "the plan's dtype" : "--dtype", mk_dtype_name(given), be->name,
                mk_dtype_name(MK_DTYPE_FP32));
}

/* The executor's layers have no dropout (its runs are the deterministic
 * reference the layouts are proven equal to): a dropout asked for is
 * refused rather than silently not applied.  A plan's dropout where none
 * was asked (Megatron's GPT default, which merak sim counts in a 16-bit
 * plan's memory) is the model's, and run trains it without. */
static int run_dropout_check(const mk_args_t *a)
{
    double at = a->ov.attention_dropout, hd = a->ov.hidden_dropout;
    if (at <= 0 && hd <= 0) return 0;
    return mk_cli_fail("run", "%s %g: the executor trains without dropout (0, or merak sim and merak plan)",
                       at > 0 ? "--attention-dropout" : "--hidden-dropout", at > 0 ? at : hd);
}

/* The plan from --plan FILE or the flags, resolved once for this world
 * with the executor's rules (as fp32: *given is the plan's own dtype). */
static int run_ctx(const mk_args_t *a, int world, mk_dtype_t *given, mk_plan_ctx_t *ctx)
{
    mk_plan_t p;
    if (run_dropout_check(a) || mk_args_plan(a, &run_defaults, world, run_defaults.dtype, &p) < 0) return -1;
    *given = p.dtype;
    if (run_dtype_check(&p, a->plan_file != NULL)) return -1;
    p.dtype = MK_DTYPE_FP32;
    mk_plan_resolve_opts_t ro = {.world = world, .check = mk_exec_check};
    return mk_args_resolve(a, &run_defaults, &p, &ro, ctx);
}

/* The backend, then the streams must build; the plan's dtype is said last
 * (a refused plan gets its one line only). */
static int run_backend(const mk_args_t *a, mk_dtype_t given, const mk_plan_ctx_t *ctx, mk_exec_opts_t *o)
{
    if (!(o->be = mk_backend_new(a->backend))) return mk_cli_fail("run", "%s", mk_error_last());
    if (mk_exec_validate(ctx) < 0) return mk_cli_fail("run", "%s", mk_error_last());
    run_dtype_warn(given, a->plan_file != NULL, o->be);
    return 0;
}

/* Loss scaling as Megatron-LM chooses it (megatron/core/optimizer):
 * --loss-scale X a constant scale (fp16 or bf16), else fp16 a dynamic one
 * (--initial-loss-scale 2^32, --min-loss-scale 1, --loss-scale-window 1000,
 * --hysteresis 2: its defaults), else none.  Flags that would do nothing
 * (an fp32 run's, the dynamic ones beside --loss-scale or with bf16) and a
 * floor above the start are refused rather than ignored. */
static int loss_scaler_of(const mk_args_t *a, mk_dtype_t given, mk_loss_scaler_t *ls)
{
    int dyn = a->initial_loss_scale >= 0 || a->min_loss_scale >= 0 || a->loss_scale_window || a->hysteresis;
    const char *dyn_flag = a->initial_loss_scale >= 0 ? "--initial-loss-scale" : a->min_loss_scale >= 0
                           ? "--min-loss-scale" : a->loss_scale_window ? "--loss-scale-window" : "--hysteresis";
    double init = a->initial_loss_scale >= 0 ? a->initial_loss_scale : 4294967296.0 /* 2^32 */;
    double floor = a->min_loss_scale >= 0 ? a->min_loss_scale : 1.0;
    if (given == MK_DTYPE_FP32 && (dyn || a->loss_scale >= 0))
        return mk_cli_fail("run", "%s is for --fp16 and --bf16 runs: an fp32 run scales no loss",
                           a->loss_scale >= 0 ? "--loss-scale" : dyn_flag);
    if (dyn && a->loss_scale >= 0)
        return mk_cli_fail("run", "%s tunes the dynamic loss scale, and --loss-scale fixes it: give one", dyn_flag);
    if (dyn && given != MK_DTYPE_FP16)
        return mk_cli_fail("run", "%s is for --fp16 (a %s run scales its loss only with --loss-scale X)", dyn_flag,
                           mk_dtype_name(given));
    if (floor > init)
        return mk_cli_fail("run", "--min-loss-scale %g is above the initial loss scale %g", floor, init);
    mk_loss_scale_kind_t kind = a->loss_scale >= 0 ? MK_LOSS_SCALE_CONSTANT
                                : given == MK_DTYPE_FP16 ? MK_LOSS_SCALE_DYNAMIC : MK_LOSS_SCALE_NONE;
    mk_loss_scaler_init(ls, kind, a->loss_scale >= 0 ? a->loss_scale : init, floor,
                        a->loss_scale_window ? a->loss_scale_window : 1000, a->hysteresis ? a->hysteresis : 2);
    return 0;
}

/* --save-hf DIR, before any work: a directory, or a name in one (made at the end). */
static int save_hf_ok(const mk_args_t *a)
{
    struct stat st;
    if (!a->save_hf) return 0;
    if (stat(a->save_hf, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : mk_cli_fail("run", "--save-hf: '%s' exists and is not a directory", a->save_hf);
    char parent[4096];
    mk_strlcpy(parent, a->save_hf, sizeof parent);
    char *slash = strrchr(parent, '/');
    if (!slash) return 0;
    *slash = 0;
    if (!*parent || (stat(parent, &st) == 0 && S_ISDIR(st.st_mode))) return 0;
    return mk_cli_fail("run", "--save-hf: directory '%s' does not exist", parent);
}

static int fill_opts(const mk_args_t *a, int world, mk_plan_ctx_t *ctx, mk_exec_opts_t *o)
{
    const mk_cli_defaults_t *d = &run_defaults;
    mk_dtype_t given;
    mk_exec_opts_init(o);
    if (unsupported(a) || save_hf_ok(a) || run_ctx(a, world, &given, ctx) < 0) return -1;
    if (loss_scaler_of(a, given, &o->loss_scaler) || run_backend(a, given, ctx, o)) {
        mk_plan_ctx_free(ctx);
        return -1;
    }
    o->ctx = ctx;
    o->steps = a->steps >= 0 ? a->steps : d->steps;
    o->lr = a->lr >= 0 ? a->lr : strtod(d->lr, NULL);
    if (a->min_lr >= 0) o->min_lr = a->min_lr;
    o->warmup = a->lr_warmup_iters >= 0 ? a->lr_warmup_iters : -1; /* -1: mk_exec_default_warmup */
    o->weight_decay = a->weight_decay >= 0 ? a->weight_decay : strtod(d->weight_decay, NULL);
    o->clip_grad = a->clip_grad >= 0 ? a->clip_grad : strtod(d->clip_grad, NULL);
    if (a->timeout_min >= 0) o->timeout_s = 60.0 * a->timeout_min;
    o->adam_eps = a->adam_eps >= 0 ? a->adam_eps : strtod(d->adam_eps, NULL);
    o->adam_beta1 = a->adam_beta1 >= 0 ? a->adam_beta1 : strtod(d->adam_beta1, NULL);
    o->adam_beta2 = a->adam_beta2 >= 0 ? a->adam_beta2 : strtod(d->adam_beta2, NULL);
    o->log_interval = a->quiet ? 0 : a->log_interval > 0 ? a->log_interval : 1;
    o->seed = (uint64_t)(a->seed >= 0 ? a->seed : d->seed);
    o->trace = a->trace_file;
    o->data = a->data;
    o->save = a->save;
    o->save_hf = a->save_hf;
    o->hf_max_shard_bytes = a->hf_max_shard;
    /* the exported model in the run's 16-bit type (issue 37), as Megatron's converters and save_pretrained do */
    o->hf_dtype = given == MK_DTYPE_BF16 ? MK_ST_BF16 : given == MK_DTYPE_FP16 ? MK_ST_F16 : MK_ST_F32;
    if (o->be->set_gemm_dtype && given != MK_DTYPE_FP32) o->gemm_dtype = given;
    /* the gradient buffers' type: the plan's (mk_plan_grad_dtype, Megatron-LM's rule, which the
       simulator's memory and DP volume follow too) */
    mk_plan_t gp = ctx->plan;
    gp.dtype = given;
    mk_dtype_t gd = mk_plan_grad_dtype(&gp);
    if (o->be->round16 && gd != MK_DTYPE_FP32) o->grad_dtype = gd;
    o->reset_position_ids = a->reset_pos, o->reset_attention_mask = a->reset_mask;
    o->load = a->load;
    if (a->eval_interval > 0) o->eval_interval = a->eval_interval;
    o->save_interval = a->save_interval, o->lr_decay_steps = a->lr_decay_iters, o->eval_batches = a->eval_batches;
    return 0;
}

static void print_json(const mk_exec_opts_t *o, const mk_exec_result_t *r, run_backend_t rb)
{
    json_t *j = json_object(), *losses = json_array(), *times = json_array(), *mem = json_array();
    for (int k = 0; k < r->steps; k++) {
        json_array_append_new(losses, json_real(r->losses[k]));
        json_array_append_new(times, json_real(r->step_times[k]));
    }
    for (int s = 0; s < o->ctx->plan.pp; s++) json_array_append_new(mem, json_integer((json_int_t)r->peak_mem[s]));
    json_object_set_new(j, "losses", losses);
    if (r->aux_losses) {  /* MoE: the load-balancing losses, apart from the language-model loss */
        json_t *aux = json_array();
        for (int k = 0; k < r->steps; k++) json_array_append_new(aux, json_real(r->aux_losses[k]));
        json_object_set_new(j, "aux_losses", aux);
    }
    json_object_set_new(j, "first_step", json_integer((json_int_t)r->first_step));
    if (o->eval_interval > 0) {
        json_t *val = json_array();
        for (int i = 0; i < r->n_val; i++)
            json_array_append_new(val, json_pack("{s:I,s:f}", "step", (json_int_t)r->val_steps[i], "loss", r->val_losses[i]));
        json_object_set_new(j, "val_losses", val);
    }
    json_object_set_new(j, "step_times_s", times);
    json_object_set_new(j, "step_time_s", json_real(r->step_time));
    json_object_set_new(j, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(j, "peak_memory_bytes", mem);
    json_t *st = json_array(); /* the state within it: weights, gradients, optimizer (merak sim's breakdown) */
    for (int s = 0; r->state_mem && s < o->ctx->plan.pp; s++)
        json_array_append_new(st, json_integer((json_int_t)r->state_mem[s]));
    json_object_set_new(j, "state_memory_bytes", st);
    json_object_set_new(j, "layout", json_pack("{s:i,s:i,s:i}", "dp", o->ctx->plan.dp, "pp", o->ctx->plan.pp, "tp", o->ctx->plan.tp));
    if (o->ctx->plan.cp > 1) json_object_set_new(json_object_get(j, "layout"), "cp", json_integer(o->ctx->plan.cp));
    if (o->ctx->plan.ep > 1) json_object_set_new(json_object_get(j, "layout"), "ep", json_integer(o->ctx->plan.ep));
    json_object_set_new(j, "schedule", json_string(mk_sched_kind_name(o->ctx->plan.schedule)));
    json_object_set_new(j, "model", json_string(o->ctx->plan.model.name));
    json_object_set_new(j, "global_batch", json_integer(o->ctx->plan.gbs));
    json_object_set_new(j, "zero", json_integer(o->ctx->plan.zero));
    /* what ran (issue 37): the GEMMs' operands, the layer outputs and what the layers keep for their
       backward in the plan's 16-bit type where the backend rounds them (gpt.h act16; the rest fp32),
       and the attention core materialised or fused */
    mk_dtype_t ran = o->gemm_dtype ? (mk_dtype_t)o->gemm_dtype : MK_DTYPE_FP32;
    json_object_set_new(j, "dtype", json_string(mk_dtype_name(ran)));
    if (o->gemm_dtype) run_json_precision(j, o, rb);
    if (o->loss_scaler.kind) { /* Megatron's loss scaler ran (fp16, or --loss-scale) */
        json_object_set_new(j, "loss_scale", json_real(r->loss_scale));
        json_object_set_new(j, "skipped_steps", json_integer((json_int_t)r->skipped_steps));
    }
    mk_attn_backend_t ab = o->ctx->plan.attention;
    const char *core = o->ctx->plan.cp > 1 ? "ring" : ab == MK_ATTN_FLASH || ab == MK_ATTN_FUSED ? "fused" : "unfused";
    json_object_set_new(j, "attention", json_string(core));
    if (o->data) json_object_set_new(j, "data", json_string(o->data));
    json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10));
    fputc('\n', stdout);
    json_decref(j);
}

/* The ranks MPI placed on this node (its shared-memory split), alike on
 * every rank: -1 when nodes hold different numbers (collective). */
static int node_ranks(void)
{
    MPI_Comm node;
    int n = 1, lo, hi;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    MPI_Allreduce(&n, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&n, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi ? lo : -1;
}

/* Parse and validate with stderr silenced on ranks other than 0. */
static int prepare(int argc, char **argv, int rank, int world, mk_args_t *a, mk_plan_ctx_t *ctx,
                   mk_exec_opts_t *o, const char **dump)
{
    int per_node = node_ranks();
    int saved = -1, rc;
    if (rank) {
        fflush(stderr);
        saved = dup(2);
        if (!freopen("/dev/null", "w", stderr)) saved = -1;
    }
    *dump = take_flag(&argc, argv, "--dump-grads");
    rc = dump_flag_left(argc, argv, *dump != NULL);
    if (rc == 0)
        rc = mk_args_parse(a, argc, argv, MK_OPTG_MODEL | MK_OPTG_LAYOUT | MK_OPTG_SCHED | MK_OPTG_SIM |
                           MK_OPTG_RUN | MK_OPTG_JSON, run_usage, &run_defaults);
    a->node_ranks = per_node;
    if (rc == 0 && mk_args_micro_batches(a)) rc = -1;
    if (rc == 0 && fill_opts(a, world, ctx, o) != 0) rc = -1;
    if (rank && saved >= 0) {
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
    }
    return rc;
}

int mk_cmd_run(int argc, char **argv)
{
    int rank = 0, world = 1, inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    mk_args_t a;
    mk_plan_ctx_t ctx;
    mk_exec_opts_t o;
    o.be = NULL;  /* freed on every path; prepare may fail before it is made */
    const char *dump = NULL;
    int rc = prepare(argc, argv, rank, world, &a, &ctx, &o, &dump);
    a.dump_grads = dump;
    if (rc == 0 && mk_args_check_outputs(&a, 1)) rc = -1, mk_plan_ctx_free(&ctx);
    if (rc) {
        mk_backend_free(o.be);
        MPI_Finalize();
        return rc < 0 ? MK_EXIT_USAGE : 0;
    }
    o.dump_grads = dump;
    char first[320], blas[256];
    if (!strcmp(o.be->name, "cpu")) { /* which kernels (issue 37), once the run is set up */
        mk_cli_blas_describe(blas, sizeof blas);
        snprintf(first, sizeof first, "merak run: the cpu backend on OpenBLAS, %s", blas);
        o.first_line = first;
    }
    mk_file_defer_signals(); /* from here a signal stops the executor at its next check */
    mk_exec_result_t res;
    MPI_Comm comm = MPI_COMM_WORLD;
    int trc = mk_exec_train(&o, &comm, &res);
    run_backend_t rb = {mk_exec_store16(o.be), !strcmp(o.be->name, "cpu")};
    mk_backend_free(o.be);  /* the executor has freed its buffers */
    o.be = NULL;
    mk_plan_ctx_free(&ctx); /* the graph goes; ctx.plan stays for print_json */
    if (rank == 0 && res.load_unverified)
        fprintf(stderr, "merak run: note: %s has no checksums (written by another tool?); its data was not verified\n",
                o.load);
    if (trc < 0 && res.abort_exit) {
        /* a peer stopped answering, or Ctrl-C / SIGTERM: the peers may be
           anywhere, and hydra reports an exit that follows a signal it
           forwarded as 0 about half the time, an MPI_Abort's code always */
        fprintf(stderr, "merak run: rank %d: %s\n", rank, mk_error_last());
        /* hydra stops forwarding a rank's output once an abort reaches
           it, so the lines written just before (the handler's "removed the
           unfinished file", this one) need a moment to pass the proxy;
           rank 0, the writer, aborts first, with its lines through */
        usleep(rank == 0 ? 100000 : 300000);
        MPI_Abort(MPI_COMM_WORLD, res.abort_exit);
    }
    if (trc < 0 && res.fail_exit) {
        /* every rank failed alike (bad checkpoint or data, NaN loss): one message */
        if (rank == 0) fprintf(stderr, "merak run: %s\n", mk_error_last());
        int code = res.fail_exit;
        mk_exec_result_free(&res);
        MPI_Finalize();
        return code;
    }
    if (trc < 0) {
        /* a failure past validation may leave peers inside a collective */
        fprintf(stderr, "merak run: rank %d: %s\n", rank, mk_error_last());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0 && a.json) print_json(&o, &res, rb);
    mk_exec_result_free(&res);
    MPI_Finalize();
    return 0;
}
