//! The thesis's equations: [`ch5`] the chapter 5 model (media timing, the
//! regions of the utility plane), [`ch6`] chapter 6's bounds (equations
//! 6.1–6.19, the playout buffer each DASH architecture needs).

pub mod ch5;
pub mod ch6;
