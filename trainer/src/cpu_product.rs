//! Products of a few rows with a matrix on the CPU backend, streamed.
//!
//! Decoding multiplies one row per live episode by each weight matrix.
//! burn's CPU backend hands every product to a general matrix kernel that
//! first repacks the whole right-hand factor into panels (and, in burn 0.21,
//! copies both factors before that): for a few rows that repacking costs
//! several times the product, and decoding SmolLM2-135M spent about 80 ms a
//! token in its products where reading the weights once takes about 20 ms;
//! four rows at a time were no faster per row than one. A few rows times a
//! matrix are therefore computed here by streaming the matrix once, which is
//! what bounds it. Products of more rows (prompt passes, large batches) and
//! every product of training's autodiff backend keep burn's kernel.

use crate::{Cpu, same_type};
use burn::backend::ndarray::NdArrayTensor;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use ndarray::{ArrayView2, Ix2};

/// `x @ w`.
pub(crate) fn product<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    w: Tensor<B, D>,
) -> Tensor<B, D> {
    match same_type::<_, (Tensor<Cpu, 2>, Tensor<Cpu, 2>)>((x, w)) {
        Ok((x, w)) => same_type(cpu_matrix_product(x, w)).expect("B is Cpu and D is 2"),
        Err((x, w)) => x.matmul(w),
    }
}

/// The most rows a product streams the matrix for. Decoding SmolLM2-135M's
/// shape on two cores (`forge bench model --decode 2,4,8 --prompt 4
/// --new-tokens 32`), two rows at a time streamed make 47 tokens/s against
/// 13 through burn's kernel, four rows 54 against 26; at eight, burn's
/// kernel, which keeps blocks of the product in registers, is as fast (50).
const STREAMED_ROWS: usize = 4;

fn cpu_matrix_product(x: Tensor<Cpu, 2>, w: Tensor<Cpu, 2>) -> Tensor<Cpu, 2> {
    let [rows, _] = x.dims();
    if rows <= STREAMED_ROWS
        && let (NdArrayTensor::F32(lhs), NdArrayTensor::F32(matrix)) = (
            x.clone().into_primitive().tensor(),
            w.clone().into_primitive().tensor(),
        )
        && let (Ok(lhs), Ok(matrix)) = (
            lhs.view().into_dimensionality::<Ix2>(),
            matrix.view().into_dimensionality::<Ix2>(),
        )
        && let Some(product) = rows_times_matrix(lhs, matrix)
    {
        let product = ndarray::Array2::from_shape_vec((rows, matrix.ncols()), product)
            .expect("rows by columns")
            .into_dyn()
            .into_shared();
        return Tensor::from_primitive(TensorPrimitive::Float(NdArrayTensor::from(product)));
    }
    x.matmul(w)
}

/// `rows @ matrix` (`[m, k] @ [k, n]`), row-major, reading the matrix once
/// in memory order; `None` when either factor's rows are not contiguous.
///
/// Every element is summed in the order of `k`, as for a row alone: a row's
/// product is the same, bit for bit, whatever rows are multiplied with it.
fn rows_times_matrix(rows: ArrayView2<f32>, matrix: ArrayView2<f32>) -> Option<Vec<f32>> {
    let lhs: Vec<&[f32]> = rows
        .rows()
        .into_iter()
        .map(|row| row.to_slice())
        .collect::<Option<_>>()?;
    let n = matrix.ncols();
    let mut out = vec![0.0f32; lhs.len() * n];
    for (k, weights) in matrix.rows().into_iter().enumerate() {
        let weights = weights.to_slice()?;
        for (row, sums) in lhs.iter().zip(out.chunks_exact_mut(n)) {
            let a = row[k];
            for (y, w) in sums.iter_mut().zip(weights) {
                *y += a * w;
            }
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

    /// `x @ w`, each element summed in the order of the inner dimension.
    fn sums_in_order(x: &Tensor<Cpu, 2>, w: &Tensor<Cpu, 2>) -> Vec<f32> {
        let [rows, inner] = x.dims();
        let columns = w.dims()[1];
        let (x, w) = (
            x.to_data().to_vec::<f32>().unwrap(),
            w.to_data().to_vec::<f32>().unwrap(),
        );
        (0..rows * columns)
            .map(|at| {
                let (i, j) = (at / columns, at % columns);
                (0..inner).fold(0.0, |sum, k| sum + x[i * inner + k] * w[k * columns + j])
            })
            .collect()
    }

    #[test]
    fn a_few_rows_times_a_matrix_are_the_product() {
        let (x, w) = (random([STREAMED_ROWS, 300]), random([300, 70]));
        for rows in 1..=STREAMED_ROWS {
            let x = x.clone().narrow(0, 0, rows);
            let ours = product(x.clone(), w.clone());
            assert_eq!(ours.dims(), [rows, 70]);
            let ours = ours.into_data();
            ours.assert_approx_eq::<f32>(
                &x.clone().matmul(w.clone()).into_data(),
                // Sums of 300 products of values below 1 in magnitude.
                Tolerance::absolute(1e-5),
            );
            // Within burn's rounding, and exactly the sums in order.
            assert_eq!(ours.to_vec::<f32>().unwrap(), sums_in_order(&x, &w));
        }
    }

    #[test]
    fn a_rows_product_does_not_depend_on_the_rows_beside_it() {
        let (x, w) = (random([STREAMED_ROWS, 64]), random([64, 50]));
        let together = product(x.clone(), w.clone());
        for row in 0..STREAMED_ROWS {
            assert_eq!(
                product(x.clone().narrow(0, row, 1), w.clone()).into_data(),
                together.clone().narrow(0, row, 1).into_data(),
                "row {row}"
            );
        }
    }

    #[test]
    fn other_products_are_burns() {
        let (x, w) = (random([STREAMED_ROWS + 1, 30]), random([30, 7]));
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
