# Sourced by tools/study_kjv.sh and tools/study_chains_eq.sh: what one study
# item "SPEC@SEED" trains, and its label.
#
#   item_methods SPEC   the --methods that train SPEC: a post-training spec
#                       (init-from=@standard) gets standard first, so study
#                       reuses (or trains) that seed's standard run; a matched
#                       policy (policy-hist=auto) gets its gated run first (the
#                       spec less its policy options), whose gates' exit
#                       histogram it copies. A relabelled matched spec
#                       (label=X_policy_...) gets its gated run relabelled X.
#   item_label SPEC     its label= part, or the spec with ':', '=' and '/' as '_'
#                       (src/train/method_spec.h)

item_label() {
  local part
  for part in $(echo "$1" | tr ':' ' '); do
    case $part in label=*) echo "${part#label=}"; return ;; esac
  done
  echo "$1" | tr ':=/' '___'
}

item_methods() {
  local spec=$1 gated label
  case $spec in
    *init-from=@standard*) echo "standard,$spec" ;;
    *policy-hist=auto*|*policy-passes=auto*)
      # adaponder:gate-bias=0 for adaponder:gate-bias=0:policy=matched-gated:policy-hist=auto
      gated=$(echo "$spec" | tr ':' '\n' | grep -v -e '^policy' -e '^label=' | paste -sd: -)
      case $spec in
        *:label=*) label=$(item_label "$spec"); gated="$gated:label=${label%%_policy_*}" ;;
      esac
      echo "$gated,$spec" ;;
    *) echo "$spec" ;;
  esac
}
