#!/usr/bin/env python3
"""Writes an invented but plausible results.json for showing the report page
(docs/img/report.png) before a real study exists. The numbers are made up: a
k-hop variable-chain passage ("a=7;b=a;?b=7") where adaptive methods spend
more passes on the answers of longer chains. Deterministic (seeded).

    python3 tests/report_example.py runs/report_example   # writes .../results.json
    ./report --study runs/report_example
"""
import json
import math
import os
import random
import sys

rng = random.Random(7)
CLASSES = ["trivial", "random", "hop1", "hop2", "hop3"]
SEEDS = [1337, 1338, 1339]

# The passage: statements "x=5;" (a fresh random digit), "y=x;" (copies), and
# queries "?y=5" whose answer digit needs as many hops as the chain is long.
tokens, classes = [], []
def emit(tok, cls):
    tokens.append(tok)
    classes.append(CLASSES.index(cls))
letters = "abcdefghijklmnopqrstuvwxyz"
while len(tokens) < 250:
    names = rng.sample(letters, 4)
    value = str(rng.randrange(10))
    emit(names[0], "trivial"); emit("=", "trivial"); emit(value, "random"); emit(";", "trivial")
    hops = rng.choice([1, 2, 3])
    for h in range(1, hops + 1):
        emit(" " + names[h], "trivial"); emit("=", "trivial"); emit(names[h - 1], "trivial"); emit(";", "trivial")
    emit(" ?", "trivial"); emit(names[hops], "trivial"); emit("=", "trivial")
    emit(value, "hop%d" % hops)
    emit("\n", "trivial")

# Per method: how the passes and the NLL depend on the class.
METHODS = [  # label, spec, method, passes by class (mean), loss, train flops scale, knob
    ("standard", "standard", "standard", [1, 1, 1, 1, 1], 0.742, 1.0, None),
    ("looped", "looped:loops=2", "looped", [3, 3, 3, 3, 3], 0.701, 3.0, None),
    ("ponder", "ponder:passes=3", "ponder", [3, 3, 3, 3, 3], 0.668, 3.05, None),
    ("adaponder", "adaponder:tau=1e-3", "adaponder", [1.2, 1.6, 1.9, 2.7, 3.6], 0.672, 3.1, "tau"),
    ("tah", "tah:depth=4", "tah", [1.05, 1.2, 1.5, 2.2, 3.1], 0.689, 1.9, "threshold"),
]
NLL_BY_CLASS = [0.02, 2.30, 0.25, 0.9, 1.7]
ACC_BY_CLASS = [0.99, 0.10, 0.93, 0.62, 0.31]
BASE_FLOPS = 3.9e6
TOKENS_PER_RUN = 2457600
VAL_TOKENS = 131072
CLASS_SHARE = [0.62, 0.08, 0.12, 0.10, 0.08]

def r3(x):
    return float("%.6g" % x)

methods, passage_methods = [], {}
for mi, (label, spec, method, passes, loss, tscale, knob) in enumerate(METHODS):
    adaptive = knob is not None
    gain = (mi / 4.0)  # how much the extra computation helps the hard classes
    runs = []
    for seed in SEEDS:
        noise = rng.gauss(0, 0.004)
        mean_passes = sum(p * s for p, s in zip(passes, CLASS_SHARE))
        hist = {}
        for k in range(1, 6):
            if adaptive:
                w = math.exp(-((k - mean_passes) ** 2) / 1.2)
            else:
                w = 1.0 if k == round(mean_passes) else 0.0
            hist[str(k)] = int(VAL_TOKENS * w)
        total = sum(hist.values())
        hist = {k: int(v * VAL_TOKENS / total) for k, v in hist.items()}
        per_class = {}
        for ci, c in enumerate(CLASSES):
            boost = gain * (0.35 if ci >= 3 else 0.1 if ci == 2 else 0)
            per_class[c] = {"tokens": int(VAL_TOKENS * CLASS_SHARE[ci]),
                            "accuracy": r3(min(0.999, ACC_BY_CLASS[ci] + boost + rng.gauss(0, 0.01))),
                            "nll": r3(max(0.01, NLL_BY_CLASS[ci] * (1 - 0.6 * boost) + rng.gauss(0, 0.01))),
                            "passes": r3(passes[ci] + (rng.gauss(0, 0.04) if adaptive else 0))}
        infer = BASE_FLOPS * mean_passes * (1 + rng.gauss(0, 0.01) if adaptive else 1)
        runs.append({"seed": seed, "dir": "runs/study/%s_s%d" % (label, seed), "val_loss": r3(loss + noise),
                     "accuracy": r3(0.71 + 0.02 * gain + rng.gauss(0, 0.003)), "passes": r3(mean_passes),
                     "train_flops": r3(6 * BASE_FLOPS * TOKENS_PER_RUN * tscale), "infer_flops": r3(infer),
                     "infer_other": r3(infer * 0.02), "infer_us": r3(180 * mean_passes * (1 + rng.gauss(0, 0.05))),
                     "train_seconds": r3(420 * tscale), "pass_hist": hist, "per_class": per_class})
    def stat(key):
        xs = [r[key] for r in runs]
        m = sum(xs) / len(xs)
        return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    keys = ["val_loss", "accuracy", "passes", "train_flops", "infer_flops", "infer_other", "infer_us"]
    mean = {k: r3(stat(k)[0]) for k in keys}
    std = {k: r3(stat(k)[1]) for k in keys}
    per_class = {}
    for c in CLASSES:
        entry = {"tokens": runs[0]["per_class"][c]["tokens"]}
        for f in ["accuracy", "nll", "passes"]:
            xs = [r["per_class"][c][f] for r in runs]
            m = sum(xs) / len(xs)
            entry[f] = [r3(m), r3(math.sqrt(sum((x - m) ** 2 for x in xs) / 2))]
        per_class[c] = entry
    bins = []
    for b in range(8):
        lo, hi = 0.5 * b, 0.5 * (b + 1)
        p = mean["passes"] if not adaptive else 1 + (max(passes) - 1) * (1 - math.exp(-0.5 * (lo + 0.25)))
        bins.append({"nll_lo": lo, "nll_hi": hi, "tokens": int(VAL_TOKENS * 3 * math.exp(-b * 0.6) / 2.2), "passes": r3(p)})
    entry = {"label": label, "spec": spec, "method": method, "runs": runs, "mean": mean, "std": std,
             "per_class": per_class, "passes_by_nll": bins}
    if knob:
        pts = []
        for j, v in enumerate([3e-4, 1e-3, 3e-3, 1e-2] if knob == "tau" else [0.3, 0.5, 0.7, 0.9]):
            f = 1.35 - 0.2 * j
            pts.append({"value": v, "val_loss": r3(mean["val_loss"] + 0.02 * (1 - f) ** 2 * 4 + 0.004 * j),
                        "accuracy": r3(mean["accuracy"] - 0.01 * j), "infer_flops": r3(mean["infer_flops"] * f),
                        "passes": r3(mean["passes"] * f)})
        entry["knob"] = {"name": knob, "points": pts}
    methods.append(entry)
    # The passage under this method.
    ps, nl = [], []
    for c in classes:
        p = passes[c]
        if adaptive:
            p = max(1, min(5, round(p + rng.gauss(0, 0.45))))
        ps.append(p)
        boost = gain * (0.35 if c >= 3 else 0.1 if c == 2 else 0)
        nl.append(r3(max(0.001, rng.expovariate(1 / max(0.01, NLL_BY_CLASS[c] * (1 - 0.6 * boost))))))
    passage_methods[label] = {"passes": ps, "nll": nl}

def pair(a, b, diff, se_t, se_s):
    se = math.sqrt(se_t ** 2 + se_s ** 2)
    return {"a": a, "b": b, "diff": diff, "se": r3(se), "se_tokens": se_t, "se_seeds": se_s, "tokens": VAL_TOKENS,
            "per_seed": [{"seed": s, "diff": r3(diff + rng.gauss(0, se_s)), "se": r3(se_t * math.sqrt(3))} for s in SEEDS]}

doc = {
    "schema": 1,
    "setup": {"command": "./study --data task:hops --config tiny --methods standard,looped,ponder,adaponder,tah --seeds 3",
              "date": "2026-12-01", "machine": "example (invented numbers, tests/report_example.py)",
              "data": "synthetic k-hop chains", "config": "tiny", "steps": 1200, "batch": 16, "seq": 128,
              "tokens_per_run": TOKENS_PER_RUN, "seeds": SEEDS, "val_tokens": VAL_TOKENS},
    "classes": CLASSES,
    "methods": methods,
    "pairs": [pair("ponder", "standard", -0.074, 0.0021, 0.0030), pair("adaponder", "ponder", 0.004, 0.0015, 0.0031),
              pair("tah", "looped", -0.012, 0.0018, 0.0029), pair("looped", "standard", -0.041, 0.0020, 0.0035)],
    "passage": {"tokens": tokens, "classes": classes, "methods": passage_methods},
}
out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(doc, f, indent=1)
print("wrote", os.path.join(out, "results.json"))
