// Method specs as compare and study take them: `name[:flag=value]...`, and
// the names their runs go by.
//
//   adaponder:tau=1e-3                  label adaponder_tau_1e-3
//   adaponder:gate-bias=4:label=adaponder
//                                       label adaponder: the runs recorded
//                                       under that name before gate bias 0
//                                       became the default
//
// A label names a run's folder (runs/<label>_s<seed>), its row in the
// tables, and the method in --pairs, --knob and init-from=@LABEL. By default
// it is the spec with ':', '=' and '/' turned into '_'. A `label=NAME` part
// chooses it instead, so that when a default changes, a study's committed
// records keep their folders: the spec spells out the old value and keeps
// the old name. Nothing else is relaxed: a record stands for a spec only if
// every training option matches (train/study_record.h).
#pragma once
#include <string>
#include <vector>

namespace ada {

// s cut at each sep; empty pieces dropped.
std::vector<std::string> split_list(const std::string& s, char sep);

// The spec as a file name: ':', '=' and '/' become '_' ("adaponder:tau=1e-3"
// -> "adaponder_tau_1e-3").
std::string spec_label(const std::string& spec);

// A spec with its optional `label=NAME` part taken out.
struct LabelledSpec {
  std::string spec;         // the spec without the label part (what options_for_spec reads)
  std::string label;        // NAME, or spec_label(spec)
  bool relabelled = false;  // a label= part was given
};
// Throws when the label part is given twice, is empty, or is not a plain
// file name (letters, digits, '_', '-', '.', '@'; not "." or "..").
LabelledSpec labelled_spec(const std::string& spec);

}  // namespace ada
