//! The data-parallel reducer against an in-process fake collective: each rank runs on its own
//! thread, and a sum completes once every rank has started it (as MPI's `Iallreduce`).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use ferrograd::distributed::{assign_buckets, Collective, Reducer};
use ferrograd::tensor::Element;
use ferrograd::{DType, Result, Tensor};

/// The shared state of a fake world of `n` ranks.
struct World {
    n: usize,
    state: Mutex<State>,
    done: Condvar,
}

#[derive(Default)]
struct State {
    /// Buffers started under each ticket, by rank.
    started: HashMap<usize, Vec<Option<Tensor>>>,
    /// Tickets whose sum is written.
    finished: Vec<usize>,
}

/// One rank's view of the world; records the sizes of the buffers it started, in order.
struct Rank {
    world: Arc<World>,
    rank: usize,
    next: usize,
    log: Vec<usize>,
}

fn world(n: usize) -> Vec<Rank> {
    let w = Arc::new(World {
        n,
        state: Mutex::new(State::default()),
        done: Condvar::new(),
    });
    (0..n)
        .map(|rank| Rank {
            world: w.clone(),
            rank,
            next: 0,
            log: Vec::new(),
        })
        .collect()
}

/// Write `values` into the contiguous tensor `t`.
fn overwrite<T: Element>(t: &Tensor, values: &[T]) {
    let mut guard = t.storage().write();
    let data = T::data_mut(&mut guard).expect("dtype");
    let off = t.layout().offset;
    data.as_mut_slice()[off..off + values.len()].copy_from_slice(values);
}

impl Collective for Rank {
    fn world_size(&self) -> usize {
        self.world.n
    }
    fn start_sum(&mut self, buffer: &Tensor) -> Result<usize> {
        let ticket = self.next;
        self.next += 1;
        self.log.push(buffer.numel());
        let mut st = self.world.state.lock().expect("lock");
        let slots = st
            .started
            .entry(ticket)
            .or_insert_with(|| vec![None; self.world.n]);
        slots[self.rank] = Some(buffer.clone());
        if slots.iter().all(Option::is_some) {
            let bufs: Vec<Tensor> = slots.iter().flatten().cloned().collect();
            let numel = bufs[0].numel();
            assert!(
                bufs.iter().all(|b| b.numel() == numel),
                "ranks disagree on sizes"
            );
            // Summed in rank order, so every rank gets the same bits.
            let mut sum = vec![0.0f64; numel];
            for b in &bufs {
                for (s, x) in sum.iter_mut().zip(b.to_vec::<f64>()?) {
                    *s += x;
                }
            }
            for b in &bufs {
                match b.dtype() {
                    DType::Float32 => {
                        overwrite(b, &sum.iter().map(|&x| x as f32).collect::<Vec<_>>())
                    }
                    _ => overwrite(b, &sum),
                }
            }
            st.finished.push(ticket);
            self.world.done.notify_all();
        }
        Ok(ticket)
    }
    fn wait(&mut self, ticket: usize) -> Result<()> {
        let mut st = self.world.state.lock().expect("lock");
        while !st.finished.contains(&ticket) {
            st = self.world.done.wait(st).expect("wait");
        }
        Ok(())
    }
}

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
        .expect("tensor")
        .requires_grad_(true)
        .expect("leaf")
}

fn grad(p: &Tensor) -> Option<Vec<f64>> {
    p.grad().map(|g| g.to_vec::<f64>().expect("grad"))
}

#[test]
fn buckets_fill_in_reverse_order_with_a_small_first_bucket() -> Result<()> {
    // f32 params of 100, 300, 200, 50 elements (400, 1200, 800, 200 bytes).
    let p = [
        (100, DType::Float32),
        (300, DType::Float32),
        (200, DType::Float32),
        (50, DType::Float32),
    ];
    // First cap 500 bytes: 3 (200 B) + 2 (800 B) closes it; then 1000 B: 1 (1200 B) closes.
    assert_eq!(
        assign_buckets(&p, &[500, 1000])?,
        vec![vec![3, 2], vec![1], vec![0]]
    );
    // One cap larger than everything: a single bucket, last parameter first.
    assert_eq!(assign_buckets(&p, &[1 << 20])?, vec![vec![3, 2, 1, 0]]);
    Ok(())
}

#[test]
fn buckets_hold_one_dtype_each() -> Result<()> {
    let p = [
        (10, DType::Float64),
        (10, DType::Float32),
        (10, DType::Float64),
        (10, DType::Float32),
    ];
    // 81 bytes: two f64 (160 B) close a bucket; the two f32 (80 B) stay open until the end.
    assert_eq!(assign_buckets(&p, &[81])?, vec![vec![2, 0], vec![3, 1]]);
    // 80 bytes: a bucket closes when it reaches the cap exactly.
    assert_eq!(
        assign_buckets(&p, &[80])?,
        vec![vec![2], vec![3, 1], vec![0]]
    );
    assert!(assign_buckets(&p, &[]).is_err());
    assert!(assign_buckets(&p, &[0]).is_err());
    Ok(())
}

/// Two ranks mark the same parameters ready in different orders; both end with the mean of their
/// gradients, bitwise equal, and both started the same buckets in the same order.
#[test]
fn gradients_are_averaged_across_ranks_whatever_the_ready_order() -> Result<()> {
    let orders = [vec![3, 2, 1, 0], vec![0, 2, 3, 1]];
    let handles: Vec<_> = world(2)
        .into_iter()
        .zip(orders)
        .map(|(mut rank, order)| {
            std::thread::spawn(move || -> Result<(Vec<Vec<f64>>, Vec<usize>)> {
                let r = rank.rank as f64;
                let params = vec![
                    t(&[1.0; 6], &[2, 3]),
                    t(&[1.0; 4], &[4]),
                    t(&[1.0; 3], &[3]),
                    t(&[1.0; 2], &[2]),
                ];
                for (i, p) in params.iter().enumerate() {
                    let g: Vec<f64> = (0..p.numel()).map(|k| (i * 10 + k) as f64 + r).collect();
                    p.set_grad(Some(Tensor::from_vec(g, p.shape())?))?;
                }
                // 8-byte elements: buckets {3, 2} (40 B >= 32), {1} (32 B), {0}.
                let mut reducer = Reducer::new(params.clone(), 32, 32)?;
                assert_eq!(reducer.bucket_indices(), vec![vec![3, 2], vec![1], vec![0]]);
                for i in order {
                    reducer.mark_ready(i, &mut rank)?;
                }
                assert!(reducer.finalize(&mut rank, false)?.is_empty());
                let grads = params.iter().map(|p| grad(p).expect("grad")).collect();
                Ok((grads, rank.log))
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("rank thread"))
        .collect::<Result<_>>()?;
    for (i, g) in results[0].0.iter().enumerate() {
        let expected: Vec<f64> = (0..g.len()).map(|k| (i * 10 + k) as f64 + 0.5).collect();
        assert_eq!(g, &expected, "parameter {i}");
        assert_eq!(g, &results[1].0[i], "ranks differ on parameter {i}");
    }
    assert_eq!(results[0].1, vec![5, 4, 6]);
    assert_eq!(results[1].1, vec![5, 4, 6]);
    Ok(())
}

/// A bucket is started as soon as it is complete and its predecessors are started, before the
/// end of backward.
#[test]
fn a_complete_bucket_starts_before_the_pass_ends() -> Result<()> {
    let mut ranks = world(1);
    let rank = &mut ranks[0];
    let params = vec![t(&[1.0; 4], &[4]), t(&[1.0; 4], &[4]), t(&[1.0; 4], &[4])];
    for p in &params {
        p.set_grad(Some(Tensor::from_vec(vec![2.0f64; 4], &[4])?))?;
    }
    let mut reducer = Reducer::new(params.clone(), 32, 32)?;
    assert_eq!(reducer.bucket_indices(), vec![vec![2], vec![1], vec![0]]);
    reducer.mark_ready(1, rank)?;
    assert!(rank.log.is_empty(), "bucket 1 must wait for bucket 0");
    reducer.mark_ready(2, rank)?;
    assert_eq!(rank.log, vec![4, 4], "buckets 0 and 1 start together");
    reducer.mark_ready(0, rank)?;
    assert_eq!(rank.log.len(), 3);
    reducer.finalize(rank, false)?;
    // One process: the average is the gradient itself.
    assert_eq!(grad(&params[0]), Some(vec![2.0; 4]));
    assert!(!reducer.in_pass());
    Ok(())
}

#[test]
fn marking_a_parameter_twice_is_torchs_error() -> Result<()> {
    let mut ranks = world(1);
    let p = t(&[1.0], &[1]);
    p.set_grad(Some(Tensor::from_vec(vec![1.0f64], &[1])?))?;
    let mut reducer = Reducer::new(vec![p.clone(), t(&[1.0], &[1])], 1 << 20, 1 << 20)?;
    reducer.mark_ready(0, &mut ranks[0])?;
    let e = reducer
        .mark_ready(0, &mut ranks[0])
        .expect_err("second mark");
    assert!(e.to_string().contains("marked as ready twice"), "{e}");
    let e = reducer
        .mark_ready(7, &mut ranks[0])
        .expect_err("out of range");
    assert!(e.to_string().contains("out of range"), "{e}");
    Ok(())
}

#[test]
fn integer_parameters_are_refused() {
    let p = Tensor::from_vec(vec![1i64], &[1]).expect("tensor");
    assert!(Reducer::new(vec![p], 1 << 20, 1 << 20).is_err());
}

/// Rank 0 uses both parameters, rank 1 only the first; parameter 2 is used by nobody.
#[test]
fn unused_parameters_count_as_zeros_and_globally_unused_keep_their_grad() -> Result<()> {
    let handles: Vec<_> = world(2)
        .into_iter()
        .map(|mut rank| {
            std::thread::spawn(move || -> Result<Vec<Option<Vec<f64>>>> {
                let params = vec![t(&[0.0; 2], &[2]), t(&[0.0; 2], &[2]), t(&[0.0; 2], &[2])];
                let mut reducer = Reducer::new(params.clone(), 1 << 20, 1 << 20)?;
                params[0].set_grad(Some(Tensor::from_vec(vec![2.0f64, 4.0], &[2])?))?;
                reducer.mark_ready(0, &mut rank)?;
                if rank.rank == 0 {
                    params[1].set_grad(Some(Tensor::from_vec(vec![6.0f64, 8.0], &[2])?))?;
                    reducer.mark_ready(1, &mut rank)?;
                }
                let unused = reducer.finalize(&mut rank, true)?;
                let expected_unused = if rank.rank == 0 { vec![2] } else { vec![1, 2] };
                assert_eq!(unused, expected_unused);
                Ok(params.iter().map(grad).collect())
            })
        })
        .collect();
    for h in handles {
        let g = h.join().expect("rank thread")?;
        assert_eq!(g[0], Some(vec![2.0, 4.0]));
        assert_eq!(
            g[1],
            Some(vec![3.0, 4.0]),
            "locally unused: half of rank 0's"
        );
        assert_eq!(g[2], None, "used by nobody: left alone");
    }
    Ok(())
}

#[test]
fn an_unused_parameter_without_detection_is_torchs_error_and_the_reducer_recovers() -> Result<()> {
    let mut ranks = world(1);
    let rank = &mut ranks[0];
    let params = vec![t(&[0.0; 2], &[2]), t(&[0.0; 2], &[2])];
    let mut reducer = Reducer::new(params.clone(), 1 << 20, 1 << 20)?;
    params[1].set_grad(Some(Tensor::from_vec(vec![1.0f64, 1.0], &[2])?))?;
    reducer.mark_ready(1, rank)?;
    let e = reducer.finalize(rank, false).expect_err("unused");
    assert!(
        e.to_string()
            .contains("Expected to have finished reduction in the prior iteration"),
        "{e}"
    );
    assert!(
        e.to_string().contains("did not receive grad for rank: 0"),
        "{e}"
    );
    // The next pass starts clean.
    params[0].set_grad(Some(Tensor::from_vec(vec![3.0f64, 3.0], &[2])?))?;
    reducer.mark_ready(0, rank)?;
    reducer.mark_ready(1, rank)?;
    reducer.finalize(rank, false)?;
    assert_eq!(grad(&params[0]), Some(vec![3.0, 3.0]));
    Ok(())
}

/// A real backward pass: post-accumulate-grad hooks mark parameters ready while the engine runs.
#[test]
fn hooks_during_backward_drive_the_reducer() -> Result<()> {
    let handles: Vec<_> = world(2)
        .into_iter()
        .map(|rank| {
            std::thread::spawn(move || -> Result<Vec<Vec<f64>>> {
                let r = rank.rank as f64;
                let w = t(&[1.0, 2.0, 3.0], &[3]);
                let b = t(&[0.5], &[1]);
                let params = vec![w.clone(), b.clone()];
                let reducer = Arc::new(Mutex::new(Reducer::new(params.clone(), 8, 8)?));
                let rank = Arc::new(Mutex::new(rank));
                for (i, p) in params.iter().enumerate() {
                    let (red, rk) = (reducer.clone(), rank.clone());
                    p.register_post_accumulate_grad_hook(Arc::new(move |_| {
                        let mut rk = rk.lock().expect("rank");
                        red.lock().expect("reducer").mark_ready(i, &mut *rk)
                    }))?;
                }
                // loss = sum(w * x) + b * (r + 1): grads x and r + 1.
                let x = Tensor::from_vec(vec![r, 2.0 * r, 3.0 * r], &[3])?;
                let s = Tensor::from_vec(vec![r + 1.0], &[1])?;
                let loss = w.mul(&x)?.sum()?.add(&b.mul(&s)?.sum()?)?;
                loss.backward()?;
                let mut rk = rank.lock().expect("rank");
                reducer.lock().expect("reducer").finalize(&mut *rk, false)?;
                Ok(params.iter().map(|p| grad(p).expect("grad")).collect())
            })
        })
        .collect();
    for h in handles {
        let g = h.join().expect("rank thread")?;
        assert_eq!(g[0], vec![0.5, 1.0, 1.5]);
        assert_eq!(g[1], vec![1.5]);
    }
    Ok(())
}
