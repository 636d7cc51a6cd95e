#!/usr/bin/env python3
"""A deliberately simple, independent reference of GPT-2 encoding, used to
produce the expected ids of tests/test_gpt2_tokenizer.cpp.

    python3 tests/gpt2_reference.py [data/gpt2]            # print C++ test cases
    python3 tests/gpt2_reference.py [data/gpt2] --self-check
        # also compare the hand-written pre-tokenizer with the third-party
        # `regex` module running GPT-2's real pattern (only if it is installed)

It follows OpenAI's encoder.py step by step -- bytes_to_unicode, string-level
BPE with ranks, merging every occurrence of the best bigram -- but replaces
the `regex` pattern (Python's `re` has no \\p{L}) with a small scanner that
tries the pattern's alternatives in order, with explicit backtracking for
\\s+(?!\\S). Character classes come from unicodedata (categories L*, N*), and
whitespace is Unicode White_Space: str.isspace() minus U+001C..U+001F, which
isspace() counts but regex's \\s does not.

Written independently of the C++ tokenizer: no shared code, tables or logic.
"""
import json
import os
import sys
import unicodedata

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def is_L(ch):
    return unicodedata.category(ch)[0] == "L"


def is_N(ch):
    return unicodedata.category(ch)[0] == "N"


def is_S(ch):  # regex \s
    return ch.isspace() and ch not in "\x1c\x1d\x1e\x1f"


def is_other(ch):
    return not (is_L(ch) or is_N(ch) or is_S(ch))


# Each alternative: (text, position) -> length of its match there, or None.
def contraction(t, i):
    for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
        if t.startswith("'" + suffix, i):
            return 1 + len(suffix)
    return None


def opt_space_then_run(pred):
    def alt(t, i):
        j = i + 1 if t.startswith(" ", i) else i
        for start in ([j, i] if j != i else [i]):  # greedy ' ?', then without it
            k = start
            while k < len(t) and pred(t[k]):
                k += 1
            if k > start:
                return k - i
        return None
    return alt


def spaces_not_followed_by_nonspace(t, i):
    k = i
    while k < len(t) and is_S(t[k]):
        k += 1
    for end in range(k, i, -1):  # backtrack from the longest run
        if end == len(t) or is_S(t[end]):
            return end - i
    return None


def spaces(t, i):
    k = i
    while k < len(t) and is_S(t[k]):
        k += 1
    return (k - i) or None


ALTERNATIVES = [contraction, opt_space_then_run(is_L), opt_space_then_run(is_N),
                opt_space_then_run(is_other), spaces_not_followed_by_nonspace, spaces]


def pretokenize(text):
    out, i = [], 0
    while i < len(text):
        for alt in ALTERNATIVES:
            n = alt(text, i)
            if n:
                out.append(text[i:i + n])
                i += n
                break
        else:
            raise AssertionError("no alternative matched at %d" % i)
    return out


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Gpt2:
    def __init__(self, folder):
        with open(os.path.join(folder, "encoder.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(os.path.join(folder, "vocab.bpe"), encoding="utf-8") as f:
            lines = f.read().split("\n")[1:]
        merges = [tuple(l.split()) for l in lines if l]
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()

    def bpe(self, word):
        word = list(word)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return word

    def encode(self, text):
        ids = []
        for piece in pretokenize(text):
            mapped = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            ids.extend(self.encoder[tok] for tok in self.bpe(mapped))
        return ids


# The test strings. Each exercises a rule of the pattern; keep them to
# characters whose category is stable across Unicode versions.
CASES = [
    "Hello world",
    "Hello, world! How's it going? I'm fine; we'll see, they've done, you'd think, we're here.",
    "don't DON'T 'S 'twas rock'n'roll '' ''s x's ?'s",
    "  leading spaces and trailing   ",
    "a  b   c    d",
    "line1\nline2\n\nline3\n\n\n  indented\n",
    "\t\ttabs\tand\r\nCRLF \n\n",
    "Numbers: 3.14159, 1,000,000 and 2024-05-20; 12345678901234567890",
    "½ Ⅻ ٣ ² 10½",
    "naïve café résumé Ωmega Straße Москва",
    "中文字符测试 日本語のテキスト 한국어",
    "emoji 😀👍🏽 and flags 🇺🇸! family 👨‍👩‍👧",
    "mixed: hello123world 123abc ...!!! ??? --- *** (parens) [brackets] {braces}",
    "<|endoftext|>",
    "   ",
    "\n",
    " ",
    "x \u00a0y\u3000z \u2003 w",
    "e\u0301 decomposed \u200b zero width",
    "def f(x):\n    return x**2  # comment\n",
    "nul\x00byte\x01\x7f",
    "  2 And the earth was without form, and void;",
]


def cpp_literal(s):
    # Octal escapes (always 3 digits) cannot run into the following character.
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c == '"' or c == "\\":
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append("\\%03o" % b)
    return '"' + "".join(out) + '"'


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    folder = args[0] if args else "data/gpt2"
    tok = Gpt2(folder)
    if "--self-check" in sys.argv:
        try:
            import regex
        except ImportError:
            print("regex module not installed; skipping self-check", file=sys.stderr)
        else:
            pat = regex.compile(PATTERN)
            for s in CASES:
                assert pat.findall(s) == pretokenize(s), s
            print("self-check: pre-tokenizer agrees with regex on all cases", file=sys.stderr)
    for s in CASES:
        ids = tok.encode(s)
        print("    {std::string(%s, %d), {%s}}," % (cpp_literal(s), len(s.encode("utf-8")),
                                                 ", ".join(map(str, ids))))


if __name__ == "__main__":
    main()
