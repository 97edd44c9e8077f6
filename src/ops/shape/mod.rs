//! Shape ops: views of one tensor (`reshape`, `transpose`, `permute`, `expand`, `slice`, ...) in
//! [`view`], and ops that join, split or rearrange (`cat`, `stack`, `split`, `unbind`, `flip`,
//! `roll`, `repeat`, ...) in [`join`].

pub mod combine;
pub mod join;
pub mod view;
