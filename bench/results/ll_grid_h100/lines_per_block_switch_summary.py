import sys, re, statistics, collections
d = collections.defaultdict(list)
key = None
for line in open(sys.argv[1]):
    m = re.match(r'=== round (\d+) lpb (\d+) (\w+)', line)
    if m:
        key = (m.group(3), int(m.group(2)))
        continue
    f = line.split()
    if key and len(f) > 6 and f[2] == 'float':
        d[key + (int(f[0]),)].append(float(f[5]))
colls = sorted({k[0] for k in d})
for c in colls:
    sizes = sorted({k[2] for k in d if k[0] == c})
    print(c, 'size: lpb4096 / 2048 / 1024 (median of rounds, out-of-place us; min in brackets)')
    for s in sizes:
        row = []
        for l in (4096, 2048, 1024):
            v = d.get((c, l, s), [])
            row.append(f"{statistics.median(v):7.1f} ({min(v):6.1f})" if v else '   -   ')
        print(f"  {s:>8} " + ' '.join(row))
