// Settings every test of build/run_tests runs under, made before main():
//   ADA_ARENA_POISON=1   the step arena fills what a scratch scope releases
//                        with 0xFF (NaN), so a buffer read after its scope
//                        ended fails the gradient checks and the CPU/GPU
//                        agreement tests instead of reading stale values
//                        (src/backend/arena.h). Programs the tests start
//                        (./train_cpu, ./study, ...) inherit it.
//   ADA_CLASSIFIER_CHUNK_ROWS=5   the fused classifier (methods/fused_classifier.h)
//                        works on 5 rows at a time instead of ~667 at the
//                        70m vocabulary, so every gradient check, precision
//                        test and CPU/GPU step comparison of the methods that
//                        use it crosses several chunks, a ragged last one
//                        included.
// An explicit setting in the environment wins (setenv's last argument 0).
#include <cstdlib>

namespace {
const int kArenaPoison = setenv("ADA_ARENA_POISON", "1", 0);
const int kClassifierChunk = setenv("ADA_CLASSIFIER_CHUNK_ROWS", "5", 0);
}  // namespace
