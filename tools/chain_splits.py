#!/usr/bin/env python3
"""Answer accuracy of the chain task by class and by the line's chain split.

The chain task (docs/tasks.md) splits each line's assignments into chains of
random lengths by default. An answer in a line whose other chain is short can
be found by elimination (recognise the short chain's root, answer with the
other root) instead of by following the answer's own chain; this script shows
how much of a model's accuracy comes from such lines.

    ./eval --ckpt RUN --batches 0 --seq 114 --per-token tok.csv
    python3 tools/chain_splits.py data/chains/chains_val_000000.bin tok.csv

Reads the validation shard (fused grammar, version-1 header) and eval's
per-token CSV (row r predicts token r + 1 of the shard: eval --batches 0
evaluates consecutive windows from the first token). Prints, per split (the
sorted chain lengths) and answer class, the accuracy, the mean passes (steps,
depths) and the number of answers.
"""
import collections
import csv
import struct
import sys

ROOT, LINK, LETTERS = 128, 198, 7  # src/text/chain_task.h: kFusedRoot, kFusedLink, kFusedMaxLetters


def main(shard, per_token):
    raw = open(shard, 'rb').read()
    magic, version, n = struct.unpack('<3i', raw[:12])
    if magic != 20240520 or version != 1:
        sys.exit(f'error: {shard} is not a version-1 token shard (magic {magic}, version {version})')
    toks = struct.unpack('<%dH' % n, raw[1024:1024 + 2 * n])
    rows = list(csv.DictReader(open(per_token)))
    acc = collections.defaultdict(lambda: [0, 0, 0.0])
    start = 0
    while start < len(toks):
        try:
            end = toks.index(ord('\n'), start)
        except ValueError:  # the last line has no newline
            end = len(toks)
        line = toks[start:end]
        parent = {}
        for t in line:
            if ROOT <= t < LINK:
                parent[(t - ROOT) // 10] = None
            elif LINK <= t < LINK + LETTERS * LETTERS:
                parent[(t - LINK) // LETTERS] = (t - LINK) % LETTERS
        def root(v):
            while parent[v] is not None:
                v = parent[v]
            return v
        split = tuple(sorted(collections.Counter(root(v) for v in parent).values()))
        for i, t in enumerate(line):
            if ord('0') <= t <= ord('9'):  # an answer digit, predicted at the row before it
                r = start + i - 1
                if 0 <= r < len(rows):
                    a = acc[(split, int(rows[r]['cls']))]
                    a[0] += int(rows[r]['correct'])
                    a[1] += 1
                    a[2] += float(rows[r]['passes'])
        start = end + 1
    print('split    class  accuracy   passes  answers')
    for (split, cls), (right, total, passes) in sorted(acc.items()):
        name = 'hop%d' % (cls - 2) if cls >= 3 else str(cls)
        print('%-8s %-6s %8.3f %8.2f %8d' % ('+'.join(map(str, split)), name, right / total, passes / total, total))


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
