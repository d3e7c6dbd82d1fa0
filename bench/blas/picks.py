#!/usr/bin/env python3
"""bench/blas/picks.py FILES: read bench kernels outputs with BENCH_BLAS=1 lines
("  blas {m,n,k,ta,tb,epi,dtype,beta} index I T ms" after each matmul row, "matmuls: cuBLASLt V
on DEVICE (S SMs), ..." at the top) and print, per shape, the median time of each heuristic index
over the files, then the blas_picks[] entries for kernels/matmul.cu: the fastest index where it
is at least MARGIN (3%) faster than the heuristic's first choice over all files and faster in
every run (a run: the files named ...-rN.txt with the same N) as well, since one shape's time
moves by several percent from process to process."""
import re
import statistics
import sys

MARGIN = 0.97
times = {}   # key -> index -> [ms]
runs = {}    # key -> run -> index -> ms
labels = {}  # key -> row label
dev = None
for path in sys.argv[1:]:
    label = None
    run = re.search(r"-r(\d+)\.txt$", path)
    run = run.group(1) if run else path
    with open(path) as f:
        for line in f:
            m = re.match(r"matmuls: cuBLASLt (\d+) on (.*) \((\d+) SMs\)", line)
            if m:
                d = (m.group(2), int(m.group(3)), int(m.group(1)))
                if dev and dev != d:
                    sys.exit(f"{path}: {d} differs from {dev}")
                dev = d
                continue
            if line.startswith("matmul"):
                label = line[:34].strip()
                continue
            m = re.match(r"\s+blas (\{[-\d,]+\}) index (\d+) ([\d.]+) ms", line)
            if m and label:
                key = m.group(1)
                labels[key] = label
                times.setdefault(key, {}).setdefault(int(m.group(2)), []).append(float(m.group(3)))
                runs.setdefault(key, {}).setdefault(run, {})[int(m.group(2))] = float(m.group(3))
if not dev:
    sys.exit("no 'matmuls:' line in the inputs")
print(f"# {dev[0]}, {dev[1]} SMs, cuBLASLt {dev[2]}: median ms per heuristic index")
picks = []
for key in sorted(times, key=lambda k: labels[k]):
    med = {i: statistics.median(v) for i, v in times[key].items()}
    base = med.get(0)
    best = min(med, key=med.get)
    row = " ".join(f"{i}:{med[i]:.4f}" for i in sorted(med))
    gain = f"{best} is {100 * (1 - med[best] / base):.1f}% faster" if base and best != 0 else "0 fastest"
    print(f"# {labels[key]:34s} {key}  {row}  ({gain})")
    every = all(r.get(best, 1e30) < r.get(0, 0) for r in runs[key].values())
    if base and best != 0 and med[best] < MARGIN * base and every:
        f = key.strip("{}").split(",")
        picks.append(f'    /* {labels[key]}: {base:.3f} -> {med[best]:.3f} ms */\n'
                     f'    {{"{dev[0]}", {dev[1]}, {dev[2]}, {", ".join(f)}, {best}}},')
print("\n".join(picks) if picks else "# no pick beats the heuristic's first by 3%")
