#!/bin/sh
# Bad input to the CLI and to JSON model descriptions: one line, exit 2.
. "$top_srcdir/tests/lib.sh"
M="$top_srcdir/tests/models"

expect_fail "no subcommand" "usage" -- "$MERAK"
expect_fail "unknown subcommand" "unknown subcommand 'frobnicate'" -- "$MERAK" frobnicate
expect_fail "unknown flag" "unknown option '--bogus'" -- "$MERAK" model --bogus
expect_fail "flag of another subcommand" "unknown option '--dp'" -- "$MERAK" model --dp 2
expect_fail "missing value" "needs a value" -- "$MERAK" model --tp
expect_fail "unknown preset" "unknown model 'gpt-99b'" -- "$MERAK" model --model gpt-99b
expect_fail "non-positive size" "--num-layers must be an integer >= 1" -- "$MERAK" model --num-layers 0
expect_fail "non-numeric size" "--hidden-size must be an integer" -- "$MERAK" model --hidden-size 12x
expect_fail "negative tp" "--tp must be an integer >= 1" -- "$MERAK" model --tp -2
expect_fail "heads not dividing hidden" "heads 5 does not divide --hidden-size 64" -- \
  "$MERAK" model --model gpt-tiny --num-attention-heads 5
expect_fail "tp not dividing heads" "tensor parallel size 3 does not divide the 4 attention heads" -- \
  "$MERAK" model --model gpt-tiny --tp 3
expect_fail "gbs not a multiple of mbs" "not a multiple of --mbs" -- "$MERAK" model --gbs 10 --mbs 4
expect_fail "unknown dtype" "unknown dtype 'fp4'" -- "$MERAK" model --dtype fp4
expect_fail "stray argument" "unexpected argument" -- "$MERAK" model extra
expect_fail "missing JSON file" "cannot read model description" -- "$MERAK" model --model "$M/none.json"
expect_fail "malformed JSON" "malformed JSON" -- "$MERAK" model --model "$M/bad-syntax.json"
expect_fail "missing field" "missing field 'seq_length'" -- "$MERAK" model --model "$M/missing-field.json"
expect_fail "wrong type" "field 'out' must be an integer" -- "$MERAK" model --model "$M/wrong-type.json"
expect_fail "unknown op" "unknown op 'conv2d'" -- "$MERAK" model --model "$M/unknown-op.json"
expect_fail "cycle" "cycle" -- "$MERAK" model --model "$M/cycle.json"
expect_fail "undefined input" "input 'nowhere' names no op" -- "$MERAK" model --model "$M/undefined-input.json"
expect_fail "width mismatch" "add of widths" -- "$MERAK" model --model "$M/width-mismatch.json"
expect_fail "unknown field" "unknown field 'hidden'" -- "$MERAK" model --model "$M/unknown-field.json"
finish
