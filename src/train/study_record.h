// A finished study run kept without its checkpoint: everything `study`
// aggregates (the headline figures and every evaluated token's NLL, passes,
// correctness, position and class), so a study can be continued in another
// session, on another machine, from files small enough to commit.
//
//   <run>/record.json   what the run was (spec, seed, every option that shapes
//                       it, validation tokens) and its headline figures
//   <run>/record.bin    "ADASREC1", uint64 n, then per token, each array
//                       whole: f64 nll[n], f64 passes[n], u8 correct[n],
//                       u64 position[n], i32 class[n] (little-endian)
//
// Written atomically (record.bin first, record.json last: a record counts
// only when record.json is there and names a record.bin of n tokens).
// docs/formats.md ("Study records") has the schema.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "train/options.h"
#include "train/study_results.h"

namespace ada {

// What a record must match to stand for a run of the present study.
struct StudyRecordKey {
  std::string spec;
  // The spec's label (method_spec.h). relabelled: the spec has a label= part,
  // and then a record made by any spec of that label stands for this one,
  // provided every option below matches; otherwise the record's spec must be
  // this spec.
  std::string label;
  bool relabelled = false;
  long long seed = 0;
  // Every training option that shapes the result (option_values() less
  // out, resume, init-from, threads and the logging and saving cadences).
  std::vector<std::pair<std::string, std::string>> options;
  // Options a record may hold with any value, because they do not shape a
  // run of this method: adaponder's --gate-bias for every other method (its
  // default changed from 4 to 0 after records of every method were made).
  std::vector<std::string> ignored;
};

// The key of a study's run trained with options o from method spec `spec`
// (as given in --methods, label= part included).
StudyRecordKey study_record_key(const std::string& spec, const TrainOptions& o);

// Throws unless a run was made with the key's options: `made` is what the
// run recorded (a record's options, or a checkpoint's option.* metadata) and
// `what` names it in the message. complete: every option of the key must be
// there (a record); otherwise one the run lacks is taken to be newer than the
// run and skipped (a checkpoint).
void check_made_with(const std::string& what, const std::vector<std::pair<std::string, std::string>>& made,
                     const StudyRecordKey& key, bool complete);

// Writes run (and key) into dir/record.bin and dir/record.json.
void save_study_record(const std::string& dir, const StudyRecordKey& key, const StudyRun& run);

// True when dir holds a record (record.json). Does not validate it.
bool has_study_record(const std::string& dir);

// Loads dir's record into *run (dir, seed, figures, per-token arrays).
// Throws naming the file and the field when the record is corrupt, or when it
// was made with another spec (or, for a relabelled spec, another label),
// seed or option than key (naming the first).
void load_study_record(const std::string& dir, const StudyRecordKey& key, StudyRun* run);

}  // namespace ada
