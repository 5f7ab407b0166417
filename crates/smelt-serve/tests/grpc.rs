//! The gRPC protocol against a real server: health (inference and grpc.health.v1),
//! metadata, config, ModelInfer with raw and typed contents (bit-equal to a session), and
//! NOT_FOUND / INVALID_ARGUMENT errors.

mod common;
use common::*;
use smelt_serve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use smelt_serve::proto::model_infer_request::InferInputTensor;
use smelt_serve::proto::{self as pb};
use tonic::Code;

fn infer_request(rows: usize, data: &[f32], raw: bool) -> pb::ModelInferRequest {
    let mut input = InferInputTensor {
        name: "x".into(),
        datatype: "FP32".into(),
        shape: vec![rows as i64, 16],
        ..Default::default()
    };
    let mut req = pb::ModelInferRequest {
        model_name: "mlp".into(),
        id: "g1".into(),
        ..Default::default()
    };
    if raw {
        req.raw_input_contents = vec![le(data)];
    } else {
        input.contents = Some(pb::InferTensorContents {
            fp32_contents: data.to_vec(),
            ..Default::default()
        });
    }
    req.inputs = vec![input];
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_round_trips_and_errors() {
    let s = serve(options()).await;
    let url = format!("http://{}", s.grpc.unwrap());
    let mut c = GrpcInferenceServiceClient::connect(url.clone())
        .await
        .unwrap();
    assert!(
        c.server_live(pb::ServerLiveRequest {})
            .await
            .unwrap()
            .into_inner()
            .live
    );
    assert!(
        c.server_ready(pb::ServerReadyRequest {})
            .await
            .unwrap()
            .into_inner()
            .ready
    );
    let ready = c
        .model_ready(pb::ModelReadyRequest {
            name: "mlp".into(),
            version: String::new(),
        })
        .await
        .unwrap();
    assert!(ready.into_inner().ready);
    let meta = c
        .server_metadata(pb::ServerMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(meta.extensions.contains(&"binary_tensor_data".to_string()));
    let m = c
        .model_metadata(pb::ModelMetadataRequest {
            name: "mlp".into(),
            version: "1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (m.inputs[0].name.as_str(), m.inputs[0].datatype.as_str()),
        ("x", "FP32")
    );
    assert_eq!(m.inputs[0].shape, vec![-1, 16]);
    let cfg = c
        .model_config(pb::ModelConfigRequest {
            name: "mlp".into(),
            version: String::new(),
        })
        .await
        .unwrap();
    let cfg = cfg.into_inner().config.unwrap();
    assert_eq!(
        (cfg.max_batch_size, cfg.input[0].dims.clone()),
        (8, vec![16])
    );

    let data = x(2, 3);
    let want = reference(2, &data);
    for raw in [true, false] {
        let r = c
            .model_infer(infer_request(2, &data, raw))
            .await
            .unwrap()
            .into_inner();
        assert_eq!((r.model_name.as_str(), r.id.as_str()), ("mlp", "g1"));
        assert_eq!(r.outputs[0].shape, vec![2, 4]);
        assert_eq!(
            bits(&from_le(&r.raw_output_contents[0])),
            bits(&want),
            "raw inputs: {raw}"
        );
    }

    let mut bad = infer_request(2, &data, true);
    bad.model_name = "nope".into();
    assert_eq!(c.model_infer(bad).await.unwrap_err().code(), Code::NotFound);
    let mut bad = infer_request(2, &data, true);
    bad.raw_input_contents[0].pop();
    let e = c.model_infer(bad).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("input 'x'"), "{}", e.message());
    let mut bad = infer_request(2, &data, false);
    bad.inputs[0].datatype = "INT32".into();
    assert_eq!(
        c.model_infer(bad).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let no = c
        .model_ready(pb::ModelReadyRequest {
            name: "mlp".into(),
            version: "7".into(),
        })
        .await;
    assert_eq!(no.unwrap_err().code(), Code::NotFound);

    // The standard health service says SERVING once the models are ready.
    let ch = tonic::transport::Endpoint::from_shared(url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut h = tonic_health::pb::health_client::HealthClient::new(ch);
    let st = h
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(
        st.into_inner().status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    s.shutdown().await;
}
