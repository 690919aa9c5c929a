#!/usr/bin/env python3
"""PyTorch's NCCL backend running on Lanes' drop-in libnccl.so.2.

usage: torch_nccl_test.py --lib BUILD/lib/libnccl.so.2 --nprocs N [--log-dir DIR]

Starts N worker processes of this script, each with LD_PRELOAD=<lib>, all on
cuda:0 (several ranks on one GPU, which NCCL itself refuses), and checks
torch.distributed's "nccl" backend on them: all_reduce, broadcast, reduce,
all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single (even and
uneven splits), batch_isend_irecv, send/recv, barrier and subgroups in
float32, bfloat16, float16 and int64 against CPU references, then a small
DistributedDataParallel training run against the same model trained in one
process. Finally it proves that Lanes served PyTorch: every worker logged
Lanes' per-communicator INFO line, and in every worker each nccl* symbol
that libtorch_cuda.so imports resolves to the preloaded library.

Exit status: 0 when every check passed in every worker, 77 (CTest's skip code)
when torch cannot be imported or sees no CUDA device, 1 otherwise.

libtorch_cuda.so needs libnccl.so.2, found through an RPATH in the NCCL
wheel PyTorch ships with; a preloaded library whose SONAME is libnccl.so.2
satisfies that need, and being first in the global scope it also wins every
symbol lookup. torch/__init__.py still maps its own copy by path (it preloads
the CUDA wheels' libraries), without exporting it, so "mapped" does not mean
"used": hence the symbol check rather than a check of /proc/self/maps. The
workers are fresh processes with LD_PRELOAD in their environment from the
start, not torch.multiprocessing children of a parent that has loaded torch.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import zlib

SKIP_EXIT = 77
RESULT_TAG = "TORCH_NCCL_RESULT "

# Worker exit codes: some check failed (the ranks stayed in step), or a check
# raised and the worker stopped at once (its peers may be stuck in a
# collective it will never join, so it does not try to tear down cleanly).
WORKER_FAILED = 1
WORKER_ABORTED = 2

# Sizes in elements: one, an odd thousand and an odd size above 1 Mi, so no
# implementation can rely on aligned or even lengths.
SIZES = (1, 1023, (1 << 20) + 3)
LARGE_NUMEL = 16 << 20  # the 64 MiB float32 all_reduce
SUBGROUP_NUMEL = 4099

# Inputs are integers in [-VALUE_RANGE, VALUE_RANGE]. Sums over up to
# MAX_PROCS ranks, also multiplied by PREMUL_FACTOR, stay below 256 in
# magnitude, which bfloat16 (8 significant bits) and float16 represent
# exactly; so every SUM, MAX, PREMUL_SUM and data movement result is exact in
# every dtype and compared with tolerance 0.
VALUE_RANGE = 7
PREMUL_FACTOR = 2.0
MAX_PROCS = 16
# Written to output buffers before a collective, outside the input range, so
# a buffer the collective left untouched (or a stale allocation that happens
# to hold the right values) cannot pass.
SENTINEL = 99

DTYPE_NAMES = ("float32", "bfloat16", "float16", "int64")
# Float types only: torch refuses PREMUL_SUM for integers, and an integer AVG
# (truncating division) is not what any PyTorch code relies on.
FLOAT_ONLY_OPS = ("avg", "premul_sum")

DDP_STEPS = 20
DDP_PER_RANK_BATCH = 16
DDP_LR = 0.1
DDP_MODEL_SEED = 1234
DDP_DATA_SEED = 4321
DDP_LOSS_RTOL = 1e-4
DDP_LOSS_ATOL = 1e-6
DDP_PARAM_RTOL = 1e-4
DDP_PARAM_ATOL = 1e-5

# What the workers run collectives on; module-level so a test of this script
# can run the same plan elsewhere.
BACKEND_UNDER_TEST = "nccl"
WORKER_SCRIPT = os.path.abspath(__file__)

# A Lanes log line: "host:pid:rank [lanes] ..." (rank is "-" outside a
# communicator).
LANES_LINE_RE = re.compile(r":(\d+):(?:\d+|-) \[lanes\]")
LANES_LOG_NAME_RE = re.compile(r"lanes\.(\d+)\.log$")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# --------------------------------------------------------------------------
# Parent: start the workers, wait for them, check the logs.
# --------------------------------------------------------------------------


def torch_skip_reason(nprocs: int, reference_nccl: bool) -> str | None:
    """Why this machine cannot run the test, or None when it can."""
    try:
        import torch
    except Exception as exc:  # ImportError, or OSError from a broken CUDA install
        return f"import torch failed ({first_line(exc)})"
    try:
        available = torch.cuda.is_available()
    except Exception as exc:
        return f"torch.cuda.is_available() raised ({first_line(exc)})"
    if not available:
        return f"torch {torch.__version__}: torch.cuda.is_available() is False"
    import torch.distributed as dist

    if not dist.is_available():
        return f"torch {torch.__version__} was built without torch.distributed"
    if not dist.is_nccl_available():
        return f"torch {torch.__version__} was built without the NCCL backend"
    # The real NCCL refuses two ranks on one GPU, so the reference run needs
    # a GPU per rank.
    if reference_nccl and torch.cuda.device_count() < nprocs:
        return f"--reference-nccl needs {nprocs} GPUs, torch sees {torch.cuda.device_count()}"
    return None


def pick_master_port(host: str = "127.0.0.1", tries: int = 200) -> int:
    """A port that is free and whose successor is free too: torch's TCPStore
    takes MASTER_PORT, and Lanes' launcher convention puts a bootstrap root on
    MASTER_PORT+1 when it initialises from torchrun-style variables."""
    for _ in range(tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as first:
            first.bind((host, 0))
            port = first.getsockname()[1]
            if port >= 65535:
                continue
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as second:
                    second.bind((host, port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("found no free pair of TCP ports on 127.0.0.1")


def prepare_log_dir(path: str | None) -> str:
    if path is None:
        import tempfile

        return tempfile.mkdtemp(prefix="lanes-torch-nccl-")
    os.makedirs(path, exist_ok=True)
    # Logs of an earlier run would be attributed by pid; remove them.
    for old in glob.glob(os.path.join(path, "lanes.*.log")) + glob.glob(
        os.path.join(path, "rank*.out")
    ):
        os.remove(old)
    return os.path.abspath(path)


class Worker:
    def __init__(self, rank: int, proc: subprocess.Popen, out_path: str):
        self.rank = rank
        self.proc = proc
        self.out_path = out_path
        self.result: dict | None = None
        self.preload_refused = False
        self.pump: threading.Thread | None = None


def worker_env(args, rank: int, port: int, log_dir: str, lib: str | None) -> dict:
    env = dict(os.environ)
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(args.nprocs),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(args.nprocs),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        PYTHONUNBUFFERED="1",
        LANES_DEBUG="INFO",
        LANES_DEBUG_FILE=os.path.join(log_dir, "lanes.%p.log"),
        LANES_TIMEOUT="60",
    )
    # Gloo picks its interface from the host name, which need not resolve in
    # a container; all ranks are local.
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if lib is not None:
        env["LD_PRELOAD"] = lib
    return env


def worker_argv(args) -> list[str]:
    argv = [sys.executable, WORKER_SCRIPT, "--worker", "--nprocs", str(args.nprocs)]
    argv += ["--pg-timeout", str(args.pg_timeout)]
    if args.lib:
        argv += ["--lib", args.lib]
    if args.eager_init:
        argv.append("--eager-init")
    if args.reference_nccl:
        argv.append("--reference-nccl")
    return argv


def pump_output(worker: Worker, lock: threading.Lock) -> None:
    """Copies a worker's output to its file and, prefixed, to our stdout; keeps
    its result line."""
    with open(worker.out_path, "w", encoding="utf-8") as out:
        for raw in iter(worker.proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            out.write(line)
            out.flush()
            if line.startswith(RESULT_TAG):
                try:
                    worker.result = json.loads(line[len(RESULT_TAG):])
                except ValueError:
                    pass
            if "cannot be preloaded" in line:
                worker.preload_refused = True
            with lock:
                sys.stdout.write(f"[rank {worker.rank}] {line}")
                if not line.endswith("\n"):
                    sys.stdout.write("\n")
                sys.stdout.flush()


def stop(workers: list[Worker]) -> None:
    for w in workers:
        if w.proc.poll() is None:
            w.proc.terminate()
    deadline = time.monotonic() + 10
    for w in workers:
        try:
            w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.proc.kill()
            w.proc.wait()


def wait_for_workers(workers: list[Worker], timeout: float, grace: float) -> None:
    """Returns when all workers exited; kills them all at the deadline, and the
    rest `grace` seconds after the first one failed."""
    deadline = time.monotonic() + timeout
    first_failure = None
    while True:
        running = [w for w in workers if w.proc.poll() is None]
        if not running:
            return
        now = time.monotonic()
        if first_failure is None:
            failed = [w for w in workers if w.proc.returncode not in (None, 0)]
            if failed:
                first_failure = now
                print(
                    f"torch-nccl: rank {failed[0].rank} exited with {describe_rc(failed[0].proc.returncode)};"
                    f" the others get {grace:.0f} s",
                    flush=True,
                )
        if now >= deadline:
            print(f"torch-nccl: timeout after {timeout:.0f} s; killing ranks "
                  f"{[w.rank for w in running]}", flush=True)
            stop(workers)
            return
        if first_failure is not None and now - first_failure >= grace:
            print(f"torch-nccl: killing ranks {[w.rank for w in running]} "
                  f"{grace:.0f} s after the first failure", flush=True)
            stop(workers)
            return
        time.sleep(0.25)


def describe_rc(rc: int | None) -> str:
    if rc is None:
        return "no exit status"
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def lanes_info_pids(log_dir: str, workers: list[Worker]) -> dict[int, str]:
    """pid -> first Lanes INFO line that names a rank, from the Lanes log files
    (LANES_DEBUG_FILE) and, should Lanes have fallen back to stderr, from the
    workers' output."""
    found: dict[int, str] = {}
    paths = sorted(glob.glob(os.path.join(log_dir, "lanes.*.log")))
    paths += [w.out_path for w in workers]
    for path in paths:
        m = LANES_LOG_NAME_RE.search(os.path.basename(path))
        file_pid = int(m.group(1)) if m else None
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if "[lanes]" not in line or "rank " not in line:
                        continue
                    if not re.search(r"\bINFO\b", line):
                        continue
                    m = LANES_LINE_RE.search(line)
                    pid = int(m.group(1)) if m else file_pid
                    if pid is not None:
                        found.setdefault(pid, line.strip())
        except OSError:
            continue
    return found


def parent_main(args) -> int:
    reason = torch_skip_reason(args.nprocs, args.reference_nccl)
    if reason is not None:
        print(f"torch-nccl: SKIP: {reason}", flush=True)
        return SKIP_EXIT

    lib = None
    if not args.reference_nccl:
        if not args.lib:
            print("torch-nccl: FAIL: --lib is required (the Lanes libnccl.so.2 to preload)")
            return 1
        lib = os.path.abspath(args.lib)
        if not os.path.isfile(lib):
            print(f"torch-nccl: FAIL: {lib} does not exist (is lanes_nccl built?)")
            return 1
        args.lib = lib

    log_dir = prepare_log_dir(args.log_dir)
    port = pick_master_port()
    print(
        f"torch-nccl: {args.nprocs} processes on "
        f"{'one GPU each (reference NCCL)' if args.reference_nccl else 'cuda:0'}, "
        f"LD_PRELOAD={lib or '(none)'}, MASTER_PORT={port}, logs in {log_dir}",
        flush=True,
    )

    lock = threading.Lock()
    workers: list[Worker] = []
    for rank in range(args.nprocs):
        proc = subprocess.Popen(
            worker_argv(args),
            env=worker_env(args, rank, port, log_dir, lib),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        w = Worker(rank, proc, os.path.join(log_dir, f"rank{rank}.out"))
        w.pump = threading.Thread(target=pump_output, args=(w, lock), daemon=True)
        w.pump.start()
        workers.append(w)

    wait_for_workers(workers, args.timeout, args.grace)
    for w in workers:
        w.pump.join(timeout=10)

    passed = failed = 0
    for w in workers:
        if w.result is not None:
            passed += int(w.result.get("passed", 0))
            failed += int(w.result.get("failed", 0))
        rc = w.proc.returncode
        if w.result is None:
            failed += 1
            print(f"FAIL rank={w.rank} op=worker: {describe_rc(rc)} before reporting its results"
                  f" (output: {w.out_path})")
        elif rc != 0:
            failed += 1
            print(f"FAIL rank={w.rank} op=worker: {describe_rc(rc)}"
                  + (" after reporting its results (a hang or crash at exit)"
                     if w.result.get("failed", 0) == 0 else ""))
        else:
            passed += 1
            print(f"PASS rank={w.rank} op=worker: exit status 0")
        if w.preload_refused:
            print(f"note rank={w.rank}: the dynamic linker refused LD_PRELOAD={lib}"
                  " (see its output); PyTorch then loads its own NCCL")

    if args.reference_nccl:
        print("torch-nccl: reference NCCL run: no Lanes log check")
    else:
        seen = lanes_info_pids(log_dir, workers)
        for w in workers:
            line = seen.get(w.proc.pid)
            if line is not None:
                passed += 1
                print(f"PASS rank={w.rank} op=lanes_log pid={w.proc.pid}: {line}")
            else:
                failed += 1
                print(
                    f"FAIL rank={w.rank} op=lanes_log pid={w.proc.pid}: no Lanes INFO line naming a rank"
                    f" from this process in {log_dir} (PyTorch did not create a communicator"
                    " through the preloaded library)"
                )

    print(f"torch-nccl: {args.nprocs} processes, {passed} checks passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


# --------------------------------------------------------------------------
# Worker: the checks.
# --------------------------------------------------------------------------


class CheckAborted(Exception):
    """A check raised; the worker stops (its peers cannot be assumed in step)."""


class Ctx:
    """What every check needs: this rank, torch, the device and the groups."""

    def __init__(self, torch, dist, rank: int, world: int, dev, lib: str | None):
        self.torch = torch
        self.dist = dist
        self.rank = rank
        self.world = world
        self.dev = dev
        self.lib = lib
        self.gloo = None  # the CPU reference group, or None
        self.subgroups: dict[tuple[int, ...], object] = {}
        self.passed = 0
        self.failed = 0
        self._gloo_notes: set[str] = set()

    def dtype(self, name: str):
        return getattr(self.torch, name)

    def record(self, ok: bool, op: str, dtype=None, numel=None, err=None, tol=None,
               ref=None, detail=None) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        parts = [("PASS" if ok else "FAIL"), f"rank={self.rank}", f"op={op}"]
        if dtype is not None:
            parts.append(f"dtype={dtype_name(dtype)}")
        if numel is not None:
            parts.append(f"numel={numel}")
        if err is not None:
            parts.append(f"max_abs_err={err:.6g}")
        if tol is not None:
            parts.append(f"tol={tol:.3g}")
        if ref is not None:
            parts.append(f"ref={ref}")
        if detail:
            parts.append(detail)
        print(" ".join(parts), flush=True)

    def gloo_refused(self, what: str, exc: BaseException) -> None:
        if what not in self._gloo_notes:
            self._gloo_notes.add(what)
            print(f"note rank={self.rank}: gloo has no {what} here ({first_line(exc)[:160]});"
                  " its reference is computed in float64 on the CPU", flush=True)


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def rank_input(torch, key: str, rank: int, numel: int, dtype):
    """Rank `rank`'s input for check `key`: integers in [-VALUE_RANGE,
    VALUE_RANGE] from a seed every process derives alike, so each rank can
    recompute any other rank's input for its reference."""
    gen = torch.Generator()
    gen.manual_seed(zlib.crc32(f"{key}/{rank}/{numel}".encode()))
    values = torch.randint(-VALUE_RANGE, VALUE_RANGE + 1, (numel,), generator=gen, dtype=torch.int64)
    return values.to(dtype)


def sentinel(ctx: Ctx, numel: int, dtype, device=None):
    return ctx.torch.full((numel,), SENTINEL, dtype=dtype, device=device or ctx.dev)


def reduce_op(ctx: Ctx, name: str):
    rop = ctx.dist.ReduceOp
    if name == "sum":
        return rop.SUM
    if name == "avg":
        return rop.AVG
    if name == "max":
        return rop.MAX
    if name == "premul_sum":
        # Same factor on every rank, passed by value: ProcessGroupNCCL turns it
        # into ncclRedOpCreatePreMulSum with a host scalar.
        return ctx.dist._make_nccl_premul_sum(PREMUL_FACTOR)
    raise ValueError(name)


def premul_factor_applied(ctx: Ctx, dtype) -> float:
    """The factor NCCL applies for PREMUL_SUM on `dtype` when PyTorch passes it.

    ProcessGroupNCCL hands ncclRedOpCreatePreMulSum a float32 scalar for
    bfloat16 tensors (unpackPreMulSum<float, ncclBfloat16>), and NCCL reads
    the scalar's size of the datatype from it: two bytes, the float's low
    half on a little-endian host. Lanes reads the scalar as NCCL does, so the
    factor really applied is that bfloat16 (0 for 2.0); other dtypes get
    PREMUL_FACTOR itself.
    """
    torch = ctx.torch
    if dtype != torch.bfloat16:
        return PREMUL_FACTOR
    bits = torch.tensor([PREMUL_FACTOR], dtype=torch.float32).view(torch.int16)
    return float(bits[0:1].view(torch.bfloat16).item())


def local_reduce(ctx: Ctx, name: str, inputs):
    """Exact reduction of `inputs` in float64 (int64 for integer dtypes)."""
    torch = ctx.torch
    wide = torch.float64 if inputs[0].is_floating_point() else torch.int64
    factor = premul_factor_applied(ctx, inputs[0].dtype)
    acc = None
    for x in inputs:
        x = x.to(wide)
        if name == "premul_sum":
            x = x * factor
        if acc is None:
            acc = x.clone()
        elif name == "max":
            acc = torch.maximum(acc, x)
        else:
            acc += x
    if name == "avg":
        acc = acc / len(inputs)
    return acc


def reduce_tolerance(ctx: Ctx, name: str, dtype, nranks: int, expected) -> float:
    """0 except for AVG over a rank count that is not a power of two: there
    x/n is inexact, and an implementation may scale before or after summing
    (NCCL scales each input by 1/n), so allow n roundings of the largest
    value."""
    if name != "avg" or (nranks & (nranks - 1)) == 0 or not dtype.is_floating_point:
        return 0.0
    eps = ctx.torch.finfo(dtype).eps
    return nranks * eps * max(1.0, float(expected.abs().max()) if expected.numel() else 1.0)


def max_abs_err(got, expected) -> float:
    if tuple(got.shape) != tuple(expected.shape):
        return float("inf")
    if got.numel() == 0:
        return 0.0
    return float((got.double() - expected.double()).abs().max())


def compare(ctx: Ctx, op: str, dtype, numel: int, got, expected, tol: float, ref: str) -> None:
    err = max_abs_err(got, expected)
    ok = err <= tol  # False for NaN
    detail = None
    if tuple(got.shape) != tuple(expected.shape):
        detail = f"shape {tuple(got.shape)} expected {tuple(expected.shape)}"
    ctx.record(ok, op, dtype, numel, err, tol, ref, detail)


def reference(ctx: Ctx, what: str, gloo_fn, local_fn):
    """Expected result: the same collective on the gloo group over CPU copies
    of the inputs where gloo provides it; otherwise computed exactly in
    float64 (int64) from every rank's input, which each rank regenerates.
    PREMUL_SUM is NCCL's alone and never goes to gloo; older gloo builds also
    lack AVG, bfloat16/float16 reductions or reduce_scatter_tensor. Gloo
    refusals are argument checks that every rank makes alike, so all ranks
    take the same path and stay in step."""
    if ctx.gloo is not None and gloo_fn is not None:
        try:
            return gloo_fn(), "gloo"
        except Exception as exc:
            ctx.gloo_refused(what, exc)
    return local_fn(), "local-f64"


# ---- collectives ----------------------------------------------------------


def check_all_reduce(ctx: Ctx, opname: str, dtype, numel: int, key: str = "allreduce") -> None:
    torch, dist = ctx.torch, ctx.dist
    x = rank_input(torch, key, ctx.rank, numel, dtype)
    t = x.to(ctx.dev, copy=True)
    dist.all_reduce(t, op=reduce_op(ctx, opname))
    got = t.cpu()

    def via_gloo():
        r = x.clone()
        dist.all_reduce(r, op=reduce_op(ctx, opname), group=ctx.gloo)
        return r

    expected, ref = reference(
        ctx,
        f"all_reduce {opname} for {dtype_name(dtype)}",
        None if opname == "premul_sum" else via_gloo,  # an NCCL-only op object
        lambda: local_reduce(ctx, opname, [rank_input(torch, key, r, numel, dtype)
                                           for r in range(ctx.world)]),
    )
    tol = reduce_tolerance(ctx, opname, dtype, ctx.world, expected)
    compare(ctx, f"all_reduce.{opname}", dtype, numel, got, expected, tol, ref)


def check_broadcast(ctx: Ctx, dtype, numel: int) -> None:
    torch, dist = ctx.torch, ctx.dist
    root = 1 if ctx.world > 1 else 0
    x = rank_input(torch, "broadcast", ctx.rank, numel, dtype)
    t = x.to(ctx.dev, copy=True)
    dist.broadcast(t, src=root)
    got = t.cpu()

    def via_gloo():
        r = x.clone()
        dist.broadcast(r, src=root, group=ctx.gloo)
        return r

    expected, ref = reference(ctx, f"broadcast for {dtype_name(dtype)}", via_gloo,
                              lambda: rank_input(torch, "broadcast", root, numel, dtype))
    compare(ctx, f"broadcast.root{root}", dtype, numel, got, expected, 0.0, ref)


def check_reduce(ctx: Ctx, dtype, numel: int) -> None:
    """ncclReduce to the last rank; only the root's result is defined."""
    torch, dist = ctx.torch, ctx.dist
    root = ctx.world - 1
    x = rank_input(torch, "reduce", ctx.rank, numel, dtype)
    t = x.to(ctx.dev, copy=True)
    dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
    got = t.cpu()
    # Always computed locally: gloo's reduce leaves non-roots' buffers
    # unspecified too, and all ranks must make the same gloo calls.
    expected = local_reduce(ctx, "sum", [rank_input(torch, "reduce", r, numel, dtype)
                                         for r in range(ctx.world)])
    if ctx.rank == root:
        compare(ctx, f"reduce.sum.root{root}", dtype, numel, got, expected, 0.0, "local-f64")


def check_all_gather(ctx: Ctx, dtype, numel: int) -> None:
    torch, dist = ctx.torch, ctx.dist
    x = rank_input(torch, "allgather", ctx.rank, numel, dtype)
    out = sentinel(ctx, ctx.world * numel, dtype)
    dist.all_gather_into_tensor(out, x.to(ctx.dev, copy=True))
    got = out.cpu()

    def via_gloo():
        r = sentinel(ctx, ctx.world * numel, dtype, device="cpu")
        dist.all_gather_into_tensor(r, x.clone(), group=ctx.gloo)
        return r

    expected, ref = reference(
        ctx, f"all_gather_into_tensor for {dtype_name(dtype)}", via_gloo,
        lambda: torch.cat([rank_input(torch, "allgather", r, numel, dtype) for r in range(ctx.world)]))
    compare(ctx, "all_gather_into_tensor", dtype, numel, got, expected, 0.0, ref)


def check_reduce_scatter(ctx: Ctx, opname: str, dtype, numel: int) -> None:
    """Each rank contributes world*numel elements and keeps its numel-element
    slice of the reduction."""
    torch, dist = ctx.torch, ctx.dist
    key = f"reducescatter.{opname}"
    x = rank_input(torch, key, ctx.rank, ctx.world * numel, dtype)
    out = sentinel(ctx, numel, dtype)
    dist.reduce_scatter_tensor(out, x.to(ctx.dev, copy=True), op=reduce_op(ctx, opname))
    got = out.cpu()

    def via_gloo():
        r = sentinel(ctx, numel, dtype, device="cpu")
        dist.reduce_scatter_tensor(r, x.clone(), op=reduce_op(ctx, opname), group=ctx.gloo)
        return r

    lo, hi = ctx.rank * numel, (ctx.rank + 1) * numel
    expected, ref = reference(
        ctx, f"reduce_scatter_tensor {opname} for {dtype_name(dtype)}",
        None if opname == "premul_sum" else via_gloo,
        lambda: local_reduce(ctx, opname, [rank_input(torch, key, r, ctx.world * numel, dtype)[lo:hi]
                                           for r in range(ctx.world)]))
    tol = reduce_tolerance(ctx, opname, dtype, ctx.world, expected)
    compare(ctx, f"reduce_scatter_tensor.{opname}", dtype, numel, got, expected, tol, ref)


def uneven_split(src: int, dst: int, numel: int) -> int:
    """Elements rank src sends rank dst in the uneven all_to_all: numel/2,
    numel or 3*numel/2 (rounded down, so 0 for numel 1: empty chunks too)."""
    return (numel * ((src + 2 * dst) % 3 + 1)) // 2


def check_all_to_all(ctx: Ctx, dtype, numel: int, uneven: bool) -> None:
    torch, dist = ctx.torch, ctx.dist
    world, rank = ctx.world, ctx.rank
    key = "alltoall.uneven" if uneven else "alltoall.even"

    def split(src, dst):
        return uneven_split(src, dst, numel) if uneven else numel

    in_splits = [split(rank, j) for j in range(world)]
    out_splits = [split(j, rank) for j in range(world)]
    x = rank_input(torch, key, rank, sum(in_splits), dtype)
    out = sentinel(ctx, sum(out_splits), dtype)
    if uneven:
        dist.all_to_all_single(out, x.to(ctx.dev, copy=True),
                               output_split_sizes=out_splits, input_split_sizes=in_splits)
    else:
        dist.all_to_all_single(out, x.to(ctx.dev, copy=True))
    got = out.cpu()

    def via_gloo():
        r = sentinel(ctx, sum(out_splits), dtype, device="cpu")
        if uneven:
            dist.all_to_all_single(r, x.clone(), output_split_sizes=out_splits,
                                   input_split_sizes=in_splits, group=ctx.gloo)
        else:
            dist.all_to_all_single(r, x.clone(), group=ctx.gloo)
        return r

    def local():
        parts = []
        for j in range(world):
            xj = rank_input(torch, key, j, sum(split(j, m) for m in range(world)), dtype)
            offset = sum(split(j, m) for m in range(rank))
            parts.append(xj[offset:offset + split(j, rank)])
        return torch.cat(parts)

    expected, ref = reference(ctx, f"all_to_all_single for {dtype_name(dtype)}", via_gloo, local)
    compare(ctx, f"all_to_all_single.{'uneven' if uneven else 'even'}", dtype, numel, got,
            expected, 0.0, ref)


# ---- point-to-point, barrier, subgroups -----------------------------------


def check_p2p_ring(ctx: Ctx, dtype, numel: int) -> None:
    """One batch_isend_irecv per rank: send to rank+1, receive from rank-1.
    The reference is the sender's input, which every rank can regenerate."""
    torch, dist = ctx.torch, ctx.dist
    nxt, prv = (ctx.rank + 1) % ctx.world, (ctx.rank - 1) % ctx.world
    send = rank_input(torch, "ring", ctx.rank, numel, dtype).to(ctx.dev, copy=True)
    recv = sentinel(ctx, numel, dtype)
    ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    got = recv.cpu()
    expected = rank_input(torch, "ring", prv, numel, dtype)
    compare(ctx, "batch_isend_irecv.ring", dtype, numel, got, expected, 0.0, "sender-input")


def check_send_recv_pair(ctx: Ctx, dtype, numel: int) -> None:
    """Blocking send/recv between ranks 0 and 1, one direction after the other
    (torch gives such a pair a communicator of its own)."""
    torch, dist = ctx.torch, ctx.dist
    if ctx.rank > 1:
        return
    peer = 1 - ctx.rank
    mine = rank_input(torch, "sendrecv", ctx.rank, numel, dtype).to(ctx.dev, copy=True)
    recv = sentinel(ctx, numel, dtype)
    if ctx.rank == 0:
        dist.send(mine, dst=peer)
        dist.recv(recv, src=peer)
    else:
        dist.recv(recv, src=peer)
        dist.send(mine, dst=peer)
    got = recv.cpu()
    expected = rank_input(torch, "sendrecv", peer, numel, dtype)
    compare(ctx, f"send_recv.{peer}to{ctx.rank}", dtype, numel, got, expected, 0.0, "sender-input")


def default_store(dist):
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:
        return None


def check_barrier(ctx: Ctx) -> None:
    """Rank 0 arrives a second late; every rank marks its arrival in the
    rendezvous store before the barrier, so after it all marks must exist."""
    dist = ctx.dist
    store = default_store(dist)
    if ctx.rank == 0:
        time.sleep(1.0)
    prefix = "lanes_torch_nccl_test/barrier/"
    if store is not None:
        store.set(prefix + str(ctx.rank), "1")
    start = time.monotonic()
    if ctx.dev.type == "cuda":
        dist.barrier(device_ids=[ctx.dev.index])
    else:
        dist.barrier()
    waited = time.monotonic() - start
    if store is None:
        ctx.record(True, "barrier", detail=f"returned after {waited:.3f} s (no store to check arrivals)")
        return
    missing = [r for r in range(ctx.world) if not store.check([prefix + str(r)])]
    ctx.record(not missing, "barrier",
               detail=f"waited {waited:.3f} s" + (f", ranks not yet arrived: {missing}" if missing else ""))


def check_subgroup(ctx: Ctx, members: tuple[int, ...], dtype, numel: int) -> None:
    """all_reduce and broadcast (from the last member, a global rank) inside a
    group created with new_group; non-members make no call."""
    torch, dist = ctx.torch, ctx.dist
    group = ctx.subgroups[members]
    if ctx.rank not in members:
        return
    name = "group" + "_".join(str(m) for m in members)
    key = f"subgroup.{name}"
    t = rank_input(torch, key, ctx.rank, numel, dtype).to(ctx.dev, copy=True)
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    expected = local_reduce(ctx, "sum", [rank_input(torch, key, r, numel, dtype) for r in members])
    compare(ctx, f"{name}.all_reduce.sum", dtype, numel, t.cpu(), expected, 0.0, "local-f64")

    root = members[-1]
    b = rank_input(torch, key + ".bcast", ctx.rank, numel, dtype).to(ctx.dev, copy=True)
    dist.broadcast(b, src=root, group=group)
    expected = rank_input(torch, key + ".bcast", root, numel, dtype)
    compare(ctx, f"{name}.broadcast.root{root}", dtype, numel, b.cpu(), expected, 0.0, "sender-input")


# ---- DistributedDataParallel ----------------------------------------------


def make_mlp(torch):
    torch.manual_seed(DDP_MODEL_SEED)
    nn = torch.nn
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def check_ddp(ctx: Ctx) -> None:
    """20 SGD steps of a small MLP under DDP, each rank on an equal shard of
    every global batch, against the same model trained on the whole batches
    in this process without DDP. With a mean loss and equal shards DDP's
    averaged gradient is the full-batch gradient, so the global losses (mean
    of the shards' losses, summed by an all_reduce) and the final parameters
    must agree up to float32 rounding."""
    torch, dist = ctx.torch, ctx.dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_float32_matmul_precision("highest")  # no TF32: rounding stays float32's
    batch = DDP_PER_RANK_BATCH * ctx.world
    gen = torch.Generator()
    gen.manual_seed(DDP_DATA_SEED)
    xs = torch.randn(DDP_STEPS, batch, 64, generator=gen)
    ys = torch.randint(0, 10, (DDP_STEPS, batch), generator=gen)

    ref_model = make_mlp(torch).to(ctx.dev)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=DDP_LR)
    ref_losses = []
    for step in range(DDP_STEPS):
        ref_opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ref_model(xs[step].to(ctx.dev)), ys[step].to(ctx.dev))
        ref_losses.append(float(loss))
        loss.backward()
        ref_opt.step()

    model = make_mlp(torch).to(ctx.dev)
    ddp = DDP(model, device_ids=[ctx.dev.index] if ctx.dev.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=DDP_LR)
    lo, hi = ctx.rank * DDP_PER_RANK_BATCH, (ctx.rank + 1) * DDP_PER_RANK_BATCH
    losses = []
    for step in range(DDP_STEPS):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(xs[step, lo:hi].to(ctx.dev)), ys[step, lo:hi].to(ctx.dev))
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        losses.append(float(total) / ctx.world)

    loss_err = max(abs(a - b) for a, b in zip(losses, ref_losses))
    loss_ok = all(abs(a - b) <= DDP_LOSS_ATOL + DDP_LOSS_RTOL * abs(b)
                  for a, b in zip(losses, ref_losses))
    ctx.record(loss_ok, "ddp.loss", torch.float32, None, loss_err, None, "single-process",
               f"steps={DDP_STEPS} rtol={DDP_LOSS_RTOL:g} atol={DDP_LOSS_ATOL:g}"
               f" first={losses[0]:.6f}/{ref_losses[0]:.6f}"
               f" last={losses[-1]:.6f}/{ref_losses[-1]:.6f}")

    param_err = 0.0
    param_ok = True
    count = 0
    with torch.no_grad():
        for p, q in zip(model.parameters(), ref_model.parameters()):
            diff = (p - q).abs()
            count += p.numel()
            param_err = max(param_err, float(diff.max()))
            if bool((diff > DDP_PARAM_ATOL + DDP_PARAM_RTOL * q.abs()).any()) or bool(diff.isnan().any()):
                param_ok = False
    ctx.record(param_ok, "ddp.params", torch.float32, count, param_err, None, "single-process",
               f"rtol={DDP_PARAM_RTOL:g} atol={DDP_PARAM_ATOL:g}")


# ---- which libnccl serves torch ---------------------------------------------

# The NCCL entry points checked when libtorch_cuda.so's symbol table cannot be
# read: the ones every ProcessGroupNCCL run calls.
CORE_NCCL_SYMBOLS = (
    "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRankConfig", "ncclCommAbort",
    "ncclCommDestroy", "ncclCommGetAsyncError", "ncclGroupStart", "ncclGroupEnd",
    "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
    "ncclSend", "ncclRecv", "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy",
)


def mapped_files(name_filter) -> set[str]:
    """Real paths of the files mapped into this process whose base name
    passes `name_filter`."""
    paths = set()
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) < 6:
                continue
            path = fields[5].strip()
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            if path.startswith("/") and name_filter(os.path.basename(path)):
                paths.add(os.path.realpath(path))
    return paths


def elf_undefined_symbols(path: str, prefix: str) -> list[str] | None:
    """Names starting with `prefix` that the ELF64 little-endian shared object
    at `path` imports (undefined entries of its .dynsym), or None when the file
    is not such an object. Read through mmap: libtorch_cuda.so is large."""
    import mmap
    import struct

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as elf:
        if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
            return None
        shoff, = struct.unpack_from("<Q", elf, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
        names = []
        for sh in sections:
            if sh[1] != 11:  # SHT_DYNSYM
                continue
            sym_off, sym_size, str_index, sym_entsize = sh[4], sh[5], sh[6], sh[9] or 24
            str_off = sections[str_index][4]
            for i in range(sym_size // sym_entsize):
                st_name, _info, _other, st_shndx, _value, _size = struct.unpack_from(
                    "<IBBHQQ", elf, sym_off + i * sym_entsize)
                if st_shndx != 0 or st_name == 0:  # defined here, or nameless
                    continue
                end = elf.find(b"\0", str_off + st_name)
                name = elf[str_off + st_name:end].decode("ascii", errors="replace")
                if name.startswith(prefix):
                    names.append(name.split("@", 1)[0])
        return sorted(set(names))


def symbol_library(name: str) -> str | None:
    """Real path of the object that defines `name` in the process's global
    scope (main program, LD_PRELOAD, RTLD_GLOBAL libraries: the scope searched
    first when libtorch_cuda.so's references were bound), or None when no
    object there defines it."""
    import ctypes

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    scope = ctypes.CDLL(None)
    try:
        addr = ctypes.cast(getattr(scope, name), ctypes.c_void_p).value
    except AttributeError:
        return None
    dladdr = scope.dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    dladdr.restype = ctypes.c_int
    info = DlInfo()
    if not dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return "(unknown object)"
    return os.path.realpath(info.dli_fname.decode())


def check_mapped_nccl(ctx: Ctx, when: str) -> None:
    """The preloaded library must be mapped. Other libnccl files are listed,
    not refused: torch/__init__.py preloads its own libnccl.so.2 by path
    (_preload_cuda_deps) once libcudart is loaded, which maps a second copy
    under LD_PRELOAD too; which one torch calls is check_nccl_binding's
    business."""
    loaded = mapped_files(lambda base: base.startswith("libnccl"))
    listed = ", ".join(sorted(loaded)) or "none"
    if ctx.lib is None:  # the reference run: nothing to prove, show what it loaded
        ctx.record(True, f"mapped_libnccl.{when}", detail=listed)
        return
    want = os.path.realpath(ctx.lib)
    ctx.record(want in loaded, f"mapped_libnccl.{when}",
               detail=f"mapped: {listed}" + ("" if want in loaded else f"; {want} is not mapped"))


def check_nccl_binding(ctx: Ctx) -> None:
    """Every nccl* symbol libtorch_cuda.so imports must resolve to the
    preloaded library. This is what tells "Lanes serves torch" apart from
    "torch's own NCCL, also mapped, fills in what the preload lacks"."""
    torch_libs = mapped_files(lambda base: base == "libtorch_cuda.so")
    names = None
    source = "built-in list"
    for lib in sorted(torch_libs):
        try:
            names = elf_undefined_symbols(lib, "nccl")
        except (OSError, ValueError, IndexError) as exc:
            print(f"note rank={ctx.rank}: cannot read the symbols of {lib} ({first_line(exc)})", flush=True)
        if names:
            source = os.path.basename(lib)
            break
    if not names:
        names = list(CORE_NCCL_SYMBOLS)
    bound: dict[str, list[str]] = {}
    for name in names:
        bound.setdefault(symbol_library(name) or "(undefined)", []).append(name)
    summary = "; ".join(f"{where}: {len(syms)}" for where, syms in sorted(bound.items()))
    if ctx.lib is None:
        ctx.record(True, "nccl_symbols_bind", numel=len(names), detail=f"from {source}; {summary}")
        return
    want = os.path.realpath(ctx.lib)
    strays = {where: syms for where, syms in bound.items() if where != want}
    detail = f"{len(names)} symbols from {source}"
    if strays:
        detail += "; not from the preload: " + "; ".join(
            f"{where}: {' '.join(syms)}" for where, syms in sorted(strays.items()))
    ctx.record(not strays, "nccl_symbols_bind", detail=detail)


# ---- plan and driver -------------------------------------------------------


def build_plan(ctx: Ctx) -> list[tuple[str, object, tuple]]:
    """(label, function, arguments) of every check, in the order all ranks
    run them; labels name the check when it raises."""
    torch = ctx.torch
    plan: list[tuple[str, object, tuple]] = []
    for name in DTYPE_NAMES:
        dtype = ctx.dtype(name)
        ops = ["sum", "max"] + (list(FLOAT_ONLY_OPS) if dtype.is_floating_point else [])
        for numel in SIZES:
            for op in ops:
                plan.append((f"all_reduce.{op}/{name}/{numel}", check_all_reduce, (op, dtype, numel)))
    plan.append((f"all_reduce.sum/float32/{LARGE_NUMEL}", check_all_reduce,
                 ("sum", torch.float32, LARGE_NUMEL, "allreduce.large")))
    for name in DTYPE_NAMES:
        dtype = ctx.dtype(name)
        for numel in SIZES:
            plan.append((f"broadcast/{name}/{numel}", check_broadcast, (dtype, numel)))
            plan.append((f"all_gather_into_tensor/{name}/{numel}", check_all_gather, (dtype, numel)))
            ops = ["sum", "max"] + (list(FLOAT_ONLY_OPS) if dtype.is_floating_point else [])
            for op in ops:
                plan.append((f"reduce_scatter_tensor.{op}/{name}/{numel}", check_reduce_scatter,
                             (op, dtype, numel)))
            plan.append((f"all_to_all_single.even/{name}/{numel}", check_all_to_all, (dtype, numel, False)))
            plan.append((f"all_to_all_single.uneven/{name}/{numel}", check_all_to_all, (dtype, numel, True)))
            if ctx.world > 1:
                plan.append((f"batch_isend_irecv/{name}/{numel}", check_p2p_ring, (dtype, numel)))
    for numel in SIZES:
        plan.append((f"reduce/float32/{numel}", check_reduce, (torch.float32, numel)))
    if ctx.world > 1:
        for numel in SIZES[1:]:
            plan.append((f"send_recv/float32/{numel}", check_send_recv_pair, (torch.float32, numel)))
    plan.append(("barrier", check_barrier, ()))
    for members in ctx.subgroups:
        for name in ("float32", "bfloat16"):
            plan.append((f"subgroup{members}/{name}", check_subgroup,
                         (members, ctx.dtype(name), SUBGROUP_NUMEL)))
    plan.append(("ddp", check_ddp, ()))
    return plan


def make_reference_group(dist):
    """The gloo group over all ranks the CPU references run on (new_group is
    collective: every rank calls it)."""
    return dist.new_group(backend="gloo")


def worker_device(torch, args, rank: int):
    # Several ranks on one GPU is the point; the reference NCCL run cannot do
    # that and puts rank r on GPU r.
    return torch.device("cuda", rank if args.reference_nccl else 0)


def guarded(ctx: Ctx, label: str, fn, *fargs):
    try:
        return fn(ctx, *fargs)
    except Exception as exc:
        ctx.failed += 1
        print(f"FAIL rank={ctx.rank} op={label} raised {first_line(exc)}", flush=True)
        traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
        raise CheckAborted(label) from exc


def init_groups(ctx: Ctx, args) -> None:
    dist = ctx.dist
    kwargs = dict(backend=BACKEND_UNDER_TEST, rank=ctx.rank, world_size=ctx.world,
                  timeout=datetime.timedelta(seconds=args.pg_timeout))
    if args.eager_init:
        # Creates the communicator now and lets new_group split it
        # (ncclCommSplit) instead of creating each group's from a new id.
        kwargs["device_id"] = ctx.dev
    dist.init_process_group(**kwargs)
    ctx.record(True, "init_process_group",
               detail=f"backend={dist.get_backend()} eager={bool(args.eager_init)}")
    try:
        ctx.gloo = make_reference_group(dist)
    except Exception as exc:
        print(f"note rank={ctx.rank}: no gloo group ({first_line(exc)}); every reference is"
              " computed in float64 on the CPU", flush=True)
        ctx.gloo = None
    # new_group is collective over the default group: every rank creates
    # every group, members or not, in the same order.
    for members in ((0, 1), (1, 2, 3)):
        if max(members) < ctx.world:
            ctx.subgroups[members] = dist.new_group(list(members))


def run_worker(args, ctx: Ctx) -> None:
    torch, dist = ctx.torch, ctx.dist
    try:
        version = torch.cuda.nccl.version()
        nccl_version = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    except Exception as exc:
        nccl_version = f"unknown ({first_line(exc)})"
    print(f"info rank={ctx.rank} pid={os.getpid()} torch={torch.__version__} cuda={torch.version.cuda}"
          f" device={ctx.dev} nccl_version_reported={nccl_version}", flush=True)

    guarded(ctx, "mapped_libnccl.startup", check_mapped_nccl, "startup")
    guarded(ctx, "nccl_symbols_bind", check_nccl_binding)
    guarded(ctx, "init_process_group", init_groups, args)
    for label, fn, fargs in build_plan(ctx):
        guarded(ctx, label, fn, *fargs)
    if ctx.dev.type == "cuda":
        torch.cuda.synchronize(ctx.dev)
    guarded(ctx, "mapped_libnccl.end", check_mapped_nccl, "end")

    def destroy(c):
        dist.destroy_process_group()
        c.record(True, "destroy_process_group")

    guarded(ctx, "destroy_process_group", destroy)


def emit_result(rank: int, passed: int, failed: int) -> None:
    print(RESULT_TAG + json.dumps({"rank": rank, "pid": os.getpid(), "passed": passed,
                                   "failed": failed}), flush=True)


def worker_main(args) -> int:
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:
        # The parent imported torch without the preload, so this is the
        # preloaded library's doing (typically a symbol torch needs that it
        # does not export).
        print(f"FAIL rank={rank} op=import_torch raised {first_line(exc)}", flush=True)
        emit_result(rank, 0, 1)
        return WORKER_ABORTED

    dev = worker_device(torch, args, rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    ctx = Ctx(torch, dist, rank, world, dev, None if args.reference_nccl else args.lib)
    code = 0
    try:
        run_worker(args, ctx)
    except CheckAborted:
        code = WORKER_ABORTED
    except BaseException as exc:  # noqa: BLE001 - anything else is a failure too
        ctx.failed += 1
        print(f"FAIL rank={rank} op=worker raised {first_line(exc)}", flush=True)
        traceback.print_exc(file=sys.stdout)
        code = WORKER_ABORTED
    emit_result(rank, ctx.passed, ctx.failed)
    if code == WORKER_ABORTED:
        # Skip interpreter teardown: process group destructors would wait for
        # collectives that peers will never complete.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return WORKER_FAILED if ctx.failed else 0


# --------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", help="Lanes' libnccl.so.2 to preload into every worker")
    p.add_argument("--nprocs", type=int, default=2, help="ranks, all on cuda:0 (default 2)")
    p.add_argument("--log-dir", help="where the Lanes logs and the workers' output go"
                   " (default: a new temporary folder)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds all workers together may take (default 600)")
    p.add_argument("--grace", type=float, default=30.0,
                   help="seconds the other workers get after one failed (default 30)")
    p.add_argument("--pg-timeout", type=float, default=300.0,
                   help="init_process_group timeout in seconds (default 300)")
    p.add_argument("--eager-init", action="store_true",
                   help="pass device_id to init_process_group (eager communicator,"
                        " subgroups by ncclCommSplit)")
    p.add_argument("--reference-nccl", action="store_true",
                   help="no preload: run the same checks on the NCCL PyTorch ships, one GPU"
                        " per rank (checks this script where that NCCL can run; no Lanes log check)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not 1 <= args.nprocs <= MAX_PROCS:
        p.error(f"--nprocs must be between 1 and {MAX_PROCS} (the exactness of the references"
                " in bfloat16 depends on it)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
