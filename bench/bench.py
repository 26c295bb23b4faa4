#!/usr/bin/env python3
"""Helpers for bench/load.sh: generate large AdmissionReviews, check answers,
measure start-to-ready, and turn oha's JSON results into Markdown tables.

Standard library only. Subcommands:

  compact FIXTURE OUT                  FIXTURE re-serialised as compact JSON, as a kube-apiserver sends it
  grow FIXTURE OBJECT_BYTES OUT        fixture 07 with both objects grown to OBJECT_BYTES
  check URL BODY CA                    POST BODY, require 200 and the request's uid echoed
  ready STARTS OUT ADMIN_PORT -- CMD...  exec CMD STARTS times, time exec -> /readyz 200
  rss PID                              VmRSS of PID in KiB
  trim DB WARMUP OUT                   percentiles from oha's --db-url rows, first WARMUP s left out
  report DIR                           Markdown report of a load.sh run directory
  soak-report DIR                      Markdown report of a load.sh soak directory
"""

import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


# --------------------------------------------------------------------------
# generating bodies


def compact(fixture, out):
    """The captured fixtures are pretty-printed for reading; a kube-apiserver
    sends compact JSON (fixture 07: 14.6 KB pretty, 8.3 KB compact)."""
    body = json.dumps(json.loads(Path(fixture).read_text()), separators=(",", ":"))
    Path(out).write_text(body)
    print(f"{out}: {len(body)} bytes compact ({Path(fixture).stat().st_size} pretty)")


def grow(fixture, object_bytes, out):
    """Fixture 07 with spec.pipeline.spec.vertices of both the object and the
    old object grown (copies of its `cat` vertex under new names) until each
    object serialises to at least object_bytes. benches/decision.rs uses the
    same recipe."""
    review = json.loads(Path(fixture).read_text())
    compact = lambda v: json.dumps(v, separators=(",", ":"))  # noqa: E731
    for key in ("object", "oldObject"):
        obj = review["request"][key]
        vertices = obj["spec"]["pipeline"]["spec"]["vertices"]
        template = next(v for v in vertices if v["name"] == "cat")
        one = len(compact(template)) + 1
        needed = max(0, -(-(object_bytes - len(compact(obj))) // one))
        for i in range(needed):
            vertex = json.loads(compact(template))
            vertex["name"] = f"cat-{i:05d}"
            vertices.append(vertex)
    body = compact(review)
    Path(out).write_text(body)
    obj_size = len(compact(review["request"]["object"]))
    print(f"{out}: body {len(body)} bytes, object {obj_size} bytes, "
          f"{len(review['request']['object']['spec']['pipeline']['spec']['vertices'])} vertices")


# --------------------------------------------------------------------------
# checking answers


def check(url, body_path, ca):
    body = Path(body_path).read_bytes()
    uid = json.loads(body)["request"]["uid"]
    ctx = ssl.create_default_context(cafile=ca)
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        status = resp.status
        answer = json.loads(resp.read())
    response = answer.get("response", {})
    ok = status == 200 and answer.get("kind") == "AdmissionReview" and "allowed" in response
    # The constant reference echoes no uid by design.
    echoed = response.get("uid") == uid
    print(f"{url} {Path(body_path).name}: HTTP {status}, allowed={response.get('allowed')}, "
          f"uid echoed={echoed}")
    if not ok:
        sys.exit(f"unexpected answer from {url}: {answer}")


# --------------------------------------------------------------------------
# start to ready


def rss_kib(pid, field="VmRSS"):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def readyz(port):
    """True when GET /readyz answers 200."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            head = s.recv(64)
            return head.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def ready(starts, out, admin_port, cmd):
    results = []
    for i in range(starts):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = t0 + 10
        while not readyz(admin_port):
            if proc.poll() is not None or time.perf_counter() > deadline:
                proc.kill()
                sys.exit(f"start {i}: not ready (exit code {proc.poll()})")
            time.sleep(0.0005)
        ms = (time.perf_counter() - t0) * 1000
        time.sleep(1.0)
        idle = rss_kib(proc.pid)
        anon = rss_kib(proc.pid, "RssAnon")
        file_backed = rss_kib(proc.pid, "RssFile")
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        results.append({"start_to_ready_ms": ms, "idle_rss_kib": idle,
                        "idle_rss_anon_kib": anon, "idle_rss_file_kib": file_backed})
        print(f"start {i + 1}: ready after {ms:.1f} ms, idle RSS {idle / 1024:.1f} MiB "
              f"(anonymous {anon / 1024:.1f}, file-backed {file_backed / 1024:.1f})")
    Path(out).write_text(json.dumps(results))


# --------------------------------------------------------------------------
# leaving out the warm-up


def percentile(sorted_values, p):
    """oha's own method: the value at index floor(p/100 * n)."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]


def trim(db, warmup, out):
    """Percentiles and throughput of the requests scheduled (or, without a
    fixed rate, sent) at least `warmup` seconds into the run: the first
    requests of a run pay oha's start-up and the TLS handshakes of every
    connection, which a long-running API server connection does not."""
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT COALESCE(start_latency_correction, start), end, duration, status FROM oha"
    ).fetchall()
    con.close()
    kept = [r for r in rows if r[0] >= warmup]
    durations = sorted(r[2] for r in kept)
    last_end = max((r[1] for r in kept), default=warmup)
    window = max(last_end - warmup, 1e-9)
    result = {
        "warmup_s": warmup,
        "requests": len(kept),
        "requests_total": len(rows),
        "rps": sum(1 for r in rows if r[1] >= warmup) / window,
        "p50": percentile(durations, 50),
        "p99": percentile(durations, 99),
        "p99.9": percentile(durations, 99.9),
        "max": durations[-1] if durations else float("nan"),
        "non_200": sum(1 for r in kept if r[3] != 200),
    }
    Path(out).write_text(json.dumps(result))


# --------------------------------------------------------------------------
# reports


def load_runs(directory):
    runs = []
    for line in (Path(directory) / "runs.jsonl").read_text().splitlines():
        run = json.loads(line)
        data = json.loads((Path(directory) / run["file"]).read_text())
        pct = data["latencyPercentiles"]
        status = data.get("statusCodeDistribution", {})
        errors = sum(data.get("errorDistribution", {}).values())
        errors += sum(n for code, n in status.items() if code != "200")
        run.update(
            rps=data["summary"]["requestsPerSec"],
            p50=pct["p50"] * 1e3,
            p99=pct["p99"] * 1e3,
            p999=pct["p99.9"] * 1e3,
            errors=errors,
            requests=sum(status.values()),
        )
        # The server's CPU time over the whole run, per request answered.
        if run.get("cpu_ticks", -1) >= 0 and run["requests"]:
            run["cpu_us"] = run["cpu_ticks"] / run["clk_tck"] * 1e6 / run["requests"]
        trimmed = Path(directory) / (run["file"] + ".trim.json")
        if trimmed.exists():
            t = json.loads(trimmed.read_text())
            run.update(rps=t["rps"], p50=t["p50"] * 1e3, p99=t["p99"] * 1e3,
                       p999=t["p99.9"] * 1e3, warmup=t["warmup_s"])
        runs.append(run)
    return runs


def med(values):
    return statistics.median(values) if values else float("nan")


def fmt_ms(v):
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def fmt_range(values, f):
    if not values:
        return "–"
    if len(values) < 2:
        return f(med(values))
    return f"{f(med(values))} ({f(min(values))}–{f(max(values))})"


SERVERS = ["webhook", "webhook-quiet", "floor", "constant", "parse-all"]
REFERENCES = ("floor", "constant", "parse-all")

# What each body name of load.sh stands for.
LABELS = {
    "validate": "/validate 07 denied",
    "allowed": "/validate 01 allowed",
    "mutate": "/mutate 07",
}


def label(endpoint):
    return LABELS.get(endpoint, "/" + endpoint)


def report(directory):
    directory = Path(directory)
    meta = json.loads((directory / "meta.json").read_text())
    runs = load_runs(directory)
    out = []
    w = out.append
    w(f"## Load benchmark results ({meta['started']})\n")
    w(f"Machine: {meta['cpu']}, {meta['nproc']} CPUs, {meta['mem']}, kernel {meta['kernel']}. "
      f"Load average before: {meta['loadavg_before']}; after: {meta.get('loadavg_after', '?')}. "
      f"Source: {meta['git']}. oha {meta['oha']}. {meta['rounds']} rounds × {meta['duration']} per cell, "
      f"interleaved (each cell runs the servers back to back). Medians across rounds; "
      f"(min–max) in brackets. Latencies in ms. "
      + (f"The first {meta['warmup']} s of every run (oha's start-up, the TLS handshakes) are "
         f"left out of req/s and the percentiles; errors count the whole run.\n"
         if float(meta.get("warmup", 0)) > 0 else "Whole runs, warm-up included.\n"))

    noisy = [r for r in runs if r.get("quiet") is False]
    w(f"Runs that started with the 1-minute load average at or above the cell limit: "
      f"{len(noisy)} of {len(runs)}"
      + (" (" + ", ".join(f"{r['server']} {r['endpoint']} {r['load']} at {r['loadavg_before']}"
                          for r in noisy[:8]) + ("…" if len(noisy) > 8 else "") + ")"
         if noisy else "") + ".\n")

    groups = {}
    for r in runs:
        if r["kind"] != "matrix":
            continue
        groups.setdefault((r["endpoint"], r["load"]), {}).setdefault(r["server"], []).append(r)
    loads = []
    for key in groups:
        if key[1] not in loads:
            loads.append(key[1])

    w("| endpoint | load | server | req/s | p50 | p99 | p99.9 | server CPU µs/req | errors / requests |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for (endpoint, load), by_server in groups.items():
        for server in SERVERS:
            rs = by_server.get(server, [])
            if not rs:
                continue
            w(f"| {label(endpoint)} | {load} | {server} | "
              f"{fmt_range([r['rps'] for r in rs], lambda v: f'{v:,.0f}')} | "
              f"{fmt_range([r['p50'] for r in rs], fmt_ms)} | "
              f"{fmt_range([r['p99'] for r in rs], fmt_ms)} | "
              f"{fmt_range([r['p999'] for r in rs], fmt_ms)} | "
              f"{fmt_range([r['cpu_us'] for r in rs if 'cpu_us' in r], lambda v: f'{v:.0f}')} | "
              f"{sum(r['errors'] for r in rs)} / {sum(r['requests'] for r in rs):,} |")
    w("")
    w("Ratios of medians (ours / reference). Throughput: higher is better for us; "
      "latency: lower is better.\n")
    present = [ref for ref in REFERENCES
                if any(ref in by_server for by_server in groups.values())]
    heads = [f"{name} ÷ {ref}" for name in ("req/s", "p50", "p99", "CPU/req") for ref in present]
    w("| endpoint | load | " + " | ".join(heads) + " |")
    w("|---|---|" + "---:|" * len(heads))
    for (endpoint, load), by_server in groups.items():
        def m(server, field):
            return med([r[field] for r in by_server.get(server, []) if field in r])
        cells = []
        for field in ("rps", "p50", "p99", "cpu_us"):
            for ref in present:
                denom = m(ref, field)
                ok = denom and denom == denom
                cells.append(f"{m('webhook', field) / denom:.2f}" if ok else "–")
        w(f"| {label(endpoint)} | {load} | " + " | ".join(cells) + " |")
    w("")
    targets(w, runs, groups)

    pretty = {}
    for r in runs:
        if r["kind"] == "pretty":
            pretty.setdefault(r["load"], {}).setdefault(r["server"], []).append(r)
    if pretty:
        w("### The same /validate request pretty-printed (the fixture file as captured)\n")
        w("| load | server | req/s compact | req/s pretty | p50 compact | p50 pretty "
          "| CPU µs/req compact | CPU µs/req pretty |")
        w("|---|---|---:|---:|---:|---:|---:|---:|")
        for load, by_server in pretty.items():
            compact_runs = groups.get(("validate", load), {})
            for server in SERVERS:
                rs = by_server.get(server, [])
                cs = compact_runs.get(server, [])
                if not rs:
                    continue
                cells = []
                for field, f in (("rps", lambda v: f"{v:,.0f}"), ("p50", fmt_ms),
                                 ("cpu_us", lambda v: f"{v:.0f}")):
                    for group in (cs, rs):
                        cells.append(fmt_range([r[field] for r in group if field in r], f))
                w(f"| {load} | {server} | " + " | ".join(cells) + " |")
        w("")

    rss = [r for r in runs if r["server"] == "webhook" and "rss_after_kib" in r]
    if rss:
        w(f"Webhook RSS: {meta.get('webhook_rss_idle_kib', 0) / 1024:.1f} MiB idle before the "
          f"matrix; largest after any run {max(r['rss_after_kib'] for r in rss) / 1024:.1f} MiB; "
          f"{meta.get('webhook_rss_end_kib', 0) / 1024:.1f} MiB at the end "
          f"({len(runs)} runs)."
          + ("".join([" Per c64 run (before → after): ", ", ".join(
              f"{r['rss_before_kib'] / 1024:.1f}→{r['rss_after_kib'] / 1024:.1f}"
              for r in rss if r["load"] == "c64"), " MiB."])
             if any(r["load"] == "c64" for r in rss) else "") + "\n")
    ref_rss = {}
    for r in runs:
        if r["server"] != "webhook" and "rss_after_kib" in r:
            ref_rss[r["server"]] = max(ref_rss.get(r["server"], 0), r["rss_after_kib"])
    if ref_rss:
        w("Reference servers' largest RSS after a run: "
          + ", ".join(f"{s} {v / 1024:.1f} MiB" for s, v in ref_rss.items()) + ".\n")

    scale = {}
    for r in runs:
        if r["kind"] == "scale":
            scale.setdefault((r["size"], r["body_bytes"]), {}).setdefault(r["server"], []).append(r)
    if scale:
        w("### Scale: concurrency 1, /validate, fixture 07 grown (object and oldObject each ≈ size)\n")
        w("| object size | body | server | req/s | p50 | p99 | p50 per body MiB |")
        w("|---|---:|---|---:|---:|---:|---:|")
        for (size, body), by_server in sorted(scale.items(), key=lambda kv: kv[0][1]):
            for server in SERVERS:
                rs = by_server.get(server, [])
                if not rs:
                    continue
                p50 = med([r["p50"] for r in rs])
                w(f"| {size} | {body / 1024:,.0f} KiB | {server} | "
                  f"{fmt_range([r['rps'] for r in rs], lambda v: f'{v:,.0f}')} | "
                  f"{fmt_range([r['p50'] for r in rs], fmt_ms)} | "
                  f"{fmt_range([r['p99'] for r in rs], fmt_ms)} | "
                  f"{p50 / (body / 1048576):.2f} ms |")
        w("")

    starts_file = directory / "starts.json"
    if starts_file.exists():
        starts = json.loads(starts_file.read_text())
        ms = [s["start_to_ready_ms"] for s in starts]
        idle = [s["idle_rss_kib"] / 1024 for s in starts]
        anon = [s.get("idle_rss_anon_kib", -1) / 1024 for s in starts]
        file_backed = [s.get("idle_rss_file_kib", -1) / 1024 for s in starts]
        w(f"Start to ready (exec → /readyz 200, certificates present), {len(ms)} starts: "
          f"median {med(ms):.1f} ms, min {min(ms):.1f}, max {max(ms):.1f} ms. "
          f"Idle RSS 1 s after ready: median {med(idle):.1f} MiB (max {max(idle):.1f}), of which "
          f"anonymous {med(anon):.1f} MiB and file-backed (the binary's code, libc) "
          f"{med(file_backed):.1f} MiB.\n")
    print("\n".join(out))


def targets(w, runs, groups):
    """The speed targets: the webhook's figures as ratios to the floor's,
    taken in the same run."""
    def m(endpoint, load, server, field):
        return med([r[field] for r in groups.get((endpoint, load), {}).get(server, [])
                    if field in r])

    def ratio(a, b):
        return f"{a / b:.2f}x" if a == a and b == b and b else "–"

    rows = []
    for endpoint, name in (("validate", "denied"), ("allowed", "allowed")):
        wh, fl = m(endpoint, "c1", "webhook", "p50"), m(endpoint, "c1", "floor", "p50")
        if wh == wh:
            rows.append((f"{name} review, c1 p50 ÷ floor",
                         f"{ratio(wh, fl)} ({wh:.3f} vs {fl:.3f} ms)", "<= 1.25x"))
    for endpoint, name in (("validate", "denied"), ("allowed", "allowed")):
        wh, fl = m(endpoint, "c8", "webhook", "rps"), m(endpoint, "c8", "floor", "rps")
        if wh == wh:
            share = f"{wh / fl:.1%} ({wh:,.0f} vs {fl:,.0f} req/s)" if fl == fl and fl else "–"
            rows.append((f"{name} review, c8 req/s, share of the floor's", share, ">= 60%"))
    big = [r for r in runs if r["kind"] == "scale" and r.get("size") == "1MiB"]
    wh = med([r["p99"] for r in big if r["server"] == "webhook"])
    fl = med([r["p99"] for r in big if r["server"] == "floor"])
    if wh == wh:
        rows.append(("1 MiB UPDATE (2 MiB compact body), c1 p99 ÷ floor",
                     f"{ratio(wh, fl)} ({wh:.2f} vs {fl:.2f} ms)", "<= 1.5x"))
    rss = [r for r in runs if r["kind"] == "rss" and r["server"] == "webhook"]
    if rss:
        rows.append(("RSS after the c64 run from a fresh start",
                     f"{med([r['rss_after_kib'] for r in rss]) / 1024:.1f} MiB", "<= 12 MiB"))
    if not rows:
        return
    w("### The speed targets\n")
    w("| figure | this run | target |")
    w("|---|---|---|")
    for row in rows:
        w("| " + " | ".join(row) + " |")
    w("")
    ref = [r for r in runs if r["kind"] == "rss" and r["server"] != "webhook"]
    if ref:
        w("Resident memory after the same c64 run: " + ", ".join(
            f"{r['server']} {r['rss_after_kib'] / 1024:.1f} MiB" for r in ref) + ".\n")


def soak_report(directory):
    directory = Path(directory)
    samples = [json.loads(line) for line in (directory / "rss.jsonl").read_text().splitlines()]
    data = json.loads((directory / "soak.json").read_text())
    pct = data["latencyPercentiles"]
    status = data.get("statusCodeDistribution", {})
    errors = sum(data.get("errorDistribution", {}).values()) + sum(
        n for c, n in status.items() if c != "200")
    print("## Soak\n")
    print(f"{sum(status.values()):,} requests, {data['summary']['requestsPerSec']:,.0f} req/s, "
          f"p50 {pct['p50'] * 1e3:.3f} ms, p99 {pct['p99'] * 1e3:.3f} ms, "
          f"p99.9 {pct['p99.9'] * 1e3:.3f} ms, errors {errors}.\n")
    print("| t (s) | VmRSS (MiB) |")
    print("|---:|---:|")
    for s in samples:
        print(f"| {s['t']} | {s['rss_kib'] / 1024:.1f} |")
    loaded = [s["rss_kib"] for s in samples if s["t"] == "end" or s["t"] >= 60]
    if len(loaded) >= 2:
        print(f"\nFrom t=60 s to the end: {loaded[0] / 1024:.1f} → {loaded[-1] / 1024:.1f} MiB "
              f"(min {min(loaded) / 1024:.1f}, max {max(loaded) / 1024:.1f}).")


def main(argv):
    if not argv:
        sys.exit(__doc__)
    cmd, args = argv[0], argv[1:]
    if cmd == "compact":
        compact(args[0], args[1])
    elif cmd == "grow":
        grow(args[0], int(args[1]), args[2])
    elif cmd == "check":
        check(*args)
    elif cmd == "ready":
        sep = args.index("--")
        ready(int(args[0]), args[1], int(args[2]), args[sep + 1:])
    elif cmd == "rss":
        print(rss_kib(int(args[0])))
    elif cmd == "trim":
        trim(args[0], float(args[1]), args[2])
    elif cmd == "report":
        report(args[0])
    elif cmd == "soak-report":
        soak_report(args[0])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
