//! Vector-matrix products on the CPU backend, streamed.
//!
//! Decoding one episode multiplies a single row by each weight matrix.
//! burn's CPU backend hands every product to a general matrix kernel that
//! first repacks the whole right-hand factor into panels (and, in burn 0.21,
//! copies both factors before that): for a single row that repacking costs
//! several times the product, and decoding SmolLM2-135M spent about 80 ms a
//! token in its products where reading the weights once takes about 20 ms.
//! A row times a matrix is therefore computed here by streaming the matrix
//! once, row after row, which is what bounds it. Products of more rows
//! (batched decoding, prompt passes) and every product of training's
//! autodiff backend keep burn's kernel.

use crate::Cpu;
use burn::backend::ndarray::NdArrayTensor;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use ndarray::{ArrayView2, Ix2};
use std::any::Any;

/// `x @ w`.
pub(crate) fn product<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    w: Tensor<B, D>,
) -> Tensor<B, D> {
    // Moved through `Option`s seen as `dyn Any`, so that telling the CPU's
    // matrices from every other backend's tensors allocates nothing.
    let mut factors = Some((x, w));
    if let Some(matrices) = (&mut factors as &mut dyn Any)
        .downcast_mut::<Option<(Tensor<Cpu, 2>, Tensor<Cpu, 2>)>>()
        .and_then(Option::take)
    {
        let (x, w) = matrices;
        let mut product = Some(cpu_matrix_product(x, w));
        return (&mut product as &mut dyn Any)
            .downcast_mut::<Option<Tensor<B, D>>>()
            .and_then(Option::take)
            .expect("B is Cpu and D is 2");
    }
    let (x, w) = factors.expect("not taken");
    x.matmul(w)
}

fn cpu_matrix_product(x: Tensor<Cpu, 2>, w: Tensor<Cpu, 2>) -> Tensor<Cpu, 2> {
    if x.dims()[0] == 1
        && let (NdArrayTensor::F32(row), NdArrayTensor::F32(matrix)) = (
            x.clone().into_primitive().tensor(),
            w.clone().into_primitive().tensor(),
        )
        && let (Ok(row), Ok(matrix)) = (
            row.view().into_dimensionality::<Ix2>(),
            matrix.view().into_dimensionality::<Ix2>(),
        )
        && let Some(product) = row_times_matrix(row, matrix)
    {
        let product = ndarray::Array2::from_shape_vec((1, product.len()), product)
            .expect("one row")
            .into_dyn()
            .into_shared();
        return Tensor::from_primitive(TensorPrimitive::Float(NdArrayTensor::from(product)));
    }
    x.matmul(w)
}

/// `row @ matrix` (`[1, k] @ [k, n]`), reading the matrix once in memory
/// order; `None` when its rows are not contiguous.
fn row_times_matrix(row: ArrayView2<f32>, matrix: ArrayView2<f32>) -> Option<Vec<f32>> {
    let mut out = vec![0.0f32; matrix.ncols()];
    for (&a, weights) in row.iter().zip(matrix.rows()) {
        for (y, w) in out.iter_mut().zip(weights.as_slice()?) {
            *y += a * w;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Autodiff;
    use burn::tensor::{FloatDType, TensorData, Tolerance};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A matrix of seeded uniform values: the same in every run, so that a
    /// tolerance that holds once holds always.
    fn random(shape: [usize; 2]) -> Tensor<Cpu, 2> {
        let mut rng = ChaCha8Rng::seed_from_u64((shape[0] * 1000 + shape[1]) as u64);
        let values: Vec<f32> = (0..shape[0] * shape[1])
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        Tensor::from_data(TensorData::new(values, shape), &Default::default())
    }

    #[test]
    fn a_row_times_a_matrix_is_the_product() {
        let (x, w) = (random([1, 300]), random([300, 70]));
        let ours = product(x.clone(), w.clone());
        assert_eq!(ours.dims(), [1, 70]);
        let ours = ours.into_data();
        ours.assert_approx_eq::<f32>(
            &x.clone().matmul(w.clone()).into_data(),
            // Sums of 300 products of values below 1 in magnitude.
            Tolerance::absolute(1e-5),
        );
        // Within burn's rounding, and exactly the sum in row order.
        let expected: Vec<f32> = (0..70)
            .map(|j| {
                let column = w
                    .clone()
                    .narrow(1, j, 1)
                    .into_data()
                    .to_vec::<f32>()
                    .unwrap();
                let row = x.clone().into_data().to_vec::<f32>().unwrap();
                row.iter().zip(&column).fold(0.0, |sum, (a, b)| sum + a * b)
            })
            .collect();
        assert_eq!(ours.to_vec::<f32>().unwrap(), expected);
    }

    #[test]
    fn other_products_are_burns() {
        let (x, w) = (random([5, 30]), random([30, 7]));
        assert_eq!(
            product(x.clone(), w.clone()).into_data(),
            x.clone().matmul(w.clone()).into_data()
        );
        // A matrix viewed transposed (rows not contiguous).
        let wt = random([7, 30]);
        let row = x.clone().narrow(0, 0, 1);
        assert_eq!(
            product(row.clone(), wt.clone().transpose()).into_data(),
            row.matmul(wt.transpose()).into_data()
        );
        // Another element type.
        let (x64, w64) = (
            x.clone().cast(FloatDType::F64),
            w.clone().cast(FloatDType::F64),
        );
        assert_eq!(
            product(x64.clone().narrow(0, 0, 1), w64.clone()).into_data(),
            x64.narrow(0, 0, 1).matmul(w64).into_data()
        );
        // Training's backend, which records the product for its gradients.
        let device = Default::default();
        let row = Tensor::<Autodiff<Cpu>, 2>::from_data(x.narrow(0, 0, 1).to_data(), &device)
            .require_grad();
        let weights = Tensor::<Autodiff<Cpu>, 2>::from_data(w.to_data(), &device);
        let grads = product(row.clone(), weights).sum().backward();
        let expected = Tensor::<Cpu, 2>::ones([1, 7], &device).matmul(w.transpose());
        assert_eq!(row.grad(&grads).unwrap().into_data(), expected.into_data());
    }
}
