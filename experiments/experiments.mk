# Experiments and plots: reproducible scripts (not run by make check).
EXTRA_DIST += experiments/merak-paper/run.sh experiments/merak-paper/plot.py experiments/bench-plan.sh experiments/bench-trace.sh
# the committed plans (tests/plan-format.sh loads them)
EXTRA_DIST += \
	experiments/merak-paper/results/gpt-1.5b-deepspeed.plan.json \
	experiments/merak-paper/results/gpt-1.5b-megatron-sp.plan.json \
	experiments/merak-paper/results/gpt-1.5b-megatron.plan.json \
	experiments/merak-paper/results/gpt-1.5b-merak.plan.json \
	experiments/merak-paper/results/gpt-2.5b-deepspeed.plan.json \
	experiments/merak-paper/results/gpt-2.5b-megatron-sp.plan.json \
	experiments/merak-paper/results/gpt-2.5b-megatron.plan.json \
	experiments/merak-paper/results/gpt-2.5b-merak.plan.json \
	experiments/merak-paper/results/gpt-20b-deepspeed.plan.json \
	experiments/merak-paper/results/gpt-20b-megatron-sp.plan.json \
	experiments/merak-paper/results/gpt-20b-megatron.plan.json \
	experiments/merak-paper/results/gpt-20b-merak.plan.json \
	experiments/merak-paper/results/gpt-8.3b-deepspeed.plan.json \
	experiments/merak-paper/results/gpt-8.3b-megatron-sp.plan.json \
	experiments/merak-paper/results/gpt-8.3b-megatron.plan.json \
	experiments/merak-paper/results/gpt-8.3b-merak.plan.json
# Published measured runs (issue 15): the data, the replay and its
# committed figures; tests/published.sh is the MAPE regression check.
EXTRA_DIST += experiments/published/README.md experiments/published/run.sh experiments/published/replay.py experiments/published/breakdown.py \
	experiments/published/multi-node.json experiments/published/single-node.json \
	experiments/published/long-context.json experiments/published/torchtitan.json \
	experiments/published/nemo-summary.json \
	experiments/published/mt-nlg.json experiments/published/moe-modelzoo.json \
	experiments/published/megatron-h100.json \
	experiments/published/recorded.json tests/published.sh
TESTS += tests/published.sh
# Memory against measured peaks (issue 34): published peaks and merak run's;
# tests/memory-experiment.sh runs the published half.
EXTRA_DIST += experiments/memory/README.md experiments/memory/run.sh experiments/memory/memory.py \
	experiments/memory/published.json tests/memory-experiment.sh
TESTS += tests/memory-experiment.sh
