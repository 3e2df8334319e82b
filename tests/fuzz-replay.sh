#!/bin/sh
# Replay the committed fuzz corpus (tests/fuzz/corpus/READER/) through each
# reader's harness (tests/fuzz/replay-READER): no input may crash, hang or
# run away with memory, reject-* inputs must be rejected and accept-*
# inputs accepted.  Every failing file is listed.
: "${top_srcdir:=.}" "${top_builddir:=.}"
st=0
for r in model cluster plan trace safetensors data hfdir; do
  "$top_builddir/tests/fuzz/replay-$r" "$top_srcdir/tests/fuzz/corpus/$r" || st=1
done
exit $st
