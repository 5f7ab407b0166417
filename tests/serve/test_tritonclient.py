"""`smelt serve` driven by the real tritonclient (HTTP and gRPC): metadata, infer with
binary and JSON tensors (outputs bit-equal to `smelt run`), errors, overload, and a
batching check on MiniLM. Run by scripts/test-serve.sh, which sets SMELT to the binary."""

import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

ROOT = Path(__file__).resolve().parents[2]
SMELT = os.environ.get("SMELT", str(ROOT / "target/release/smelt"))
MLP = ROOT / "examples/mlp/model.onnx"
DATA = Path(os.environ.get("SMELT_CACHE", Path.home() / ".cache/smelt")) / "data"
MINILM = DATA / "models/minilm-b1/model.onnx"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `smelt serve` process on free local ports; stopped with SIGTERM."""

    def __init__(self, *args):
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        cmd = [SMELT, "serve", "--host", "127.0.0.1", "--http-port", str(self.http),
               "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics), *args]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        client = httpclient.InferenceServerClient(f"127.0.0.1:{self.http}")
        deadline = time.time() + 120
        while time.time() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                if client.is_server_ready():
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not get ready: " + self.output())

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def http_client(self, **kw):
        return httpclient.InferenceServerClient(f"127.0.0.1:{self.http}", **kw)

    def grpc_client(self):
        return grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc}")

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(timeout=60)
        assert code == 0, f"exit {code}: {self.output()}"


@pytest.fixture(scope="module")
def mlp():
    s = Server("--model", f"mlp={MLP}")
    yield s
    s.stop()


def smelt_run(model, inputs, tmp):
    """Outputs of `smelt run` on the same inputs (the reference: no server, no batching)."""
    Path(tmp).mkdir(parents=True, exist_ok=True)
    args = [SMELT, "run", str(model), "--output-dir", str(tmp)]
    for name, value in inputs.items():
        path = Path(tmp) / f"in_{name}.npy"
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    subprocess.run(args, check=True, capture_output=True)
    return {p.stem: np.load(p) for p in Path(tmp).glob("*.npy") if not p.stem.startswith("in_")}


def test_http_metadata(mlp):
    c = mlp.http_client()
    assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("mlp")
    assert "binary_tensor_data" in c.get_server_metadata()["extensions"]
    meta = c.get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert meta["outputs"][0]["name"] == "y"
    assert c.get_model_config("mlp")["max_batch_size"] == 8
    assert not c.is_model_ready("mlp", "4")


@pytest.mark.parametrize("binary", [True, False])
def test_http_infer_is_bit_equal_to_smelt_run(mlp, tmp_path, binary):
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    want = smelt_run(MLP, {"x": x}, tmp_path)["y"]
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    out = httpclient.InferRequestedOutput("y", binary_data=binary)
    r = mlp.http_client().infer("mlp", [inp], outputs=[out], request_id="7")
    got = r.as_numpy("y")
    assert got.dtype == np.float32 and got.shape == (5, 4)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert r.get_response()["id"] == "7"


def test_http_default_request_uses_the_binary_extension(mlp, tmp_path):
    x = np.random.default_rng(2).standard_normal((2, 16)).astype(np.float32)
    inp = httpclient.InferInput("x", [2, 16], "FP32")
    inp.set_data_from_numpy(x)
    got = mlp.http_client().infer("mlp", [inp]).as_numpy("y")
    assert np.array_equal(got, smelt_run(MLP, {"x": x}, tmp_path)["y"])


def test_grpc_metadata_and_infer(mlp, tmp_path):
    c = mlp.grpc_client()
    assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("mlp")
    assert "binary_tensor_data" in c.get_server_metadata().extensions
    meta = c.get_model_metadata("mlp")
    assert (meta.inputs[0].name, meta.inputs[0].datatype, list(meta.inputs[0].shape)) == ("x", "FP32", [-1, 16])
    assert c.get_model_config("mlp").config.max_batch_size == 8
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32)
    inp = grpcclient.InferInput("x", [3, 16], "FP32")
    inp.set_data_from_numpy(x)
    got = c.infer("mlp", [inp], outputs=[grpcclient.InferRequestedOutput("y")]).as_numpy("y")
    want = smelt_run(MLP, {"x": x}, tmp_path)["y"]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_errors_name_what_is_wrong(mlp):
    h, g = mlp.http_client(), mlp.grpc_client()
    x = np.zeros((1, 16), np.float32)
    for client, mod in [(h, httpclient), (g, grpcclient)]:
        inp = mod.InferInput("x", [1, 16], "FP32")
        inp.set_data_from_numpy(x)
        with pytest.raises(InferenceServerException) as e:
            client.infer("nope", [inp])
        assert "'nope'" in e.value.message()
        bad = mod.InferInput("x", [1, 16], "INT64")
        bad.set_data_from_numpy(x.astype(np.int64))
        with pytest.raises(InferenceServerException) as e:
            client.infer("mlp", [bad])
        assert "input 'x'" in e.value.message() and "INT64" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        h.get_model_metadata("nope")
    assert e.value.status() == "404"
    with pytest.raises(InferenceServerException) as e:
        g.get_model_metadata("nope")
    assert e.value.status() == "StatusCode.NOT_FOUND"


def test_overload_is_answered_with_503_and_the_server_recovers(tmp_path):
    s = Server("--model", f"mlp={MLP}", "--max-batch-size", "0", "--max-queue-size", "1", "--instances", "1")
    try:
        x = np.random.default_rng(4).standard_normal((20000, 16)).astype(np.float32)
        codes, lock = [], threading.Lock()

        def client():
            c = s.http_client()
            for _ in range(4):
                inp = httpclient.InferInput("x", list(x.shape), "FP32")
                inp.set_data_from_numpy(x)
                try:
                    c.infer("mlp", [inp])
                    code = "200"
                except InferenceServerException as e:
                    # The queue, or the compile lane while the new shape compiles, is full.
                    assert e.message().endswith("try again later"), e.message()
                    code = e.status()
                with lock:
                    codes.append(code)

        threads = [threading.Thread(target=client) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(codes) == 64
        assert set(codes) == {"200", "503"}, codes
        assert s.http_client().is_server_ready()
        metrics = subprocess.run(["python3", "-c", f"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:{s.metrics}/metrics').read().decode())"],
                                 check=True, capture_output=True, text=True).stdout
        failures = [l for l in metrics.splitlines() if l.startswith("nv_inference_request_failure{")]
        assert failures and int(failures[0].split()[-1]) == codes.count("503"), failures
    finally:
        s.stop()


@pytest.mark.skipif(not MINILM.exists(), reason="MiniLM test data not fetched (scripts/fetch-test-data.sh)")
def test_minilm_batched_outputs_are_bit_equal_to_batch_one(tmp_path):
    s = Server("--model", f"minilm={MINILM}", "--max-batch-size", "8", "--max-queue-delay-us", "20000")
    try:
        rng = np.random.default_rng(5)
        requests = []
        for _ in range(8):
            ids = rng.integers(1000, 20000, (1, 16)).astype(np.int64)
            requests.append({"input_ids": ids, "attention_mask": np.ones((1, 16), np.int64)})
        results = [None] * 8

        def client(k):
            inputs = []
            for name, v in requests[k].items():
                i = grpcclient.InferInput(name, list(v.shape), "INT64")
                i.set_data_from_numpy(v)
                inputs.append(i)
            r = s.grpc_client().infer("minilm", inputs)
            results[k] = {o.name: r.as_numpy(o.name) for o in r.get_response().outputs}

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k in range(8):
            want = smelt_run(MINILM, requests[k], tmp_path / str(k))
            for name, got in results[k].items():
                w = want[name.replace(":", "_")] if name.replace(":", "_") in want else want[name]
                assert got.shape == w.shape, name
                # The kernels are batch-invariant here: batched rows are bit-equal to batch 1.
                assert got.dtype == w.dtype, name
                assert np.array_equal(got.view(np.uint8), w.view(np.uint8)), name
        metrics = subprocess.run(["python3", "-c", f"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:{s.metrics}/metrics').read().decode())"],
                                 check=True, capture_output=True, text=True).stdout
        exec_count = [l for l in metrics.splitlines() if l.startswith("nv_inference_exec_count{")]
        # Eight requests within the 20 ms delay run in fewer than eight executions.
        assert int(exec_count[0].split()[-1]) < 8, exec_count
    finally:
        s.stop()
