//! The REST protocol against a real server on an ephemeral port: health and metadata,
//! infer with JSON and with the binary tensor data extension (outputs bit-equal to a
//! session's), the errors and their status codes, and the metrics.

mod common;
use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metadata_and_not_found() {
    let s = serve(options()).await;
    let a = s.http.unwrap();
    for path in [
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models/mlp/ready",
        "/v2/models/mlp/versions/1/ready",
    ] {
        let r = call(a, "GET", path, vec![], vec![]).await;
        assert_eq!(r.status, 200, "{path}");
        assert!(r.body.is_empty(), "{path}");
    }
    let v2 = call(a, "GET", "/v2", vec![], vec![]).await.json();
    assert_eq!(v2["name"], "smelt");
    assert!(v2["extensions"]
        .as_array()
        .unwrap()
        .contains(&json!("binary_tensor_data")));
    let m = call(a, "GET", "/v2/models/mlp", vec![], vec![])
        .await
        .json();
    assert_eq!(m["platform"], "onnx_onnxv1");
    assert_eq!(
        m["inputs"],
        json!([{"name": "x", "datatype": "FP32", "shape": [-1, 16]}])
    );
    assert_eq!(
        m["outputs"],
        json!([{"name": "y", "datatype": "FP32", "shape": [-1, 4]}])
    );
    let c = call(a, "GET", "/v2/models/mlp/config", vec![], vec![])
        .await
        .json();
    assert_eq!(c["max_batch_size"], 8);
    assert_eq!(c["input"][0]["dims"], json!([16]));
    for path in [
        "/v2/models/nope",
        "/v2/models/mlp/versions/2",
        "/v2/models/nope/ready",
        "/v3",
    ] {
        let r = call(a, "GET", path, vec![], vec![]).await;
        assert_eq!(r.status, 404, "{path}");
        assert!(r.json()["error"].is_string(), "{path}");
    }
    let r = call(a, "POST", "/v2/models/nope/infer", vec![], b"{}".to_vec()).await;
    assert_eq!(r.status, 404);
    assert!(r.json()["error"].as_str().unwrap().contains("'nope'"));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_binary_infer_match_a_session_bit_for_bit() {
    let s = serve(options()).await;
    let a = s.http.unwrap();
    let data = x(3, 7);
    let want = reference(3, &data);
    // JSON in, JSON out, nested data.
    let nested: Vec<Vec<f32>> = data.chunks(16).map(|c| c.to_vec()).collect();
    let body = json!({"id": "r1", "inputs": [{"name": "x", "shape": [3, 16], "datatype": "FP32", "data": nested}]});
    let r = call(
        a,
        "POST",
        "/v2/models/mlp/infer",
        vec![],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let j = r.json();
    assert_eq!(
        (j["id"].clone(), j["model_name"].clone()),
        (json!("r1"), json!("mlp"))
    );
    assert_eq!(j["outputs"][0]["shape"], json!([3, 4]));
    let got: Vec<f32> = j["outputs"][0]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(bits(&got), bits(&want));
    // Binary in, binary out (as tritonclient sends by default), on the versioned route.
    let head = json!({
        "inputs": [{"name": "x", "shape": [3, 16], "datatype": "FP32", "parameters": {"binary_data_size": 3 * 16 * 4}}],
        "parameters": {"binary_data_output": true}
    })
    .to_string();
    let mut body = head.clone().into_bytes();
    body.extend_from_slice(&le(&data));
    let hdr = vec![("Inference-Header-Content-Length", head.len().to_string())];
    let r = call(a, "POST", "/v2/models/mlp/versions/1/infer", hdr, body).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let n: usize = r
        .header("inference-header-content-length")
        .unwrap()
        .parse()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&r.body[..n]).unwrap();
    assert_eq!(j["outputs"][0]["parameters"]["binary_data_size"], 3 * 4 * 4);
    assert_eq!(bits(&from_le(&r.body[n..])), bits(&want));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_answered_with_the_protocols_codes() {
    let mut o = options();
    o.max_body_bytes = 4096;
    let s = serve(o).await;
    let a = s.http.unwrap();
    let infer = |body: serde_json::Value| {
        call(
            a,
            "POST",
            "/v2/models/mlp/infer",
            vec![],
            body.to_string().into_bytes(),
        )
    };
    let x1 = x(1, 1);
    let cases = [
        (
            json!({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "INT64", "data": vec![1; 16]}]}),
            "datatype INT64",
        ),
        (
            json!({"inputs": [{"name": "x", "shape": [1, 15], "datatype": "FP32", "data": vec![1.0; 15]}]}),
            "shape [1, 15]",
        ),
        (
            json!({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": vec![1.0; 15]}]}),
            "needs 16",
        ),
        (
            json!({"inputs": [{"name": "x", "shape": [-1, 16], "datatype": "FP32", "data": x1}]}),
            "dim -1",
        ),
        (
            json!({"inputs": [{"name": "z", "shape": [1, 16], "datatype": "FP32", "data": x1}]}),
            "unexpected input 'z'",
        ),
        (json!({"inputs": []}), "missing input 'x'"),
        (
            json!({"inputs": [{"name": "x", "shape": [9, 16], "datatype": "FP32", "data": vec![0.0; 144]}]}),
            "batch size 9",
        ),
        (
            json!({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": x1}], "outputs": [{"name": "q"}]}),
            "output 'q'",
        ),
        (
            json!({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP8", "data": x1}]}),
            "datatype 'FP8'",
        ),
        (json!({"inputs": "x"}), "not valid JSON"),
    ];
    for (body, says) in cases {
        let r = infer(body.clone()).await;
        assert_eq!(r.status, 400, "{body}");
        let e = r.json()["error"].as_str().unwrap().to_string();
        assert!(e.contains(says), "{e} should say {says}");
    }
    // Binary sizes that do not match the shape, or run past the body.
    for (size, sent, says) in [(60, 60, "needs 64"), (64, 74, "10 bytes"), (64, 20, "left")] {
        let head = json!({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": size}}]}).to_string();
        let mut body = head.clone().into_bytes();
        body.extend(std::iter::repeat_n(0u8, sent));
        let r = call(
            a,
            "POST",
            "/v2/models/mlp/infer",
            vec![("Inference-Header-Content-Length", head.len().to_string())],
            body,
        )
        .await;
        assert_eq!(r.status, 400);
        let e = r.json()["error"].as_str().unwrap().to_string();
        assert!(e.contains(says), "{e} should say {says}");
    }
    let r = call(
        a,
        "POST",
        "/v2/models/mlp/infer",
        vec![("Inference-Header-Content-Length", "999".into())],
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(r.status, 400);
    // Past the body limit: 413, still a JSON error.
    let r = call(a, "POST", "/v2/models/mlp/infer", vec![], vec![b' '; 8192]).await;
    assert_eq!(r.status, 413);
    assert!(r.json()["error"].as_str().unwrap().contains("4096"));
    // A request timeout of 1 us expires in the queue.
    let body = json!({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": x1}], "parameters": {"timeout": 1}});
    let r = infer(body).await;
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.json()["error"].as_str().unwrap().contains("timed out"));
    // Failures are counted, per model.
    let m = call(s.metrics.unwrap(), "GET", "/metrics", vec![], vec![]).await;
    let text = String::from_utf8(m.body).unwrap();
    let failures = text
        .lines()
        .find(|l| l.starts_with("nv_inference_request_failure{"))
        .unwrap();
    assert!(failures.ends_with(" 16"), "{failures}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_batched_and_counted() {
    let mut o = options();
    o.max_queue_delay = std::time::Duration::from_millis(200);
    let s = serve(o).await;
    let a = s.http.unwrap();
    let mut tasks = Vec::new();
    for k in 0..8u32 {
        tasks.push(tokio::spawn(async move {
            let data = x(1, 100 + k);
            let body = json!({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": data}]});
            let r = call(a, "POST", "/v2/models/mlp/infer", vec![], body.to_string().into_bytes()).await;
            (data, r)
        }));
    }
    for t in tasks {
        let (data, r) = t.await.unwrap();
        assert_eq!(r.status, 200);
        let got: Vec<f32> = r.json()["outputs"][0]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        // The kernels are batch-invariant: rows run in a batch of 8 are bit-equal to batch 1.
        assert_eq!(bits(&got), bits(&reference(1, &data)));
    }
    let text = String::from_utf8(
        call(s.metrics.unwrap(), "GET", "/metrics", vec![], vec![])
            .await
            .body,
    )
    .unwrap();
    let value = |name: &str| -> u64 {
        let l = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{model=\"mlp\"")))
            .unwrap();
        l.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("nv_inference_request_success"), 8);
    assert_eq!(value("nv_inference_count"), 8);
    // Eight requests within the 200 ms delay of the first fill one batch of 8.
    assert!(value("nv_inference_exec_count") < 8, "{text}");
    assert!(value("nv_inference_queue_duration_us") > 0);
    s.shutdown().await;
}
