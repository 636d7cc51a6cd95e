// Class side files: the difficulty class of every token of a shard (a
// synthetic task's, docs/tasks.md), in a file beside it. Format (all
// little-endian; full description in docs/formats.md):
//
//   header   256 x int32 (1024 bytes)
//              [0] magic    20261202
//              [1] version  1
//              [2] number of tokens N (0 <= N < 2^31), the shard's
//              [3] number of classes C (1 <= C <= 255)
//              [4] bytes S of the names block
//              [5..255] 0
//   names    S bytes: C class names, each followed by '\n'; a name is 1 to
//            32 characters of [A-Za-z0-9_-], no two alike
//   ids      N x uint8: the class of token i, < C
//
// The file of shard "dir/x_val_000000.bin" is "dir/x_val_000000.cls". When
// every shard of a MultiShardTokens has one, their classes are attached to it
// (TokenSource::classes), so eval and study report per-class figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/tokens.h"

namespace ada {

inline constexpr int32_t kClassFileMagic = 20261202;
inline constexpr int32_t kClassFileVersion = 1;
inline constexpr size_t kClassFileHeaderBytes = 256 * sizeof(int32_t);
inline constexpr size_t kMaxClasses = 255;
inline constexpr size_t kMaxClassNameBytes = 32;

// "dir/x_train_000000.bin" -> "dir/x_train_000000.cls" (a path not ending in
// .bin gets ".cls" appended).
std::string class_file_for(const std::string& shard_path);

// Writes the classes as one side file, atomically ("<path>.tmp", then a
// rename). Throws ada::Error for bad names (empty, too long, odd characters,
// repeated), more than kMaxClasses classes, an id out of range, or a write
// failure.
void write_class_file(const std::string& path, const TokenClasses& classes);

// Reads and validates one side file. Throws ada::Error naming the file and
// the problem: not found, too short, wrong magic, unsupported version, bad
// counts, a malformed names block, a size that disagrees with the header, or
// a class id out of range (with its position).
TokenClasses read_class_file(const std::string& path);

// The classes of shards read as one sequence: nothing (empty names) when no
// shard has a side file; otherwise every shard must have one, with the
// shard's token count (sizes[i]) and the same class names as the first, and
// the ids are concatenated. Throws ada::Error naming the file otherwise.
TokenClasses read_shard_classes(const std::vector<std::string>& shard_paths, const std::vector<size_t>& sizes);

}  // namespace ada
