#!/usr/bin/env bash
# The equal-split chain study (docs/tasks.md, "The methods' study on
# equal-split data"), one stream of items: each item "SPEC@SEED" trains (or
# resumes, or reuses) one run in studies/chains_eq with the study's fixed budget. Two streams on
# two cores, one thread each, at low priority:
#
#   nohup nice -n 15 tools/study_chains_eq.sh standard@1338 ponder@1338 > /dev/null 2>&1 &
#
# Post-training specs (init-from=@standard) get standard listed first, so
# study reuses (or trains) that seed's standard run; a matched policy
# (policy-hist=auto) gets its gated run (the spec less its policy options)
# listed first, whose gates' exit histogram it copies (tools/study_items.sh).
# The committed AdaPonderLM runs made before gate bias 0 became the default
# are items with gate-bias=4 and their old label, e.g.
# adaponder:gate-bias=4:label=adaponder@1341. Each item's log is
# $OUT/logs/<label>_s<seed>.log.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-studies/chains_eq}  # another study folder: OUT=studies/x tools/...
mkdir -p "$OUT/logs"
. tools/study_items.sh
for item in "$@"; do
  spec=${item%@*}; seed=${item##*@}
  methods=$(item_methods "$spec")
  label=$(item_label "$spec")
  ./study --data data/chains_equal --vocab 256 --tokenizer bytes --seq 114 --steps 1500 --threads 1 \
          --save-every 250 --seeds "$seed" --methods "$methods" --out "$OUT" \
          > "$OUT/logs/${label}_s${seed}.log" 2>&1 || echo "FAILED $item" >> "$OUT/logs/failed.txt"
done
