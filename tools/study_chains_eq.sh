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
# listed first, whose gates' exit histogram it copies. Each item's log is
# $OUT/logs/<label>_s<seed>.log.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-studies/chains_eq}  # another study folder: OUT=studies/x tools/...
mkdir -p "$OUT/logs"
for item in "$@"; do
  spec=${item%@*}; seed=${item##*@}
  methods=$spec
  case $spec in
    *init-from=@standard*) methods="standard,$spec" ;;
    # its own gated run: the spec less its policy options (adaponder:gate-bias=0
    # for adaponder:gate-bias=0:policy=matched-gated:policy-hist=auto)
    *policy-hist=auto*|*policy-passes=auto*) methods="$(echo "$spec" | tr ':' '\n' | grep -v '^policy' | paste -sd: -),$spec" ;;
  esac
  label=$(echo "$spec" | tr ':=/' '___')
  ./study --data data/chains_equal --vocab 256 --tokenizer bytes --seq 114 --steps 1500 --threads 1 \
          --save-every 250 --seeds "$seed" --methods "$methods" --out "$OUT" \
          > "$OUT/logs/${label}_s${seed}.log" 2>&1 || echo "FAILED $item" >> "$OUT/logs/failed.txt"
done
