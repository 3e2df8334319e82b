# Experiments and plots: reproducible scripts (not run by make check).
EXTRA_DIST += experiments/merak-paper/run.sh experiments/merak-paper/plot.py experiments/bench-plan.sh
