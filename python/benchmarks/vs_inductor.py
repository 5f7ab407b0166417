"""torch.compile(backend="smelt") against torch.compile's default backend (Inductor) and
eager, side by side in one run: one worker process per backend (so that Inductor's OpenMP
threads, torch's and smelt's pool do not fight over the cores), the same seeded model and
input in each, the same CPU threads. Each worker reports its compile time (the first call:
Dynamo's tracing and the backend's compilation, Inductor with an empty cache) and checks its
output against eager (rtol 1e-3, atol 1e-4); then the parent interleaves timed blocks
between the workers (ABBA order) and reports steady-state latency.

    python python/benchmarks/vs_inductor.py --model resnet18 [--iters 100] [--json out.json]
    python python/benchmarks/vs_inductor.py --model encoder

Models are the test modules (python/tests/torch_models.py): resnet18 at 1x3x224x224,
encoder (d_model 384, 6 heads, FFN 1536) at 1x128x384, mlp at 1x64.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def model_and_input(name):
    import torch

    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import torch_models as tm

    g = torch.Generator().manual_seed(1)
    if name == "resnet18":
        return tm.seeded(tm.ResNet18()), torch.randn(1, 3, 224, 224, generator=g)
    if name == "encoder":
        return tm.seeded(tm.encoder_block()), torch.randn(1, 128, 384, generator=g)
    if name == "mlp":
        return tm.seeded(tm.MLP()), torch.randn(1, 64, generator=g)
    raise SystemExit(f"unknown model {name}")


def worker(model_name, backend, threads, fastpath):
    """Compiles, checks, then answers 'run N' with N per-call times (s), one JSON line each."""
    import torch

    torch.set_num_threads(threads)
    torch.backends.mha.set_fastpath_enabled(fastpath)
    model, x = model_and_input(model_name)
    with torch.no_grad():
        ref = model(x)
        fn = model if backend == "eager" else torch.compile(model, backend=backend)
        t = time.perf_counter()
        y = fn(x)
        first = time.perf_counter() - t
        err = (y - ref).abs().max().item()
        hello = {"compile_s": first if backend != "eager" else None, "max_abs_err": err,
                 "close": bool(torch.allclose(y, ref, rtol=1e-3, atol=1e-4)),
                 "torch": torch.__version__, "threads": torch.get_num_threads()}
        if backend == "smelt":
            import smelt.dynamo

            g = smelt.dynamo.report().graphs
            hello["export_s"] = sum(r.export_seconds for r in g)
            hello["smelt_compile_s"] = sum(r.compile_seconds for r in g)
            hello["on_smelt"] = all(r.backend == "smelt" for r in g)
        for _ in range(3):
            fn(x)
        print(json.dumps(hello), flush=True)
        for line in sys.stdin:
            if not line.startswith("run"):
                break
            times = []
            for _ in range(int(line.split()[1])):
                t = time.perf_counter()
                fn(x)
                times.append(time.perf_counter() - t)
            print(json.dumps(times), flush=True)


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "encoder", "mlp"])
    ap.add_argument("--iters", type=int, default=100, help="timed calls per backend")
    ap.add_argument("--blocks", type=int, default=10, help="interleaved blocks")
    ap.add_argument("--threads", type=int, default=0, help="threads for every backend (0: torch's default)")
    ap.add_argument("--no-mha-fastpath", action="store_true",
                    help="turn off the fused fast path of nn.TransformerEncoderLayer/MultiheadAttention "
                         "(Dynamo then traces its Python decomposition)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "BACKEND"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.threads == 0:
        import torch

        a.threads = torch.get_num_threads()
    if a.worker:
        return worker(a.worker[0], a.worker[1], a.threads, not a.no_mha_fastpath)
    cache = tempfile.mkdtemp(prefix="smelt-vs-inductor-")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
    names = ["eager", "smelt", "inductor"]
    procs, hello = {}, {}
    for name in names:  # one at a time: a compile does not compete with another's
        p = subprocess.Popen(
            [sys.executable, __file__, "--worker", a.model, name, "--threads", str(a.threads)]
            + (["--no-mha-fastpath"] if a.no_mha_fastpath else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        procs[name] = p
        hello[name] = json.loads(p.stdout.readline())
        h = hello[name]
        comp = f"{h['compile_s']:7.2f} s" if h["compile_s"] is not None else "      -  "
        print(f"{name:9s} first call (compile) {comp}  max |err| vs eager {h['max_abs_err']:.2e}  "
              f"close: {h['close']}", flush=True)
    times = {n: [] for n in names}
    per = max(1, a.iters // a.blocks)
    for b in range(a.blocks):
        for name in names if b % 2 == 0 else list(reversed(names)):
            procs[name].stdin.write(f"run {per}\n")
            procs[name].stdin.flush()
            times[name] += json.loads(procs[name].stdout.readline())
    for p in procs.values():
        p.stdin.write("quit\n")
        p.stdin.close()
        p.wait()
    fp = ", MHA fast path off" if a.no_mha_fastpath else ""
    print(f"\n{a.model}{fp} on {a.threads} threads (torch {hello['eager']['torch']}), "
          f"{per * a.blocks} calls each in {a.blocks} interleaved blocks:")
    print(f"{'backend':9s} {'p50 ms':>9s} {'p90 ms':>9s} {'mean ms':>9s} {'compile s':>10s}")
    out = {"model": a.model, "threads": a.threads, "torch": hello["eager"]["torch"], "results": {}}
    for name in names:
        ms = [t * 1e3 for t in times[name]]
        row = dict(hello[name], p50_ms=statistics.median(ms), p90_ms=percentile(ms, 0.9),
                   mean_ms=statistics.fmean(ms))
        out["results"][name] = row
        comp = f"{row['compile_s']:10.2f}" if row["compile_s"] is not None else f"{'-':>10s}"
        print(f"{name:9s} {row['p50_ms']:9.3f} {row['p90_ms']:9.3f} {row['mean_ms']:9.3f} {comp}")
    s, i = out["results"]["smelt"]["p50_ms"], out["results"]["inductor"]["p50_ms"]
    print(f"smelt/inductor p50 ratio {s / i:.3f}: smelt is {max(s, i) / min(s, i):.2f}x "
          f"{'faster' if s < i else 'slower'}")
    h = hello["smelt"]
    print(f"smelt's first call: ONNX export {h['export_s']:.2f} s, smelt compile "
          f"{h['smelt_compile_s']:.2f} s, the rest Dynamo; every graph on smelt: {h['on_smelt']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
