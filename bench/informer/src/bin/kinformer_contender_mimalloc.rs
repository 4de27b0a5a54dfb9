//! kinformer's contender with mimalloc as the global allocator (the allocator rows of
//! `cargo xtask bench informer`); everything else is `kinformer-contender`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "kinformer_contender.rs"]
mod contender;

fn main() -> anyhow::Result<()> {
    contender::main()
}
