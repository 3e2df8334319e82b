#!/bin/sh
# No output replaces an input or another output (issue 32): every output
# flag (--save, --trace, --save-plan, --dump-grads, profile --out, plot -o,
# standard output) is checked before any work against every input (--data,
# --load, --plan, --model and --cluster files, the traces a plot draws) and
# every other output by file identity, not spelling: ./ and .. spellings,
# symlinks and hard links are the same file.  A clash is one line naming
# both flags, exit 2, and nothing is written.  Resuming in place is allowed.
. "$top_srcdir/tests/lib.sh"
T=$tmpdir/w   # lib.sh's own files stay outside the folder watched
mkdir "$T" && cd "$T" || exit 1
mkdir ck a b
i=0; while [ $i -lt 300 ]; do printf 'the quick brown fox %d ' $i; i=$((i + 1)); done >d.txt
cp "$top_srcdir/traces/models/gpt-small.json" m.json
"$MERAK" plan --model gpt-tiny --gpus 1 --gbs 4 --dtype fp32 --save-plan p.json >/dev/null || exit 1
"$MERAK" sim --model gpt-tiny --gbs 4 --trace t.json >/dev/null 2>&1 || exit 1
ln d.txt hard.txt; ln -s d.txt sym.txt; ln -s ck link
for f in d.txt m.json p.json t.json; do cp "$f" "keep.$f"; done
state() { ls -R; cat d.txt m.json p.json t.json | cksum; }
before=$(state)
run() { timeout 20 "$MERAK" run "$@"; }
clash() { # clash DESC FLAG-A FLAG-B CMD...: refused naming both, nothing written
  desc=$1 fa=$2 fb=$3; shift 3
  expect_fail "$desc" "^merak [a-z]*: ($fa|$fb) .* and ($fa|$fb) .* are the same file" -- "$@"
}
clash "--save and --trace spelled ck/ and ./ck/" --save --trace run --steps 100000 --save ck/a.st --trace ./ck/a.st
clash "--save and --trace through a symlinked folder" --save --trace run --steps 100000 --save ck/a.st --trace link/a.st
clash "--save and --dump-grads via ck/../ck" --save --dump-grads run --steps 100000 --save ck/x.st --dump-grads ck/../ck/x.st
clash "--save over the --data file" --save --data run --steps 100000 --data d.txt --save d.txt
clash "--trace over the --data file" --trace --data run --steps 100000 --data d.txt --trace ./d.txt
clash "--trace over a hard link of the --data file" --trace --data run --steps 100000 --data d.txt --trace hard.txt
clash "--dump-grads over the file a --data symlink names" --dump-grads --data run --steps 100000 --data sym.txt --dump-grads d.txt
clash "--save over the --plan file" --save --plan run --steps 100000 --plan p.json --save "$T/p.json"
clash "sim --trace over its --plan file" --trace --plan "$MERAK" sim --plan p.json --trace p.json
clash "sim --trace over its --model file" --trace --model "$MERAK" sim --model m.json --trace ./m.json
clash "plan --save-plan over its --model file" --save-plan --model "$MERAK" plan --model m.json --gpus 2 --save-plan m.json
clash "plan --save-plan and --trace" --save-plan --trace "$MERAK" plan --model gpt-tiny --gpus 2 --save-plan a/x.json --trace a/x.json
clash "profile --out over its --model file" --out --model timeout 20 "$MERAK" profile --model m.json --out m.json
expect_fail "sim --json appended to its --plan file" "standard output and --plan .* are the same file" -- \
  sh -c '"$0" sim --plan p.json --json >>p.json' "$MERAK"
expect_fail "run's standard output on its --data file" "standard output and --data .* are the same file" -- \
  sh -c '"$0" run --steps 100000 --data d.txt >>hard.txt' "$MERAK"
if "$PYTHON" -c "import matplotlib" 2>/dev/null; then
  clash "plot -o over the trace it draws" -o "the trace" "$MERAK" plot timeline t.json -o ./t.json
  clash "plot --output= over the --overlay trace" -o --overlay "$MERAK" plot timeline t.json --overlay sym.txt --output=d.txt
fi
check "every input byte-identical, no file created" test "$before" = "$(state)"
for f in d.txt m.json p.json t.json; do check "$f unchanged" cmp -s "$f" "keep.$f"; done

# what stays allowed: resuming in place, the same name in other folders
expect_ok "resume in place (--load X --save ./X)" sh -c '"$0" run --steps 1 --save ck/r.st && "$0" run --steps 2 --load ck/r.st --save ./ck/r.st' "$MERAK"
expect_ok "the same name in two folders" run --steps 1 --save a/s --trace b/s
check "both written" test -s a/s -a -s b/s
finish
