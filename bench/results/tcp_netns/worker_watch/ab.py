#!/usr/bin/env python3
"""Alternating runs between the namespace hosts of netns_up.sh: Lanes variants and Open MPI.

usage: ab.py HOSTS COLL MIN MAX ROUNDS NAME=SPEC...
  COLL: all_reduce | all_gather; sizes MIN..MAX by factors of 4, 20 timed calls a run.
  SPEC: 'mpi' (Open MPI, ob1 + tcp btl), or comma-separated VAR=value settings for a Lanes
  run; BIN=dir picks the build's bin folder (default $BIN or build/release/bin).
Each round runs every variant once, the order turned by one each round; prints the
median out-of-place time per size, then each other variant's speed over the first's
(the first's time over its own).
"""
import collections, os, statistics, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
hosts, coll, lo, hi, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
variants = [v.split('=', 1) for v in sys.argv[6:]]
default_bin = os.environ.get('BIN', 'build/release/bin')
sweep = ['-b', lo, '-e', hi, '-f', '4', '-n', '20', '-w', '3']
times = collections.defaultdict(lambda: collections.defaultdict(list))
for r in range(rounds):
    k = r % len(variants)
    for name, spec in variants[k:] + variants[:k]:
        env = dict(os.environ)
        if spec == 'mpi':
            env.update(PMIX_MCA_ptl_tcp_remote_connections='1', PMIX_MCA_ptl_tcp_if_include='10.77.0.0/24')
            cmd = ['ip', 'netns', 'exec', 'lanes-xbr', 'mpirun', '--allow-run-as-root', '--oversubscribe',
                   '-np', hosts, '--mca', 'pml', 'ob1', '--mca', 'btl', 'tcp,self', '--mca',
                   'btl_tcp_if_include', '10.77.0.0/24', f'{here}/rank.sh',
                   f'{default_bin}/mpi_{coll.replace("_", "")}_perf'] + sweep
        else:
            env.update(kv.split('=', 1) for kv in spec.split(',') if kv)
            b = env.pop('BIN', default_bin)
            env.update(LANES_SOCKET_IFNAME='vx', LANES_ROOT_ADDR='10.77.0.1:41000')
            cmd = [f'{b}/lanes-run', '-n', hosts, f'{here}/rank.sh', f'{b}/lanes_{coll}_perf',
                   '--memory', 'host', '-c', '0'] + sweep
        out = subprocess.run(cmd, env=env, capture_output=True, text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) > 6 and f[0].isdigit():
                times[int(f[0])][name].append(float(f[5]))
names = [n for n, _ in variants]
print(f"# {hosts} hosts, {coll}, {rounds} rounds; median out-of-place us; "
      f"then {names[0]}'s time over each other's (above 1: faster than {names[0]})")
print('size ' + ' '.join(f'{n:>10}' for n in names))
for s in sorted(times):
    med = [statistics.median(times[s][n]) if times[s][n] else float('nan') for n in names]
    print(f'{s >> 10:>5}K ' + ' '.join(f'{m:10.1f}' for m in med) + '  ' +
          ' '.join(f'{med[0] / m:5.2f}' for m in med[1:]))
