//! The queue between reflector and informer: DeltaFIFO and the in-order FIFO behind one trait.
//!
//! This crate is laid out in the workspace; its content arrives with its own issue
//! (see the workspace README's crate map).
