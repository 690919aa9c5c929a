"""Scrapes a running 3-rank job's metrics over HTTP and parses them with the
Prometheus client library's text-format parser: every counter adds up to the
calls the job made, the endpoint serves GET and HEAD of /metrics (and /),
answers other paths and methods with 404 and 405, serves many scrapes at
once, and stays up while the job runs; the file written at an interval holds
the final counts after the job ends.

Usage: metrics_scrape.py LANES_RUN METRICS_JOB
Exit 77 (skipped) where python3-prometheus-client is missing (the first
python3 on PATH without it re-runs this under /usr/bin/python3).
"""
import concurrent.futures
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    # A python3 first on PATH (pyenv, a venv) does not see Debian's packages.
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and \
            os.access("/usr/bin/python3", os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIPPED: no prometheus_client for %s or /usr/bin/python3 (Debian: "
          "python3-prometheus-client, which make deps installs)" % sys.executable)
    sys.exit(77)

RANKS = 3
CALLS = 200


def free_base_port():
    """A port p with p..p+RANKS-1 free on loopback, below the kernel's
    ephemeral range (which the job's own sockets draw from)."""
    low = 20000
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    for _ in range(50):
        base = random.randrange(10000, max(10001, low - RANKS))
        try:
            held = []
            for p in range(base, base + RANKS):
                t = socket.socket()
                held.append(t)
                t.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for t in held:
                t.close()
    raise RuntimeError("no free run of ports")


def wait_for(paths, seconds, job):
    end = time.time() + seconds
    while not all(os.path.exists(p) for p in paths):
        if job.poll() is not None:
            raise AssertionError("the job ended early (exit %d):\n%s" % (job.returncode, job.stdout.read()))
        if time.time() > end:
            raise AssertionError("timed out waiting for %s" % paths)
        time.sleep(0.02)


def fetch(port, path="/metrics", method="GET"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def samples(text):
    """{(name, frozenset(labels)): value} from the text-format parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def total(parsed, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in parsed.items() if n == name and want <= ls)


def check_counts(parsed, rank, allreduces):
    def expect(what, got, want):
        if got != want:
            raise AssertionError("rank %d: %s is %s, expected %s" % (rank, what, got, want))

    r = str(rank)
    expect("lanes_communicators", total(parsed, "lanes_communicators"), 1)
    expect("all-reduce calls", total(parsed, "lanes_calls_total", rank=r, collective="allreduce",
                                     datatype="float32", memory="host"), allreduces)
    expect("all-reduce bytes", total(parsed, "lanes_bytes_total", rank=r, collective="allreduce"),
           allreduces * 4000)
    expect("broadcast calls", total(parsed, "lanes_calls_total", rank=r, collective="broadcast",
                                    datatype="int32"), CALLS)
    calls = allreduces + CALLS
    expect("latency samples", total(parsed, "lanes_host_call_seconds_count", rank=r), calls)
    expect("+Inf buckets", total(parsed, "lanes_host_call_seconds_bucket", rank=r, le="+Inf"), calls)
    expect("plan choices", total(parsed, "lanes_plan_calls_total", rank=r), calls)
    if total(parsed, "lanes_transport_bytes_total", rank=r, direction="sent") <= 0:
        raise AssertionError("rank %d: no transport bytes counted" % rank)
    if total(parsed, "lanes_host_call_seconds_sum", rank=r) <= 0:
        raise AssertionError("rank %d: no time in the latency sums" % rank)


def main():
    lanes_run, job_binary = sys.argv[1], sys.argv[2]
    base = free_base_port()
    with tempfile.TemporaryDirectory(prefix="lanes-metrics-") as tmp:
        env = dict(os.environ)
        env["LANES_METRICS"] = "http=%d,file=%s/m-%%r.prom,interval=0.2" % (base, tmp)
        job = subprocess.Popen([lanes_run, "-n", str(RANKS), "--timeout", "200", job_binary, tmp,
                                str(CALLS)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(["%s/ready1.%d" % (tmp, r) for r in range(RANKS)], 120, job)
            for rank in range(RANKS):
                status, headers, text = fetch(base + rank)
                assert status == 200, "GET /metrics gave %d" % status
                assert headers["Content-Type"].startswith("text/plain; version=0.0.4"), headers
                check_counts(samples(text), rank, CALLS)
            port = base
            status, _, root = fetch(port, "/")
            assert status == 200 and "lanes_calls_total" in root, status
            status, headers, _ = fetch(port, "/metrics", "HEAD")
            assert status == 200, "HEAD gave %d" % status
            status, _, body = fetch(port, "/nothing-here")
            assert status == 404 and "/metrics" in body, (status, body)
            status, headers, _ = fetch(port, "/metrics", "POST")
            assert status == 405 and "GET" in headers.get("Allow", ""), (status, headers)
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                results = list(pool.map(lambda _: fetch(port), range(64)))
            assert all(s == 200 for s, _, _ in results), [s for s, _, _ in results]
            for _, _, text in results:
                samples(text)  # every one parses
            # The job goes on; the endpoint with it.
            open(os.path.join(tmp, "go"), "w").close()
            wait_for(["%s/ready2.%d" % (tmp, r) for r in range(RANKS)], 120, job)
            for rank in range(RANKS):
                status, _, text = fetch(base + rank)
                assert status == 200
                check_counts(samples(text), rank, 2 * CALLS)
            open(os.path.join(tmp, "finish"), "w").close()
            out, _ = job.communicate(timeout=120)
            assert job.returncode == 0, "the job exited %d:\n%s" % (job.returncode, out)
            # The file's last write came after the destroy: the final counts.
            for rank in range(RANKS):
                with open("%s/m-%d.prom" % (tmp, rank)) as f:
                    parsed = samples(f.read())
                assert total(parsed, "lanes_communicators") == 0
                assert total(parsed, "lanes_calls_total", rank=str(rank), collective="allreduce") \
                    == 2 * CALLS, "rank %d's file" % rank
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
    print("metrics of %d ranks scraped twice while running and read from files: counts add up"
          % RANKS)


if __name__ == "__main__":
    main()
