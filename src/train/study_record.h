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
  long long seed = 0;
  // Every training option that shapes the result (option_values() less
  // out, resume, init-from, threads and the logging and saving cadences).
  std::vector<std::pair<std::string, std::string>> options;
};

// The key of a study's run trained with options o from method spec `spec`.
StudyRecordKey study_record_key(const std::string& spec, const TrainOptions& o);

// Writes run (and key) into dir/record.bin and dir/record.json.
void save_study_record(const std::string& dir, const StudyRecordKey& key, const StudyRun& run);

// True when dir holds a record (record.json). Does not validate it.
bool has_study_record(const std::string& dir);

// Loads dir's record into *run (dir, seed, figures, per-token arrays).
// Throws naming the file and the field when the record is corrupt, or when it
// was made with another spec, seed or option than key (naming the first).
void load_study_record(const std::string& dir, const StudyRecordKey& key, StudyRun* run);

}  // namespace ada
