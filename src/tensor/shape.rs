//! Shape arithmetic: broadcasting, dimension wrapping, formatting.

use super::storage::Dims;
use crate::error::{Error, Result};

/// NumPy broadcasting of two shapes; the error names both shapes and the failing dimension.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Dims> {
    let n = a.len().max(b.len());
    let mut out: Dims = smallvec::smallvec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::runtime(format!(
                "The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i}"
            )));
        };
    }
    Ok(out)
}

/// True when `from` can be broadcast to `to` (so a gradient of shape `to` sums back to `from`).
pub fn is_expandable_to(from: &[usize], to: &[usize]) -> bool {
    if from.len() > to.len() {
        return false;
    }
    let off = to.len() - from.len();
    from.iter()
        .enumerate()
        .all(|(i, &d)| d == 1 || d == to[i + off])
}

/// Wrap a possibly negative dimension index into `0..ndim`, torch's message on failure.
pub fn wrap_dim(dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        return Err(Error::index(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -n,
            n - 1
        )));
    }
    Ok(if dim < 0 {
        (dim + n) as usize
    } else {
        dim as usize
    })
}

/// Format a shape like torch prints sizes in messages: `[2, 3]`.
pub fn fmt_shape(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(
            broadcast_shapes(&[2, 1, 3], &[4, 1]).unwrap().as_slice(),
            &[2, 4, 3]
        );
        assert_eq!(broadcast_shapes(&[], &[5]).unwrap().as_slice(), &[5]);
        let e = broadcast_shapes(&[3], &[4]).unwrap_err();
        assert!(e
            .message()
            .contains("size of tensor a (3) must match the size of tensor b (4)"));
    }

    #[test]
    fn negative_dims_wrap() {
        assert_eq!(wrap_dim(-1, 3).unwrap(), 2);
        assert!(wrap_dim(3, 3).is_err());
        assert_eq!(wrap_dim(0, 0).unwrap(), 0);
    }
}
