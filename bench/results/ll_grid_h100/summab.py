import sys, re, statistics, collections
d = collections.defaultdict(list)
key = None
for line in open(sys.argv[1]):
    m = re.match(r'=== round (\d+) side (\w+) np (\d+) (\w+)', line)
    if m:
        key = (m.group(4), int(m.group(3)), m.group(2))
        continue
    f = line.split()
    if key and len(f) > 6 and f[2] == 'float':
        d[key + (int(f[0]),)].append(float(f[5]))
for c, np in sorted({(k[0], k[1]) for k in d}):
    print(f"{c}, {np} processes: size  old / new  (median of rounds, out-of-place us; each round in brackets)")
    for s in sorted({k[3] for k in d if k[0] == c and k[1] == np}):
        o, n = d.get((c, np, 'old', s), []), d.get((c, np, 'new', s), [])
        if o and n:
            print(f"  {s:>8} {statistics.median(o):7.1f} / {statistics.median(n):7.1f}  ({', '.join(f'{x:.1f}' for x in o)} | {', '.join(f'{x:.1f}' for x in n)})")
