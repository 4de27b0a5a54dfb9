//! Declares the `kinformer_loom` cfg, under which the queue's mutex and condition variable are loom's.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(kinformer_loom)");
}
