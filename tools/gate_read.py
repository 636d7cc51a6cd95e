#!/usr/bin/env python3
"""Read AdaPonderLM's gates per token class by evaluating at raised thresholds.

A token stops after the first pass i whose gate s^i is below tau, so
evaluating one checkpoint with `--method-overrides tau=X` and counting, per
class of a synthetic task (docs/tasks.md), where its tokens stop says which
of their gates lie below X: "after pass 1" = s^1 < X; "after pass 2" =
s^1 >= X > s^2; and so on ("all" = no gate below X).

    tools/gate_read.py --taus 0.5,0.1,0.01,1e-3 runs/ap1340/ckpt_100 runs/ap1340/ckpt_125

prints, per checkpoint, threshold and class: tokens, the share of them that
stops after each pass, mean passes and accuracy (argmax = target) at that
threshold. Every token of the validation split is evaluated once
(`eval --batches 0`); eval must have been built (`make eval`).

The class x passes table is eval's "by passes" (its --json "by_passes"),
the table `study` writes as "Where each class stops"; this tool is a loop
of eval over checkpoints and thresholds.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def read_one(eval_bin, ckpt, tau, threads):
    with tempfile.TemporaryDirectory() as tmp:
        json_path = os.path.join(tmp, "t.json")
        cmd = [eval_bin, "--ckpt", ckpt, "--batches", "0", "--threads", str(threads),
               "--method-overrides", "tau=%s" % tau, "--json", json_path]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit("gate_read: %s failed:\n%s" % (" ".join(cmd), done.stdout))
        with open(json_path) as f:
            report = json.load(f)
    names = report.get("classes") or []
    if not names:
        sys.exit("gate_read: %s has no token classes (use a synthetic task's data)" % ckpt)
    # K+1 passes at most: halting has exit_1 .. exit_{K+1}
    max_passes = sum(1 for k in report.get("halting", {}) if k.startswith("exit_"))
    # per class: tokens, tokens per pass count, passes summed, correct summed
    counts = {name: [0, {}, 0, 0] for name in names}
    for cell in report["by_passes"]:
        c, p, n = counts[cell["class"]], cell["passes"], cell["tokens"]
        c[0] += n
        c[1][p] = n
        c[2] += p * n
        c[3] += cell["accuracy"] * n
    return names, [counts[name] for name in names], max_passes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpts", nargs="+", help="checkpoint directories (ckpt_<step>) or run directories")
    ap.add_argument("--taus", default="0.5,0.1,0.01,1e-3", help="thresholds, comma-separated")
    ap.add_argument("--eval", default="./eval", help="the eval program [./eval]")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    taus = [t for t in a.taus.split(",") if t]
    if not os.access(a.eval, os.X_OK):
        sys.exit("gate_read: no eval program at %s (build it: make eval)" % a.eval)
    for t in taus:
        try:
            ok = 0 <= float(t) < 1
        except ValueError:
            ok = False
        if not ok:
            sys.exit("gate_read: each tau must be a number in [0, 1) (got '%s')" % t)
    for ckpt in a.ckpts:
        for tau in taus:
            names, counts, P = read_one(a.eval, ckpt, tau, a.threads)
            if ckpt == a.ckpts[0] and tau == taus[0]:
                head = "%-48s %-7s %-8s %7s " % ("checkpoint", "tau", "class", "tokens")
                head += " ".join("%6s" % ("@%d" % i if i < P else "all") for i in range(1, P + 1))
                print(head + " %6s %6s" % ("passes", "acc"))
            for name, (n, by_pass, passes, correct) in zip(names, counts):
                if n == 0:
                    continue
                line = "%-48s %-7s %-8s %7d " % (ckpt[-48:], tau, name, n)
                line += " ".join("%6.3f" % (by_pass.get(i, 0) / n) for i in range(1, P + 1))
                print(line + " %6.2f %6.3f" % (passes / n, correct / n), flush=True)


if __name__ == "__main__":
    main()
