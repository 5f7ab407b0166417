//! The gRPC side of the protocol: `inference.GRPCInferenceService` (health, metadata,
//! config and ModelInfer with raw or typed tensor contents) on tonic.

use crate::datatype;
use crate::error::{Result, ServeError};
use crate::http_infer::timeout_of;
use crate::meta;
use crate::model::{ServedModel, TensorSpec};
use crate::proto::grpc_inference_service_server::GrpcInferenceService;
use crate::proto::infer_parameter::ParameterChoice;
use crate::proto::{self as pb, model_infer_response, model_metadata_response};
use crate::state::{Decoded, State};
use crate::{grpc_contents, raw};
use smelt_ir::Tensor;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status};

/// The service over the server's state.
pub struct Service {
    /// The shared state.
    pub state: Arc<State>,
}

type Answer<T> = std::result::Result<Response<T>, Status>;

fn tensors(specs: &[TensorSpec]) -> Vec<model_metadata_response::TensorMetadata> {
    specs
        .iter()
        .map(|s| model_metadata_response::TensorMetadata {
            name: s.name.clone(),
            datatype: datatype::name(s.dtype).unwrap_or("?").into(),
            shape: s.shape.clone(),
        })
        .collect()
}

fn config(m: &ServedModel) -> pb::ModelConfig {
    let c = &m.config;
    pb::ModelConfig {
        name: m.name.clone(),
        platform: meta::PLATFORM.into(),
        backend: "smelt".into(),
        max_batch_size: i32::try_from(c.max_batch_size).unwrap_or(i32::MAX),
        input: m
            .inputs
            .iter()
            .map(|s| pb::ModelInput {
                name: s.name.clone(),
                data_type: datatype::config_code(s.dtype),
                dims: meta::config_dims(m, s),
            })
            .collect(),
        output: m
            .outputs
            .iter()
            .map(|s| pb::ModelOutput {
                name: s.name.clone(),
                data_type: datatype::config_code(s.dtype),
                dims: meta::config_dims(m, s),
            })
            .collect(),
        instance_group: vec![pb::ModelInstanceGroup {
            name: m.name.clone(),
            count: i32::try_from(c.instance_count).unwrap_or(i32::MAX),
            kind: pb::model_instance_group::Kind::Cpu as i32,
        }],
        scheduling_choice: c.dynamic_batching.as_ref().map(|b| {
            pb::model_config::SchedulingChoice::DynamicBatching(pb::ModelDynamicBatching {
                preferred_batch_size: b
                    .preferred_batch_size
                    .iter()
                    .map(|&n| i32::try_from(n).unwrap_or(i32::MAX))
                    .collect(),
                max_queue_delay_microseconds: b.max_queue_delay.as_micros() as u64,
            })
        }),
    }
}

fn uint_param(p: Option<&pb::InferParameter>) -> Option<u64> {
    match p?.parameter_choice.as_ref()? {
        ParameterChoice::Int64Param(v) => u64::try_from(*v).ok(),
        ParameterChoice::Uint64Param(v) => Some(*v),
        _ => None,
    }
}

/// Decodes a ModelInfer request's inputs (raw contents when given, one per input in order).
fn decode(m: &ServedModel, req: &pb::ModelInferRequest) -> Result<Decoded<(String, Vec<bool>)>> {
    let raw_given = !req.raw_input_contents.is_empty();
    if raw_given && req.raw_input_contents.len() != req.inputs.len() {
        return Err(ServeError::invalid(format!(
            "{} raw_input_contents for {} inputs; give one per input, in order",
            req.raw_input_contents.len(),
            req.inputs.len()
        )));
    }
    let mut inputs = Vec::with_capacity(req.inputs.len().min(m.inputs.len()));
    for (k, i) in req.inputs.iter().enumerate() {
        let (pos, dtype, shape) = m.check_wire_input(&i.name, &i.datatype, &i.shape)?;
        let t = match (raw_given, &i.contents) {
            (true, Some(_)) => {
                return Err(ServeError::invalid(format!(
                    "input '{}' has contents, but raw_input_contents is used",
                    i.name
                )))
            }
            (true, None) => raw::decode(&i.name, dtype, shape, &req.raw_input_contents[k])?,
            (false, Some(c)) => grpc_contents::decode(&i.name, dtype, shape, c)?,
            (false, None) => {
                return Err(ServeError::invalid(format!(
                    "input '{}' has no data",
                    i.name
                )))
            }
        };
        inputs.push((pos, t));
    }
    let mut wanted = vec![req.outputs.is_empty(); m.outputs.len()];
    for o in &req.outputs {
        let pos = m.output_position(&o.name)?;
        wanted[pos] = true;
    }
    Ok(Decoded {
        inputs,
        timeout: timeout_of(uint_param(req.parameters.get("timeout"))),
        extra: (req.id.clone(), wanted),
    })
}

fn encode(
    m: &ServedModel,
    outputs: Vec<Tensor>,
    (id, wanted): (String, Vec<bool>),
) -> Result<pb::ModelInferResponse> {
    let mut resp = pb::ModelInferResponse {
        model_name: m.name.clone(),
        model_version: m.version.clone(),
        id,
        ..Default::default()
    };
    for ((spec, t), want) in m.outputs.iter().zip(outputs).zip(wanted) {
        if !want {
            continue;
        }
        resp.outputs.push(model_infer_response::InferOutputTensor {
            name: spec.name.clone(),
            datatype: datatype::name(t.dtype()).unwrap_or("?").into(),
            shape: t.shape().iter().map(|&d| d as i64).collect(),
            ..Default::default()
        });
        resp.raw_output_contents.push(raw::encode(&t)?);
    }
    Ok(resp)
}

#[tonic::async_trait]
impl GrpcInferenceService for Service {
    async fn server_live(
        &self,
        _: Request<pb::ServerLiveRequest>,
    ) -> Answer<pb::ServerLiveResponse> {
        Ok(Response::new(pb::ServerLiveResponse { live: true }))
    }

    async fn server_ready(
        &self,
        _: Request<pb::ServerReadyRequest>,
    ) -> Answer<pb::ServerReadyResponse> {
        Ok(Response::new(pb::ServerReadyResponse {
            ready: self.state.is_ready(),
        }))
    }

    async fn model_ready(
        &self,
        r: Request<pb::ModelReadyRequest>,
    ) -> Answer<pb::ModelReadyResponse> {
        let r = r.into_inner();
        let m = self.state.model(&r.name, Some(&r.version))?;
        Ok(Response::new(pb::ModelReadyResponse {
            ready: m.is_ready(),
        }))
    }

    async fn server_metadata(
        &self,
        _: Request<pb::ServerMetadataRequest>,
    ) -> Answer<pb::ServerMetadataResponse> {
        Ok(Response::new(pb::ServerMetadataResponse {
            name: meta::SERVER_NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            extensions: meta::EXTENSIONS.iter().map(|s| s.to_string()).collect(),
        }))
    }

    async fn model_metadata(
        &self,
        r: Request<pb::ModelMetadataRequest>,
    ) -> Answer<pb::ModelMetadataResponse> {
        let r = r.into_inner();
        let m = self.state.model(&r.name, Some(&r.version))?;
        Ok(Response::new(pb::ModelMetadataResponse {
            name: m.name.clone(),
            versions: vec![m.version.clone()],
            platform: meta::PLATFORM.into(),
            inputs: tensors(&m.inputs),
            outputs: tensors(&m.outputs),
        }))
    }

    async fn model_config(
        &self,
        r: Request<pb::ModelConfigRequest>,
    ) -> Answer<pb::ModelConfigResponse> {
        let r = r.into_inner();
        let m = self.state.model(&r.name, Some(&r.version))?;
        Ok(Response::new(pb::ModelConfigResponse {
            config: Some(config(&m)),
        }))
    }

    async fn model_infer(
        &self,
        r: Request<pb::ModelInferRequest>,
    ) -> Answer<pb::ModelInferResponse> {
        let started = Instant::now();
        let req = r.into_inner();
        let m = self
            .state
            .model(&req.model_name, Some(&req.model_version))?;
        let resp = self
            .state
            .infer(&m, started, |m| decode(m, &req), encode)
            .await?;
        Ok(Response::new(resp))
    }
}
