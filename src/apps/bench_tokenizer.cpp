// bench_tokenizer: encoding and training speed of the tokenizers, on the
// corpus and on long words (the worst case of BPE merging, issue 14).
//   ./bench_tokenizer [--data DIR] [--words 100000,400000,1000000]
// DIR holds kjv.txt, kjv_bpe4096.txt and gpt2/; --words lists the long-word
// lengths to encode and train on.
// A long word is the letters of kjv.txt with everything else removed, so it
// is one pre-tokenizer chunk of realistic letter pairs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/common.h"
#include "text/bpe.h"
#include "text/dataset.h"
#include "text/tokenizer.h"

using namespace ada;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string letters_only(const std::string& text, size_t n) {
  std::string out;
  for (char c : text) {
    if (out.size() == n) break;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) out += c;
  }
  check(out.size() == n, "kjv.txt has fewer than " + std::to_string(n) + " letters");
  return out;
}

void time_encode(const Tokenizer& tok, const std::string& label, const std::string& text) {
  const auto t0 = Clock::now();
  const auto ids = tok.encode(text);
  const double s = seconds_since(t0);
  std::printf("  %-8s encode %-26s %9zu bytes -> %8zu tokens  %8.3f s\n", tok.name().c_str(), label.c_str(),
              text.size(), ids.size(), s);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure shows as soon as it is measured
  std::string dir = "data";
  std::vector<size_t> words = {100000, 400000, 1000000};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--words" && i + 1 < argc) {
      words.clear();
      for (const char* p = argv[++i]; *p;) {
        char* end = nullptr;
        words.push_back(std::strtoull(p, &end, 10));
        if (end == p || words.back() == 0) {
          std::fprintf(stderr, "--words takes positive integers separated by commas\n");
          return 2;
        }
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--words N,N,...]\n", argv[0]);
      return 2;
    }
  }
  try {
    const std::string kjv = read_text_file(dir + "/kjv.txt");
    auto gpt2 = load_tokenizer(dir + "/gpt2");
    auto bpe = load_tokenizer(dir + "/kjv_bpe4096.txt");
    std::printf("encoding\n");
    for (const Tokenizer* tok : {gpt2.get(), bpe.get()}) {
      time_encode(*tok, "kjv.txt", kjv);
      for (size_t n : words) {
        time_encode(*tok, "one word of " + std::to_string(n / 1000) + "k letters", letters_only(kjv, n));
      }
    }
    std::printf("training (train_bpe, 4096 tokens)\n");
    std::vector<size_t> train_sizes = {0};  // 0: the corpus itself
    train_sizes.insert(train_sizes.end(), words.begin(), words.end());
    for (size_t n : train_sizes) {
      const std::string text = n == 0 ? kjv : letters_only(kjv, n);
      const auto t0 = Clock::now();
      const auto merges = train_bpe(text, 4096);
      std::printf("  %-35s %9zu bytes -> %5zu merges  %8.3f s\n",
                  n == 0 ? "kjv.txt" : ("one word of " + std::to_string(n / 1000) + "k letters").c_str(),
                  text.size(), merges.size(), seconds_since(t0));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
