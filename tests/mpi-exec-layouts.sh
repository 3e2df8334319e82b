#!/bin/sh
# gpt-tiny on 8 ranks: every (dp, pp, tp) with pp, tp in {1, 2, 4}, under
# 1f1b, merak and gpipe, recompute full and none, gives the one-rank losses
# (3 steps, 1e-5 relative) and step-1 gradients (per tensor, 1e-5); then
# every layout again under merak with a vocabulary of 300 (no multiple of
# 128: padded at every tp, the padding rows masked and never saved).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
make_reference
for layout in "8 1 1" "4 2 1" "4 1 2" "2 4 1" "2 2 2" "2 1 4" "1 4 2" "1 2 4"; do
  for sched in 1f1b merak gpipe; do
    for rec in full none; do
      # shellcheck disable=SC2086
      equiv $layout --schedule $sched --recompute $rec
    done
  done
done
RUN_COMMON="$RUN_COMMON --vocab-size 300"
make_reference
for layout in "8 1 1" "4 2 1" "4 1 2" "2 4 1" "2 2 2" "2 1 4" "1 4 2" "1 2 4"; do
  # shellcheck disable=SC2086
  equiv $layout --schedule merak
done
# GPT's learned positions per document (Megatron's --reset-position-ids, --reset-attention-mask on a Megatron
# dataset's documents): wpe rows restart at each document, forward and backward
"${PYTHON:-python3}" "$top_srcdir/tests/megatron_write.py" "$tmpdir/docs" 3 400 5 40
RUN_COMMON="$RUN_COMMON --data-path $tmpdir/docs --reset-position-ids --reset-attention-mask"
make_reference
equiv 1 2 2 --schedule 1f1b
finish
