//! The run's AdamW optimizer, and its state in a checkpoint.

use super::config::OptimSection;
use crate::llama::Llama;
use anyhow::{Result, anyhow, bail};
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::record::{AdaptorRecord, AdaptorRecordV1};
use burn::optim::{AdamW, AdamWConfig, GradientsParams, Optimizer};
use burn::record::{
    BinBytesRecorder, BinFileRecorder, BurnRecord, FullPrecisionSettings, Record, Recorder,
    RecorderError,
};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Shape, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub type AdamOptimizer<B> = OptimizerAdaptor<AdamW, Llama<B>, B>;
type State<B> = <AdamOptimizer<B> as Optimizer<Llama<B>, B>>::Record;

/// AdamW as `optim` sets it. Its gradients are clipped before they reach
/// it, by [`clip_to_norm`]: burn's own clipping scales each parameter's
/// gradient on its own, which turns the update, where clipping the whole
/// gradient only shortens it.
pub fn new<B: AutodiffBackend>(optim: &OptimSection) -> AdamOptimizer<B> {
    AdamWConfig::new()
        .with_beta_1(optim.beta1)
        .with_beta_2(optim.beta2)
        .with_epsilon(optim.epsilon)
        .with_weight_decay(optim.weight_decay)
        .init()
}

/// Scales the whole gradient `grads` of `model`, of L2 norm `norm` (see
/// [`grad_norm`]), down to norm `max_norm` if it is longer.
pub fn clip_to_norm<B: AutodiffBackend>(
    model: &Llama<B>,
    grads: &mut GradientsParams,
    norm: f64,
    max_norm: f64,
) {
    struct Scale<'a> {
        grads: &'a mut GradientsParams,
        factor: f64,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(grad) = self.grads.remove::<B::InnerBackend, D>(param.id) {
                self.grads
                    .register(param.id, grad.mul_scalar(self.factor as f32));
            }
        }
    }
    if max_norm > 0.0 && norm > max_norm {
        model.visit(&mut Scale {
            grads,
            factor: max_norm / norm,
        });
    }
}

/// The L2 norm of the whole gradient `grads` of `model`, before clipping:
/// the step-size diagnostic every trainer logs (a spike or a steady climb
/// is an unstable run long before the reward shows it). The squares are
/// summed on the device and read back once.
pub fn grad_norm<B: AutodiffBackend>(model: &Llama<B>, grads: &GradientsParams) -> f64 {
    struct Squares<'a, B: AutodiffBackend> {
        grads: &'a GradientsParams,
        sum: Option<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Squares<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let Some(grad) = self.grads.get::<B::InnerBackend, D>(param.id) else {
                return;
            };
            let squares = grad.powi_scalar(2).sum();
            self.sum = Some(match self.sum.take() {
                Some(sum) => sum + squares,
                None => squares,
            });
        }
    }
    let mut squares = Squares::<B> { grads, sum: None };
    model.visit(&mut squares);
    squares
        .sum
        .map_or(0.0, |sum| sum.into_scalar().elem::<f64>().sqrt())
}

type StateRecorder = BinFileRecorder<FullPrecisionSettings>;

/// The file the state saved at `path` lies in: the recorder adds its
/// extension.
pub fn state_file(path: &Path) -> PathBuf {
    path.with_extension("bin")
}

/// Writes `optimizer`'s state to `path`, its parameters in the order of
/// their ids: burn keeps them in a `HashMap`, whose order changes from one
/// process to the next, and the same run must give the same bytes. A map
/// reads back the same whichever order it was written in. The bytes are
/// [`StateRecorder`]'s, written here: whole or not at all, and a failure
/// (a full disk) told as the system tells it.
pub fn save<B: AutodiffBackend>(optimizer: &AdamOptimizer<B>, path: &Path) -> Result<()> {
    let by_id: BTreeMap<_, _> = optimizer
        .to_record()
        .into_item::<FullPrecisionSettings>()
        .into_iter()
        .collect();
    let bytes = Recorder::<B>::save_item(
        &BinBytesRecorder::<FullPrecisionSettings>::new(),
        BurnRecord::<_, B>::new::<StateRecorder>(by_id),
        (),
    )
    .map_err(|err| anyhow!("encoding the optimizer state: {err}"))?;
    crate::checkpoint::write_atomically(&state_file(path), &bytes)
        .map_err(|err| anyhow!("writing the optimizer state: {err:#}"))
}

/// The optimizer of [`new`] carrying the state saved at `path` for `model`.
///
/// State whose moments do not have their parameters' shapes (another model's,
/// or one from before a change of weight layout) is refused here: loaded as
/// it is, it would only fail at the next step, deep inside the update.
pub fn load<B: AutodiffBackend>(
    optim: &OptimSection,
    model: &Llama<B>,
    path: &Path,
    device: &B::Device,
) -> Result<AdamOptimizer<B>> {
    let file = state_file(path);
    let state: State<B> = StateRecorder::new()
        .load(path.to_owned(), device)
        .map_err(|err| match err {
            RecorderError::FileNotFound(_) => {
                anyhow!(
                    "reading the optimizer state {}: no such file",
                    file.display()
                )
            }
            // burn's message for a file it cannot decode is a nested dump
            // that blames a change of its record format.
            _ => anyhow!(
                "reading the optimizer state {}: the file is damaged or cut short, so the run \
                 cannot resume from this checkpoint (an earlier one in checkpoints/ may do: \
                 name it in checkpoints/latest)",
                file.display()
            ),
        })?;
    if let Some(mismatch) = first_mismatch(model, &state) {
        bail!(
            "the optimizer state {} does not fit the model: {mismatch}; it belongs to another \
             model or to an older layout of this one, so this run cannot resume from it",
            path.display()
        );
    }
    Ok(new(optim).load_record(state))
}

/// The first parameter of `model` whose moments in `state` have another
/// shape, described; `None` when all fit.
fn first_mismatch<B: AutodiffBackend>(model: &Llama<B>, state: &State<B>) -> Option<String> {
    struct Shapes<'a, B: AutodiffBackend> {
        state: &'a State<B>,
        path: Vec<String>,
        mismatch: Option<String>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Shapes<'_, B> {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_owned());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if self.mismatch.is_some() {
                return;
            }
            let Some(record) = self.state.get(&param.id) else {
                return;
            };
            let shape = param.val().shape();
            let moment = moment_shape(record);
            if moment.as_ref() != Some(&shape) {
                let moment = moment.map_or_else(|| "of another rank".to_owned(), |m| m.to_string());
                self.mismatch = Some(format!(
                    "`{}` is {shape} but its moments are {moment}",
                    self.path.join(".")
                ));
            }
        }
    }
    let mut shapes = Shapes {
        state,
        path: Vec::new(),
        mismatch: None,
    };
    model.visit(&mut shapes);
    shapes.mismatch
}

/// The shape of a parameter's first moment in `record`; `None` for a rank
/// no parameter of the model has. Read from the record's rank rather than
/// converted to the parameter's, which panics when the ranks differ.
fn moment_shape<B: AutodiffBackend>(record: &AdaptorRecord<AdamW, B>) -> Option<Shape> {
    match record {
        AdaptorRecord::V1(AdaptorRecordV1::Rank1(state)) => Some(state.momentum.moment_1.shape()),
        AdaptorRecord::V1(AdaptorRecordV1::Rank2(state)) => Some(state.momentum.moment_1.shape()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Architecture, LlamaConfig};
    use crate::train::CpuTrain;
    use burn::optim::GradientsParams;

    /// A model after one AdamW step, and the optimizer that took it.
    fn stepped(config: LlamaConfig) -> (Llama<CpuTrain>, AdamOptimizer<CpuTrain>) {
        let device = Default::default();
        let model = Llama::<CpuTrain>::init(config, 7, &device);
        let mut optimizer = new::<CpuTrain>(&OptimSection::default());
        let loss = model.forward_batch(&[&[1, 2, 3]]).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let model = optimizer.step(1e-3, model, grads);
        (model, optimizer)
    }

    #[test]
    fn the_gradient_norm_is_the_l2_norm_of_the_whole_gradient() {
        let device = Default::default();
        let model = Llama::<CpuTrain>::init(LlamaConfig::tiny(32), 7, &device);
        let norm_of = |scale: f32| {
            let loss = model.forward_batch(&[&[1, 2, 3]]).sum().mul_scalar(scale);
            grad_norm(
                &model,
                &GradientsParams::from_grads(loss.backward(), &model),
            )
        };
        let (once, thrice) = (norm_of(1.0), norm_of(3.0));
        assert!(once.is_finite() && once > 0.0, "{once}");
        // A norm, not a sum of squares: it scales with the loss.
        assert!((thrice / once - 3.0).abs() < 1e-4, "{once} {thrice}");
        assert_eq!(grad_norm(&model, &GradientsParams::new()), 0.0);
    }

    #[test]
    fn clipping_shortens_the_whole_gradient_without_turning_it() {
        let device = Default::default();
        let model = Llama::<CpuTrain>::init(LlamaConfig::tiny(32), 7, &device);
        let loss = model.forward_batch(&[&[1, 2, 3]]).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let norm = grad_norm(&model, &grads);
        let flat = |grads: &GradientsParams| {
            struct Values<'a> {
                grads: &'a GradientsParams,
                values: Vec<f32>,
            }
            impl ModuleVisitor<CpuTrain> for Values<'_> {
                fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<CpuTrain, D>>) {
                    let grad = self
                        .grads
                        .get::<<CpuTrain as AutodiffBackend>::InnerBackend, D>(param.id);
                    let grad = grad.expect("every parameter has a gradient");
                    self.values.extend(grad.into_data().iter::<f32>());
                }
            }
            let mut values = Values {
                grads,
                values: Vec::new(),
            };
            model.visit(&mut values);
            values.values
        };
        let before = flat(&grads);

        let mut clipped = grads;
        clip_to_norm(&model, &mut clipped, norm, norm / 4.0);
        assert!((grad_norm(&model, &clipped) - norm / 4.0).abs() < 1e-4 * norm);
        let after = flat(&clipped);
        assert_eq!(before.len(), after.len());
        for (before, after) in before.iter().zip(&after) {
            assert!((before / 4.0 - after).abs() <= 1e-6 * before.abs().max(1e-6));
        }
        // A gradient within the bound is left as it is.
        clip_to_norm(&model, &mut clipped, norm / 4.0, norm);
        assert_eq!(flat(&clipped), after);
    }

    #[test]
    fn state_resumes_only_into_the_model_it_was_saved_with() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("optimizer");
        let (model, optimizer) = stepped(LlamaConfig::tiny(32));
        save(&optimizer, &path).unwrap();
        assert!(state_file(&path).is_file());
        let device = Default::default();
        let optim = OptimSection::default();
        let loaded = load(&optim, &model, &path, &device).unwrap();
        assert_eq!(loaded.to_record().len(), optimizer.to_record().len());

        let refused = |config: LlamaConfig| {
            let other = Llama::<CpuTrain>::init(config, 7, &device);
            match load(&optim, &other, &path, &device) {
                Ok(_) => panic!("the state of another model was loaded"),
                Err(err) => err.to_string(),
            }
        };
        let err = refused(LlamaConfig {
            ffn: 2 * LlamaConfig::tiny(32).ffn,
            ..LlamaConfig::tiny(32)
        });
        assert!(
            err.contains("does not fit the model") && err.contains("w_gate"),
            "{err}"
        );
        // Qwen2's biases shift the parameter ids: a bias meets a matrix's
        // state, of another rank (which burn's conversion of the state to
        // the parameter's rank would panic on).
        let err = refused(LlamaConfig {
            architecture: Architecture::Qwen2,
            ..LlamaConfig::tiny(32)
        });
        assert!(
            err.contains("`layers.0.qkv_bias.0` is [64] but its moments are [64, 64]"),
            "{err}"
        );
    }
}
