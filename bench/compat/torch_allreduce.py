#!/usr/bin/env python3
"""torch.distributed.all_reduce through Lanes' libnccl.so.2, for users' reference.

Starts N processes on one GPU (NCCL itself refuses several ranks per GPU), each
with the layer preloaded, and times all_reduce (float32, sum, in place) at the
given sizes: the mean over --iters calls after --warmup, with the stream
synchronised once around each timed batch, as nccl-tests does.

  python3 bench/compat/torch_allreduce.py --lib build/release/lib/libnccl.so.2 \
      --nprocs 2 --sizes 8,268435456
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(args):
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=args.nprocs)
    for size in args.sizes:
        n = max(1, size // 4)
        t = torch.ones(n, dtype=torch.float32, device="cuda")
        for _ in range(args.warmup):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        us = (time.perf_counter() - start) / args.iters * 1e6
        t.fill_(1.0)
        dist.all_reduce(t)
        ok = bool(torch.all(t == float(args.nprocs)).item())
        if rank == 0:
            print(f"torch all_reduce {n * 4:>12} B  {args.nprocs} procs  {us:10.2f} us  "
                  f"algbw {n * 4 / us / 1e3:8.2f} GB/s  {'ok' if ok else 'WRONG'}", flush=True)
        if not ok:
            sys.exit(1)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--sizes", default="8,268435456", help="bytes, comma separated")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--worker", action="store_true")
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        return worker(args)
    lib = os.path.abspath(args.lib)
    port = free_port()
    procs = []
    for r in range(args.nprocs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nprocs), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LD_PRELOAD=lib,
                   PYTHONUNBUFFERED="1")
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker"] + sys.argv[1:],
                                      env=env))
    rc = 0
    for pr in procs:
        rc |= pr.wait(timeout=900)
    return rc


if __name__ == "__main__":
    sys.exit(main())
