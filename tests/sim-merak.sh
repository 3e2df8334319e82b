#!/bin/sh
# Merak's runtime techniques on the paper's setting: rtx3090-pcie, GPT-8.3B,
# 64 GPUs (dp 2, pp 8, tp 4).  `merak` with stage-aware:0.8 beats 1f1b with
# full recompute, and its trace shows recompute moved off the critical path:
# R runs ahead of the gradient on early stages, and the last stage's
# backwards (on the critical path) no longer include a recompute.
. "${top_srcdir:-.}/tests/lib.sh"
L="--cluster rtx3090-pcie --model gpt-8.3b --dp 2 --pp 8 --tp 4 --gbs 128"
expect_ok "1f1b full" $MERAK sim $L --schedule 1f1b --recompute full --json --trace "$tmpdir/a.json"
cp "$tmpdir/out" "$tmpdir/a.out"
expect_ok "merak stage-aware:0.8" $MERAK sim $L --schedule merak --recompute stage-aware:0.8 --json --trace "$tmpdir/b.json"
cp "$tmpdir/out" "$tmpdir/b.out"
check "merak is faster, R off the critical path" "$PYTHON" -c "
import json
a = json.load(open('$tmpdir/a.out')); b = json.load(open('$tmpdir/b.out'))
print('1f1b %.3f s, merak %.3f s, speed-up %.3f' % (a['step_time_s'], b['step_time_s'], a['step_time_s'] / b['step_time_s']))
assert b['step_time_s'] < a['step_time_s']
def ev(path):
    return [e for e in json.load(open(path))['traceEvents'] if e['ph'] == 'X' and e['tid'] == 0]
ta, tb = ev('$tmpdir/a.json'), ev('$tmpdir/b.json')
last = 7
rs = [e for e in tb if e['name'][0] == 'R' and e['name'][1].isdigit()]
assert rs and all(e['args']['stage'] < last for e in rs), 'R runs ahead on early stages only'
assert not [e for e in ta if e['name'][0] == 'R' and e['name'][1].isdigit()], '1f1b has no R'
def bdur(t, st):
    d = [e['dur'] for e in t if e['args']['stage'] == st and e['name'][0] == 'B' and e['name'][1].isdigit()]
    return sum(d) / len(d)
print('last-stage B: 1f1b %.1f us, merak %.1f us' % (bdur(ta, last), bdur(tb, last)))
assert bdur(tb, last) < 0.85 * bdur(ta, last), 'last stage backward without recompute'
"
finish
