//! `ferrograd::autocast`: which tensors a region casts, the weight cache, nesting, and that the
//! state is per thread.

use ferrograd::{autocast, DType, Tensor};

fn t(dtype: DType) -> Tensor {
    Tensor::from_vec(vec![0.5f64, -1.25, 3.0, 2.0], &[2, 2])
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

#[test]
fn a_region_casts_float32_and_half_operands_but_not_float64_or_integers() {
    assert!(!autocast::is_enabled());
    let _region = autocast::Region::enter(DType::BFloat16).unwrap();
    assert_eq!(
        autocast::lower(&t(DType::Float32)).unwrap().dtype(),
        DType::BFloat16
    );
    assert_eq!(
        autocast::lower(&t(DType::Float16)).unwrap().dtype(),
        DType::BFloat16
    );
    assert_eq!(
        autocast::lower(&t(DType::Float64)).unwrap().dtype(),
        DType::Float64
    );
    assert_eq!(
        autocast::lower(&t(DType::Int64)).unwrap().dtype(),
        DType::Int64
    );
    assert_eq!(
        autocast::float32(&t(DType::BFloat16)).unwrap().dtype(),
        DType::Float32
    );
    assert_eq!(
        autocast::float32(&t(DType::Float64)).unwrap().dtype(),
        DType::Float64
    );
    // The values are the rounded ones (these four are exact in bfloat16).
    let y = autocast::lower(&t(DType::Float32))
        .unwrap()
        .matmul(&autocast::lower(&t(DType::Float32)).unwrap())
        .unwrap();
    assert_eq!(y.dtype(), DType::BFloat16);
    let want = t(DType::Float32).matmul(&t(DType::Float32)).unwrap();
    assert_eq!(
        y.to_dtype(DType::Float32).unwrap().to_vec::<f32>().unwrap(),
        want.to_vec::<f32>().unwrap()
    );
}

#[test]
fn outside_a_region_nothing_is_cast() {
    let x = t(DType::Float32);
    assert!(autocast::lower(&x).unwrap().same(&x));
}

#[test]
fn weights_are_cast_once_per_region() {
    let w = t(DType::Float32);
    w.set_requires_grad(true).unwrap();
    let first = {
        let _region = autocast::Region::enter(DType::Float16).unwrap();
        let a = autocast::lower(&w).unwrap();
        assert!(a.same(&autocast::lower(&w).unwrap()));
        // An activation (no grad) is cast each time.
        let x = t(DType::Float32);
        assert!(!autocast::lower(&x)
            .unwrap()
            .same(&autocast::lower(&x).unwrap()));
        a
    };
    let _region = autocast::Region::enter(DType::Float16).unwrap();
    assert!(!first.same(&autocast::lower(&w).unwrap()));
}

#[test]
fn regions_nest_and_restore_the_outer_state() {
    {
        let _outer = autocast::Region::enter(DType::BFloat16).unwrap();
        {
            let _inner = autocast::Region::enter(DType::Float16).unwrap();
            assert_eq!(autocast::dtype(), DType::Float16);
        }
        assert!(autocast::is_enabled());
        assert_eq!(autocast::dtype(), DType::BFloat16);
    }
    assert!(!autocast::is_enabled());
    assert!(autocast::Region::enter(DType::Float32).is_err());
    assert!(!autocast::is_enabled());
}

#[test]
fn the_state_is_per_thread() {
    let _region = autocast::Region::enter(DType::BFloat16).unwrap();
    let other = std::thread::spawn(autocast::is_enabled).join().unwrap();
    assert!(!other);
    assert!(autocast::is_enabled());
}
