//! The graph-level autograd API from Rust: saved-tensor hooks, node pre- and post-hooks,
//! gradient edges, callbacks at the end of backward, and the generator's state.

mod common;
use common::leaf;
use ferrograd::autograd::saved_hooks::{Payload, SavedTensorHooks};
use ferrograd::autograd::{self, engine, GradOptions, GradPoint};
use ferrograd::tensor::creation::{rng_state, set_rng_state};
use ferrograd::{DType, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

#[test]
fn saved_tensor_hooks_pack_each_save_and_give_the_same_gradients() {
    let packs = Arc::new(AtomicUsize::new(0));
    let unpacks = Arc::new(AtomicUsize::new(0));
    let (p, u) = (packs.clone(), unpacks.clone());
    // Keep copies, as an offloading hook would.
    let hooks = SavedTensorHooks::new(
        move |t: &Tensor| {
            p.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(t.copy_detached()?) as Payload)
        },
        move |payload: &Payload| {
            u.fetch_add(1, Ordering::SeqCst);
            Ok(payload.downcast_ref::<Tensor>().unwrap().clone())
        },
    );
    let xs = [0.3, -1.2, 2.0];
    let x = leaf(&xs, &[3]);
    let y = {
        let _active = hooks.enter().unwrap();
        // exp saves its output, mul both operands.
        x.exp().unwrap().mul(&x).unwrap().sum().unwrap()
    };
    assert_eq!(packs.load(Ordering::SeqCst), 3);
    let g = autograd::grad(
        &[y],
        std::slice::from_ref(&x),
        GradOptions {
            create_graph: true,
            ..Default::default()
        },
    )
    .unwrap();
    let g = g[0].clone().unwrap();
    assert_eq!(unpacks.load(Ordering::SeqCst), 3);
    // d/dx x e^x = e^x (1 + x); d2/dx2 = e^x (2 + x)
    for (g, x) in values(&g).iter().zip(xs) {
        assert!((g - x.exp() * (1.0 + x)).abs() < 1e-12);
    }
    let g2 = autograd::grad(&[g.sum().unwrap()], &[x], GradOptions::default()).unwrap();
    for (g, x) in values(g2[0].as_ref().unwrap()).iter().zip(xs) {
        assert!((g - x.exp() * (2.0 + x)).abs() < 1e-12);
    }
}

#[test]
fn hooked_tensors_still_get_the_in_place_check() {
    let hooks = SavedTensorHooks::new(
        |t: &Tensor| Ok(Box::new(t.clone()) as Payload),
        |p: &Payload| Ok(p.downcast_ref::<Tensor>().unwrap().clone()),
    );
    let x = leaf(&[1.0, 2.0], &[2]);
    let w = Tensor::from_vec(vec![3.0f64, 4.0], &[2]).unwrap();
    let y = {
        let _active = hooks.enter().unwrap();
        x.mul(&w).unwrap().sum().unwrap()
    };
    w.fill_(5.0).unwrap();
    let err = y.backward().unwrap_err().to_string();
    assert!(err.contains("modified by an inplace operation"), "{err}");
}

#[test]
fn disabled_hooks_refuse_to_enter() {
    let hooks = SavedTensorHooks::new(
        |t: &Tensor| Ok(Box::new(t.clone()) as Payload),
        |p: &Payload| Ok(p.downcast_ref::<Tensor>().unwrap().clone()),
    );
    let prev = autograd::saved_hooks::disable_saved_tensors_hooks(Some("not here".into()));
    let err = hooks.enter().err().expect("entering must fail").to_string();
    autograd::saved_hooks::disable_saved_tensors_hooks(prev);
    assert!(err.contains("not here"));
    assert!(hooks.enter().is_ok());
}

#[test]
fn node_hooks_see_and_replace_gradients() {
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = x.mul_scalar(2.0).unwrap();
    let node = y.grad_fn().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let _pre = node.register_prehook(Arc::new(move |grads: &[Option<Tensor>]| {
        s.lock().unwrap().push(values(grads[0].as_ref().unwrap()));
        Ok(Some(vec![Some(
            grads[0].as_ref().unwrap().mul_scalar(3.0)?,
        )]))
    }));
    let s = seen.clone();
    let post = node.register_hook(Arc::new(
        move |grad_inputs: &[Option<Tensor>], _grad_outputs: &[Option<Tensor>]| {
            s.lock()
                .unwrap()
                .push(values(grad_inputs[0].as_ref().unwrap()));
            Ok(None)
        },
    ));
    y.sum().unwrap().backward().unwrap();
    // seed 1, x3 by the prehook, x2 by the node
    assert_eq!(*seen.lock().unwrap(), vec![vec![1.0, 1.0], vec![6.0, 6.0]]);
    assert_eq!(values(&x.grad().unwrap()), vec![6.0, 6.0]);
    post.remove();
    x.set_grad(None).unwrap();
    y.sum().unwrap().backward().unwrap_err(); // the graph was freed
}

#[test]
fn gradient_edges_stand_for_tensors() {
    let p = leaf(&[1.0, 2.0, 3.0], &[3]);
    let q = p.mul_scalar(2.0).unwrap();
    let edge = autograd::get_gradient_edge(&q).unwrap();
    let r = q.mul(&q).unwrap().sum().unwrap();
    let g = autograd::grad_points(
        &[GradPoint::Tensor(r)],
        &[GradPoint::Edge(edge), GradPoint::Tensor(p.clone())],
        GradOptions::default(),
    )
    .unwrap();
    // r = sum(q^2), q = 2p: dr/dq = 2q = 4p, dr/dp = 8p
    assert_eq!(values(g[0].as_ref().unwrap()), vec![4.0, 8.0, 12.0]);
    assert_eq!(values(g[1].as_ref().unwrap()), vec![8.0, 16.0, 24.0]);
    let plain = Tensor::from_vec(vec![1.0f64], &[1]).unwrap();
    assert!(autograd::get_gradient_edge(&plain).is_err());
}

#[test]
fn callbacks_run_after_the_pass_and_only_inside_one() {
    assert!(engine::queue_callback(Box::new(|| Ok(()))).is_err());
    let x = leaf(&[1.0, 2.0], &[2]);
    let y = x.mul_scalar(2.0).unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    y.register_hook(Arc::new(move |_g: &Tensor| {
        let ev2 = ev.clone();
        assert!(engine::current_graph_task_id().is_some());
        engine::queue_callback(Box::new(move || {
            ev2.lock().unwrap().push("callback");
            Ok(())
        }))?;
        ev.lock().unwrap().push("hook");
        Ok(None)
    }))
    .unwrap();
    y.sum().unwrap().backward().unwrap();
    events.lock().unwrap().push("after");
    assert_eq!(*events.lock().unwrap(), vec!["hook", "callback", "after"]);
    assert!(engine::current_graph_task_id().is_none());
}

#[test]
fn rng_state_replays_the_same_draws() {
    let state = rng_state();
    let a = values(&Tensor::randn(&[5], DType::Float64).unwrap());
    set_rng_state(&state);
    let b = values(&Tensor::randn(&[5], DType::Float64).unwrap());
    assert_eq!(a, b);
    let c = values(&Tensor::randn(&[5], DType::Float64).unwrap());
    assert_ne!(a, c);
}

#[test]
fn forward_mode_tangents_match_closed_forms() {
    use ferrograd::autograd::forward_ad;
    let xs = [0.3f64, -1.2, 2.0];
    let vs = [1.0f64, 2.0, -1.0];
    let x = Tensor::from_vec(xs.to_vec(), &[3]).unwrap();
    let v = Tensor::from_vec(vs.to_vec(), &[3]).unwrap();
    let level = forward_ad::dual_level().unwrap();
    assert!(forward_ad::dual_level().is_err(), "one level at a time");
    let d = forward_ad::make_dual(&x, &v).unwrap();
    let y = d.sin().unwrap().mul(&d).unwrap();
    let (primal, tangent) = forward_ad::unpack_dual(&y).unwrap();
    // d/dx x sin x = sin x + x cos x
    for ((t, x), v) in values(&tangent.unwrap()).iter().zip(xs).zip(vs) {
        assert!((t - (x.sin() + x * x.cos()) * v).abs() < 1e-12);
    }
    assert!(forward_ad::unpack_dual(&primal).unwrap().1.is_none());
    drop(level);
    assert!(forward_ad::unpack_dual(&y).unwrap().1.is_none());
}

/// x³ with a forward rule of its own (scaled by 10 so the test sees which rule ran).
struct Cube {
    with_jvp: bool,
}

impl ferrograd::autograd::CustomFunction for Cube {
    fn name(&self) -> String {
        "Cube".into()
    }
    fn forward(
        &self,
        ctx: &mut ferrograd::autograd::FunctionCtx,
        inputs: &[Tensor],
    ) -> ferrograd::Result<Vec<Tensor>> {
        ctx.to_save = vec![Some(inputs[0].clone())];
        Ok(vec![inputs[0].mul(&inputs[0])?.mul(&inputs[0])?])
    }
    fn backward(
        &self,
        ctx: &ferrograd::autograd::FunctionCtx,
        grads: &[Option<Tensor>],
    ) -> ferrograd::Result<Vec<Option<Tensor>>> {
        let x = ctx.saved_tensors()?[0].clone().unwrap();
        let g = grads[0].clone().unwrap();
        Ok(vec![Some(x.mul(&x)?.mul_scalar(3.0)?.mul(&g)?)])
    }
    fn jvp(
        &self,
        _ctx: &ferrograd::autograd::FunctionCtx,
        tangents: &[Option<Tensor>],
    ) -> ferrograd::Result<Vec<Option<Tensor>>> {
        if !self.with_jvp {
            return Err(ferrograd::Error::not_implemented("no jvp"));
        }
        Ok(vec![tangents[0]
            .as_ref()
            .map(|t| t.mul_scalar(10.0))
            .transpose()?])
    }
}

#[test]
fn custom_functions_give_their_own_tangents() {
    use ferrograd::autograd::{forward_ad, function::apply};
    let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
    let v = Tensor::from_vec(vec![1.0f64, 3.0], &[2]).unwrap();
    let _level = forward_ad::dual_level().unwrap();
    let d = forward_ad::make_dual(&x, &v).unwrap();
    let y = apply(Arc::new(Cube { with_jvp: true }), std::slice::from_ref(&d)).unwrap();
    assert_eq!(values(&y[0]), vec![1.0, 8.0]);
    let t = forward_ad::unpack_dual(&y[0]).unwrap().1.unwrap();
    assert_eq!(values(&t), vec![10.0, 30.0]);
    let err = apply(Arc::new(Cube { with_jvp: false }), &[d])
        .err()
        .unwrap();
    assert_eq!(err.kind(), ferrograd::ErrorKind::NotImplemented);
    // Without tangents the function runs as before.
    let z = apply(Arc::new(Cube { with_jvp: false }), &[x]).unwrap();
    assert_eq!(values(&z[0]), vec![1.0, 8.0]);
}
