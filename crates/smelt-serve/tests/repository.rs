//! A model repository in Triton's layout: the config's batching, queue and instance
//! settings show in the model's config; and overload is answered with 503s, never queued
//! without bound.

mod common;
use common::*;
use serde_json::json;

fn repository(config: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "smelt-serve-test-{}-{}",
        std::process::id(),
        config.len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("mlp/3")).unwrap();
    std::fs::copy(mlp(), dir.join("mlp/3/model.onnx")).unwrap();
    std::fs::write(dir.join("mlp/config.pbtxt"), config).unwrap();
    dir
}

fn repo_options(dir: &std::path::Path) -> smelt_serve::ServeOptions {
    smelt_serve::ServeOptions {
        models: Vec::new(),
        repository: Some(dir.to_path_buf()),
        ..options()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triton_config_is_served_as_written() {
    let dir = repository(
        r#"name: "mlp"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 500 }
instance_group [ { count: 2 kind: KIND_CPU } ]
"#,
    );
    let s = serve(repo_options(&dir)).await;
    let a = s.http.unwrap();
    let m = call(a, "GET", "/v2/models/mlp", vec![], vec![])
        .await
        .json();
    assert_eq!(m["versions"], json!(["3"]));
    let c = call(a, "GET", "/v2/models/mlp/versions/3/config", vec![], vec![])
        .await
        .json();
    assert_eq!(c["max_batch_size"], 4);
    assert_eq!(c["instance_group"][0]["count"], 2);
    assert_eq!(c["dynamic_batching"]["preferred_batch_size"], json!([2, 4]));
    assert_eq!(
        call(a, "GET", "/v2/models/mlp/versions/1/ready", vec![], vec![])
            .await
            .status,
        404
    );
    let data = x(4, 5);
    let body =
        json!({"inputs": [{"name": "x", "shape": [4, 16], "datatype": "FP32", "data": data}]});
    let r = call(
        a,
        "POST",
        "/v2/models/mlp/versions/3/infer",
        vec![],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200);
    let got: Vec<f32> = r.json()["outputs"][0]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(bits(&got), bits(&reference(4, &data)));
    s.shutdown().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_answered_with_503() {
    // No batching, one instance, a queue of one: large requests from 16 clients overflow it.
    let s = serve(smelt_serve::ServeOptions {
        max_batch_size: 0,
        max_queue_size: 1,
        instances: 1,
        ..options()
    })
    .await;
    let a = s.http.unwrap();
    let rows = 20_000;
    let data = le(&x(rows, 9));
    let head = json!({"inputs": [{"name": "x", "shape": [rows, 16], "datatype": "FP32", "parameters": {"binary_data_size": data.len()}}], "outputs": [{"name": "y", "parameters": {"binary_data": true}}]}).to_string();
    let mut body = head.clone().into_bytes();
    body.extend_from_slice(&data);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (body, head_len) = (body.clone(), head.len());
        tasks.push(tokio::spawn(async move {
            let mut codes = Vec::new();
            for _ in 0..4 {
                let r = call(
                    a,
                    "POST",
                    "/v2/models/mlp/infer",
                    vec![("Inference-Header-Content-Length", head_len.to_string())],
                    body.clone(),
                )
                .await;
                // The queue, or the compile lane while the new shape compiles, is full.
                if r.status == 503 {
                    assert!(r.json()["error"]
                        .as_str()
                        .unwrap()
                        .ends_with("try again later"));
                }
                codes.push(r.status);
            }
            codes
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.extend(t.await.unwrap());
    }
    let ok = codes.iter().filter(|&&c| c == 200).count();
    let busy = codes.iter().filter(|&&c| c == 503).count();
    assert_eq!(ok + busy, 64, "{codes:?}");
    assert!(ok > 0 && busy > 0, "{ok} answered, {busy} refused");
    assert_eq!(
        call(a, "GET", "/v2/health/ready", vec![], vec![])
            .await
            .status,
        200
    );
    s.shutdown().await;
}
