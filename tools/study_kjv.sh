#!/usr/bin/env bash
# The corpus study kept as committed records (studies/kjv; docs/workflow.md,
# "Study records"): the shipped corpus, tiny, 600 steps x 16 x 128, whole
# validation split, the budget of the corpus rows of docs/claims.md (whose
# runs/study_kjv* folders were not kept). One stream of items "SPEC@SEED",
# each trained (or resumed, or reused from its record) with the study's fixed
# budget; two streams on two cores, one thread each, at low priority:
#
#   nohup nice -n 15 tools/study_kjv.sh ponderlm2@1337 pause@1337 > /dev/null 2>&1 &
#
# A matched policy (policy-hist=auto) gets its gated run (the spec less its
# policy options) listed first, whose gates' exit histogram it copies
# (tools/study_items.sh). The committed AdaPonderLM runs made before gate bias
# 0 became the default are items with gate-bias=4 and their old label, e.g.
# adaponder:gate-bias=4:label=adaponder@1337. Each item's log is
# $OUT/logs/<label>_s<seed>.log.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-studies/kjv}  # another study folder: OUT=studies/x tools/...
mkdir -p "$OUT/logs"
. tools/study_items.sh
for item in "$@"; do
  spec=${item%@*}; seed=${item##*@}
  methods=$(item_methods "$spec")
  label=$(item_label "$spec")
  ./study --steps 600 --threads 1 --save-every 200 --seeds "$seed" --methods "$methods" --out "$OUT" \
          > "$OUT/logs/${label}_s${seed}.log" 2>&1 || echo "FAILED $item" >> "$OUT/logs/failed.txt"
done
